"""Copy a local Triton model repository into gs://BUCKET/PREFIX without ever losing data it does not own.

    triton-gke sync LOCAL_DIR gs://BUCKET/PREFIX [--dry-run] [--allow-mass-delete] [--adopt] [--stage | --pin]
                    [--hold NAME]

Ownership. The destination needs a prefix (a bare bucket is refused). The sync keeps a record,
PREFIX/.triton-gke-sync.json, of every object it wrote there (name, the generation GCS gave that
write, its MD5 and CRC32C) and of each model's live version. Ownership is by identity, not name: GCS
gives an object a new generation whenever it is replaced, so an object whose live generation is not
the recorded one (overwritten by someone, or a name deleted and reused by another team) is not the
object the sync wrote. The sync also marks what it writes with custom metadata (OWNER_KEY, holding
the MD5 it wrote), so a hand-edited record cannot claim an object the sync never wrote. It deletes or
overwrites only objects whose live generation, MD5 and mark match the record, and sends those
requests with if_generation_match=<recorded generation>, so a change racing the sync makes GCS refuse
(412) instead of losing someone's data. Any other object under the prefix (a "stranger") is left
where it is and reported, a recorded one that changed hands by name in a warning; a stranger where the
sync must write (a model's config.pbtxt, say) stops the sync before it changes anything (exit 2).
The record is written before the objects it lists: names about to be uploaded carry the MD5 of the
upload in flight ("next"), and the generations the uploads got are recorded right after them; a run
after an interruption claims an upload that arrived only if its MD5 and mark are that "next" one.
A bucket an earlier version of the sync filled has no record: its model folders (config.pbtxt and
numeric version folders, named like the source's models) stop the sync until --adopt takes
ownership of them, once; nothing else under the prefix is ever adopted. A record of the earlier
format (names only, no generations) is read too: a name it lists is claimed only if its object holds
exactly what this sync would upload under that name; with --adopt every object it lists inside a source model's
folder (config.pbtxt, numeric version folders) is claimed at
its current generation (a person vouches for the old record); the rest are strangers. Adopted objects
get the mark (a metadata patch, if_generation_match on their generation) before they are recorded.
The record is read bounded: at most RECORD_MAX_BYTES, UTF-8, nested at most _RECORD_MAX_DEPTH deep,
whole numbers only (generations 1 .. 2**63-1); anything else stops the sync with one line naming it.

The source is checked whole before anything is sent (model_repo/sync_source.py): every name must be
UTF-8 without control characters, links inside a model are followed only within the source (dangling
ones and loops refused), ONNX files must parse and model.py must compile, every file is read and
hashed; a folder model_repo built is sent exactly as its build manifest lists. A model is a
folder with config.pbtxt and a version folder holding a file; other
top-level entries are left out and listed; a source without a model is refused. A sync that would
remove more models than it keeps (kept: present before and after, so renaming every model keeps
none) is refused unless --allow-mass-delete is given.

Atomic updates. Triton loads only the versions a config's `version_policy: { specific: { versions:
[...] } }` lists ("Version Policy" in
https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md),
so every synced config.pbtxt is the local one with its policy replaced by a pin on the version
folders written with it. A model's first sync keeps its version numbers. A changed model:
  1. its served version folders go up under NEW numbers, above every version folder in the bucket
     (local version v becomes v + offset), beside the untouched live ones, and so do the files its
     outputs' label_filename name, under new names (labels.txt -> labels.vN.txt, see label_names());
     other files beside config.pbtxt, which the config does not refer to, are updated in place;
  2. its config.pbtxt is replaced by one pinning the new numbers: one object write, so Triton sees
     either the old config with the old weights or the new config with the new weights;
  3. the old version folders are deleted.
Configs always go up after the files of every model, and removed models lose their config first.

Staged updates (--stage). Where something must be built from the new files before Triton may serve them (the
engine-build Job writes a TensorRT plan into the new version folder, k8s/engine_build.py), `pulumi up` runs the sync
twice: `--stage` does step 1 only (new version folders, label and side files) and records the new numbers as pending,
leaving every config pinned to its live versions and every old folder in place, so a pod that starts while the build
runs, or after it failed, loads the last good version; `--pin` after the build (infra/model_upload.py ModelPin,
which waits for every Job's Complete condition) resumes into those folders, pins them and deletes the old ones. The
resume accepts, inside the staged folders, the plan files the Job writes (model_repo/engines.py is_engine_file) and
nothing else it did not write, and only while the staged files are still those of the source; otherwise a plain
sync would go to fresh folders, and `--pin` refuses (exit 2, nothing changed) to upload anything but configs: it
pins only what was staged and built, never a folder no Job has seen.

Held versions (--hold NAME, repeatable). A tritonserver started with --model-config-name=NAME loads
<model>/configs/NAME.pbtxt where it exists and config.pbtxt otherwise (triton-inference-server/core
src/model_repository_manager.cc GetModelConfigFullPath; k8s/triton.py starts a held region's Triton so). A hold,
new in a sync, copies each model's live config.pbtxt, byte for byte, to configs/NAME.pbtxt before the flip, so those
servers keep the versions it pins while the others take the new ones; the versions' files and the label files that
config names are kept as long as the hold is given (recorded per model under "holds"). A sync without a hold it
recorded deletes that configs/NAME.pbtxt, and the held versions go with the next flip. A model synced for the first
time has nothing live to hold. A staged sync neither writes nor releases holds: the pin does. A release deletes the
held configs before the files they pin; a recorded hold whose config someone else deleted or replaced stops the
sync (release it, then hold again).
Version folders the local policy would not load are not sent (Triton copies a whole remote model
before loading it: "Cloud Storage with Environment variables" in model_repository.md). An
interrupted sync leaves the live config pinned to complete weights; the next run resumes into the
same new folders, skipping what already arrived.

Transfer. A file is sent only when its content differs from the object's (MD5, or CRC32C for
objects GCS reports without an MD5); each upload carries its MD5 so GCS rejects bytes that differ
from what was hashed, and the stored object is checked after; large files stream in resumable
chunks, and an unfinished resumable upload never becomes an object.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from google.api_core import exceptions as api_exceptions
from google.auth.credentials import AnonymousCredentials
from google.auth.exceptions import GoogleAuthError
from google.cloud import storage
from google.cloud.storage import exceptions as storage_exceptions
from google.cloud.storage.fileio import BlobWriter
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from triton_gke.bounded_files import json_depth
from triton_gke.contracts.naming import bucket_name_problem, object_prefix_problem
from triton_gke.model_repo.engines import is_engine_file
from triton_gke.model_repo.reserved import HOLDS_FOLDER, RECORD_NAME  # their one home
from triton_gke.model_repo.sync_source import (
    CONFIG_NAME,
    IGNORED_DIRS,
    LocalFile,
    Source,
    SourceModel,
    SyncError,
    bytes_file,
    file_hashes,
    hash_local,
    scan_source,
    show,
    version_number,
)
from triton_gke.one_line import OneLineParser

__all__ = [
    "CONFIG_NAME",
    "IGNORED_DIRS",
    "LocalFile",
    "SyncError",
    "SyncReport",
    "file_hashes",
    "hash_local",
    "scan_local",
    "sync_repository",
]

# Resumable chunks must be a multiple of 256 KiB; 8 MiB keeps memory small and
# requests few. Files above CHUNKED_THRESHOLD are streamed chunk by chunk.
CHUNK_SIZE = 8 * 1024 * 1024
CHUNKED_THRESHOLD = 8 * 1024 * 1024
_CHUNK_MULTIPLE = 256 * 1024
_RECORD_FORMAT = 2  # 1: names only (read as legacy, see the module docstring)
_LEGACY_FORMAT = 1
RECORD_MAX_BYTES = 16 * 1024 * 1024  # ~100 bytes an object: far above any model repository's record
_RECORD_MAX_DEPTH = 8  # the format nests 6 deep (models -> model -> holds -> hold -> keep)
_MAX_GENERATION = 2**63 - 1  # GCS generations are int64 ("generation": "int64" in the JSON API's object resource)
_MAX_DIGITS = 20
# Custom metadata the sync sets on every object it writes; its value is the MD5 it wrote.
# Custom metadata is kept with the object until it is replaced or edited
# (https://cloud.google.com/storage/docs/metadata#custom-metadata).
OWNER_KEY = "triton-gke-sync"
# GCS object names are at most 1024 bytes of UTF-8 (https://cloud.google.com/storage/docs/naming-objects).
_MAX_NAME_BYTES = 1024
# A hold's name: Triton joins it into <model>/configs/NAME.pbtxt (reserved.HOLDS_FOLDER); a region's name fits.
HOLD_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_CONFIG_HEADER = "# Written by model_repo.sync: version_policy pins the version folders uploaded with this config.\n"

# progress(name, bytes_done, bytes_total): once per chunk of a large file, and once for
# every object when it is uploaded and verified (done == total); name is below PREFIX.
ProgressCallback = Callable[[str, int, int], None]
# step(action, name) after every change to the bucket: "upload", "delete" or "record".
StepCallback = Callable[[str, str], None]
# Errors the client raises for failed requests, wrapped into one-line SyncErrors.
_REQUEST_ERRORS = (
    api_exceptions.GoogleAPIError,
    storage_exceptions.InvalidResponse,
    storage_exceptions.DataCorruption,
    requests.exceptions.RequestException,
)


@dataclass
class SyncReport:
    """What a sync did (or, for a dry run, would do); object names are relative to PREFIX."""

    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    bytes_uploaded: int = 0
    strangers: list[str] = field(default_factory=list)  # objects under PREFIX the sync did not write: left alone
    # recorded names whose live object is not the one the sync wrote (new generation, no mark): strangers now
    disowned: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # source entries that are not models: not sent
    versions: dict[str, list[int]] = field(default_factory=dict)  # model -> the versions its config pins
    # --stage: model -> the versions uploaded and recorded as pending, not pinned (the config keeps `versions`)
    staged: dict[str, list[int]] = field(default_factory=dict)
    # --hold: model -> hold name -> the versions its configs/NAME.pbtxt pins
    held: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    # hold name -> the models whose recorded hold this sync releases (not given again)
    released: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Owned:
    """One object the sync wrote: the generation GCS gave that write and its hashes (base64, as GCS reports)."""

    generation: int | None  # None: not written yet (only `next` is in flight)
    md5: str | None
    crc32c: str | None = None
    next: str | None = None  # MD5 of an upload in flight to this name (recorded before it starts)
    adopt: bool = False  # claimed at its live generation; gets the mark before the record lists it (not saved)

    def to_json(self) -> dict[str, Any]:
        return {"generation": self.generation, "md5": self.md5, "crc32c": self.crc32c, "next": self.next}


@dataclass
class Record:
    """PREFIX/.triton-gke-sync.json: what this sync owns under the prefix."""

    objects: dict[str, Owned] = field(default_factory=dict)  # names below PREFIX it wrote (or is about to write)
    # model -> {"offset": live offset or None, "versions": pinned by the live config, "pending": offset or None}
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    generation: int = 0  # of the record object; 0 while there is none
    legacy: set[str] = field(default_factory=set)  # names a format-1 record lists: claimed only as documented
    disowned: set[str] = field(default_factory=set)  # recorded names whose live object the sync did not write

    def to_json(self) -> bytes:
        objects = {name: self.objects[name].to_json() for name in sorted(self.objects)}
        body = {"format": _RECORD_FORMAT, "objects": objects, "models": self.models}
        return (json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


@dataclass(frozen=True)
class ModelPlan:
    name: str
    offset: int  # remote version = local version + offset
    desired: dict[str, LocalFile]  # name below PREFIX -> content, the pinned config included
    changed: bool


@dataclass
class SyncPlan:
    models: list[ModelPlan]
    uploads: list[LocalFile]  # in safe order: every model's files, then the configs
    before_flip: list[storage.Blob]  # own leftovers inside the new version folders
    after_flip: list[storage.Blob]  # in safe order: removed models' configs, then everything else
    removed_models: list[str]
    unchanged: int
    strangers: list[str]
    # model -> hold name -> {"versions": [...], "keep": [names below PREFIX]}: the holds after this sync
    holds: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _describe(err: Exception) -> str:
    """One line for a failed request: GCS's own error message when it sent one."""
    response = getattr(err, "response", None)
    try:
        message = response.json()["error"]["message"]
        return _one_line(f"HTTP {response.status_code}: {message}")
    except (AttributeError, ValueError, KeyError, TypeError):
        return _one_line(err)


