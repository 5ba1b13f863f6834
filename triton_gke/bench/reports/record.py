"""The benchmark's capacity records (capacity/records.py): one per variant whose search found a rate.

Every run writes them into `OUT/records/`, each with the revision it would get in capacity/records/ (one more than
the record there of the same GPU, variant, image tag and SLO, else 1); `--record` also writes them into
capacity/records/ (`--records-dir` for another folder). For a finished run, from its results.json:

    triton-gke bench record RESULTS_DIR [--record] [--records-dir DIR]

What a record says the run cannot say itself: the sandbox measures one CPU twin server (gpu `cpu-twin`, the image
tag of the tritonserver release the nvidia-pytriton wheel ships); the stack target measures the stack's GPU and
image, but only with `--saddr` on one pod (a `kubectl port-forward` reaches one pod of a Service) is the rate one
pod's, divided by the pod's GPUs; through the load balancer it is the sum over an unknown number of pods, and no
record is written.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import numbers
import shlex
import sys
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_gke.bench.plans.results import MAX_RESULTS_BYTES
from triton_gke.bounded_files import one_line, output_folder_problem, parse_json, read_text_file
from triton_gke.capacity.from_bench import Measured, records_from_results
from triton_gke.capacity.records import (
    RECORDS_DIR,
    TWIN_GPU,
    CapacityError,
    CapacityRecord,
    load_records,
    record_file_name,
    records_lock,
    revised,
    write_records,
)
from triton_gke.one_line import OneLineParser

if TYPE_CHECKING:
    from triton_gke.settings.values import StackSettings

OUT_RECORDS = "records"  # the folder of a run's records inside its --out
# A run's results.json is ~100 KB (results/bench/); far more is not one, and is not read into memory whole.
# The sandbox's tritonserver is the nvidia-pytriton 0.7.0 wheel's: Triton 2.51.0, which is NGC release 24.10
# (one minor version per monthly release: Triton 2.44.0 is release 24.03, the newest its release notes list,
# https://docs.nvidia.com/deeplearning/triton-inference-server/archives/triton-inference-server-2440/release-notes/running.html).
TWIN_RELEASES = {"2.51.0": "24.10-py3"}
# `kubectl port-forward service/NAME` forwards to one pod the Service selects
# (https://kubernetes.io/docs/reference/kubectl/generated/kubectl_port-forward/): --saddr then measures one pod.
NO_POD_RATE = (
    "measured through the load balancer (no --saddr), across an unknown number of pods: no per-GPU rate; "
    "bench one pod with `kubectl -n triton port-forward svc/triton 8000:8000` and --saddr 127.0.0.1:8000"
)


def check_before_run(target: str, saddr: str | None, record: bool, records_dir: Path, out: Path | None) -> None:
    """Refuse, before anything is measured, what would stop the records afterwards: a records folder that does not
    read, or `--record` where no per-GPU rate can come out. CapacityError, one line."""
    if record and target == "stack" and not saddr:
        raise CapacityError(f"--record: {NO_POD_RATE}")
    if records_dir.exists():
        load_records(records_dir)
    if out is not None and (out / OUT_RECORDS).exists():
        load_records(out / OUT_RECORDS)
    folders = ([("--records-dir", records_dir)] if record else []) + ([("--out", out / OUT_RECORDS)] if out else [])
    for option, folder in folders:  # nothing is written anywhere when one of them cannot be
        problem = output_folder_problem(folder)
        if problem is not None:
            raise CapacityError(f"{option} {folder}: {problem}")


def check_guard_options(record: bool, force: bool, accept_regression: bool) -> None:
    """--force and --accept-regression only say what --record may replace: without it they would do nothing."""
    for option, given in (("--force", force), ("--accept-regression", accept_regression)):
        if given and not record:
            raise CapacityError(f"{option}: only with --record (it says which records --record may replace)")


def stack_settings(stack: str, what: str) -> StackSettings:
    """The stack's settings; a bad name or a missing or unreadable stack file is one line naming it."""
    from triton_gke.settings import from_stack_file
    from triton_gke.settings.stack import check_stack_name

    check_stack_name(stack, what)  # the one rule and wording of every command (a ConfigError, one line)
    try:
        return from_stack_file(stack)
    except OSError as err:  # FileNotFoundError: "Pulumi.<stack>.yaml: no such stack file" (settings/stack.py)
        reason = str(err) if isinstance(err, FileNotFoundError) else f"{err.filename}: {err.strerror}"
        raise CapacityError(f"{what} {stack[:80]!r}: {reason}") from None


