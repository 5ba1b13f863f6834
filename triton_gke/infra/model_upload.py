"""Moves the built model repository into the bucket during `pulumi up`.

Why a sync command and not one `gcp.storage.BucketObject` per file: the same tested code
(model_repo/sync.py) then serves `pulumi up`, the local sandbox's GCS emulator and CI pipelines
that publish models without touching infrastructure; it skips unchanged files by MD5, touches only
objects it wrote itself (its record under the prefix), moves a changed model to a new version folder
before its config.pbtxt pins it so a polling Triton never pairs a config with other weights, and
streams large files in resumable chunks. It is never passed --allow-mass-delete: a build that lost
most of its models fails the update instead of emptying the bucket. Pulumi keeps only a digest of
the repository (its trigger), never file contents.

Where the engine-build Jobs must build a plan from the new files first (tritonBuildEngines), the upload only
stages them (`sync --stage`: new version folders beside the live ones, configs untouched) and ModelPin runs
`sync --pin` (configs only: it refuses to upload anything the stage did not) once every Job reports Complete: a Job
that fails stops the update before the pin (pulumi-kubernetes fails a Job's create or update on its Failed
condition, https://www.pulumi.com/registry/packages/kubernetes/api-docs/batch/v1/job/, and Pulumi creates no
resource that depends on a failed one), so every pod started meanwhile, or after, loads the last good version, which
the staged sync leaves in place. The Job itself can only create plan
objects (infra/engine_writer.py), never a config.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

import pulumi
import pulumi_command as command

from triton_gke.bounded_files import parse_json, read_text_file
from triton_gke.contracts.paths import built_repository, project_dir
from triton_gke.infra.config import ConfigError
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.manifest import (
    BY_RECIPE,
    MANIFEST,
    MANIFEST_MAX_BYTES,
    PLAN_CAPABILITIES,
    rebuild,
    verify_repository,
)
from triton_gke.model_repo.settings import ModelRepoSettings
from triton_gke.model_repo.sync import hash_local, scan_local
from triton_gke.one_line import model_repo_command

# Where `triton-gke model-repo` writes the repository and the upload reads it: build/model_repository of the project
# folder, the folder `pulumi up` runs the program in (contracts/paths.py project_dir: the engine's working directory).


def __getattr__(name: str) -> Path:
    # BUILT_REPOSITORY, read as a constant by callers: the project folder's, as of the read (PEP 562).
    if name == "BUILT_REPOSITORY":
        return built_repository()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The Python the two Commands (this sync, infra/negs.py) run the package's modules with. Relative to the project
# directory, where pulumi-command runs a local command by default ("dir: the directory from which to run the command
# ... defaults to the directory of the Pulumi program",
# https://www.pulumi.com/registry/packages/command/api-docs/local/command/): this repository's venv (Pulumi.yaml
# names it). A program that installed triton-gke passes its own interpreter instead (TritonGkeSystemArgs.python,
# e.g. sys.executable): the default only exists inside this repository. Kept relative here, so the command text in
# the state does not change with the folder a deployer checked the repository out to.
VENV_PYTHON = ".venv/bin/python"


def _rebuild_hint(stack: str) -> str:
    # `make model-repo STACK=dev` in this repository or under make, `triton-gke model-repo --stack dev` elsewhere.
    return f"run `{model_repo_command(stack)}` first"


def _shown(path: Path) -> Path:
    """A path relative to the project folder when inside it (build/model_repository), else as given."""
    here = project_dir()
    return path.relative_to(here) if path.is_absolute() and path.is_relative_to(here) else path


def built_repository_digest(settings: ModelRepoSettings, stack: str, root: Path | None = None) -> str:
    """Digest of the built repository, after checking it was built from these settings.

    root: the built repository; default the project's build/model_repository (built_repository()).
    """
    root = Path(root) if root is not None else built_repository()
    where = _shown(root)
    path = root / MANIFEST
    if not os.path.lexists(path):
        raise ConfigError(f"{where}: no model repository built; {_rebuild_hint(stack)}")

    def error(line: str) -> ConfigError:
        return ConfigError(f"{line}; {_rebuild_hint(stack)}")

    manifest = parse_json(read_text_file(path, MANIFEST_MAX_BYTES, "a build manifest", error), path, error)
    if not isinstance(manifest, dict):
        raise error(f"{where}: not a build manifest")
    built = {
        "models": manifest.get("models"),
        "tritonImageTag": manifest.get("triton_image_tag"),
        "plans": manifest.get(PLAN_CAPABILITIES, []),
    }
    wanted = {
        "models": [asdict(v) for v in settings.variants],
        "tritonImageTag": settings.triton_image_tag,
        "plans": sorted(settings.plan_compute_capabilities),  # tritonBuildEngines: plan configs, not ONNX Runtime's
    }
    source_ok = (settings.source is None) == manifest.get("source", "").startswith("built-in")
    if built != wanted or not source_ok:
        raise ConfigError(f"{where}: built from other model settings than stack {stack!r}; {_rebuild_hint(stack)}")
    try:  # every file still as built (SHA-256 in the manifest): an edited model is refused, never uploaded
        verify_repository(root)
    except ModelRepoError as err:
        raise ConfigError(str(err).replace(rebuild(), rebuild(stack))) from None
    # The files the sync will send. Their ONNX check is left to the sync itself: verify_repository has just matched
    # every byte to the build, which checked its models (model_repo/resnet50.py), and a plan runs in a new process
    # (onnx.checker.check_model is 0.8 s of it).
    paths = scan_local(root, check_files=False)
    by_recipe = manifest.get(BY_RECIPE) or {}
    if not isinstance(by_recipe, dict) or not all(isinstance(v, str) for v in by_recipe.values()):
        raise error(f"{where}: not a build manifest ({BY_RECIPE!r} is not a map of names)")
    stats = tuple((p, p.stat().st_size, p.stat().st_mtime_ns) for p in paths)
    return _content_digest(root, stats, tuple(sorted(by_recipe.items())))


@cache
def _content_digest(
    root: Path, files_with_stat: tuple[tuple[Path, int, int], ...], by_recipe: tuple[tuple[str, str], ...] = ()
) -> str:
    """Hashes every byte once per (size, mtime) of each file: a preview never re-reads an unchanged repository.

    A file whose bytes depend on the machine that built it (the manifest's BY_RECIPE: a user model's INT8 copy
    calibrated by ONNX Runtime) enters by its recipe instead: the same recipe built on another machine, or after the
    cache was wiped, leaves the digest, so the sync trigger and every Triton pod template, unchanged.
    """
    files = hash_local(root, [path for path, _, _ in files_with_stat])
    recipes = dict(by_recipe)
    listing = "\n".join(
        f"{name} recipe {recipes[name]}" if name in recipes else f"{name} {files[name].md5} {files[name].size}"
        for name in sorted(files)
    )
    return hashlib.sha256(listing.encode()).hexdigest()


@dataclass(frozen=True)
class ModelUploadArgs:
    bucket: pulumi.Input[str]
    prefix: str
    digest: str
    # The built repository to sync; default the project's build/model_repository (built_repository()).
    local_dir: Path | None = None
    # The interpreter that runs triton_gke.model_repo.sync (VENV_PYTHON: why this default).
    python: str = VENV_PYTHON
    # Upload new versions without pinning them (`sync --stage`); a ModelPin pins them after what must come first.
    stage: bool = False
    # Regions whose Triton keeps the live versions (`sync --hold`); given to the sync that pins: this one unless staged.
    holds: tuple[str, ...] = ()


def sync_command(python: str, local_dir: Path, url: str, mode: str = "", holds: Sequence[str] = ()) -> str:
    """The sync's command line as pulumi-command runs it (one home for the upload and the pin). mode: "" (upload and
    pin), "stage" or "pin" (model_repo/sync.py, Staged updates); holds: the regions whose Triton keeps the live
    versions (Held versions), given to the sync that pins."""
    if mode not in ("", "stage", "pin"):
        raise ValueError(f"sync mode {mode!r}: expected '', 'stage' or 'pin'")
    flags = [*([f"--{mode}"] if mode else []), *(f"--hold={hold}" for hold in holds)]
    return shlex.join([python, "-m", "triton_gke.model_repo.sync", str(local_dir), url, *flags])


class ModelUpload(pulumi.ComponentResource):
    sync: command.local.Command
    # gs://BUCKET/PREFIX, resolved only after the sync ran: consumers wait for the models by using it.
    repository_url: pulumi.Output[str]

    def __init__(self, name: str, args: ModelUploadArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:infra:ModelUpload", name, None, opts)
        # Relative to the project folder when inside it: pulumi-command runs the sync there (VENV_PYTHON's link), and
        # the command text in the state does not change with the folder a deployer checked the project out to.
        local_dir = _shown(Path(args.local_dir) if args.local_dir is not None else built_repository())
        self.local_dir = local_dir
        sync = pulumi.Output.from_input(args.bucket).apply(
            lambda bucket: sync_command(
                args.python,
                local_dir,
                f"gs://{bucket}/{args.prefix}",
                "stage" if args.stage else "",
                () if args.stage else args.holds,
            )
        )
        self.sync = command.local.Command(
            f"{name}-sync",
            create=sync,
            update=sync,
            # A new digest (any file added, changed or removed) runs the sync again.
            triggers=[args.digest],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.repository_url = pulumi.Output.all(args.bucket, self.sync.stdout).apply(
            lambda values: f"gs://{values[0]}/{args.prefix}"
        )
        self.register_outputs({"digest": args.digest, "repositoryUrl": self.repository_url})


@dataclass(frozen=True)
class ModelPinArgs:
    """What the pinning sync needs: the staged upload, and what must be done before its versions are served."""

    upload: ModelUpload
    bucket: pulumi.Input[str]
    prefix: str
    digest: str
    # The engine-build Jobs of every region: one bucket and one config per model serve them all.
    after: Sequence[pulumi.Resource]
    python: str = VENV_PYTHON
    holds: tuple[str, ...] = ()


class ModelPin(pulumi.ComponentResource):
    """The sync that pins a staged upload's new versions in the configs and deletes the old folders, run only once
    everything in `after` succeeded (the module docstring: why)."""

    sync: command.local.Command
    # gs://BUCKET/PREFIX, resolved only after the pin ran: Triton's Deployments wait for the pinned models by it.
    repository_url: pulumi.Output[str]

    def __init__(self, name: str, args: ModelPinArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-gke:infra:ModelPin", name, None, opts)
        pin = pulumi.Output.from_input(args.bucket).apply(
            lambda bucket: sync_command(
                args.python, args.upload.local_dir, f"gs://{bucket}/{args.prefix}", "pin", args.holds
            )
        )
        self.sync = command.local.Command(
            f"{name}-sync",
            create=pin,
            update=pin,
            triggers=[args.digest],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.upload.sync, *args.after]),
        )
        self.repository_url = pulumi.Output.all(args.bucket, self.sync.stdout).apply(
            lambda values: f"gs://{values[0]}/{args.prefix}"
        )
        self.register_outputs({"digest": args.digest, "repositoryUrl": self.repository_url})
