"""triton-gke: one command for every program of the toolkit (pyproject.toml [project.scripts]).

    triton-gke SUBCOMMAND [OPTIONS...]          # triton-gke SUBCOMMAND --help: its options

Each subcommand hands its words to the main(argv) of the module that implements it, so options, messages and exit
codes are the module's own. The module is imported only when its subcommand runs: `triton-gke --help` or a typo
stays instant, where importing the Pulumi program's modules takes seconds.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from triton_gke.cli.one_line import CONSOLE_SCRIPT, EXIT_USAGE


@dataclass(frozen=True)
class Command:
    """A subcommand: the module whose main(argv) runs it, one line of help, and subcommands of its own."""

    module: str
    summary: str
    children: Mapping[str, Command] = field(default_factory=dict)
    # A module owned elsewhere that names itself by a module-level PROG (infra/neg_cleanup.py: its Pulumi Command
    # runs it with `python -m`) is given the console script's name here instead.
    prog_attribute: str | None = None


BENCH_COMMANDS = {
    "record": Command("triton_gke.bench.record", "capacity records from a finished run's results.json"),
    "report": Command("triton_gke.bench.report", "re-render a run's README, CSVs and charts from its results.json"),
    "pa-rates": Command("triton_gke.bench.pa_rates", "perf_analyzer at fixed request rates on a local tritonserver"),
}
MODEL_REPO_COMMANDS = {
    "custom": Command(
        "triton_gke.model_repo.__main__", "a model repository from options alone, no stack (--out DIR, --onnx FILE)"
    ),
}
COMMANDS: dict[str, Command] = {
    "plan": Command("triton_gke.offline.plan", "the offline plan of a stack: what `pulumi up -s STACK` would do"),
    "model-repo": Command(
        "triton_gke.offline.build_models",
        "build the model repository a stack serves (build/model_repository, CPU twins)",
        MODEL_REPO_COMMANDS,
    ),
    "sync": Command("triton_gke.model_repo.sync", "upload a built model repository to gs://BUCKET/PREFIX"),
    "sandbox": Command("triton_gke.sandbox.run", "the stack's serving path on this machine, then a report"),
    "bench": Command(
        "triton_gke.bench.__main__", "the measure-and-tune benchmark of a stack's model variants", BENCH_COMMANDS
    ),
    "capacity": Command("triton_gke.capacity.__main__", "capacity compare BASELINE NEW: did capacity drop?"),
    "plan-diff": Command("triton_gke.offline.plan_diff", "compare two plan JSONs resource by resource"),
    "lifecycle-table": Command(
        "triton_gke.offline.lifecycle_table", "regenerate (--check: check) the table in docs/lifecycle.md"
    ),
    "dashboards": Command("triton_gke.observability.__main__", "regenerate (--check: check) dashboards/*.json"),
    "neg-cleanup": Command(
        "triton_gke.infra.neg_cleanup",
        "remove or wait for the zonal NEGs of Triton's Service (what `pulumi up` runs)",
        prog_attribute="PROG",
    ),
}

EXIT_STATUS = """\
exit status (each subcommand's --help tells its own):
  0    done, or the check passed
  1    the check failed or the work did: capacity compare (a rate dropped by more than the threshold), plan-diff
       (an unexpected difference), lifecycle-table --check and dashboards --check (out of date), sandbox and
       neg-cleanup (a step failed), bench (no variant measured)
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
        lines += ["", EXIT_STATUS]
    return "\n".join(lines)


def refuse(prog: str, message: str) -> int:
    """One line on stderr and exit 2, as every bad command line of the project (cli/one_line.py)."""
    print(f"error: {prog}: {message} (see {prog} --help)", file=sys.stderr)
    return EXIT_USAGE


def resolve(argv: Sequence[str]) -> tuple[str, Command, list[str]] | int:
    """The subcommand the words name, its prog and its own words; or the exit status of help or a refusal."""
    if not argv:
        return refuse(CONSOLE_SCRIPT, "a subcommand is needed: " + ", ".join(COMMANDS))
    if argv[0] in ("-h", "--help"):
        print(help_text())
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


def run(prog: str, command: Command, argv: list[str]) -> int:
    module = importlib.import_module(command.module)  # only now: some pull in pulumi_gcp (seconds)
    if command.prog_attribute:
        setattr(module, command.prog_attribute, prog)
    entry: Callable[[list[str]], int | None] = module.main
    return entry(argv) or 0


def main(argv: Sequence[str] | None = None) -> int:
    found = resolve(sys.argv[1:] if argv is None else argv)
    if isinstance(found, int):
        return found
    return run(*found)


if __name__ == "__main__":
    sys.exit(main())
