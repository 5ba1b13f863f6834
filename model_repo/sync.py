"""Copy a local Triton model repository into gs://BUCKET/PREFIX, safely and idempotently.

    python -m model_repo.sync LOCAL_DIR gs://BUCKET/PREFIX [--dry-run]

What "safely" means here, since Triton may be polling the bucket while we write:
  * a file is sent only when its content differs from the object's (MD5, or CRC32C
    for objects GCS reports without an MD5, such as composite uploads);
  * every model's files go up before any config.pbtxt, so Triton never finds a
    config whose model file is still missing or stale;
  * deletions run last, configs first, so a removed model disappears as a whole;
  * each upload carries its MD5, so GCS rejects bytes that differ from what was
    hashed (a file edited mid-sync), and the stored object's hash is checked after;
  * large files stream in resumable chunks; nothing reads a whole file at once;
  * objects outside PREFIX/ are never listed, written or deleted.
An interrupted sync leaves no half-written object (a resumable upload only appears
when it completes), and running it again finishes the job.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import google_crc32c
import requests
from google.api_core import exceptions as api_exceptions
from google.auth.credentials import AnonymousCredentials
from google.auth.exceptions import GoogleAuthError
from google.cloud import storage
from google.cloud.storage import exceptions as storage_exceptions
from google.cloud.storage.fileio import BlobWriter

# Resumable chunks must be a multiple of 256 KiB; 8 MiB keeps memory small and
# requests few. Files above CHUNKED_THRESHOLD are streamed chunk by chunk.
CHUNK_SIZE = 8 * 1024 * 1024
CHUNKED_THRESHOLD = 8 * 1024 * 1024
_CHUNK_MULTIPLE = 256 * 1024
_HASH_BLOCK = 1024 * 1024
CONFIG_NAME = "config.pbtxt"
# Bytecode the Python backend leaves beside model.py is machine-specific.
IGNORED_DIRS = frozenset({"__pycache__"})

# progress(relative_path, bytes_done, bytes_total): once per chunk of a large file,
# and once for every file when it is uploaded and verified (done == total).
ProgressCallback = Callable[[str, int, int], None]
# Errors the client raises for failed requests, wrapped into one-line SyncErrors.
_REQUEST_ERRORS = (
    api_exceptions.GoogleAPIError,
    storage_exceptions.InvalidResponse,
    storage_exceptions.DataCorruption,
    requests.exceptions.RequestException,
)


class SyncError(ValueError):
    """A sync that cannot proceed; the message is one line naming the bucket or file."""


@dataclass(frozen=True)
class LocalFile:
    relative: str  # POSIX path below the repository root, also the object suffix
    path: Path
    size: int
    md5: str  # base64, as GCS reports md5Hash
    crc32c: str  # base64 big-endian, as GCS reports crc32c


@dataclass
class SyncReport:
    """What a sync did (or, for a dry run, would do); paths are relative to PREFIX."""

    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    bytes_uploaded: int = 0


@dataclass(frozen=True)
class SyncPlan:
    uploads: list[LocalFile]  # in safe order: model files, then configs
    deletions: list[storage.Blob]  # in safe order: configs, then model files
    unchanged: int


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
    """'models', '/models/' -> 'models/'; '' -> '' (the whole bucket)."""
    prefix = prefix.strip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise SyncError(f"invalid object prefix: {prefix!r}")
    # GCS object names may not hold CR/LF and are at most 1024 bytes (some emulators accept them anyway).
    if any(c in prefix for c in "\r\n") or len(prefix.encode()) > 900:
        raise SyncError(f"invalid object prefix: {prefix!r} (no line breaks; at most 900 bytes)")
    return f"{prefix}/" if prefix else ""


def file_hashes(path: Path) -> tuple[str, str, int]:
    """(md5, crc32c, size) of a file, hashes in base64 like GCS metadata.

    Read in blocks, so a file of any size costs a megabyte of memory.
    """
    md5 = hashlib.md5(usedforsecurity=False)
    crc = google_crc32c.Checksum()
    size = 0
    try:
        with path.open("rb") as stream:
            while block := stream.read(_HASH_BLOCK):
                md5.update(block)
                crc.update(block)
                size += len(block)
    except OSError as err:
        raise SyncError(f"cannot read {path}: {err.strerror or err}") from err
    return _b64(md5.digest()), _b64(crc.digest()), size


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def _walk(local_dir: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(local_dir, onerror=_raise_walk_error):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIRS)
        for name in sorted(files):
            yield Path(root, name)


def _raise_walk_error(err: OSError) -> None:
    raise SyncError(f"cannot read {err.filename}: {err.strerror or err}")


def scan_local(local_dir: Path) -> list[Path]:
    """The regular files of the repository; errors for anything unusable."""
    if not local_dir.is_dir():
        raise SyncError(f"local model repository not found: {local_dir}")
    files = list(_walk(local_dir))
    for path in files:
        if not path.is_file():  # a broken symlink, a FIFO, a socket
            raise SyncError(f"cannot read {path}: not a regular file")
    if not files:
        # An empty source would delete every model under the prefix.
        raise SyncError(f"local model repository is empty: {local_dir}")
    return files


def hash_local(local_dir: Path, paths: list[Path]) -> dict[str, LocalFile]:
    result = {}
    for path in paths:
        md5, crc, size = file_hashes(path)
        relative = path.relative_to(local_dir).as_posix()
        result[relative] = LocalFile(relative, path, size, md5, crc)
    return result


def list_remote(client: storage.Client, bucket_name: str, prefix: str) -> dict[str, storage.Blob]:
    """Objects under prefix, keyed by their name below it."""
    try:
        blobs = list(client.list_blobs(bucket_name, prefix=prefix or None))
    except api_exceptions.NotFound as err:
        raise SyncError(f"bucket gs://{bucket_name} does not exist") from err
    except api_exceptions.Forbidden as err:
        raise SyncError(f"no access to bucket gs://{bucket_name}: {_describe(err)}") from err
    except _REQUEST_ERRORS as err:
        raise SyncError(f"listing gs://{bucket_name}/{prefix} failed: {_describe(err)}") from err
    # Names ending in "/" are folder placeholders made by consoles, not files.
    return {b.name[len(prefix) :]: b for b in blobs if not b.name.endswith("/")}


def is_unchanged(local: LocalFile, blob: storage.Blob) -> bool:
    if blob.size != local.size:
        return False
    if blob.md5_hash:
        return blob.md5_hash == local.md5
    # Composite objects have no MD5; their CRC32C is still exact.
    return bool(blob.crc32c) and blob.crc32c == local.crc32c


def _is_config(relative: str) -> bool:
    return relative.rsplit("/", 1)[-1] == CONFIG_NAME


def plan_sync(local: dict[str, LocalFile], remote: dict[str, storage.Blob]) -> SyncPlan:
    changed = [f for rel, f in local.items() if rel not in remote or not is_unchanged(f, remote[rel])]
    uploads = sorted(changed, key=lambda f: (_is_config(f.relative), f.relative))
    gone = [rel for rel in remote if rel not in local]
    deletions = sorted(gone, key=lambda rel: (not _is_config(rel), rel))
    return SyncPlan(uploads, [remote[rel] for rel in deletions], len(local) - len(changed))


def _generation(remote: dict[str, storage.Blob], relative: str) -> int:
    # 0 means "must not exist yet". With this precondition GCS refuses to overwrite
    # an object that someone changed since we listed it, also when the client
    # retries an upload on its own. The emulator ignores preconditions; GCS does not.
    blob = remote.get(relative)
    return int(blob.generation) if blob is not None else 0


def _upload_small(blob: storage.Blob, local: LocalFile, generation: int) -> None:
    # checksum=None: the client would otherwise replace our md5Hash with one it
    # computes from the bytes it reads now, and a file edited since we hashed it
    # would go up unnoticed. Our hash makes GCS check the bytes against the plan.
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


def _verify(bucket: storage.Bucket, name: str, local: LocalFile) -> None:
    stored = bucket.get_blob(name)
    if stored is None or stored.md5_hash != local.md5 or stored.size != local.size:
        found = "missing" if stored is None else f"md5 {stored.md5_hash}"
        raise SyncError(
            f"gs://{bucket.name}/{name} does not match {local.path} after upload ({found}, expected md5 {local.md5})"
        )


def upload_file(
    bucket: storage.Bucket,
    name: str,
    local: LocalFile,
    generation: int,
    chunk_size: int,
    progress: ProgressCallback | None,
) -> None:
    """Upload one file, check the stored object, then report it done."""
    blob = bucket.blob(name, chunk_size=chunk_size)
    # Sent as object metadata: GCS refuses the upload if the bytes it receives
    # do not have this MD5 (e.g. the file was edited after we hashed it).
    blob.md5_hash = local.md5
    try:
        if local.size > CHUNKED_THRESHOLD:
            _upload_chunked(blob, local, generation, chunk_size, progress)
        else:
            _upload_small(blob, local, generation)
    except _REQUEST_ERRORS as err:  # before OSError: requests' errors are OSErrors
        raise SyncError(f"uploading {local.path} to gs://{bucket.name}/{name} failed: {_describe(err)}") from err
    except OSError as err:
        raise SyncError(f"cannot read {local.path}: {err.strerror or err}") from err
    _verify(bucket, name, local)
    if progress is not None:
        progress(local.relative, local.size, local.size)


def _delete(bucket: storage.Bucket, blob: storage.Blob) -> None:
    try:
        bucket.delete_blob(blob.name, if_generation_match=blob.generation)
    except api_exceptions.NotFound:
        pass  # already gone: the goal of the deletion is met
    except _REQUEST_ERRORS as err:
        raise SyncError(f"deleting gs://{bucket.name}/{blob.name} failed: {_describe(err)}") from err


def sync_repository(
    local_dir: Path,
    bucket_name: str,
    prefix: str,
    client: storage.Client,
    progress: ProgressCallback | None = None,
    dry_run: bool = False,
    *,
    chunk_size: int = CHUNK_SIZE,
) -> SyncReport:
    """Make gs://bucket_name/prefix/ hold exactly the files of local_dir.

    Raises SyncError for bad input; an exception raised by `progress` propagates
    unchanged, leaving the bucket in a state the next sync completes.
    """
    if chunk_size <= 0 or chunk_size % _CHUNK_MULTIPLE:
        raise SyncError(f"chunk size must be a multiple of {_CHUNK_MULTIPLE} bytes")
    local_dir = Path(local_dir)
    prefix = normalize_prefix(prefix)
    paths = scan_local(local_dir)
    remote = list_remote(client, bucket_name, prefix)
    plan = plan_sync(hash_local(local_dir, paths), remote)
    report = SyncReport(unchanged=plan.unchanged)
    bucket = client.bucket(bucket_name)
    for local in plan.uploads:
        if not dry_run:
            upload_file(
                bucket, prefix + local.relative, local, _generation(remote, local.relative), chunk_size, progress
            )
        report.uploaded.append(local.relative)
        report.bytes_uploaded += local.size
    for blob in plan.deletions:
        if not dry_run:
            _delete(bucket, blob)
        report.deleted.append(blob.name[len(prefix) :])
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


_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")


def parse_gs_url(url: str) -> tuple[str, str]:
    """'gs://bucket/some/prefix' -> ('bucket', 'some/prefix')."""
    if not url.startswith("gs://"):
        raise SyncError(f"destination must look like gs://BUCKET/PREFIX, got {url!r}")
    bucket, _, prefix = url[len("gs://") :].partition("/")
    if not bucket:
        raise SyncError(f"destination has no bucket name: {url!r}")
    if not _BUCKET_NAME.fullmatch(bucket):
        raise SyncError(
            f"invalid bucket name in {url!r}: 3-63 lowercase letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
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


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse adds a usage block; keep one line
        raise SyncError(f"{message} (usage: {self.prog} LOCAL_DIR gs://BUCKET/PREFIX [--dry-run])")


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="python -m model_repo.sync", description="Upload a local Triton model repository to gs://BUCKET/PREFIX."
    )
    parser.add_argument("local_dir", help="local model repository folder")
    parser.add_argument("destination", help="gs://BUCKET/PREFIX")
    parser.add_argument("--dry-run", action="store_true", help="show what would change without changing anything")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        bucket, prefix = parse_gs_url(args.destination)
        client = client_from_environment()
        report = sync_repository(Path(args.local_dir), bucket, prefix, client, print_progress, dry_run=args.dry_run)
    except SyncError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Nothing half-written is visible; a second run completes the sync.
        print("interrupted; run the same command again to finish", file=sys.stderr)
        return 130
    print(_summary(args.local_dir, args.destination, report, args.dry_run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
