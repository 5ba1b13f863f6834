"""Build a Triton model repository (and optionally its CPU twin) from ModelRepoSettings.

Everything is written into a staging folder next to the target and renamed into place at
the end, so a failed build leaves the target as it was. Builds of one target run one at a time
(an exclusive lock on .NAME.lock beside it): a second build says it waits, then runs. Built and quantised ONNX files are
cached under build/cache keyed by a content hash, so repeated builds take seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import onnx
import onnxruntime

from triton_gke.bounded_files import one_line, output_folder_problem, read_text_file
from triton_gke.contracts.paths import model_cache_dir
from triton_gke.model_repo import configs, cpu_twin, digests, engines, quantize, resnet50
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.manifest import (
    BY_RECIPE,
    FILES,
    MANIFEST,
    PLAN_CAPABILITIES,
    file_digests,
    read_manifest,
    rebuild,
    verify_repository,
)
from triton_gke.model_repo.settings import ModelRepoSettings, VariantSettings, is_saved_model_dir, validate_settings


def default_cache_dir() -> Path:
    """build/cache of the project folder (contracts/paths.py model_cache_dir)."""
    return model_cache_dir()


DIGESTS_NAME = f"model_repo/{digests.DIGESTS_FILE.name}"
# Beside each cached KEY.onnx: the SHA-256 it had when it was produced, checked whenever the file is reused.
DIGEST_SUFFIX = ".sha256"
_COPY_BLOCK = 1 << 20


@dataclass(frozen=True)
class ModelSource:
    """The model every variant is built from, resolved to files."""

    description: str
    key: str  # content hash: cache key and part of the TensorRT engine cache path
    fp32: Path | None = None  # ONNX file (None for a SavedModel)
    int8: Path | None = None  # QDQ INT8 ONNX file, when an INT8 variant asks for it
    saved_model: Path | None = None
    io: configs.ModelIO | None = None
    labels: tuple[str, ...] = ()
    # The same files behind a UINT8 input (cast and /255 in the graph), when a variant asks for one.
    fp32_uint8: Path | None = None
    int8_uint8: Path | None = None
    io_uint8: configs.ModelIO | None = None

    def onnx_for(self, variant: VariantSettings) -> Path:
        int8 = variant.precision == "INT8"
        if variant.uint8_input:
            return self.int8_uint8 if int8 else self.fp32_uint8
        return self.int8 if int8 else self.fp32

    def io_for(self, variant: VariantSettings) -> configs.ModelIO:
        return self.io_uint8 if variant.uint8_input else self.io


@dataclass(frozen=True)
class BuildResult:
    out: Path
    cpu_out: Path | None
    models: tuple[str, ...]
    source: str
    files: tuple[Path, ...] = field(repr=False)  # every file written, final paths
    variants: tuple[VariantSettings, ...] = field(default=(), repr=False)

    def summary(self) -> str:
        lines = [f"model repository {self.out}: {len(self.models)} models from {self.source}"]
        for v in self.variants:
            lines.append(
                f"  {v.name:24} {v.precision:5} max batch {v.max_batch_size:3}, preferred {v.preferred_batch_size:3}, "
                f"queue delay {v.max_queue_delay_us} us, {v.instance_count} instance(s)"
                + (", UINT8 input" if v.uint8_input else "")
            )
        if self.cpu_out:
            lines.append(f"CPU twins {self.cpu_out}: same models, python backend + ONNX Runtime on CPU")
        lines.append(f"{len(self.files)} files written; every config.pbtxt validated")
        return "\n".join(lines)


def build_repository(
    settings: ModelRepoSettings, out: Path, cpu_out: Path | None = None, cache_dir: Path | None = None
) -> BuildResult:
    """Write one folder per variant under `out` (and CPU twins under `cpu_out`)."""
    validate_settings(settings)
    # As given first: resolve() follows a link to nothing to the folder it names, which the build would then create
    # (a hypothesis example of tests/unit/triton_gke/test_output_folders.py: `--out DANGLING` exited 0).
    _check_targets(Path(out), Path(cpu_out) if cpu_out else None)
    out, cpu_out = Path(out).resolve(), Path(cpu_out).resolve() if cpu_out else None
    _check_targets(out, cpu_out)
    targets = [(out, _write_gpu_model)] + ([(cpu_out, _write_twin)] if cpu_out else [])
    with contextlib.ExitStack() as stack:
        for target in sorted(target for target, _ in targets):  # one order for all builds: no deadlock
            stack.enter_context(_target_lock(target))
        _check_targets(out, cpu_out)  # again: a build that ran while this one waited may have changed them
        source = resolve_source(settings, Path(cache_dir) if cache_dir else default_cache_dir())
        if cpu_out and source.fp32 is None:
            raise ModelRepoError("cpu_out: CPU twins need an ONNX model (TensorFlow cannot run locally)")
        stages = [(target, stack.enter_context(_staging(target)), write) for target, write in targets]
        for _, stage, write in stages:
            for variant in settings.variants:
                write(stage, variant, source, settings)
            _write_manifest(stage, settings, source)
        files = [target / p.relative_to(stage) for target, stage, _ in stages for p in _files(stage)]
        for target, stage, _ in stages:
            _commit(stage, target)
    names = tuple(v.name for v in settings.variants)
    return BuildResult(out, cpu_out, names, source.description, tuple(files), settings.variants)


# ---------------------------------------------------------------- sources


def resolve_source(settings: ModelRepoSettings, cache_dir: Path) -> ModelSource:
    if settings.source and is_saved_model_dir(Path(settings.source)):
        path = Path(settings.source).resolve()
        return ModelSource(f"TF SavedModel {path}", _tree_hash(path), saved_model=path)
    if settings.source:
        fp32, description = _cache_user_onnx(Path(settings.source), cache_dir), f"ONNX file {settings.source}"
    else:
        fp32 = _cached(cache_dir, _builtin_key(), lambda p: onnx.save(resnet50.build_resnet50(), str(p)))
        description = "built-in ResNet-50 (RANDOM weights: predictions are meaningless)"
    io = configs.read_onnx_io(fp32)
    int8 = None
    if any(v.precision == "INT8" for v in settings.variants):
        try:
            int8 = _cached(cache_dir, _int8_key(fp32), lambda p: _mark(p, quantize.quantize_int8(fp32, p)))
        except ModelRepoError as err:  # name the user's file, not its copy in the cache
            raise ModelRepoError(str(err).replace(str(fp32), settings.source or str(fp32), 1)) from None
    labels = _labels(settings, io)
    source = ModelSource(description, fp32.stem, fp32=fp32, int8=int8, io=io, labels=labels)
    return _with_uint8_files(source, settings, cache_dir)


# Beside a cached KEY.onnx whose bytes depend on the machine that built it (a user model's INT8 copy calibrated by
# ONNX Runtime's float32 kernels, model_repo/quantize.py): the manifest then names the file by its recipe (the cache
# key), not its bytes, so an unchanged recipe built elsewhere never re-uploads or restarts anything.
MACHINE_DEPENDENT_SUFFIX = ".machine-dependent"


def _mark(produced: Path, exact: bool) -> None:
    """Record (or clear) the machine-dependent mark of the cache entry being produced at `produced` (its temp name)."""
    marker = Path(str(produced) + MACHINE_DEPENDENT_SUFFIX)
    if exact:
        marker.unlink(missing_ok=True)
    else:
        marker.write_text("calibrated by ONNX Runtime: its bytes depend on the CPU that built it\n", encoding="utf-8")


def machine_dependent(cached: Path) -> bool:
    """Whether this cache entry's bytes depend on the machine (it, or the file it was derived from, is marked)."""
    return Path(str(cached) + MACHINE_DEPENDENT_SUFFIX).is_file()


