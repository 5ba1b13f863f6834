"""A stand-in for the two `gcloud storage` verbs the engine-build Job's steps use (k8s/engine_build.py), against the
GCS emulator named by STORAGE_EMULATOR_HOST, so a test runs the Job's own shell lines unchanged.

What it copies of the real CLI (https://cloud.google.com/sdk/gcloud/reference/storage/ls and .../storage/cp):
- `gcloud storage ls gs://B/P/`: one line per object and per "folder" directly under P, folders ending in '/';
  `ls` of a URL that matches nothing exits 1 ("One or more URLs matched no objects").
- `gcloud storage cp gs://B/O LOCAL` downloads; `gcloud storage cp [--no-clobber|-n] LOCAL gs://B/O` uploads, and with
  --no-clobber skips an object that exists ("If a file or object exists at the destination, it is skipped"), exit 0.
Anything else exits 2 with one line, so a Job step that starts using another verb fails here loudly.

With FAKE_CLI_DIR set it answers from that recorded scenario instead (tests/support/fake_cli.py: the listings and
auth checks `triton-gke e2e` runs).

Run as `python -m tests.support.fake_gcloud ARGS...`; install_fake_gcloud writes a `gcloud` launcher into a folder.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from tests.support import fake_cli
from tests.support.checkout import PROJECT_DIR


def _split(url: str) -> tuple[str, str]:
    if not url.startswith("gs://"):
        raise ValueError(f"not a gs:// URL: {url}")
    bucket, _, name = url[len("gs://") :].partition("/")
    return bucket, name


def _client() -> storage.Client:
    return storage.Client(project="fake", credentials=AnonymousCredentials())


def _ls(url: str) -> int:
    bucket, name = _split(url)
    client = _client()
    if name and not name.endswith("/"):
        found = client.bucket(bucket).get_blob(name) is not None
        if found:
            print(url)
            return 0
        print(f"ERROR: (gcloud.storage.ls) One or more URLs matched no objects: {url}", file=sys.stderr)
        return 1
    listing = client.list_blobs(bucket, prefix=name, delimiter="/")
    lines = [f"gs://{bucket}/{blob.name}" for blob in listing]
    lines += [f"gs://{bucket}/{prefix}" for prefix in listing.prefixes]
    if not lines:
        print(f"ERROR: (gcloud.storage.ls) One or more URLs matched no objects: {url}", file=sys.stderr)
        return 1
    print("\n".join(sorted(lines)))
    return 0


def _cp(args: list[str]) -> int:
    no_clobber = any(a in ("--no-clobber", "-n") for a in args)
    source, destination = [a for a in args if not a.startswith("-")]
    client = _client()
    if source.startswith("gs://"):
        bucket, name = _split(source)
        client.bucket(bucket).blob(name).download_to_filename(destination)
        return 0
    bucket, name = _split(destination)
    try:
        client.bucket(bucket).blob(name).upload_from_filename(source, if_generation_match=0 if no_clobber else None)
    except exceptions.PreconditionFailed:
        print(f"Skipping existing destination item (no-clobber): {destination}", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    if os.environ.get(fake_cli.SCENARIO_ENV):
        return fake_cli.main("gcloud", argv)
    if argv[:2] == ["storage", "ls"] and len(argv) == 3:
        return _ls(argv[2])
    if argv[:2] == ["storage", "cp"]:
        return _cp(argv[2:])
    print(f"fake gcloud: not supported: {' '.join(argv)}", file=sys.stderr)
    return 2


def install_fake_gcloud(bin_dir: Path) -> Path:
    """A `gcloud` in bin_dir that runs this module with this interpreter, from this checkout."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    launcher = bin_dir / "gcloud"
    root = PROJECT_DIR
    launcher.write_text(
        f'#!/bin/sh\ncd_root={root}\nPYTHONPATH="$cd_root${{PYTHONPATH:+:$PYTHONPATH}}" '
        f'exec {sys.executable} -m tests.support.fake_gcloud "$@"\n'
    )
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return launcher


if __name__ == "__main__":
    os.environ.setdefault("NO_GCE_CHECK", "True")
    sys.exit(main(sys.argv[1:]))
