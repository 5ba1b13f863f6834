"""Build the built-in models from an empty cache and compare them with the published digests.

    python -m triton_gke.model_repo.check_digests            # exit 1 when a file differs from the published one
    python -m triton_gke.model_repo.check_digests --write    # record this build as the published one

Run it on any x86-64 machine, with any core count (taskset -c 0, OPENBLAS_NUM_THREADS=1), or under another CPU model
(qemu-x86_64 -cpu Haswell .venv/bin/python -m triton_gke.model_repo.check_digests): every file must say `same`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from triton_gke.model_repo import build
from triton_gke.model_repo.digests import DIGESTS_FILE, ROLES, published
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import REFERENCE_VARIANTS, ModelRepoSettings


def build_builtin(cache_dir: Path) -> dict[str, dict[str, str]]:
    """Build every built-in file into cache_dir: role -> {cache_key, sha256}."""
    int8 = next(v for v in REFERENCE_VARIANTS if v.precision == "INT8")
    fp32 = next(v for v in REFERENCE_VARIANTS if v.precision != "INT8")
    uint8 = [dataclasses.replace(v, name=f"{v.name}_u8", input_dtype="UINT8") for v in (fp32, int8)]
    settings = ModelRepoSettings(variants=(fp32, int8, *uint8))
    source = build.resolve_source(settings, cache_dir)
    files = {}
    for role in ROLES:
        path = getattr(source, role)
        files[role] = {"cache_key": path.stem, "sha256": build.cached_digest(path)}
    return files


def _versions() -> dict[str, str]:
    import numpy
    import onnx
    import onnxruntime

    return {"numpy": numpy.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m triton_gke.model_repo.check_digests", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--write", action="store_true", help="record this build as the published digests")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="builtin-models-") as folder:
        try:
            built = build_builtin(Path(folder))
        except ModelRepoError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    if args.write:
        record = {"versions": _versions(), "files": built}
        published.cache_clear()
        DIGESTS_FILE.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {DIGESTS_FILE}")
    differs = 0
    for role, entry in built.items():
        want = published().get(entry["cache_key"])
        verdict = "written" if args.write else _verdict(want, entry["sha256"])
        differs += verdict == "DIFFERS"
        print(f"{role:11} {entry['cache_key']} {entry['sha256'][:16]} {verdict}")
    return 1 if differs else 0


def _verdict(published_digest: str | None, built: str) -> str:
    if published_digest is None:  # another onnx / onnxruntime release: another cache key, nothing to compare
        return "not published (other library versions)"
    return "same" if published_digest == built else "DIFFERS"


if __name__ == "__main__":
    sys.exit(main())