def _with_uint8_files(source: ModelSource, settings: ModelRepoSettings, cache_dir: Path) -> ModelSource:
    """Add the UINT8-input copies the variants ask for (cached like the other files)."""
    wanted = [v for v in settings.variants if v.uint8_input]
    if not wanted:
        return source
    _check_uint8_capable(wanted[0], source)
    fp32_u8 = _uint8_copy(source.fp32, cache_dir) if any(v.precision != "INT8" for v in wanted) else None
    int8_u8 = _uint8_copy(source.int8, cache_dir) if any(v.precision == "INT8" for v in wanted) else None
    io_uint8 = configs.read_onnx_io(fp32_u8 or int8_u8)  # read back: the configs describe the real file
    return dataclasses.replace(source, fp32_uint8=fp32_u8, int8_uint8=int8_u8, io_uint8=io_uint8)


def _check_uint8_capable(variant: VariantSettings, source: ModelSource) -> None:
    inputs = source.io.inputs
    if len(inputs) != 1 or inputs[0].data_type != "TYPE_FP32":
        found = ", ".join(f"{i.name} {i.data_type.removeprefix('TYPE_')}" for i in inputs)
        raise ModelRepoError(
            f"variant {variant.name!r}: input_dtype UINT8 needs a model with one FP32 input (pixels in [0, 1]); "
            f"{source.description} has {found}"
        )


