"""triton-gke: one command for every program of the toolkit (pyproject.toml [project.scripts]).

    triton-gke SUBCOMMAND [OPTIONS...]          # triton-gke SUBCOMMAND --help: its options

Each subcommand hands its words to the main(argv) of the module that implements it, so options, messages and exit
codes are the module's own. The module is imported only when its subcommand runs: `triton-gke --help` or a typo
stays instant, where importing the Pulumi program's modules takes seconds.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from triton_gke.contracts.exit_codes import EXIT_BAD_INPUT
from triton_gke.one_line import CONSOLE_SCRIPT, OneLineParser


@dataclass(frozen=True)
class Command:
    """A subcommand: the module whose main(argv) runs it, one line of help, and subcommands of its own."""

    module: str
    summary: str
    children: Mapping[str, Command] = field(default_factory=dict)
    # A module owned elsewhere that names itself by a module-level PROG (infra/neg_cleanup.py: its Pulumi Command
    # runs it with `python -m`) is given the console script's name here instead.
    prog_attribute: str | None = None
    # The optional dependencies (pyproject.toml [project.optional-dependencies]) the command needs to run; its
    # --help needs none. Missing, the command is refused in one line naming the extra (missing_extra).
    extra: str | None = None
    # The module's function that takes the words (default main).
    entry: str = "main"


# The modules each extra brings that the base install lacks (pyproject.toml; `models` is part of `local`).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "models": ("onnxruntime",),
    "local": ("onnxruntime", "psutil", "locust", "prometheus_client", "matplotlib", "gcp_storage_emulator"),
}
# The extra a missing module comes with, for a ModuleNotFoundError raised past the check (a command without one).
MODULE_EXTRA = {name: extra for extra in ("local", "models") for name in EXTRA_MODULES[extra]}
HELP_WORDS = frozenset({"-h", "--help"})


def installed_schema_refusal() -> str | None:
    """`provider --write-schema` rewrites triton_gke/schema.json, committed in a checkout; an installed package's
    copy (site-packages) is the wheel's, never to be rewritten: the refusal's text, or None in a checkout."""
    spec = importlib.util.find_spec("triton_gke")
    package = Path(spec.origin).resolve().parent if spec and spec.origin else None
    if package is not None and (package.parent / "pyproject.toml").is_file():
        return None  # a checkout (or its editable install): the schema file is the repository's
    return (
        f"--write-schema: {package}/schema.json belongs to an installed package (site-packages), not a checkout; "
        "rewrite the schema in a checkout of the repository"
    )


def provider_main(argv: list[str]) -> int:
    """`triton-gke provider --schema | --write-schema`: handed to triton_gke/provider.py main, the provider's own
    entry (the plugin runs that module with the engine's address; this subcommand only prints or writes the schema)."""
    prog = f"{CONSOLE_SCRIPT} provider"
    parser = OneLineParser(
        prog=prog, description="The triton-gke component provider's schema (triton_gke/schema.json)."
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--schema", action="store_true", help="print the schema as committed (JSON, with the installed version)"
    )
    mode.add_argument(
        "--write-schema", action="store_true", help="rewrite triton_gke/schema.json with that schema (a checkout only)"
    )
    args = parser.parse_args(argv)
    refusal = installed_schema_refusal() if args.write_schema else None
    if refusal:
        print(f"error: {prog}: {refusal}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from triton_gke import provider  # pulumi's provider SDK: only now

    return provider.main(["--write-schema" if args.write_schema else "--schema"])


BENCH_COMMANDS = {
    "record": Command("triton_gke.bench.reports.record", "capacity records from a finished run's results.json"),
    "report": Command(
        "triton_gke.bench.reports.report",
        "re-render a run's README, CSVs and charts from its results.json",
        extra="local",
    ),
    "pa-rates": Command(
        "triton_gke.bench.runners.pa_rates",
        "perf_analyzer at fixed request rates on a local tritonserver",
        extra="local",
    ),
    "tune": Command(
        "triton_gke.bench.tuners.tune",
        "search one variant's serving configuration for capacity at the SLO",
        extra="local",
    ),
    "model-analyzer": Command(
        "triton_gke.bench.tuners.model_analyzer", "Triton Model Analyzer's own search on the CPU twin", extra="local"
    ),
    "loop-check": Command(
        "triton_gke.bench.tuners.loop_check",
        "one configuration on one server: perf_analyzer's closed and open loop side by side, with CPU use",
        extra="local",
    ),
    "compare-tuners": Command(
        "triton_gke.bench.tuners.compare_tuners",
        "the default, bench tune's and Model Analyzer's picks measured side by side",
        extra="local",
    ),
}
MODEL_REPO_COMMANDS = {
    "custom": Command(
        "triton_gke.model_repo.__main__",
        "a model repository from options alone, no stack (--out DIR, --onnx FILE)",
        extra="models",
    ),
}
COMMANDS: dict[str, Command] = {
    "plan": Command("triton_gke.offline.plan", "the offline plan of a stack: what `pulumi up -s STACK` would do"),
    "model-repo": Command(
        "triton_gke.offline.build_models",
        "build the model repository a stack serves (build/model_repository, CPU twins)",
        MODEL_REPO_COMMANDS,
        extra="models",
    ),
    "sync": Command("triton_gke.model_repo.sync", "upload a built model repository to gs://BUCKET/PREFIX"),
    "sandbox": Command(
        "triton_gke.sandbox.run", "the stack's serving path on this machine, then a report", extra="local"
    ),
    "bench": Command(
        "triton_gke.bench.__main__",
        "the measure-and-tune benchmark of a stack's model variants",
        BENCH_COMMANDS,
        extra="local",
    ),
    "smoke": Command(
        "triton_gke.model_repo.smoke",
        "after `pulumi up`: one image to each Triton address, checked against the built repository",
        extra="local",
    ),
    "e2e": Command(
        "triton_gke.cli.e2e",
        "in a scratch project: pulumi up, smoke test, Locust, pulumi destroy, then list what is left",
        extra="local",
    ),
    "rollout": Command(
        "triton_gke.cli.rollout",
        "change one region at a time: canary, waves, each gated on its SLO, rolled back on a breach",
    ),
    "gpu-check": Command(
        "triton_gke.model_repo.gpu_check",
        "on an NVIDIA GPU, in the TensorRT container: build and run every plan as the engine-build Job would",
    ),
    "capacity": Command("triton_gke.capacity.__main__", "capacity compare BASELINE NEW: did capacity drop?"),
    "plan-diff": Command("triton_gke.offline.plan_diff", "compare two plan JSONs resource by resource"),
    "lifecycle-table": Command(
        "triton_gke.offline.lifecycle_table",
        "regenerate (--check: check) the table in docs/lifecycle.md",
        extra="models",
    ),
    "dashboards": Command("triton_gke.observability.__main__", "regenerate (--check: check) dashboards/*.json"),
    "neg-cleanup": Command(
        "triton_gke.infra.neg_cleanup",
        "remove or wait for the zonal NEGs of Triton's Service (what `pulumi up` runs)",
        prog_attribute="PROG",
    ),
    "plan-folder": Command(
        "triton_gke.offline.plan_folder",
        "plan any Python Pulumi program folder offline: its resources, providers and outputs (--json)",
    ),
    "provider": Command(
        "triton_gke.cli.main",
        "the component provider: print (--schema) or rewrite (--write-schema) its schema",
        entry="provider_main",
    ),
}

EXIT_STATUS = """\
exit status (each subcommand's --help tells its own):
  0    done, or the check passed
  1    the check failed or the work did: capacity compare (a rate dropped by more than the threshold), plan-diff
       (an unexpected difference), lifecycle-table --check and dashboards --check (out of date), sandbox and
       neg-cleanup (a step failed), bench (no variant measured), plan-folder (the program itself failed), e2e (a
       step failed or something was left), rollout (stopped: a breach, a refused preview, a failed up, an abort)
  2    bad input: an unknown subcommand or option, a bad setting or file; one line on stderr, nothing changed
  3, 4 plan only: a generated Kubernetes manifest is invalid (3); --against: the change takes a region down (4)
  128+N  stopped by signal N (Ctrl-C: 130)
make: GNU make exits 2 whenever a recipe fails, whatever its status; its last line, `make: *** [...] Error N`,
names the program's own status N. Scripts that need 1 apart from 2 run triton-gke itself."""


def help_text(commands: Mapping[str, Command] = COMMANDS, prog: str = CONSOLE_SCRIPT) -> str:
    """Usage, one line per subcommand and, at the top level, the exit statuses."""
    width = max(map(len, commands)) + 2
    lines = [f"usage: {prog} SUBCOMMAND [OPTIONS...]", "", "subcommands:"]
    lines += [f"  {name:<{width}}{command.summary}" for name, command in commands.items()]
    lines += ["", f"{prog} SUBCOMMAND --help: the subcommand's options."]
    if commands is COMMANDS:
        lines += [f"{prog} --version: the installed version (pyproject.toml's).", "", EXIT_STATUS]
    return "\n".join(lines)


def refuse(prog: str, message: str) -> int:
    """One line on stderr and exit 2, as every bad command line of the project (triton_gke/one_line.py)."""
    print(f"error: {prog}: {message} (see {prog} --help)", file=sys.stderr)
    return EXIT_BAD_INPUT


def resolve(argv: Sequence[str]) -> tuple[str, Command, list[str]] | int:
    """The subcommand the words name, its prog and its own words; or the exit status of help or a refusal."""
    if not argv:
        return refuse(CONSOLE_SCRIPT, "a subcommand is needed: " + ", ".join(COMMANDS))
    if argv[0] in ("-h", "--help"):
        print(help_text())
        return 0
    if list(argv) == ["--version"]:  # the installed distribution's: pyproject.toml's version
        from triton_gke import __version__

        print(f"{CONSOLE_SCRIPT} {__version__}")
        return 0
    prog, commands, words = CONSOLE_SCRIPT, COMMANDS, list(argv)
    while words and words[0] in commands:
        command = commands[words[0]]
        prog, commands, words = f"{prog} {words[0]}", command.children, words[1:]
        if not commands or not words or words[0].startswith("-"):
            return prog, command, words  # the subcommand's own options, or its own refusal of a stray word
    # Only a word that names no subcommand (at the top, or after one with subcommands of its own) gets here.
    return refuse(prog, f"{_unknown(words[0])}; the subcommands are {', '.join(commands)}")


def _unknown(word: str) -> str:
    # repr: a word holding a line break or a control character stays on the one line.
    if word.startswith("-"):
        return f"unknown option {word!r}: a subcommand comes first"
    return f"unknown subcommand {word!r}"


def install_hint(extra: str) -> str:
    """How to add an extra: reinstall from the wheel or checkout this package came from (docs/library.md#install)."""
    return f"reinstall triton-gke from its wheel or checkout with [{extra}] (in a checkout: pip install '.[{extra}]')"


def missing_extra(prog: str, extra: str) -> int:
    """One line naming the extra to install, exit 2 (bad input: this install lacks what the command needs)."""
    # No package-index name: triton-gke is not published on one, so `pip install triton-gke[...]` would fetch whatever
    # someone registered under that name (issue 33). The user reinstalls what they installed, with the extra.
    print(f"error: {prog} needs the {extra!r} extra: {install_hint(extra)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _absent(extra: str) -> bool:
    # find_spec of a top-level name imports nothing; None for a module not installed (or blocked in sys.modules).
    return any(importlib.util.find_spec(name) is None for name in EXTRA_MODULES[extra])


def run(prog: str, command: Command, argv: list[str]) -> int:
    asks_help = bool(HELP_WORDS.intersection(argv))
    if command.extra and not asks_help and _absent(command.extra):
        return missing_extra(prog, command.extra)
    try:
        module = importlib.import_module(command.module)  # only now: some pull in pulumi_gcp (seconds)
        if command.prog_attribute:
            setattr(module, command.prog_attribute, prog)
        entry: Callable[[list[str]], int | None] = getattr(module, command.entry)
        return entry(argv) or 0
    except ModuleNotFoundError as err:
        extra = command.extra or MODULE_EXTRA.get((err.name or "").partition(".")[0])
        if extra is None:
            raise
        return missing_extra(prog, extra)
    finally:
        _close_mock_runtime()


def _close_mock_runtime() -> None:
    """Every command that ran a program under the mock runtime (plan, plan-folder, lifecycle-table, ...) closes its
    event loops before interpreter shutdown could print a traceback from one (offline/runtime.py close_event_loop)."""
    runtime = sys.modules.get("triton_gke.offline.runtime")
    if runtime is not None:
        runtime.close_event_loop()


def _dispatch(argv: Sequence[str] | None) -> int:
    found = resolve(sys.argv[1:] if argv is None else argv)
    if isinstance(found, int):
        return found
    return run(*found)


# CPython collects the oldest generation after 10 x 10 young collections of 700 net allocations (gc.get_threshold(),
# https://docs.python.org/3/library/gc.html#gc.set_threshold), each time scanning every object alive: with pulumi_gcp
# imported that is ~450,000, and a plan spent ~40 % of its CPU there (prod under the mock runtime: 1.3 CPU-s, 0.75
# with the collector off). Rarer collections, as mypy does for the same reason (mypy/build.py: "Run gc less
# frequently, as otherwise we can spend a large fraction of cpu in gc"); what no cycle holds is still freed at once.
GC_THRESHOLDS = (200_000, 30, 30)
# Commands that run for minutes (servers, load, searches) keep CPython's defaults: rarer collections there would let
# cyclic garbage pile up for the whole run (a review's synthetic cycles of 16 KB: 21 MB peak with the defaults, 958 MB
# with GC_THRESHOLDS), and their CPU is not spent in the collector.
LONG_RUNNING = ("sandbox", "bench", "smoke", "provider", "e2e")


def tune_gc(argv: Sequence[str] = ()) -> None:
    """Collect cyclic garbage less often: for the toolkit's short, import-heavy commands and the test workers."""
    if not (argv and argv[0] in LONG_RUNNING):
        gc.set_threshold(*GC_THRESHOLDS)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommand; a reader that stops reading (`triton-gke --help | head -2`) ends it quietly.

    The Python documentation's pattern for SIGPIPE (https://docs.python.org/3/library/signal.html#note-on-sigpipe):
    catch BrokenPipeError, point stdout at devnull so the interpreter's final flush raises nothing, and exit. The
    status is the shell's for a process SIGPIPE stopped, 128+13, as for the other signals (EXIT_STATUS).
    """
    tune_gc(sys.argv[1:] if argv is None else argv)
    try:
        try:
            return _dispatch(argv)
        finally:  # also after argparse's --help, which exits: a closed pipe shows here, not in the last flush
            sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
