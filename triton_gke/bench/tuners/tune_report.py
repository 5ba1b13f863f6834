"""bench tune's report: tune.json, README.md, results.json and the capacity record of the recommended
configuration, and the summary it prints. Split from tune.py."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_gke.bench import command
from triton_gke.bench.plans.results import BenchRun
from triton_gke.bench.plans.slo_search import RATE_RULE, spread
from triton_gke.bench.reports import plots, record
from triton_gke.bench.runners import runner
from triton_gke.bench.tuners import tune_search
from triton_gke.bench.tuners.tune_candidates import INTRA_PARAMETER, Candidate, pulumi_lines, write_stack
from triton_gke.bench.tuners.tune_measure import Measurer
from triton_gke.bench.tuners.tune_options import PROG
from triton_gke.capacity.records import CapacityError

if TYPE_CHECKING:
    from triton_gke.bench.tuners.tune_search import Outcome
    from triton_gke.model_repo.settings import VariantSettings
    from triton_gke.settings.values import StackSettings


def _capacity(outcome: Outcome[Candidate], candidate: Candidate) -> dict[str, Any]:
    found = spread(outcome.scores.get(candidate, []))
    if found is None:
        return {"median": None, "min": None, "max": None, "searches": 0}
    return {"median": found.median, "min": found.low, "max": found.high, "searches": found.count}


def make_report(
    args: argparse.Namespace,
    argv: list[str],
    settings: StackSettings,
    variant: VariantSettings,
    outcome: Outcome[Candidate],
    measurer: Measurer,
    facts: dict[str, Any],
    stamp: datetime.datetime,
    wall_s: float,
) -> dict[str, Any]:
    from triton_gke.settings.schema import config_schema

    best, default, chosen = outcome.best, outcome.reference, outcome.recommended
    assert best is not None
    best_cap, default_cap = _capacity(outcome, best), _capacity(outcome, default)
    ratio = best_cap["median"] / default_cap["median"] if best_cap["median"] and default_cap["median"] else None
    searches = (len(outcome.scores[best]), len(outcome.scores[default]))
    return {
        "command": " ".join([PROG, shlex.join(argv)]).strip(),
        "stack": args.stack,
        "variant": variant.name,
        "slo_ms": settings.monitoring.slo.latency_ms,
        "started": stamp.isoformat(timespec="seconds"),
        "wall_s": round(wall_s, 1),
        "budget_minutes": args.budget_minutes,
        "search": args.search,
        "units_spent": outcome.spent,
        "stopped_early": outcome.stopped_early,
        "rungs": [dataclasses.asdict(r) for r in outcome.rungs],
        "candidates": [
            {
                **dataclasses.asdict(c),
                "label": c.label(),
                "default": c == default,
                "capacities": outcome.scores[c],
                "median": outcome.median(c),
            }
            for c in outcome.scores
        ],  # fmt: skip
        "best": {**dataclasses.asdict(best), "label": best.label(), **best_cap},
        "default": {**dataclasses.asdict(default), "label": default.label(), **default_cap},
        "ratio": ratio,
        # Adopted only when every search of the best beat every search of the default and that is unlikely by
        # chance (bench/tuners/tune_search.py significantly_better).
        "significant": outcome.significant,
        "chance": tune_search.chance_of_separation(*searches) if best != default else None,
        "recommended": {**dataclasses.asdict(chosen), "label": chosen.label(), **_capacity(outcome, chosen)},
        "pulumi": pulumi_lines(chosen, default, config_schema()[0], args.stack),
        "client": chosen.client_lines(variant),
        "twin_only": {INTRA_PARAMETER: chosen.intra_op_threads},
        "machine": facts,
        "noisy": facts["conditions"]["noisy"],
    }


def finish(
    args: argparse.Namespace,
    out: Path,
    settings: StackSettings,
    report: dict[str, Any],
    outcome: Outcome[Candidate],
    measurer: Measurer,
    default: Candidate,
) -> int:
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    drawn = plots.write_tuning_plots(out, ("tune.json",))  # tune.png: every search of every configuration
    (out / "README.md").write_text(readme(report, [p.name for p in drawn]), encoding="utf-8")
    print(out / "tune.json")
    for path in drawn:
        print(path)
    print(out / "README.md")
    try:
        for path in _records(report, settings, out, measurer.merged(outcome.recommended)):
            print(path)
    except CapacityError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(summary(report))
    if args.write_stack and report["pulumi"]:
        from triton_gke.settings import ConfigError

        try:
            command.log(f"updated {write_stack(args.stack, outcome.recommended, default)}")
        except ConfigError as err:
            print(f"error: --write-stack: the stack refuses the edited file: {err}", file=sys.stderr)
            return 2
        except OSError as err:
            print(f"error: --write-stack: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
            return 2
    return 0


def _records(report: dict[str, Any], settings: StackSettings, out: Path, run: runner.VariantRun | None) -> list[Path]:
    """results.json (the recommended configuration as a bench run) and its capacity record in OUT/records/
    (bench/reports/record.py)."""
    if run is None:
        return []
    summary_row = runner.summarise(run, None)
    slo = settings.monitoring.slo
    bench_run = BenchRun(
        command=report["command"],
        stack=report["stack"],
        target="sandbox",
        started=report["started"],
        wall_s=report["wall_s"],
        settings={
            "slo_ms": float(slo.latency_ms),
            "max_failure_ratio": slo.max_failure_ratio,
            "arrival": "poisson",
            "ladder_growth": 1.5,
            "ladder_precision": 0.1,
            "stop_after": 2,
            "rule": RATE_RULE,
            "step_s": run.rows[0].duration_s if run.rows else 0,
            "repeats": summary_row.repeats,
        },  # fmt: skip
        machine=report["machine"],
        steps=run.rows,
        summaries=[summary_row],
        costs=[],
        pricing=[],
        notes=[f"bench tune: the recommended configuration ({report['recommended']['label']})"],
    )
    (out / "results.json").write_text(bench_run.to_json(), encoding="utf-8")
    in_out, _, notes = record.write_run_records(json.loads(bench_run.to_json()), settings, out, record=False)
    for note in notes:
        command.log(note)
    return [out / "results.json", *(r.path for r in in_out)]


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def screened(report: dict[str, Any]) -> bool:
    """Whether the report's figures are a screen's predictions (--search screen), not open-loop rate searches."""
    return report.get("search") == "screen"


def units(report: dict[str, Any]) -> str:
    """What one figure of the report is: a rate search, or a closed-loop measurement and its prediction."""
    return "closed-loop measurements" if screened(report) else "searches"


def _figure(capacity: dict[str, Any], noun: str = "searches") -> str:
    if capacity["median"] is None:
        return "not measured"
    return (
        f"{capacity['median']:.1f} req/s (min {capacity['min']:.1f}, max {capacity['max']:.1f} over "
        f"{capacity['searches']} {noun})"
    )


def verdict(report: dict[str, Any]) -> str:
    """Why the recommended configuration is the one to apply."""
    best, default, noun = report["best"], report["default"], units(report)
    if best["label"] == default["label"]:
        return "recommended: the default (no configuration measured better)"
    odds = f"chance {report['chance']:.2g} when they are equal, at most {tune_search.ALPHA:g} needed"
    if report["significant"]:
        return (
            f"recommended: the best: each of its {best['searches']} {noun} beat each of the default's "
            f"{default['searches']} ({odds})"
        )
    return (
        f"recommended: keep the default: the best measured did not beat it beyond noise over {best['searches']} and "
        f"{default['searches']} {noun} ({odds} when every one beats)"
    )


def summary(report: dict[str, Any]) -> str:
    ratio = f"{report['ratio']:.2f}x the default" if report["ratio"] else "no ratio (the default found no rate)"
    noun = units(report)
    spent = (
        f"{report['units_spent']} closed-loop measurements; capacities predicted by M/D/c, not measured open loop"
        if screened(report)
        else f"{report['units_spent']} rate searches"
    )
    lines = [
        f"best measured: {report['best']['label']}: {_figure(report['best'], noun)}",
        f"default: {report['default']['label']}: {_figure(report['default'], noun)}",
        f"ratio: {ratio} at p95 <= {report['slo_ms']} ms ({spent})",
        verdict(report),
    ]
    if report["stopped_early"]:
        lines.append(
            f"STOPPED EARLY at the end of the budget: the best measured had {report['best']['searches']} "
            f"{units(report)}, the default {report['default']['searches']}"
        )
    if report["noisy"]:
        lines.append("NOISY run: " + "; ".join(report["noisy"]))
    unchanged = "the recommended configuration's stack keys are the default's"
    lines += report["pulumi"] or [f"{unchanged}: no stack setting to change"]
    lines += report.get("client", [])
    threads = report["twin_only"][INTRA_PARAMETER]
    if threads is not None:
        lines.append(f"CPU twin only (not a stack setting): ONNX Runtime {INTRA_PARAMETER} {threads}")
    return "\n".join(lines)


def readme(report: dict[str, Any], images: Sequence[str] = ()) -> str:
    rows = "\n".join(
        f"| {c['label']} | {'yes' if c['default'] else ''} | {', '.join(f'{v:.1f}' for v in c['capacities'])} | "
        f"{_rate(c['median'])} |"
        for c in report["candidates"]
    )
    settings_block = "\n".join(report["pulumi"]) or "# no stack setting to change"
    noisy = f"**This run is marked NOISY**: {'; '.join(report['noisy'])}.\n\n" if report["noisy"] else ""
    figures = (
        "predicted capacities (req/s at the SLO by M/D/c, one per closed-loop measurement)"
        if screened(report)
        else "capacities (req/s, one per search)"
    )
    return (
        f"# Tuning {report['variant']} on the CPU twin ({report['stack']}, p95 <= {report['slo_ms']} ms)\n\n{noisy}"
        f"`{report['command']}`, {report['started']}, {report['wall_s'] / 60:.1f} min, {report['units_spent']} "
        f"{'closed-loop measurements' if screened(report) else 'rate searches'}.\n\n{summary(report)}\n\n"
        f"| configuration | default | {figures} | median |\n| --- | --- | --- | --- |\n"
        f"{rows}\n\nThe stack settings of the recommended configuration (they apply to every variant that reads "
        "them):\n\n"
        f"```sh\n{settings_block}\n```\n{screen_table(report)}" + "".join(f"\n![{name}]({name})\n" for name in images)
    )


def screen_table(report: dict[str, Any]) -> str:
    """A screen's own measurements, each with the prediction made from it ('' for an open-loop tuning)."""
    screen = report["machine"].get("screen") if screened(report) else None
    if not screen:
        return ""
    rows = "\n".join(
        f"| {label} | {r['concurrency']} | {r['infer_per_s']:g} | {r['p95_ms']:g} | {r['service_ms'] or 'n/a'} | "
        f"{r['predicted_rps']:g} |"
        for label, found in screen["measurements"].items()
        for r in found
    )
    return (
        f"\nperf_analyzer's closed-loop measurements (windows of {screen['window_s']:g} s, after a discarded warm-up "
        "on each fresh server); ms per request by Little's law, and the rate whose p95 an M/D/c queue keeps within the "
        f"SLO (bench/metrics/queue_model.py):\n\n"
        "| configuration | concurrency | infer/s | p95 ms | ms per request | predicted req/s |\n"
        f"| --- | --- | --- | --- | --- | --- |\n{rows}\n"
    )
