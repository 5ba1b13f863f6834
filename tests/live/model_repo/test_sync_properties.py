"""Property-based tests of model_repo.sync's command line: generated source trees and destinations.

For every generated source (odd names, unicode, spaces, dots, empty folders, .DS_Store, links, nested
folders, files that are not models) and destination (with and without slashes, empty, '..', unicode),
synced twice into a bucket seeded with other people's objects inside and outside the prefix:
EITHER the sync is refused with exit 2, one line on stderr and the bucket unchanged,
OR the models under the prefix are exactly the source's and nothing else in the bucket changed.
Which of the two must happen is predicted here from the generated description alone, with the rules
the README states, so a sync that refused everything (or nothing) would fail.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import os
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from google.cloud import storage
from google.protobuf import text_format
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.model_repo.sync import RECORD_NAME, main

pytest_plugins = ("tests.support.gcs_fixtures",)

# Letters, digits, spaces, dots, GCS's "avoid" characters and non-ASCII: all valid in a name.
SAFE = st.text(alphabet=st.sampled_from(list("abcXY019 ._-#[]*?éü中")), min_size=1, max_size=6).filter(
    lambda n: n not in (".", "..") and n != ".DS_Store"
)
# Names the sync must refuse: not UTF-8 (a lone surrogate is how Python spells the byte 0xff), control characters.
ODD = st.sampled_from(["bad\udcffname", "new\nline", "tab\there", "bell\x07", "cr\rx", "del\x7f"])
VERSION_FOLDERS = st.sampled_from(["1", "1", "2", "2", "3", "10", "0", "01", "v1"])
CONTENT = st.binary(max_size=24)


@dataclass
class ModelSpec:
    name: str
    config: str  # "valid", "broken" or "none"
    folders: dict[str, dict[str, bytes]]  # folder below the model ("1", "v1", ...) -> file path below it -> bytes
    extras: dict[str, bytes]  # files beside config.pbtxt


@dataclass
class TreeSpec:
    models: list[ModelSpec]
    junk_files: list[str]  # top-level files (not models)
    empty_dirs: list[str]
    linked: bool  # the first model lives elsewhere and is linked in
    dangling: bool  # a link to nothing inside the first model
    odd: str | None  # a file with this name inside the first model (or at the top when there is none)
    ds_store: bool = True
    notes: list[str] = field(default_factory=list)


def _is_version(folder: str) -> bool:
    # Triton loads numeric folders not starting with "0" (model_repository.md, "Model Versions":
    # https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_repository.md).
    return folder.isascii() and folder.isdigit() and not folder.startswith("0")


def rarely(draw: st.DrawFn, one_in: int) -> bool:
    # sampled_from is uniform, where integers() would favour its bounds.
    return draw(st.sampled_from([False] * (one_in - 1) + [True]))


def files(min_size: int = 0) -> st.SearchStrategy[dict[str, bytes]]:
    names = st.one_of(SAFE, st.builds(lambda a, b: f"{a}/{b}", SAFE, SAFE))
    return st.dictionaries(names, CONTENT, min_size=min_size, max_size=2).filter(
        lambda found: not any(k.split("/")[0] in found for k in found if "/" in k)  # a file where a folder goes
    )


@st.composite
def model_specs(draw: st.DrawFn, name: str) -> ModelSpec:
    folders = draw(st.dictionaries(VERSION_FOLDERS, files(), max_size=2))
    if not rarely(draw, 6):  # usually one version folder with a file in it
        folders[draw(st.sampled_from(["1", "2", "3", "10"]))] = draw(files(min_size=1))
    extras = draw(st.dictionaries(SAFE.filter(lambda n: n not in folders and n != "config.pbtxt"), CONTENT, max_size=2))
    config = draw(st.sampled_from(["valid"] * 8 + ["broken", "none"]))
    return ModelSpec(name, config, folders, extras)


@st.composite
def tree_specs(draw: st.DrawFn) -> TreeSpec:
    names = draw(st.lists(SAFE, min_size=1, max_size=6, unique=True))
    cut = draw(st.sampled_from(range(len(names))))  # at least one folder; it may still hold no model
    junk, rest = names[:cut], names[cut:]
    empty = rest[len(rest) // 2 + 1 :] if draw(st.booleans()) else []
    models = [draw(model_specs(n)) for n in rest if n not in empty]
    # Odd names and dangling links are rarer: most trees should be syncable.
    odd = draw(ODD) if rarely(draw, 8) else None
    return TreeSpec(models, junk, empty, draw(st.booleans()), rarely(draw, 8), odd, draw(st.booleans()))


PREFIXES = st.one_of(
    st.sampled_from(["m", "/models/v1", "team a/models", "中/ü/", "repo.v2"]),
    st.sampled_from(
        [
            "",
            "/",
            "//",
            "models",
            "models/",
            "/a/b/",
            "a//b",
            "..",
            "a/../b",
            ".",
            "./m",
            "ünï/cödé",
            "with space",
            "x\ny",
        ]
    ),
    st.text(alphabet=st.sampled_from(list("ab/.é ")), min_size=0, max_size=8),
)


# --- the source on disk, and what it should become ------------------------------------


def write_tree(spec: TreeSpec, root: Path, elsewhere: Path) -> None:
    root.mkdir(parents=True)
    for index, model in enumerate(spec.models):
        folder = elsewhere / model.name if spec.linked and index == 0 else root / model.name
        folder.mkdir(parents=True)
        if spec.linked and index == 0:
            (root / model.name).symlink_to(folder, target_is_directory=True)
        if model.config != "none":
            text = f'name: "{model.name}"\nmax_batch_size: 4\n' if model.config == "valid" else "max_batch_size: ["
            (folder / "config.pbtxt").write_text(text, encoding="utf-8")
        for sub, files in model.folders.items():
            (folder / sub).mkdir()
            for relative, content in files.items():
                (folder / sub / relative).parent.mkdir(parents=True, exist_ok=True)
                (folder / sub / relative).write_bytes(content)
            if spec.ds_store:
                (folder / sub / ".DS_Store").write_bytes(b"Bud1")
        for relative, content in model.extras.items():
            (folder / relative).write_bytes(content)
    for name in spec.junk_files:
        (root / name).write_bytes(b"not a model")
    for name in spec.empty_dirs:
        (root / name / "1").mkdir(parents=True)
    if spec.ds_store:
        (root / ".DS_Store").write_bytes(b"Bud1")
    first = root / spec.models[0].name if spec.models else root
    if spec.odd is not None:
        (first / spec.odd).write_bytes(b"odd")
    if spec.dangling:
        (first / "dangling.bin").symlink_to(root / "nowhere.bin")


def expected_models(spec: TreeSpec) -> dict[str, dict[str, str]] | None:
    """Model -> {object name below the model folder, with its version as 'V': md5}; None if refused."""
    if spec.odd is not None or spec.dangling:
        return None
    models = {}
    for model in spec.models:
        if model.config == "none":
            continue  # not a model: left out
        versions = [int(f) for f, files in model.folders.items() if _is_version(f) and files]
        if model.config == "broken" or not versions:
            return None
        served = str(max(versions))  # Triton's default policy: the latest version
        objects = {name: md5(content) for name, content in model.extras.items()}
        for folder, files in model.folders.items():
            if _is_version(folder) and folder != served:
                continue  # Triton would not load it, so the sync does not send it
            where = "V" if folder == served else folder
            objects.update({f"{where}/{relative}": md5(content) for relative, content in files.items()})
        models[model.name] = objects
    return models or None


def prefix_is_valid(prefix: str) -> bool:
    """The documented prefix rule (docs, contracts/naming.py object_prefix_problem's docstring), restated: printable,
    no empty, '.' or '..' part, no part starting or ending with a space, none of # ? [ ] *, not GCS's ACME folder."""
    stripped = prefix.strip("/")
    parts = stripped.split("/")
    return (
        bool(stripped)
        and all(p not in ("", ".", "..") and p == p.strip() for p in parts)
        and all(c.isprintable() for c in stripped)
        and not set("#?[]*") & set(stripped)
        and not f"{stripped}/".startswith(".well-known/acme-challenge/")
    )


def md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


# --- the bucket ------------------------------------------------------------------------


def snapshot(client: storage.Client, bucket: str) -> dict[str, tuple[str, int]]:
    return {b.name: (b.md5_hash, b.generation) for b in client.list_blobs(bucket)}


def bucket_models(client: storage.Client, bucket: str, prefix: str) -> dict[str, dict[str, str]]:
    """What the pinned configs under the prefix select, in expected_models' shape."""
    objects = {b.name[len(prefix) :]: b for b in client.list_blobs(bucket, prefix=prefix)}
    models = {}
    for name, blob in objects.items():
        model, _, rest = name.rpartition("/")
        if rest != "config.pbtxt" or "/" in model:
            continue
        # Downloaded by name: the emulator's listed mediaLink leaves '#' unescaped.
        config = text_format.Parse(client.bucket(bucket).blob(blob.name).download_as_text(), mc.ModelConfig())
        (pin,) = config.version_policy.specific.versions
        assert config.name == model and config.max_batch_size == 4
        under = {n[len(model) + 1 :]: b.md5_hash for n, b in objects.items() if n.startswith(f"{model}/")}
        under.pop("config.pbtxt")
        models[model] = {(f"V/{n.split('/', 1)[1]}" if n.split("/")[0] == str(pin) else n): h for n, h in under.items()}
    return models


def seed(client: storage.Client, bucket: str, prefix: str) -> dict[str, bytes]:
    """Other people's objects: beside the prefix, sharing its first letters, and inside it."""
    strangers = {"zz-outside/data.csv": b"a,b\n", "zz-top.txt": b"t"}
    if prefix:
        strangers |= {f"{prefix}zz-stranger.bin": b"theirs", f"{prefix}zz-team/model.bin": b"theirs too"}
        strangers[prefix.rstrip("/") + "-zz-sibling/x"] = b"sibling"
    for name, content in strangers.items():
        client.bucket(bucket).blob(name).upload_from_string(content)
    return strangers


def run_cli(*args: str) -> tuple[int, str]:
    """The command line's own entry point, in-process (a subprocess per example would cost seconds)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(args))
    return code, err.getvalue()


def sync_and_check(client: storage.Client, bucket: str, source: Path, url: str, expected: dict | None) -> bool:
    """One sync: refused as predicted (unchanged bucket) or done as predicted; True when done."""
    before = snapshot(client, bucket)
    code, err = run_cli(str(source), url)
    event("refused" if expected is None else f"synced {len(expected)} models")
    if expected is None:
        assert code == 2, err
        assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
        assert snapshot(client, bucket) == before
        return False
    assert code == 0, err
    return True


def assert_synced(client: storage.Client, bucket: str, prefix: str, expected: dict, strangers: dict[str, bytes]):
    assert bucket_models(client, bucket, prefix) == expected
    for name, content in strangers.items():
        assert client.bucket(bucket).blob(name).download_as_bytes() == content, name
    # Besides the models (all of whose objects bucket_models compared), only the record and the strangers.
    ours = {b.name[len(prefix) :] for b in client.list_blobs(bucket, prefix=prefix) if b.name not in strangers}
    assert {n.split("/", 1)[0] for n in ours - {RECORD_NAME}} == set(expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=tree_specs(), second=tree_specs(), prefix=PREFIXES)
def test_a_sync_is_refused_untouched_or_mirrors_the_source(
    gcs_client: storage.Client, first: TreeSpec, second: TreeSpec, prefix: str
) -> None:
    bucket = f"prop-{uuid.uuid4().hex[:16]}"
    gcs_client.create_bucket(bucket)
    valid_prefix = prefix_is_valid(prefix)
    normalized = prefix.strip("/") + "/" if valid_prefix else ""
    strangers = seed(gcs_client, bucket, normalized)
    url = f"gs://{bucket}/{prefix}"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_tree(first, root / "one", root / "elsewhere-one")
        want_first = expected_models(first) if valid_prefix else None
        done = sync_and_check(gcs_client, bucket, root / "one", url, want_first)
        if done:
            assert_synced(gcs_client, bucket, normalized, want_first, strangers)

        write_tree(second, root / "two", root / "elsewhere-two")
        want_second = expected_models(second) if valid_prefix else None
        if want_second is not None and done:
            removed, kept = set(want_first) - set(want_second), set(want_first) & set(want_second)
            if len(removed) > len(kept):
                # Removing more models than it keeps (there before and after) needs --allow-mass-delete.
                want_second = None
        # A refused second sync leaves the bucket as the first one left it (sync_and_check compares snapshots).
        if sync_and_check(gcs_client, bucket, root / "two", url, want_second):
            assert_synced(gcs_client, bucket, normalized, want_second, strangers)


def test_the_strategies_cover_both_outcomes() -> None:
    """The generated trees are neither all refused nor all accepted (so the property says something)."""
    outcomes: set[bool] = set()

    @settings(max_examples=60, deadline=None, database=None)
    @given(tree_specs())
    def collect(spec: TreeSpec) -> None:
        outcomes.add(expected_models(spec) is None)

    collect()
    assert outcomes == {True, False}


def test_names_on_disk_round_trip() -> None:
    """The odd names reach the file system as intended (a surrogate becomes the raw byte 0xff)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bad\udcffname"
        path.write_bytes(b"x")
        assert os.listdir(os.fsencode(tmp)) == [b"bad\xffname"]