def measured_for(run: Mapping[str, Any], settings: StackSettings | None, source: Path) -> Measured | None:
    """The GPU, image and GPUs per server the run measured; None when its rate is not one pod's."""
    target = run.get("target")
    if target == "sandbox":
        machine = run.get("machine") if isinstance(run.get("machine"), Mapping) else {}
        triton = str(machine.get("triton", ""))
        tag = TWIN_RELEASES.get(triton.split(" ")[0])
        if tag is None:
            raise CapacityError(
                f"{source}: machine.triton: {triton[:60]!r}: no known release tag for this tritonserver "
                "(TWIN_RELEASES in bench/reports/record.py)"
            )
        return Measured(TWIN_GPU, tag, 1, f"one CPU twin server, tritonserver {triton}")
    if target == "stack":
        saddr = _option(str(run.get("command", "")), "--saddr")
        if saddr is None or settings is None:
            return None
        pool = settings.gpu_pool
        where = f"one pod at {saddr} ({pool.accelerator_count} x {pool.accelerator_type} on {pool.machine_type})"
        return Measured(pool.accelerator_type, settings.model_repo.triton_image_tag, pool.accelerator_count, where)
    raise CapacityError(f"{source}: target: {str(target)[:40]!r} is neither sandbox nor stack")


def _option(command: str, name: str) -> str | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(f"{name}="):
            return word.split("=", 1)[1]
    return None


def write_run_records(
    run: Mapping[str, Any],
    settings: StackSettings | None,
    out: Path,
    *,
    record: bool,
    records_dir: Path = RECORDS_DIR,
    source: Path | None = None,
    force: bool = False,
    accept_regression: bool = False,
) -> tuple[list[CapacityRecord], list[CapacityRecord], list[str]]:
    """Write the run's records into OUT/records/ and, with `record`, into records_dir. Returns the records as
    written into OUT, as written into records_dir (none without `record`), and notes on variants without one
    and on records left as they were (the same figures again). Everything is decided before the first write: with
    `record`, a record measured before the one it would replace, or by a run marked noisy (bench/metrics/conditions.py),
    is refused without `force`, and a lower figure than the one it would replace without `accept_regression`
    (CapacityError, one line naming the record file and both figures; nothing is written)."""
    source = source or out / "results.json"
    measured = measured_for(run, settings, source)
    if measured is None:
        return [], [], [f"no capacity records: {NO_POD_RATE}"]
    eligible, notes = _eligible(run, source)
    records, skipped = records_from_results({**run, "summaries": eligible}, measured, source)
    notes += skipped
    if not records:
        return [], [], notes
    # With --record, the folder is read (revisions, unchanged figures) and written under one lock: a concurrent
    # `bench.reports.record --record` waits, then sees this run's files, so both updates land.
    with records_lock(records_dir) if record else contextlib.nullcontext():
        records, unchanged = _against(records, records_dir)
        if record:
            _guard(records, records_dir, force=force, accept_regression=accept_regression)
        notes += [f"{r.variant}: unchanged: {r.path} holds the same figures (revision {r.revision})" for r in unchanged]
        in_out = write_records(records + unchanged, out / OUT_RECORDS)
        return in_out, write_records(records, records_dir) if record and records else [], notes


def _eligible(run: Mapping[str, Any], source: Path) -> tuple[list[Any], list[str]]:
    """The summaries a record may come from: a rate found (`found` > 0) at a p95 within the run's SLO. The rest,
    each with a note why; no summary at all is a CapacityError (a run that measured nothing)."""
    summaries, run_settings = run.get("summaries"), run.get("settings")
    if isinstance(summaries, list) and not summaries:
        raise CapacityError(f"{source}: summaries: empty: the run measured no variant")
    if not isinstance(summaries, list) or not isinstance(run_settings, Mapping):
        return summaries, []  # records_from_results names the malformed key
    slo = run_settings.get("slo_ms")
    eligible, notes = [], []
    for summary in summaries:
        if not isinstance(summary, Mapping):
            eligible.append(summary)
            continue
        variant, p95, found = summary.get("variant"), summary.get("p95_ms"), summary.get("found")
        if _number(found) and found < 1 and summary.get("max_rps") is not None:
            notes.append(f"{variant}: no capacity record: no repeat found a rate (found {found})")
        elif _number(p95) and _number(slo) and p95 > slo and summary.get("max_rps") is not None:
            notes.append(f"{variant}: no capacity record: its p95 {p95:g} ms is over the SLO {slo:g} ms")
        else:
            eligible.append(summary)
    return eligible, notes


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _same_figures(a: CapacityRecord, b: CapacityRecord) -> bool:
    return dataclasses.replace(a, revision=0, path=Path()) == dataclasses.replace(b, revision=0, path=Path())