def normalize_prefix(prefix: str) -> str:
    """'models', '/models/' -> 'models/'. A prefix is required: the sync never owns a whole bucket."""
    stripped = prefix.strip("/")
    if not stripped:
        raise SyncError("destination needs a prefix (gs://BUCKET/PREFIX): the sync never manages a whole bucket")
    # The one prefix rule (contracts/naming.py), which the component's model_repository asks too: no control
    # character, line break or Unicode space, no part starting or ending with a space (" models"), no // . .. parts.
    why = object_prefix_problem(stripped)
    if why is None and len(stripped.encode("utf-8")) > 900:  # room below GCS's 1024 bytes for MODEL/VERSION/FILE
        why = "at most 900 bytes"
    if why is not None:
        raise SyncError(f"invalid object prefix: {stripped!r} ({why})")  # quoted: a space at either end shows
    return f"{stripped}/"


def scan_local(local_dir: Path, check_files: bool = True) -> list[Path]:
    """The files a sync would send (every model's files and configs), after checking the whole source
    (check_files: see scan_source)."""
    return scan_source(Path(local_dir), check_files).paths()


def list_remote(client: storage.Client, bucket_name: str, prefix: str) -> dict[str, storage.Blob]:
    """Objects under prefix, keyed by their name below it."""
    try:
        blobs = list(client.list_blobs(bucket_name, prefix=prefix))
    except api_exceptions.NotFound as err:
        raise SyncError(f"bucket gs://{bucket_name} does not exist") from err
    except api_exceptions.Forbidden as err:
        raise SyncError(f"no access to bucket gs://{bucket_name}: {_describe(err)}") from err
    except _REQUEST_ERRORS as err:
        raise SyncError(f"listing gs://{bucket_name}/{prefix} failed: {_describe(err)}") from err
    return {b.name[len(prefix) :]: b for b in blobs}


def is_unchanged(local: LocalFile, blob: storage.Blob | None) -> bool:
    if blob is None or blob.size != local.size:
        return False
    if blob.md5_hash:
        return blob.md5_hash == local.md5
    # Composite objects have no MD5; their CRC32C is still exact.
    return bool(blob.crc32c) and blob.crc32c == local.crc32c


# --- the ownership record -----------------------------------------------------------