def _uint8_copy(path: Path, cache_dir: Path) -> Path:
    recipe = f"{path.stem} uint8 front v{resnet50.UINT8_FRONT_VERSION} onnx {onnx.__version__}"
    key = hashlib.sha256(recipe.encode()).hexdigest()[:32]

    def produce(target: Path) -> None:  # loads the 100 MB model only on a cache miss
        onnx.save(resnet50.with_uint8_input(onnx.load(str(path))), str(target))
        _mark(target, not machine_dependent(path))  # a copy of a machine-dependent file is one too

    return _cached(cache_dir, key, produce)


def _builtin_key() -> str:
    recipe = f"resnet50 v{resnet50.BUILDER_VERSION} seed {resnet50.DEFAULT_SEED} onnx {onnx.__version__}"
    return hashlib.sha256(recipe.encode()).hexdigest()[:32]


def _int8_key(fp32: Path) -> str:
    recipe = f"{fp32.stem} int8 v{quantize.QUANTIZER_VERSION} ort {onnxruntime.__version__}"
    return hashlib.sha256(recipe.encode()).hexdigest()[:32]


def _cache_user_onnx(path: Path, cache_dir: Path) -> Path:
    """Validate the user's file, then copy it into the cache under its content hash."""
    configs.read_onnx_io(path)
    digest = _file_hash(path)
    return _cached(cache_dir, digest, lambda p: shutil.copyfile(path, p))


def _cached(cache_dir: Path, key: str, produce: Callable[[Path], object]) -> Path:
    """Return cache_dir/key.onnx, producing it first (atomically) if absent.

    Its SHA-256 is recorded beside it when it is produced and checked on every reuse, so a cached
    file changed since (by hand, or through a hard link of an older build) is refused, never copied
    into a repository. An entry without a recorded digest (an older cache) is produced again.
    """
    target = cache_dir / f"{key}.onnx"
    if target.is_file() and _digest_path(target).is_file():
        cached_digest(target)  # refuses a changed file
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=f".{key}.", suffix=".tmp")
    os.close(fd)
    try:
        produce(Path(tmp))
        os.chmod(tmp, 0o444)  # a reminder: the cache is not to be edited
        digest = _sha256(Path(tmp))
        _warn_if_unpublished(key, digest)
        _write_atomic(_digest_path(target), digest + "\n")
        marker = Path(tmp + MACHINE_DEPENDENT_SUFFIX)
        if marker.is_file():
            os.replace(marker, Path(str(target) + MACHINE_DEPENDENT_SUFFIX))
        else:
            Path(str(target) + MACHINE_DEPENDENT_SUFFIX).unlink(missing_ok=True)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
        Path(tmp + MACHINE_DEPENDENT_SUFFIX).unlink(missing_ok=True)
    return target


