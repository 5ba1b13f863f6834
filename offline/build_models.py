"""Build the model repository a stack serves: `make model-repo STACK=dev`.

    python -m offline.build_models --stack dev [--set KEY=VALUE]

Writes build/model_repository (what `pulumi up` uploads to the bucket) and
build/model_repository_cpu (CPU twins for local runs). Bad input: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import sys
import time

from infra.config import PROJECT_DIR, ConfigError
from infra.model_upload import BUILT_REPOSITORY
from model_repo.build import build_repository
from model_repo.errors import ModelRepoError
from offline.plan import EXIT_BAD_CONFIG, overrides_from
from offline.runtime import load_settings

CPU_TWINS = PROJECT_DIR / "build" / "model_repository_cpu"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make model-repo", description=__doc__)
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        settings = load_settings(args.stack, overrides_from(args.set))
        result = build_repository(settings.model_repo, BUILT_REPOSITORY, cpu_out=CPU_TWINS)
    except (ConfigError, ModelRepoError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    print(result.summary())
    print(f"stack {args.stack}: built in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
