"""CLI: triton-gke model-repo custom --out build/model_repository [--cpu-out ...] [--onnx PATH] ...

Bad input prints ONE line on stderr and exits 2; nothing is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from triton_gke.contracts.triton import TRT_CACHE_DIR
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.model_repo.settings import REFERENCE_VARIANTS, TRITON_IMAGE_TAG, ModelRepoSettings, VariantSettings
from triton_gke.one_line import OneLineParser

_SETTABLE = ("precision", "max_batch_size", "preferred_batch_size", "max_queue_delay_us", "instance_count")


def _parser() -> argparse.ArgumentParser:
    # A bad option is raised as a ModelRepoError: main() prints it like every other refusal, one line, exit 2.
    p = OneLineParser(
        prog="triton-gke model-repo custom",
        description="Build a Triton model repository from these options alone (no stack file).",
        hint=None,
        raise_as=ModelRepoError,
    )
    p.add_argument("--out", required=True, type=Path, help="GPU model repository folder")
    p.add_argument("--cpu-out", type=Path, help="also write CPU twins (python backend) here")
    p.add_argument("--onnx", help="your ONNX model (default: built-in ResNet-50, random weights)")
    p.add_argument("--saved-model", help="a TF SavedModel folder (needs --image-tag <= 25.02-py3)")
    p.add_argument("--labels", help="labels file, one class per line (default: placeholder names)")
    p.add_argument("--variants", help="comma-separated subset of: " + ",".join(v.name for v in REFERENCE_VARIANTS))
    p.add_argument(
        "--set", action="append", default=[], metavar="VARIANT.KEY=VALUE", help="e.g. trt_fp16.max_batch_size=32"
    )
    p.add_argument("--image-tag", default=TRITON_IMAGE_TAG, help=f"Triton image tag (default {TRITON_IMAGE_TAG})")
    p.add_argument("--trt-cache-dir", default=TRT_CACHE_DIR, help="TensorRT engine cache path in the container")
    p.add_argument("--cache-dir", type=Path, help="where built ONNX files are cached (default build/cache)")
    return p


def _select(names: str | None) -> tuple[VariantSettings, ...]:
    if not names:
        return REFERENCE_VARIANTS
    known = {v.name: v for v in REFERENCE_VARIANTS}
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    for name in chosen:
        if name not in known:
            raise ModelRepoError(f"--variants: unknown variant {name!r} (known: {', '.join(known)})")
    return tuple(known[n] for n in chosen)


def _apply_sets(variants: tuple[VariantSettings, ...], assignments: list[str]) -> tuple[VariantSettings, ...]:
    by_name = {v.name: v for v in variants}
    for item in assignments:
        target, _, value = item.partition("=")
        name, _, key = target.rpartition(".")
        if not value or name not in by_name or key not in _SETTABLE:
            raise ModelRepoError(
                f"--set {item!r}: expected VARIANT.KEY=VALUE with VARIANT one of {', '.join(by_name)} "
                f"and KEY one of {', '.join(_SETTABLE)}"
            )
        by_name[name] = dataclasses.replace(by_name[name], **{key: _typed(item, key, value)})
    return tuple(by_name.values())


def _typed(item: str, key: str, value: str) -> str | int:
    if key == "precision":
        return value
    try:
        return int(value)
    except ValueError:
        raise ModelRepoError(f"--set {item!r}: {key} must be an integer") from None


def settings_from_args(args: argparse.Namespace) -> ModelRepoSettings:
    if args.onnx and args.saved_model:
        raise ModelRepoError("--onnx and --saved-model are mutually exclusive")
    return ModelRepoSettings(
        variants=_apply_sets(_select(args.variants), args.set),
        source=args.onnx or args.saved_model,
        triton_image_tag=args.image_tag,
        labels=args.labels,
        trt_cache_dir=args.trt_cache_dir,
    )


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    try:
        args = _parser().parse_args(argv)  # --help and a bad option need no extra
        # Heavy imports (onnx, onnxruntime: the 'models' extra) only when building.
        from triton_gke.model_repo.build import build_repository

        result = build_repository(settings_from_args(args), args.out, args.cpu_out, args.cache_dir)
    except ModelRepoError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {err.filename or ''}: {err.strerror or err}", file=sys.stderr)
        return 2
    print(result.summary())
    print(f"done in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