def _warn_if_unpublished(key: str, digest: str) -> None:
    """A built-in file whose bytes differ from the published ones (model_repo/builtin_digests.json) is served all the
    same, with a warning: its repository digest differs too, so a `pulumi up` from here re-uploads every model and
    restarts every Triton pod (docs/model-repository.md, "Reproducible builds")."""
    wanted = digests.published().get(key)
    if wanted is not None and wanted != digest:
        print(
            f"warning: {key}.onnx: this machine built other bytes than the published recipe "
            f"({DIGESTS_NAME}: SHA-256 {wanted[:16]}..., built {digest[:16]}...); a pulumi up from here re-uploads "
            "the models and restarts Triton; please report it with `python -m triton_gke.model_repo.check_digests`",
            file=sys.stderr,
        )


def _digest_path(cached: Path) -> Path:
    return cached.with_name(cached.name + DIGEST_SUFFIX)


_DIGEST_MAX_BYTES = 4096  # a SHA-256 in hex and a line break
# One label a line: ImageNet's 1,000 labels are ~10 KiB; a 100,000-class model's fit many times over.
LABELS_MAX_BYTES = 16 * 1024 * 1024


def cached_digest(cached: Path) -> str:
    """The recorded SHA-256 of a cache entry, after checking the file still has it."""
    st = cached.stat()  # hashed again only when a write changed it (ctime cannot be set back)
    return _checked_digest(cached, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@functools.cache
def _checked_digest(cached: Path, *_stat: int) -> str:
    # The cache folder is the user's: a digest file replaced by a FIFO or /dev/zero is refused, not waited on.
    recorded = read_text_file(_digest_path(cached), _DIGEST_MAX_BYTES, "a cache digest file", ModelRepoError).strip()
    if _sha256(cached) != recorded:
        raise ModelRepoError(
            f"{cached}: changed since it was cached (SHA-256 differs from {_digest_path(cached).name}); "
            f"delete it and {rebuild()}"
        )
    return recorded


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:32]


def _tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + _file_hash(path).encode())
    return digest.hexdigest()[:32]


def _labels(settings: ModelRepoSettings, io: configs.ModelIO) -> tuple[str, ...]:
    """User labels, or placeholders (class_0000...) when the first output is a class vector."""
    output = io.outputs[0]
    classes = output.dims[0] if len(output.dims) == 1 and output.dims[0] > 0 else None
    if settings.labels is None:
        return tuple(resnet50.placeholder_labels(classes)) if classes else ()
    lines = read_text_file(
        Path(settings.labels), LABELS_MAX_BYTES, "a labels file", lambda line: ModelRepoError(f"labels: {line}")
    ).splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if classes and len(lines) != classes:
        raise ModelRepoError(
            f"labels: {settings.labels} has {len(lines)} lines but output {output.name!r} has {classes} classes"
        )
    return tuple(lines)


# ---------------------------------------------------------------- writing models


def _write_gpu_model(stage: Path, variant: VariantSettings, source: ModelSource, settings: ModelRepoSettings) -> None:
    folder = stage / variant.name
    (folder / configs.VERSION).mkdir(parents=True)
    if source.saved_model:
        shutil.copytree(source.saved_model, folder / configs.VERSION / configs.SAVEDMODEL_DIRNAME)
        config = configs.savedmodel_gpu_config(variant)
    else:
        model = source.onnx_for(variant)
        _copy_model(model, folder / configs.VERSION / configs.ONNX_FILENAME)
        if variant.uses_tensorrt and settings.plan_compute_capabilities:
            plans = engines.cc_model_filenames(settings.triton_image_tag, settings.plan_compute_capabilities)
            config = configs.tensorrt_plan_config(variant, source.io_for(variant), bool(source.labels), plans)
        else:
            cache = f"{settings.trt_cache_dir.rstrip('/')}/{variant.name}/{model.stem[:16]}-{settings.triton_image_tag}"
            config = configs.onnx_gpu_config(variant, source.io_for(variant), bool(source.labels), cache)
    note = f"precision {variant.precision}, {variant.input_dtype} input, for Triton {settings.triton_image_tag}"
    _write_config(folder, configs.render(config, note), source.labels)


