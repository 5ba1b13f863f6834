"""Build the model repository a stack serves: `make model-repo STACK=dev` (installed: `triton-gke model-repo`).

    triton-gke model-repo --stack dev [--set KEY=VALUE] [--config-file FILE]

Writes build/model_repository (what `pulumi up` uploads to the bucket) and
build/model_repository_cpu (CPU twins for local runs), in the project folder: the current one, where Pulumi.<stack>.yaml
is. Bad input: one line on stderr, exit 2.
`make plan` and `make sandbox` run this first with their own --set and --config-file options, so the repository
matches the settings they use; `make bench` takes neither and is refused them before this runs (offline/make_args.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT
from triton_gke.contracts.paths import built_repository, cpu_twin_repository
from triton_gke.model_repo.errors import ModelRepoError
from triton_gke.one_line import OneLineParser, file_path, invoked_as
from triton_gke.settings import ConfigError, from_stack_file
from triton_gke.settings.schema import overrides_from


def cpu_twins() -> Path:
    """The project's build/model_repository_cpu: the CPU twins local runs serve."""
    return cpu_twin_repository()


def _parser() -> argparse.ArgumentParser:
    # A bad option: one line, with the same hint as plan and sandbox (`make model-repo ARGS=--help` under make).
    parser = OneLineParser(
        description=__doc__.split("\n\n")[0],
        epilog="triton-gke model-repo custom --help: a repository from options alone (your ONNX model), no stack.",
        **invoked_as("model-repo", "model-repo"),
    )
    parser.add_argument("--stack", default="dev", help="stack whose model settings are built (default dev)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a stack setting (JSON for lists)"
    )
    parser.add_argument("--config-file", type=file_path, metavar="FILE", help="stack settings from FILE instead")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # --help and a bad option need no extra
    # Heavy imports (onnx, onnxruntime: the 'models' extra) only when building.
    from triton_gke.model_repo.build import build_repository

    started = time.monotonic()
    try:
        settings = from_stack_file(args.stack, overrides_from(args.set), args.config_file)
        result = build_repository(settings.model_repo, built_repository(), cpu_out=cpu_twins())
    except (ConfigError, ModelRepoError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(result.summary())
    print(f"stack {args.stack}: built in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