def _existing(records_dir: Path) -> dict[tuple[str, str, str, float], CapacityRecord]:
    return {r.key: r for r in load_records(records_dir)} if records_dir.is_dir() else {}


def _against(records: list[CapacityRecord], records_dir: Path) -> tuple[list[CapacityRecord], list[CapacityRecord]]:
    """(records to write, each revised: one more than the record of its key in records_dir, else 1; records whose
    figures are already there, with that record's revision and path)."""
    existing = _existing(records_dir)
    changed, unchanged = [], []
    for new in records:
        old = existing.get(new.key)
        if old is not None and _same_figures(new, old):
            unchanged.append(dataclasses.replace(new, revision=old.revision, path=old.path))
        else:
            changed.append(new)
    return revised(changed, records_dir), unchanged


def _guard(records: list[CapacityRecord], records_dir: Path, *, force: bool, accept_regression: bool) -> None:
    """Refuse, in one line naming the record file and the figures, what would spoil records_dir: a run measured
    before the record it replaces, or marked noisy (without `force`), or a lower figure (without
    `accept_regression`). A noisy run is refused for a new record too: nothing measured on a busy machine lands
    unasked."""
    existing = _existing(records_dir)
    for new in records:
        old = existing.get(new.key)
        target = old.path if old else records_dir / record_file_name(*new.key)
        if new.noisy and not force:
            raise CapacityError(
                f"{new.variant}: this run is marked noisy ({new.noisy}); it would write {target} "
                f"({new.max_rps_per_gpu:.1f} req/s per GPU); rerun on a quiet machine, or --force writes it"
            )
        if old is None:
            continue
        if not force and new.measured_at < old.measured_at:  # ISO dates sort as text
            raise CapacityError(
                f"{new.variant}: {old.path} (measured {old.measured_at}) is newer than this run (measured "
                f"{new.measured_at}); --force replaces it"
            )
        if not accept_regression and _exact(new.max_rps_per_gpu) < _exact(old.max_rps_per_gpu):
            change = 100 * (_exact(new.max_rps_per_gpu) / _exact(old.max_rps_per_gpu) - 1)
            raise CapacityError(
                f"{new.variant}: {old.path} holds {old.max_rps_per_gpu:.1f} req/s per GPU; this run measured "
                f"{new.max_rps_per_gpu:.1f} ({float(change):+.1f} %); --accept-regression replaces it with the lower "
                "figure"
            )


def _exact(value: float) -> Fraction:
    """A figure as the decimal its file shows (27.4, not 27.39999...): 27.4 against 27.4 is no regression."""
    return Fraction(repr(float(value)))


def describe(record: CapacityRecord) -> str:
    return (
        f"{record.path} ({record.variant}: {record.max_rps_per_gpu:.1f} req/s per GPU at "
        f"p95 <= {record.slo_latency_ms:g} ms, revision {record.revision})"
    )


def parser() -> argparse.ArgumentParser:
    # A bad option is raised as a CapacityError: main() prints it like every other refusal, one line, exit 2.
    p = OneLineParser(
        prog="triton-gke bench record",
        description="Capacity records from a finished bench run.",
        hint=None,
        raise_as=CapacityError,
    )
    p.add_argument("results", type=Path, help="a bench --out folder (or its results.json)")
    p.add_argument("--record", action="store_true", help="also update capacity/records/ (or --records-dir)")
    p.add_argument("--records-dir", type=Path, default=RECORDS_DIR, help="the records to update (capacity/records)")
    add_guard_options(p)
    return p


def add_guard_options(p: argparse.ArgumentParser) -> None:
    """--force and --accept-regression: what `--record` refuses without them (_guard)."""
    p.add_argument(
        "--force",
        action="store_true",
        help="with --record: write records of a run marked noisy, or replace records measured after this run",
    )
    p.add_argument(
        "--accept-regression",
        action="store_true",
        help="with --record: replace a record with a lower figure",
    )