def _write_twin(stage: Path, variant: VariantSettings, source: ModelSource, settings: ModelRepoSettings) -> None:
    folder = stage / variant.name
    version = folder / configs.VERSION
    version.mkdir(parents=True)
    _copy_model(source.onnx_for(variant), version / configs.ONNX_FILENAME)
    shutil.copyfile(cpu_twin.TEMPLATE, version / configs.PYTHON_FILENAME)
    config = cpu_twin.twin_config(variant, source.io_for(variant), bool(source.labels))
    _write_config(folder, configs.render(config, cpu_twin.twin_note(variant)), source.labels)


def _write_config(folder: Path, text: str, labels: tuple[str, ...]) -> None:
    if labels:
        (folder / configs.LABELS_FILENAME).write_text("\n".join(labels) + "\n", encoding="utf-8")
    path = folder / "config.pbtxt"
    path.write_text(text, encoding="utf-8")
    configs.validate_config_text(text, path)


def _copy_model(src: Path, dst: Path) -> None:
    """Stage a cached model as a hard link to the cache: enough for _commit to tell whether the target already holds
    this build (the manifest's model digests are the cache's checked ones), without writing 100 MB per model on
    every `make plan`. A build that changes the target copies them first (_copy_linked_models): a built repository
    never shares a file with the cache, so an edit of a built file can never reach it.

    Variants of one repository that serve the same file share one copy (hard links inside the staging
    folder, never to the cache): an edit of one of them is refused by the manifest check all the same.
    """
    stage = dst.parents[2]  # STAGE/<model>/<version>/model.onnx
    first = _first_copies.get((stage, src))
    linked = first if first is not None and first.is_file() else src
    try:
        os.link(linked, dst)
    except OSError:  # no hard links to the cache here (another file system): copy it now
        if linked != src:
            raise
        _copy_verified(src, dst)
    else:
        if dst.stat().st_ino == src.stat().st_ino:
            _staged_links.setdefault(stage, []).append((src, dst))
    _first_copies.setdefault((stage, src), dst)


def _copy_verified(src: Path, dst: Path) -> None:
    """Copy a cached model, hashing it on the way, and check the copy against the cache's recorded digest."""
    digest = hashlib.sha256()
    with src.open("rb") as reader, dst.open("xb") as writer:
        while block := reader.read(_COPY_BLOCK):
            digest.update(block)
            writer.write(block)
    if digest.hexdigest() != cached_digest(src):
        raise ModelRepoError(f"{src}: changed while it was copied into the repository; {rebuild()}")


def _copy_linked_models(links: list[tuple[Path, Path]]) -> None:
    """Replace each staged link to the cache by a verified copy, one copy per cached file (the others link to it)."""
    copies: dict[Path, Path] = {}
    for src, dst in links:
        fresh = dst.with_name(f".{dst.name}.copy")
        if src in copies:
            os.link(copies[src], fresh)
        else:
            _copy_verified(src, fresh)
        os.replace(fresh, dst)
        copies.setdefault(src, dst)


_first_copies: dict[tuple[Path, Path], Path] = {}  # (staging folder, cached file) -> its first file there
_staged_links: dict[Path, list[tuple[Path, Path]]] = {}  # staging folder -> (cached file, its hard link there)