def _record_entry(entry: object) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise TypeError("model entry")
    offset, pending, versions = entry.get("offset"), entry.get("pending"), entry.get("versions", [])
    for value in (offset, pending):
        if value is not None and (type(value) is not int or value < 0):
            raise TypeError("offset")
    if not isinstance(versions, list) or not all(type(v) is int and v > 0 for v in versions):
        raise TypeError("versions")
    holds = entry.get("holds", {})
    if not isinstance(holds, dict) or not all(_is_hold(name, hold) for name, hold in holds.items()):
        raise TypeError("holds")
    return {"offset": offset, "versions": versions, "pending": pending, **({"holds": holds} if holds else {})}


def _is_hold(name: str, hold: object) -> bool:
    if not HOLD_NAME.fullmatch(name) or not isinstance(hold, dict) or set(hold) != {"versions", "keep"}:
        return False
    versions, keep = hold["versions"], hold["keep"]
    return (
        isinstance(versions, list)
        and all(type(v) is int and v > 0 for v in versions)
        and isinstance(keep, list)
        and all(isinstance(n, str) for n in keep)
    )


def _owned_entry(name: str, entry: object) -> Owned:
    if not isinstance(entry, dict) or set(entry) - {"generation", "md5", "crc32c", "next"}:
        raise TypeError(f"object entry {show(name)}")
    generation = entry.get("generation")
    if generation is not None and (type(generation) is not int or not 0 < generation <= _MAX_GENERATION):
        raise TypeError(f"generation of {show(name)}: a whole number from 1 to 2**63-1 or null")
    hashes = [entry.get(key) for key in ("md5", "crc32c", "next")]
    if not all(h is None or (isinstance(h, str) and len(h) <= 64) for h in hashes):
        raise TypeError(f"hashes of {show(name)}")
    if generation is None and hashes[2] is None or generation is not None and hashes[0] is None:
        raise TypeError(f"object entry {show(name)}: a generation needs its md5, no generation an upload in flight")
    return Owned(generation, hashes[0], hashes[1], hashes[2])