def read_results(path: Path) -> tuple[dict[str, Any], Path]:
    source = path / "results.json" if path.is_dir() else path
    # The one bounded reader: a regular file only (/dev/zero or a FIFO would never end or never start), read up to
    # the cap, UTF-8, JSON of bounded depth without NaN or Infinity; each refusal one line naming the file.
    what = "a bench results.json (give a bench --out folder or its results.json)"
    shown = one_line(source)

    def unreadable(line: str) -> CapacityError:
        return CapacityError(f"{shown}: not a readable results.json ({line.removeprefix(f'{shown}: ')})")

    run = parse_json(read_text_file(source, MAX_RESULTS_BYTES, what, CapacityError), source, unreadable)
    if not isinstance(run, dict):
        raise CapacityError(f"{source}: expected a JSON object")
    check_run_facts(run, source)
    return run, source


def check_run_facts(run: Mapping[str, Any], source: Path) -> None:
    """`command`, `wall_s` and the `machine` facts a record quotes, of the types bench writes them (BenchRun in
    bench/plans/results.py, bench/metrics/machine.py); a hand-edited null, NaN or list is one CapacityError naming
    the key."""
    if not isinstance(run.get("command"), str):
        raise CapacityError(f"{source}: command: {_shown(run.get('command'))}: expected the bench command as text")
    wall = run.get("wall_s")
    if not (_number(wall) and math.isfinite(wall) and wall >= 0):
        raise CapacityError(f"{source}: wall_s: {_shown(wall)}: expected seconds, a finite number >= 0")
    machine = run.get("machine")
    if not isinstance(machine, Mapping):
        raise CapacityError(f"{source}: machine: {_shown(machine)}: expected an object of machine facts")
    for key, (check, expected) in MACHINE_FACTS.items():
        if key in machine and not check(machine[key]):
            raise CapacityError(f"{source}: machine.{key}: {_shown(machine[key])}: expected {expected}")


def _finite(value: Any) -> bool:
    return _number(value) and math.isfinite(value)


def _load(value: Any) -> bool:
    """os.getloadavg()'s three figures, or null where it had none (bench/metrics/machine.py load_average)."""
    return value is None or (isinstance(value, list) and len(value) == 3 and all(_finite(v) and v >= 0 for v in value))


def _shown(value: Any) -> str:
    return json.dumps(value)[:60] if _jsonable(value) else repr(value)[:60]


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return False
    return True


# What bench/metrics/machine.py facts() and bench/__main__.py write into `machine`: key -> (check, what is expected).
MACHINE_FACTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "cores": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number of cores >= 1"),
    "cpu_model": (lambda v: isinstance(v, str), "text"),
    "memory_gib": (lambda v: v is None or (_finite(v) and v >= 0), "a finite number >= 0 or null"),
    "gpus": (lambda v: isinstance(v, list) and all(isinstance(g, str) for g in v), "a list of GPU names"),
    "python": (lambda v: isinstance(v, str), "text"),
    "onnxruntime": (lambda v: isinstance(v, str), "text"),
    "kernel": (lambda v: isinstance(v, str), "text"),
    "commit": (lambda v: isinstance(v, str), "text"),
    "triton": (lambda v: isinstance(v, str), "text"),
    "load_start": (_load, "three finite load averages >= 0, or null"),
    "load_end": (_load, "three finite load averages >= 0, or null"),
    # bench/metrics/conditions.py RunConditions; its keys are checked where a record takes them
    # (capacity/from_bench.py).
    "conditions": (lambda v: isinstance(v, Mapping), "an object of run conditions (bench/metrics/conditions.py)"),
}


def main(argv: list[str] | None = None) -> int:
    from triton_gke.settings import ConfigError

    try:
        args = parser().parse_args(sys.argv[1:] if argv is None else argv)
        check_guard_options(args.record, args.force, args.accept_regression)
        run, source = read_results(args.results)
        saddr = _option(str(run.get("command", "")), "--saddr")
        check_before_run(str(run.get("target")), saddr, args.record, args.records_dir, source.parent)
        stack = run.get("stack")
        settings = stack_settings(str(stack), f"{source}: stack") if run.get("target") == "stack" else None
        in_out, updated, notes = write_run_records(
            run,
            settings,
            source.parent,
            record=args.record,
            records_dir=args.records_dir,
            source=source,
            force=args.force,
            accept_regression=args.accept_regression,
        )
    except (CapacityError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for note in notes:
        print(note, file=sys.stderr)
    for written in updated or in_out:
        print(describe(written))
    return 0 if in_out else 1


if __name__ == "__main__":
    sys.exit(main())