def _write_manifest(stage: Path, settings: ModelRepoSettings, source: ModelSource) -> None:
    """Written last: the settings and the SHA-256 of every file (models' from the cache's checked digests)."""
    known = {}
    if source.saved_model is None:
        for v in settings.variants:
            known[f"{v.name}/{configs.VERSION}/{configs.ONNX_FILENAME}"] = cached_digest(source.onnx_for(v))
    # Files named by recipe (their cache key) in the upload's digest (infra/model_upload.py): see _mark.
    by_recipe = {}
    if source.saved_model is None:
        for v in settings.variants:
            if machine_dependent(source.onnx_for(v)):
                by_recipe[f"{v.name}/{configs.VERSION}/{configs.ONNX_FILENAME}"] = source.onnx_for(v).stem
    manifest = {
        "source": source.description,
        "source_key": source.key,
        "triton_image_tag": settings.triton_image_tag,
        "models": [v.__dict__ for v in settings.variants],
        FILES: file_digests(stage, known),
    }
    if by_recipe:
        manifest[BY_RECIPE] = by_recipe
    if settings.plan_compute_capabilities:  # absent otherwise: a repository built before the key keeps its manifest
        manifest[PLAN_CAPABILITIES] = sorted(settings.plan_compute_capabilities)
    (stage / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


# ---------------------------------------------------------------- staging and commit


def _check_targets(out: Path, cpu_out: Path | None) -> None:
    if cpu_out and (cpu_out == out or out in cpu_out.parents or cpu_out in out.parents):
        raise ModelRepoError(f"cpu_out: {cpu_out} must be separate from out {out}")
    for key, target in (("out", out), ("cpu_out", cpu_out)):
        if target is None:
            continue
        # The one check of output folders: a file, a path under /proc or /sys, a read-only folder, a name too long.
        problem = output_folder_problem(target)
        if problem is not None:
            raise ModelRepoError(f"{key}: {one_line(target)}: {problem}")
        if target.is_dir() and any(target.iterdir()) and not (target / MANIFEST).is_file():
            raise ModelRepoError(
                f"{key}: {target} is not empty and was not written by model_repo; choose another folder"
            )


def lock_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.lock")


@contextlib.contextmanager
def _target_lock(target: Path) -> Iterator[None]:
    """Hold the exclusive lock of one target (waiting, and saying so, while another build holds it).

    flock(2) locks are released by the kernel when their holder exits, kill -9 included, so a crashed
    build never blocks the next (https://man7.org/linux/man-pages/man2/flock.2.html). The holder removes
    the lock file before it lets go, and a waiter then finds its file gone and locks the new one: no lock
    file is left beside the target, and no two builds ever hold locks on different files of one name.
    """
    created = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    path = lock_path(target)
    fd = _acquire(path, target)
    try:
        _remove_stale(target)
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)  # releases the lock
        for folder in created:  # deepest first; only if the build left them empty
            with contextlib.suppress(OSError):
                folder.rmdir()


def _acquire(path: Path, target: Path) -> int:
    said = False
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:  # another command's output-folder probe removed the empty parent just made
            path.parent.mkdir(parents=True, exist_ok=True)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not said:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                print(f"waiting for another build of {target} (pid {holder}) to finish", file=sys.stderr, flush=True)
                said = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            if (os.fstat(fd).st_ino, os.fstat(fd).st_dev) == (path.stat().st_ino, path.stat().st_dev):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                return fd
        os.close(fd)  # the file was removed by the build that held it: lock the one there now


def _remove_stale(target: Path) -> None:
    """Staging and old folders of builds of this target that were killed (none can be running: we hold the lock)."""
    for pattern in (f".{target.name}.staging-*", f".{target.name}.old-*"):
        for folder in target.parent.glob(pattern):
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _staging(target: Path) -> Iterator[Path]:
    """A temp folder beside `target` (same file system, so the final rename is atomic)."""
    stage = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.staging-"))
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _commit(stage: Path, target: Path) -> None:
    """Swap the staged folder in (under the target's lock); the old one is put back if that fails. A target that
    already holds what was staged stays: a rebuild with the same settings then never leaves a reader (a plan, the
    sandbox, a sync running beside it) the instant between the two renames where the folder is missing."""
    links = _staged_links.pop(stage, [])
    if _holds(target, stage):
        return
    _copy_linked_models(links)
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    shutil.rmtree(old, ignore_errors=True)
    moved = target.exists()
    if moved:
        target.rename(old)
    try:
        stage.rename(target)
    except OSError:
        if moved:
            old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _holds(target: Path, stage: Path) -> bool:
    """The target's manifest is the staged one (same settings, source and file digests) and every
    file of the target still matches it (verify_repository: none changed, missing or added since its build)."""
    try:
        if read_manifest(target) != read_manifest(stage):  # the one bounded reader: a FIFO planted there never hangs
            return False
        verify_repository(target)
    except ModelRepoError:
        return False
    return True


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())