def _whole_number(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_DIGITS:
        raise ValueError(f"a number of more than {_MAX_DIGITS} digits")
    return int(text)


def _not_whole(text: str) -> int:
    raise ValueError(f"{text[:24]} is not a whole number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    body = dict(pairs)
    if len(body) != len(pairs):
        raise ValueError("a key given twice")
    return body


def parse_record(data: bytes) -> Record:
    """A record's bytes -> Record (generation 0). ValueError/TypeError/KeyError for anything else, in one line."""
    if len(data) > RECORD_MAX_BYTES:
        raise ValueError(f"larger than {RECORD_MAX_BYTES} bytes")
    text = data.decode("utf-8")  # strict: UnicodeDecodeError is a ValueError
    depth = json_depth(text)  # the one home of JSON's depth check (triton_gke/bounded_files.py)
    if depth > _RECORD_MAX_DEPTH:
        raise ValueError(f"nested deeper than {_RECORD_MAX_DEPTH} levels")
    body = json.loads(
        text,
        parse_int=_whole_number,
        parse_float=_not_whole,
        parse_constant=_not_whole,
        object_pairs_hook=_unique_keys,
    )
    if not isinstance(body, dict) or body.get("format") not in (_RECORD_FORMAT, _LEGACY_FORMAT):
        raise TypeError("format")
    objects = body["objects"]
    if not isinstance(body["models"], dict):
        raise TypeError("models")
    models = {str(name): _record_entry(entry) for name, entry in body["models"].items()}
    if body["format"] == _LEGACY_FORMAT:
        if not isinstance(objects, list) or not all(isinstance(o, str) for o in objects):
            raise TypeError("objects")
        return Record({}, models, 0, set(objects))
    if not isinstance(objects, dict):
        raise TypeError("objects")
    return Record({name: _owned_entry(name, entry) for name, entry in objects.items()}, models)


def read_record(bucket: storage.Bucket, prefix: str, blob: storage.Blob | None) -> Record:
    if blob is None:
        return Record()
    where = f"gs://{bucket.name}/{prefix}{RECORD_NAME}"
    generation = int(blob.generation)  # as listed: a download may reset the blob's properties
    try:
        if blob.size is not None and int(blob.size) > RECORD_MAX_BYTES:
            raise ValueError(f"larger than {RECORD_MAX_BYTES} bytes")
        # A blob made from the name, not the listed one: its mediaLink is used as is, and an emulator's
        # may leave characters such as '#' unescaped. At most RECORD_MAX_BYTES + 1 bytes are read (end is
        # inclusive), whatever the listing said.
        data = bucket.blob(blob.name).download_as_bytes(
            start=0, end=RECORD_MAX_BYTES, if_generation_match=generation, checksum=None
        )
        record = parse_record(data)
    except _REQUEST_ERRORS as err:
        raise SyncError(f"reading {where} failed: {_describe(err)}") from err
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise SyncError(
            f"{where} is not a sync record this version can read ({_one_line(err)[:200]}); nothing changed"
        ) from err
    record.generation = generation
    return record


def write_record(bucket: storage.Bucket, prefix: str, record: Record) -> None:
    blob = bucket.blob(prefix + RECORD_NAME)
    try:
        # The generation precondition makes GCS refuse the write if another sync changed the
        # record since we read it (0: it must not exist yet).
        blob.upload_from_string(
            record.to_json(), content_type="application/json", if_generation_match=record.generation
        )
    except api_exceptions.PreconditionFailed as err:
        raise SyncError(f"gs://{bucket.name}/{prefix}{RECORD_NAME} changed during the sync: another sync runs") from err
    except _REQUEST_ERRORS as err:
        raise SyncError(f"writing gs://{bucket.name}/{prefix}{RECORD_NAME} failed: {_describe(err)}") from err
    record.generation = int(blob.generation)


# --- planning -------------------------------------------------------------------------


def _remote_name(relative: str, offset: int) -> str:
    """A served version folder's file moved to its remote version: '1/model.onnx' -> '4/model.onnx' at offset 3."""
    head, _, rest = relative.partition("/")
    return f"{version_number(head) + offset}/{rest}"  # type: ignore[operator]


def label_names(model: SourceModel, offset: int) -> dict[str, str]:
    """Local -> remote name (below the model folder) of every file the config names as label_filename.

    Triton reads an output's label_filename relative to the model folder, never the version folder
    (Model::Init in https://github.com/triton-inference-server/core/blob/main/src/model.cc joins model_dir_
    and label_filename, and refuses a path escaping it), so a label file beside config.pbtxt would be
    shared by the old and the new version. It is sent under a name of its own per update instead,
    labels.txt -> labels.v7.txt (7: the highest version pinned with it), and the synced config names that.
    """
    top = max(model.served) + offset
    names = {}
    for output in model.config.output:
        local = output.label_filename
        if not local or local in names:
            continue
        if local not in model.files:
            raise SyncError(
                f"{show(model.config_path)}: output {show(output.name)} names label_filename {show(local)}, "
                "which is not a file in the model folder"
            )
        head, slash, _ = local.partition("/")
        version = version_number(head) if slash else None
        if version is not None:
            if version not in model.served:
                raise SyncError(f"{show(model.config_path)}: label_filename {show(local)} is in a version not served")
            names[local] = _remote_name(local, offset)  # already inside a version folder: moves with it
            continue
        folder, _, base = local.rpartition("/")
        stem, dot, ext = base.rpartition(".")
        versioned = f"{stem}.v{top}.{ext}" if dot and stem else f"{base}.v{top}"
        names[local] = f"{folder}/{versioned}" if folder else versioned
    return names


def pinned_config(model: SourceModel, offset: int) -> bytes:
    """The model's config with its version policy replaced by a pin on the synced version folders
    and its label files renamed to the names they are synced under (label_names)."""
    config = type(model.config)()
    config.CopyFrom(model.config)
    config.version_policy.Clear()
    config.version_policy.specific.versions.extend(v + offset for v in model.served)
    labels = label_names(model, offset)
    for output in config.output:
        if output.label_filename:
            output.label_filename = labels[output.label_filename]
    return (_CONFIG_HEADER + text_format.MessageToString(config)).encode()


def desired_objects(model: SourceModel, hashed: dict[str, LocalFile], offset: int) -> dict[str, LocalFile]:
    """What the bucket holds for this model at this offset, keyed by name below PREFIX."""
    desired = {}
    labels = label_names(model, offset)
    for relative in model.files:
        head, slash, _ = relative.partition("/")
        version = version_number(head) if slash else None
        if version is not None and version not in model.served:
            continue  # Triton would not load it
        remote = labels.get(relative) or (relative if version is None else _remote_name(relative, offset))
        name = f"{model.name}/{remote}"
        if name in desired:  # a label file's versioned name is also a file of the source
            raise SyncError(f"{show(model.files[relative])}: its synced name {show(name)} is taken by another file")
        desired[name] = dataclasses.replace(hashed[f"{model.name}/{relative}"], relative=name)
    config = f"{model.name}/{CONFIG_NAME}"
    desired[config] = bytes_file(config, model.config_path, pinned_config(model, offset))
    return desired


def _version_folder(name: str) -> int | None:
    """'model/12/x' -> 12; None for names outside a version folder."""
    parts = name.split("/")
    return version_number(parts[1]) if len(parts) > 2 else None


def _fresh_offset(model: SourceModel, under: dict[str, storage.Blob]) -> int:
    """An offset that puts every served version above every version folder already there."""
    highest = max((v for name in under if (v := _version_folder(name)) is not None), default=0)
    return max(0, highest - min(model.served) + 1)


def _in_place(desired: dict[str, LocalFile], under: dict[str, storage.Blob]) -> bool:
    return all(is_unchanged(local, under.get(name)) for name, local in desired.items())


def _plan_model(
    model: SourceModel, hashed: dict[str, LocalFile], under: dict[str, storage.Blob], record: Record
) -> ModelPlan:
    state = record.models.get(model.name, {})
    live, pending, live_versions = state.get("offset"), state.get("pending"), set(state.get("versions", []))
    owned = {name for name in under if name in record.objects} - _held_names(model.name, state)
    if live is not None:
        desired = desired_objects(model, hashed, live)
        # Owned objects beside the live files that the build lacks are part of the live model too.
        extra = {n for n in owned - desired.keys() if _version_folder(n) is None or _version_folder(n) in live_versions}
        if _in_place(desired, under) and not extra:
            return ModelPlan(model.name, live, desired, changed=False)
    if pending is not None and pending != live:
        targets = {v + pending for v in model.served}
        inside = [n for n in under if _version_folder(n) in targets]
        staged = desired_objects(model, hashed, pending)
        # Resume an interrupted or staged update where it stopped, unless its folders hold someone else's objects:
        # the engine-build Job's plans only while the staged files are still this source's (a plan built from them).
        built_here = all(n in owned or is_engine_file(n) for n in inside) and _in_place(
            {n: f for n, f in staged.items() if _version_folder(n) is not None}, under
        )
        if not targets & live_versions and (all(n in owned for n in inside) or built_here):
            return ModelPlan(model.name, pending, staged, changed=True)
    offset = _fresh_offset(model, under)
    return ModelPlan(model.name, offset, desired_objects(model, hashed, offset), changed=True)


def _check_writes(plan: ModelPlan, under: dict[str, storage.Blob], record: Record, where: str) -> None:
    for name, local in plan.desired.items():
        if len((where + name).encode()) > _MAX_NAME_BYTES + len("gs://"):
            raise SyncError(f"{show(local.path)}: object name {show(name)} would exceed GCS's 1024 bytes")
        blob = under.get(name)
        if blob is not None and name not in record.objects and not is_unchanged(local, blob):
            if name in record.disowned:
                why = "was replaced by someone else since this sync wrote it (its generation is not the recorded one)"
            elif name in record.legacy:
                why = "is listed by an old-format record but is not what this sync would write (--adopt takes it)"
            else:
                why = "exists but was not written by this sync"
            raise SyncError(f"{show(where + name)} {why}; nothing changed: move it away or choose another prefix")


def hold_config(model: str, hold: str) -> str:
    """configs/NAME.pbtxt of a model, below PREFIX: the config a server started with --model-config-name=NAME reads."""
    return f"{model}/{HOLDS_FOLDER}/{hold}.pbtxt"


def _is_config(name: str) -> bool:
    """A model's config.pbtxt or one of its held configs: what a staged sync never writes."""
    parts = name.split("/")
    return _is_model_config(name) or (len(parts) == 3 and parts[1] == HOLDS_FOLDER and parts[2].endswith(".pbtxt"))


def _held_names(model: str, state: dict[str, Any]) -> set[str]:
    """Every name the model's recorded holds keep: their configs and the files of the versions they pin."""
    holds = state.get("holds", {})
    return {hold_config(model, h) for h in holds} | {n for hold in holds.values() for n in hold["keep"]}


def _new_hold(
    model: str, under: dict[str, storage.Blob], record: Record, where: str
) -> tuple[dict[str, Any], LocalFile] | None:
    """What holding the model's live config keeps, and the configs/NAME.pbtxt to write (its exact bytes); None where
    nothing the sync owns is live (a first sync, or a config someone else replaced)."""
    name = f"{model}/{CONFIG_NAME}"
    blob, entry = under.get(name), record.objects.get(name)
    if blob is None or entry is None or entry.generation is None or _is_ours(entry, blob) is None:
        return None
    try:
        data = blob.bucket.blob(blob.name).download_as_bytes(if_generation_match=entry.generation)
        live = text_format.Parse(data.decode("utf-8"), mc.ModelConfig())
    except _REQUEST_ERRORS as err:
        raise SyncError(f"reading {show(where + name)} to hold it failed: {_describe(err)}; nothing changed") from err
    except (text_format.ParseError, UnicodeDecodeError) as err:
        raise SyncError(f"{show(where + name)} is not a config this sync wrote ({_one_line(err)[:120]})") from err
    versions = sorted(live.version_policy.specific.versions)
    labels = {f"{model}/{o.label_filename}" for o in live.output if o.label_filename}
    keep = sorted(n for n in under if n in record.objects and (_version_folder(n) in versions or n in labels))
    return {"versions": versions, "keep": keep}, bytes_file("", Path(name), data)


def plan_holds(
    source: Source, remote: dict[str, storage.Blob], record: Record, holds: tuple[str, ...], where: str
) -> tuple[dict[str, dict[str, dict[str, Any]]], list[LocalFile]]:
    """The holds each model has after this sync (recorded ones given again kept as they are, new ones taken from the
    live config) and the configs/NAME.pbtxt files the new ones write."""
    after: dict[str, dict[str, dict[str, Any]]] = {}
    uploads: list[LocalFile] = []
    for model in source.models:
        recorded = record.models.get(model, {}).get("holds", {})
        under = {n: b for n, b in remote.items() if n.startswith(f"{model}/")}
        kept = {h: recorded[h] for h in holds if h in recorded}
        for hold in kept:
            name = hold_config(model, hold)
            entry, blob = record.objects.get(name), under.get(name)
            if blob is None or entry is None or _is_ours(entry, blob) is None:
                raise SyncError(
                    f"{show(where + name)}, the held config of {show(hold)}, was deleted or replaced by someone else; "
                    f"nothing changed: release the hold (a sync without --hold {hold}), then hold again"
                )
        for hold in (h for h in holds if h not in recorded):
            new = _new_hold(model, under, record, where)
            if new is None:
                continue
            state, live = new
            kept[hold] = state
            uploads.append(dataclasses.replace(live, relative=hold_config(model, hold)))
        if kept:
            after[model] = kept
    return after, uploads


def _model_of(name: str) -> str | None:
    return name.split("/", 1)[0] if "/" in name else None


def plan_sync(
    source: Source,
    hashed: dict[str, LocalFile],
    remote: dict[str, storage.Blob],
    record: Record,
    where: str,
    holds: tuple[str, ...] = (),
) -> SyncPlan:
    """Decide every upload and deletion; refuses (SyncError) before anything is changed."""
    plans, uploads, configs, before, after = [], [], [], [], []
    unchanged = 0
    held, hold_uploads = plan_holds(source, remote, record, holds, where)
    for local in hold_uploads:
        blob = remote.get(local.relative)
        if len((where + local.relative).encode()) > _MAX_NAME_BYTES + len("gs://"):
            raise SyncError(f"object name {show(local.relative)} would exceed GCS's 1024 bytes; nothing changed")
        if blob is not None and local.relative not in record.objects:
            raise SyncError(f"{show(where + local.relative)} exists but was not written by this sync; nothing changed")
    for model in source.models.values():
        under = {n: b for n, b in remote.items() if n.startswith(f"{model.name}/")}
        plan = _plan_model(model, hashed, under, record)
        _check_writes(plan, under, record, where)
        plans.append(plan)
        for name, local in plan.desired.items():
            if is_unchanged(local, under.get(name)):
                unchanged += 1
            else:
                (configs if _is_model_config(name) else uploads).append(local)
        targets = {v + plan.offset for v in source.models[plan.name].served}
        keep = _held_names(plan.name, {"holds": held.get(plan.name, {})})
        for name in sorted(n for n in under if n in record.objects and n not in plan.desired and n not in keep):
            # Leftovers inside the new folders go before the flip, so the new version holds only its own files.
            # A released hold's config goes before the files it pins, as a removed model's does: no config ever
            # names a version whose files are gone.
            if plan.changed and _version_folder(name) in targets:
                before.append(under[name])
            elif _is_config(name):
                after.insert(0, under[name])
            else:
                after.append(under[name])
    removed = sorted({m for n in remote if n in record.objects and (m := _model_of(n)) and m not in source.models})
    gone = [remote[n] for n in sorted(remote) if n in record.objects and _model_of(n) in removed]
    # A removed model loses its config first, so Triton never sees half of it.
    gone.sort(key=lambda b: not b.name.endswith(f"/{CONFIG_NAME}"))
    strangers = sorted(n for n in remote if n not in record.objects and n != RECORD_NAME)
    # Held configs go up before any config flips: a held server never sees the new version.
    uploads = [*uploads, *(f for f in hold_uploads if not is_unchanged(f, remote.get(f.relative)))]
    return SyncPlan(plans, uploads + configs, before, gone + after, removed, unchanged, strangers, held)


def kept_models(source: Source, remote: dict[str, storage.Blob], record: Record) -> int:
    """Models present before the sync (owned objects under their folder) that stay after it.

    Renaming every model keeps none: it removes them all, and so needs --allow-mass-delete.
    """
    before = {m for name in remote if name in record.objects and (m := _model_of(name))}
    return len(before & source.models.keys())


def _check_mass_delete(plan: SyncPlan, kept: int, allow: bool) -> None:
    if len(plan.removed_models) > kept and not allow:
        names = ", ".join(show(m) for m in plan.removed_models[:5]) + (", ..." if len(plan.removed_models) > 5 else "")
        raise SyncError(
            f"this sync would remove {len(plan.removed_models)} models ({names}) and keep {kept}; "
            "nothing changed (pass --allow-mass-delete if that is intended)"
        )


# --- what the sync may take: the build's files, an earlier sync's models ---------------------


def check_against_manifest(source: Source) -> None:
    """A folder model_repo built holds a manifest: send exactly the files it lists, refuse any other (one line)."""
    from triton_gke.model_repo.errors import ModelRepoError
    from triton_gke.model_repo.manifest import FILES, MANIFEST, read_manifest, rebuild

    if not (source.root / MANIFEST).is_file():
        return
    try:
        listed = read_manifest(source.root).get(FILES)
    except ModelRepoError as err:
        raise SyncError(str(err)) from None
    if not isinstance(listed, dict):
        raise SyncError(f"{show(source.root / MANIFEST)}: lists no files; {rebuild()}")
    for path in source.paths():
        relative = os.path.relpath(path, source.root).replace(os.sep, "/")
        if relative not in listed:
            raise SyncError(
                f"{show(path)}: not in the build manifest {MANIFEST} (not written by the build); nothing sent"
            )


def _remote_labels(bucket: storage.Bucket, blob: storage.Blob) -> set[str]:
    """The label files an earlier sync's config.pbtxt names (relative to its model folder); none if unreadable."""
    try:
        config = text_format.Parse(bucket.blob(blob.name).download_as_text(), mc.ModelConfig())
    except (*_REQUEST_ERRORS, text_format.ParseError, UnicodeDecodeError):
        return set()
    return {o.label_filename for o in config.output if o.label_filename}


def adoptable(
    source: Source, remote: dict[str, storage.Blob], record: Record, bucket: storage.Bucket
) -> dict[str, set[str]]:
    """Model -> objects of a model folder an earlier sync wrote without an ownership record.

    Only folders named like a source model that hold config.pbtxt and a numeric version folder count,
    and of them only config.pbtxt, the version folders and the label files that config names:
    never any other object under the prefix.
    """
    found = {}
    for model in source.models:
        if model in record.models:
            continue
        config = f"{model}/{CONFIG_NAME}"
        under = {n for n in remote if n.startswith(f"{model}/") and n not in record.objects.keys() | record.disowned}
        versions = {n for n in under if _version_folder(n) is not None}
        if config not in under or not versions:
            continue
        labels = {f"{model}/{label}" for label in _remote_labels(bucket, remote[config])} & under
        found[model] = {config, *versions, *labels}
    return found


def _adopt(
    found: dict[str, set[str]], record: Record, adopt: bool, where: str, remote: dict[str, storage.Blob]
) -> None:
    if found and not adopt:
        names = ", ".join(show(f"{where}{m}/") for m in sorted(found)[:3]) + (", ..." if len(found) > 3 else "")
        raise SyncError(
            f"{names}: model folders without an ownership record (written by an earlier version of the sync?); "
            "nothing changed (pass --adopt to take ownership of them once)"
        )
    for names in found.values():
        record.objects.update({name: _adopted(remote[name]) for name in names})


# --- ownership by identity ------------------------------------------------------------
# GCS gives an object a new generation whenever it is replaced ("generation ... changes when the object is
# replaced": https://cloud.google.com/storage/docs/metadata#generation-number), and a request sent with
# ifGenerationMatch proceeds only while the object's generation is that value, else fails with 412
# Precondition Failed (https://cloud.google.com/storage/docs/request-preconditions); 0 means "only if no live
# object has the name". The local emulator the tests use (gcp-storage-emulator) gives every write a new
# generation but ignores preconditions, so there the listing check below is what stops the sync.


def _adopted(blob: storage.Blob) -> Owned:
    return Owned(int(blob.generation), blob.md5_hash, blob.crc32c, adopt=True)


def _is_ours(entry: Owned, blob: storage.Blob) -> Owned | None:
    """The record entry for the live object if it is the very object the sync wrote, else None."""
    mark = (blob.metadata or {}).get(OWNER_KEY)
    if mark is None or blob.md5_hash is None:
        return None
    live = int(blob.generation)
    if entry.generation == live and mark == entry.md5 == blob.md5_hash:
        return Owned(live, entry.md5, entry.crc32c)
    if entry.next is not None and mark == entry.next == blob.md5_hash:  # an upload the record could not confirm
        return Owned(live, blob.md5_hash, blob.crc32c)
    return None


def resolve_ownership(
    source: Source, hashed: dict[str, LocalFile], remote: dict[str, storage.Blob], record: Record, adopt: bool
) -> None:
    """Keep in record.objects only the objects the sync wrote, at their live generations.

    A recorded name whose object is gone frees the name; one whose object is not the one written (another
    generation, no mark, other bytes) goes to record.disowned and is a stranger from now on. The names an
    old-format record lists are claimed only where the object holds what this sync would upload under that
    name (at the model's recorded offsets), or all of them with --adopt.
    """
    objects = {}
    for name, entry in record.objects.items():
        blob = remote.get(name)
        if blob is None:
            continue
        owned = _is_ours(entry, blob)
        if owned is None:
            record.disowned.add(name)
        else:
            objects[name] = owned
    record.objects = objects
    if not record.legacy:
        return
    for model in source.models.values():
        state = record.models.get(model.name, {})
        for offset in {state.get("offset"), state.get("pending")} - {None}:
            for name, local in desired_objects(model, hashed, offset).items():
                if name in record.legacy and is_unchanged(local, remote.get(name)):
                    record.objects[name] = _adopted(remote[name])
    if adopt:
        # As for a bucket without a record (adoptable()): only what a model folder of the source holds, its
        # config.pbtxt and numeric version folders; whatever else an (edited) old record lists stays a stranger.
        claimed = {n for n in record.legacy if n in remote and n not in objects and _adoptable_name(n, source)}
        record.objects.update({n: _adopted(remote[n]) for n in claimed})


def _adoptable_name(name: str, source: Source) -> bool:
    """An object --adopt may claim from an old-format record: a source model's config.pbtxt or version folder."""
    model = _model_of(name)
    return model in source.models and (name == f"{model}/{CONFIG_NAME}" or _version_folder(name) is not None)


# --- transfer -------------------------------------------------------------------------


def _upload_small(blob: storage.Blob, local: LocalFile, generation: int) -> None:
    # checksum=None: the client would otherwise replace our md5Hash with one it
    # computes from the bytes it reads now, and a file edited since we hashed it
    # would go up unnoticed. Our hash makes GCS check the bytes against the plan.
    if local.data is not None:
        blob.upload_from_string(local.data, content_type="text/plain", if_generation_match=generation, checksum=None)
    else:
        blob.upload_from_filename(str(local.path), if_generation_match=generation, checksum=None)


def _upload_chunked(
    blob: storage.Blob,
    local: LocalFile,
    generation: int,
    chunk_size: int,
    progress: ProgressCallback | None,
) -> None:
    # Writing exactly one chunk per write() makes BlobWriter send it at once, so
    # each progress call reports bytes that have reached the server.
    writer = BlobWriter(blob, chunk_size=chunk_size, checksum="md5", if_generation_match=generation)
    done = 0
    try:
        with local.path.open("rb") as stream:
            while chunk := stream.read(chunk_size):
                writer.write(chunk)
                done += len(chunk)
                if progress is not None and done < local.size:
                    progress(local.relative, done, local.size)
        writer.close()
    except BaseException:
        # Abandon the resumable session: an unfinished upload never becomes an
        # object. Cancelling is best effort; the original error matters more.
        with contextlib.suppress(Exception):
            writer.terminate()
        raise


def _verify(bucket: storage.Bucket, name: str, local: LocalFile) -> storage.Blob:
    stored = bucket.get_blob(name)
    if stored is None or stored.md5_hash != local.md5 or stored.size != local.size:
        found = "missing" if stored is None else f"md5 {stored.md5_hash}"
        raise SyncError(
            f"{show(f'gs://{bucket.name}/{name}')} does not match {show(local.path)} after upload "
            f"({found}, expected md5 {local.md5})"
        )
    return stored


def upload_file(
    bucket: storage.Bucket,
    name: str,
    local: LocalFile,
    generation: int,
    chunk_size: int,
    progress: ProgressCallback | None,
) -> int:
    """Upload one file, check the stored object, then report it done; the generation it made."""
    blob = bucket.blob(name, chunk_size=chunk_size)
    # Sent as object metadata: GCS refuses the upload if the bytes it receives
    # do not have this MD5 (e.g. the file was edited after we hashed it).
    blob.md5_hash = local.md5
    blob.metadata = {OWNER_KEY: local.md5}  # the mark: see resolve_ownership()
    try:
        if local.size > CHUNKED_THRESHOLD:
            _upload_chunked(blob, local, generation, chunk_size, progress)
        else:
            _upload_small(blob, local, generation)
    except _REQUEST_ERRORS as err:  # before OSError: requests' errors are OSErrors
        where = show(f"gs://{bucket.name}/{name}")
        if _precondition_failed(err):
            raise SyncError(
                f"{where} changed during the sync (its generation is no longer {generation or 'absent'}): "
                "not overwritten; the next sync reports it as not written by this sync"
            ) from err
        raise SyncError(f"uploading {show(local.path)} to {where} failed: {_describe(err)}") from err
    except OSError as err:
        raise SyncError(f"cannot read {show(local.path)}: {err.strerror or err}") from err
    stored = _verify(bucket, name, local)
    if progress is not None:
        progress(local.relative, local.size, local.size)
    # The upload's own response names the generation it made (a resumable one leaves it to the check).
    return int(blob.generation if blob.generation is not None else stored.generation)


def _precondition_failed(err: Exception) -> bool:
    response = getattr(err, "response", None)
    return isinstance(err, api_exceptions.PreconditionFailed) or getattr(response, "status_code", None) == 412


def _delete(bucket: storage.Bucket, blob: storage.Blob, generation: int) -> bool:
    """Delete the generation the sync wrote; False when the name holds another one now (left as it is)."""
    try:
        bucket.delete_blob(blob.name, if_generation_match=generation)
    except api_exceptions.NotFound:
        pass  # already gone: the goal of the deletion is met
    except _REQUEST_ERRORS as err:
        if _precondition_failed(err):
            return False  # replaced since the listing: someone else's object now
        raise SyncError(f"deleting gs://{bucket.name}/{blob.name} failed: {_describe(err)}") from err
    return True


def _mark_adopted(bucket: storage.Bucket, name: str, entry: Owned) -> None:
    """Put the mark on an object the sync takes over, only while it is the generation that was checked."""
    blob = bucket.blob(name)
    blob.metadata = {OWNER_KEY: entry.md5}
    try:
        blob.patch(if_generation_match=entry.generation)
    except _REQUEST_ERRORS as err:
        why = "it changed since the listing" if _precondition_failed(err) else _describe(err)
        raise SyncError(f"taking over gs://{bucket.name}/{name} failed: {why}; nothing of it changed") from err
    entry.adopt = False


def _apply(
    bucket: storage.Bucket,
    prefix: str,
    plan: SyncPlan,
    record: Record,
    transfer: tuple[int, ProgressCallback | None, StepCallback | None],
    stage: bool = False,
) -> list[str]:
    """Carry out a plan: marks, record, new folders, configs, record, old folders, record. A staged plan
    (stage_only) has no configs and no old folders to delete, and leaves the new versions pending.

    Returns the names it did not delete because they were replaced during the sync (strangers now)."""
    chunk_size, progress, step = transfer

    def done(action: str, name: str) -> None:
        if step is not None:
            step(action, name)

    for name, entry in sorted(record.objects.items()):
        if entry.adopt:
            _mark_adopted(bucket, prefix + name, entry)
            done("mark", name)
    changed = [p for p in plan.models if p.changed]
    for local in plan.uploads:
        # Recorded before the upload starts: an upload that lands but is never confirmed is still the sync's.
        entry = record.objects.get(local.relative) or Owned(None, None)
        record.objects[local.relative] = dataclasses.replace(entry, next=local.md5)
    for model in changed:
        record.models.setdefault(model.name, {"offset": None, "versions": [], "pending": None})["pending"] = (
            model.offset
        )
    write_record(bucket, prefix, record)
    done("record", RECORD_NAME)
    replaced = []

    def delete(blob: storage.Blob) -> None:
        relative = blob.name[len(prefix) :]
        if not _delete(bucket, blob, record.objects[relative].generation or 0):
            replaced.append(relative)
        done("delete", relative)

    for blob in plan.before_flip:
        delete(blob)
    for local in plan.uploads:
        # Only the generation the sync wrote is overwritten (0: only a name nobody holds).
        precondition = record.objects[local.relative].generation or 0
        generation = upload_file(bucket, prefix + local.relative, local, precondition, chunk_size, progress)
        record.objects[local.relative] = Owned(generation, local.md5, local.crc32c)
        done("upload", local.relative)
    for model in [] if stage else changed:
        versions = sorted(int(v) for v in plan_versions(model))
        record.models[model.name] = {"offset": model.offset, "versions": versions, "pending": None}
    for model in [] if stage else plan.models:
        state = record.models.get(model.name)
        if state is not None:
            state.pop("holds", None)
            state.update({"holds": plan.holds[model.name]} if model.name in plan.holds else {})
    if changed or plan.uploads or plan.holds:
        write_record(bucket, prefix, record)
        done("record", RECORD_NAME)
    for blob in plan.after_flip:
        delete(blob)
    gone = {b.name[len(prefix) :] for b in plan.before_flip + plan.after_flip}
    for name in gone:
        record.objects.pop(name, None)
    for name in plan.removed_models:
        record.models.pop(name, None)
    if gone:
        write_record(bucket, prefix, record)
        done("record", RECORD_NAME)
    return replaced


def stage_only(plan: SyncPlan) -> SyncPlan:
    """The part of `plan` a staged sync carries out: every upload but the models' configs, no deletion but the
    leftovers inside the new folders; removed models stay, configs and all, until the sync that pins."""
    uploads = [f for f in plan.uploads if not _is_config(f.relative)]
    return dataclasses.replace(plan, uploads=uploads, after_flip=[], removed_models=[], holds={})


def _is_model_config(name: str) -> bool:
    return name.endswith(f"/{CONFIG_NAME}") and name.count("/") == 1


def check_pin_only(plan: SyncPlan, remote: dict[str, storage.Blob], record: Record, where: str) -> None:
    """--pin: the plan may write configs only (the staged folders are complete and were built from): anything else
    to upload means a model was not staged, or its staged folder cannot be resumed. Refused naming the model."""
    for local in plan.uploads:
        if _is_config(local.relative):
            continue
        model = local.relative.split("/", 1)[0]
        foreign = sorted(
            n
            for n in remote
            if _model_of(n) == model and n not in record.objects and _version_folder(n) is not None
            and not is_engine_file(n)
        )  # fmt: skip
        why = (
            "a version folder holds objects neither this sync nor the engine-build Job wrote: "
            + ", ".join(show(n) for n in foreign[:3])
            if foreign
            else "its files were not staged (run the sync with --stage first)"
        )
        raise SyncError(f"--pin: {show(where + model)} cannot be pinned, {why}; nothing changed")


def plan_versions(model: ModelPlan) -> list[int]:
    """The version numbers a model's pinned config lists."""
    return sorted({v for name in model.desired if (v := _version_folder(name)) is not None})


def sync_repository(
    local_dir: Path,
    bucket_name: str,
    prefix: str,
    client: storage.Client,
    progress: ProgressCallback | None = None,
    dry_run: bool = False,
    *,
    chunk_size: int = CHUNK_SIZE,
    allow_mass_delete: bool = False,
    step: StepCallback | None = None,
    adopt: bool = False,
    source: Source | None = None,
    note: Callable[[str], None] | None = None,
    stage: bool = False,
    holds: tuple[str, ...] = (),
    pin: bool = False,
) -> SyncReport:
    """Make the models under gs://bucket_name/prefix/ those of local_dir, touching only objects the sync owns.

    Raises SyncError for bad input, before the bucket is changed; an exception raised by `progress`
    or `step` propagates unchanged, leaving the bucket in a state the next sync completes.
    adopt: take ownership of model folders an earlier sync wrote without a record (see adoptable()).
    source: local_dir already scanned (scan_source), so a caller can check it before it makes a client.
    note: told one line before the first request to the bucket (the listing), which may wait on the network.
    stage: upload new versions without pinning them or deleting anything live (module docstring, Staged updates).
    holds: names of servers that keep the live versions (module docstring, Held versions); each a HOLD_NAME.
    pin: write configs only, pinning what a staged sync uploaded; anything else to upload is refused (SyncError).
    """
    if stage and pin:
        raise SyncError("--stage and --pin: choose one (stage the new versions, then pin them)")
    for hold in holds:
        if not HOLD_NAME.fullmatch(hold):
            raise SyncError(f"--hold {show(hold)}: expected a lowercase name of letters, digits and '-' (a region)")
    if len(set(holds)) != len(holds):
        raise SyncError("--hold: each name once")
    if chunk_size <= 0 or chunk_size % _CHUNK_MULTIPLE:
        raise SyncError(f"chunk size must be a multiple of {_CHUNK_MULTIPLE} bytes")
    prefix = normalize_prefix(prefix)
    source = source or scan_source(Path(local_dir))
    check_against_manifest(source)
    hashed = hash_local(source.root, source.paths())
    if note is not None:
        note(f"listing gs://{bucket_name}/{prefix} ...")
    remote = list_remote(client, bucket_name, prefix)
    bucket = client.bucket(bucket_name)
    record = read_record(bucket, prefix, remote.pop(RECORD_NAME, None))
    where = f"gs://{bucket_name}/{prefix}"
    resolve_ownership(source, hashed, remote, record, adopt)
    _adopt(adoptable(source, remote, record, bucket), record, adopt, where, remote)
    plan = plan_sync(source, hashed, remote, record, where, tuple(holds))
    _check_mass_delete(plan, kept_models(source, remote, record), allow_mass_delete)
    live = {name: list(state.get("versions", [])) for name, state in record.models.items()}
    if stage:
        plan = stage_only(plan)
    if pin:
        check_pin_only(plan, remote, record, where)
    released: dict[str, list[str]] = {}
    for model, state in sorted(record.models.items()):
        for hold in [] if stage else sorted(set(state.get("holds", {})) - set(plan.holds.get(model, {}))):
            released.setdefault(hold, []).append(model)
    report = SyncReport(
        uploaded=[f.relative for f in plan.uploads],
        deleted=[b.name[len(prefix) :] for b in plan.before_flip + plan.after_flip],
        unchanged=plan.unchanged,
        bytes_uploaded=sum(f.size for f in plan.uploads),
        strangers=plan.strangers,
        disowned=sorted(record.disowned),
        left_out=source.left_out,
        versions={m.name: live.get(m.name, []) if stage and m.changed else plan_versions(m) for m in plan.models},
        staged={m.name: plan_versions(m) for m in plan.models if stage and m.changed},
        held={m: {h: state["versions"] for h, state in by.items()} for m, by in plan.holds.items()},
        released=released,
    )
    holds_change = any(plan.holds.get(m, {}) != s.get("holds", {}) for m, s in record.models.items() if not stage)
    if not dry_run and (report.uploaded or report.deleted or holds_change or any(m.changed for m in plan.models)):
        replaced = _apply(bucket, prefix, plan, record, (chunk_size, progress, step), stage)
        report.deleted = [n for n in report.deleted if n not in replaced]
        report.disowned = sorted({*report.disowned, *replaced})
        report.strangers = sorted({*report.strangers, *replaced})
    return report


# --- command line -----------------------------------------------------------------


def print_progress(relative: str, done: int, total: int) -> None:
    """Progress reporter for the command line: one line per chunk or file."""
    mib = 1024 * 1024
    if done < total:
        print(f"  {relative}: {done / mib:.1f}/{total / mib:.1f} MiB ({100 * done // total}%)", flush=True)
    else:
        print(f"  uploaded {relative} ({_size(total)})", flush=True)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    value = count / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def parse_gs_url(url: str) -> tuple[str, str]:
    """'gs://bucket/some/prefix' -> ('bucket', 'some/prefix')."""
    if not url.startswith("gs://"):
        raise SyncError(f"destination must look like gs://BUCKET/PREFIX, got {url!r}")
    bucket, _, prefix = url[len("gs://") :].partition("/")
    if not bucket:
        raise SyncError(f"destination has no bucket name: {show(url)}")
    why = bucket_name_problem(bucket)  # the rule TritonOnCluster's model_repository follows too
    if why:
        raise SyncError(f"invalid bucket name in {url!r}: {why}")
    normalize_prefix(prefix)  # refused here, before any client is made: gs://BUCKET alone is never a destination
    return bucket, prefix


def client_from_environment() -> storage.Client:
    """The emulator's client when STORAGE_EMULATOR_HOST is set, else ADC's."""
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        # Explicit anonymous credentials: never look for Google credentials or
        # ask the metadata server when the target is an emulator.
        return storage.Client(
            project=os.environ.get("GOOGLE_CLOUD_PROJECT", "local"), credentials=AnonymousCredentials()
        )
    try:
        return storage.Client()
    except GoogleAuthError as err:
        raise SyncError(f"no Google credentials: {_one_line(err)}") from err


def _summary(local_dir: str, url: str, report: SyncReport, dry_run: bool) -> str:
    verb = "would upload" if dry_run else "uploaded"
    head = "dry run" if dry_run else "synced"
    return (
        f"{head} {local_dir} -> {url}: {verb} {len(report.uploaded)} files "
        f"({_size(report.bytes_uploaded)}), "
        f"{'would delete' if dry_run else 'deleted'} {len(report.deleted)}, "
        f"unchanged {report.unchanged}"
    )


def _notes(report: SyncReport, shown: int = 5) -> list[str]:
    """What the sync left alone on purpose: source entries that are not models, objects it does not own."""

    def listing(names: list[str]) -> str:
        return ", ".join(show(n) for n in names[:shown]) + (
            f", ... ({len(names)} in all)" if len(names) > shown else ""
        )

    notes = []
    for hold, models in sorted(report.released.items()):
        notes.append(f"released hold {show(hold)} (no --hold {hold}): its configs and the versions only they kept go, "
                     f"models {', '.join(show(m) for m in models)}")  # fmt: skip
    for model, by in sorted(report.held.items()):
        notes.append(f"held: {show(model)} " + ", ".join(f"{show(h)} {v}" for h, v in sorted(by.items())))
    if report.staged:
        staged = ", ".join(f"{show(m)} {v}" for m, v in sorted(report.staged.items()))
        notes.append(f"staged, not pinned (configs still pin the live versions): {staged}")
    if report.left_out:
        notes.append(f"left out of the sync (not models): {listing(report.left_out)}")
    if report.strangers:
        notes.append(f"left in place (not written by this sync): {listing(report.strangers)}")
    if report.disowned:
        notes.append(
            "warning: replaced by someone else since this sync wrote them (another generation), "
            f"no longer the sync's, left in place: {listing(report.disowned)}"
        )
    return notes


def _parser() -> argparse.ArgumentParser:
    # A bad option is raised as a SyncError, so main() prints it like every other refusal: one line, exit 2.
    parser = OneLineParser(
        prog="triton-gke sync",
        description="Upload a local Triton model repository to gs://BUCKET/PREFIX.",
        hint="usage: {prog} LOCAL_DIR gs://BUCKET/PREFIX [--dry-run] [--allow-mass-delete] [--adopt] [--stage | --pin] "
        "[--hold NAME]",
        raise_as=SyncError,
    )
    parser.add_argument("local_dir", help="local model repository folder")
    parser.add_argument("destination", help="gs://BUCKET/PREFIX")
    parser.add_argument("--dry-run", action="store_true", help="show what would change without changing anything")
    parser.add_argument(
        "--allow-mass-delete",
        action="store_true",
        help="allow a sync that removes more models from the bucket than it keeps",
    )
    parser.add_argument(
        "--adopt",
        action="store_true",
        help="take ownership of model folders an earlier version of the sync wrote (no ownership record yet)",
    )
    parser.add_argument(
        "--stage",
        action="store_true",
        help="upload new versions beside the live ones without pinning them or deleting anything; "
        "a later sync without --stage pins them",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="pin what a sync with --stage uploaded (configs only); refuse if anything else would be uploaded",
    )
    parser.add_argument(
        "--hold",
        action="append",
        default=[],
        metavar="NAME",
        help="keep the live versions for servers started with --model-config-name=NAME (configs/NAME.pbtxt); "
        "repeatable; a hold not given again is released",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        bucket, prefix = parse_gs_url(args.destination)
        # A folder model_repo built holds a manifest of SHA-256 digests: files changed since the build are refused.
        from triton_gke.model_repo.manifest import verify_if_present

        verify_if_present(Path(args.local_dir), error=SyncError)
        # The source first: a missing or broken folder is the error to show, not missing Google credentials.
        source = scan_source(Path(args.local_dir))
        client = client_from_environment()
        report = sync_repository(
            Path(args.local_dir),
            bucket,
            prefix,
            client,
            print_progress,
            dry_run=args.dry_run,
            allow_mass_delete=args.allow_mass_delete,
            adopt=args.adopt,
            source=source,
            stage=args.stage,
            pin=args.pin,
            holds=tuple(args.hold),
            # An unreachable endpoint is retried for 120 s before the listing fails (google.cloud.storage.retry
            # DEFAULT_RETRY, google.api_core.retry _DEFAULT_DEADLINE = 60.0 * 2.0): say what it waits on.
            note=lambda line: print(line, flush=True),
        )
    except SyncError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Nothing half-written is visible; a second run completes the sync.
        print("interrupted; run the same command again to finish", file=sys.stderr)
        return 130
    for line in _notes(report):
        print(line)
    print(_summary(args.local_dir, args.destination, report, args.dry_run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
