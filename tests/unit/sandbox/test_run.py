"""sandbox.run's command line takes --config-file and --set like plan."""

from __future__ import annotations

from pathlib import Path

from triton_gke.sandbox import run as sandbox_run


def test_sandbox_takes_config_file_like_plan() -> None:
    args = sandbox_run._parser().parse_args(["--config-file", "Pulumi.dev.yaml", "--set", "a=b"])
    assert (args.config_file, args.set) == (Path("Pulumi.dev.yaml"), ["a=b"])
