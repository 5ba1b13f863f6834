"""Capacity records from a benchmark run's results.json (what `make bench` writes), one per measured variant.

Pure: reads the parsed JSON, never imports bench/ (bench imports this). What the run cannot say itself (which
GPU and image it measured, how many GPUs one server had) the caller passes: bench/reports/record.py knows the target.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_gke.capacity.records import MAX_TEXT, CapacityError, CapacityRecord, percent_of, record_from_dict

# bench/plans/slo_search.py judges every step on the p95 of its successful requests: the records' percentile.
SEARCH_PERCENTILE = 95.0
MAX_COMMAND = 300  # characters of the bench command quoted in a method line
MAX_METHOD = MAX_TEXT["method"]


@dataclass(frozen=True)
class Measured:
    """What the caller knows about the run's target."""

    gpu: str  # GKE accelerator type, or capacity.records.TWIN_GPU for the sandbox
    image_tag: str
    gpus_per_server: int = 1  # the GPUs of the one server (pod) measured: the rate is divided by them
    where: str = ""  # the server, in words ("CPU twin on tritonserver 2.51.0", "one pod at 127.0.0.1:8000")


def _get(mapping: Any, key: str, where: str) -> Any:
    if not isinstance(mapping, Mapping) or key not in mapping:
        raise CapacityError(f"{where}: {key}: missing; not a results.json written by `make bench`")
    return mapping[key]


def _number(mapping: Any, key: str, where: str, *, optional: bool = False) -> float | None:
    value = _get(mapping, key, where)
    if value is None and optional:
        return None
    number = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):  # a JSON integer too large for a float stays NaN
            number = float(value)
    if not math.isfinite(number):
        raise CapacityError(f"{where}: {key}: expected a finite number, got {str(value)[:40]}")
    return number


def _text(mapping: Any, key: str, where: str) -> str:
    value = _get(mapping, key, where)
    if not isinstance(value, str):
        raise CapacityError(f"{where}: {key}: expected text, got {value!r}"[:300])
    return value


def records_from_results(
    run: Mapping[str, Any], measured: Measured, source: Path
) -> tuple[list[CapacityRecord], list[str]]:
    """One record per variant whose search found a rate (revision 1; bench/reports/record.py revises them), and one line
    per variant without a record saying why. CapacityError names `source` and the key on malformed input."""
    where = str(source)
    settings = _get(run, "settings", where)
    slo_ms = _number(settings, "slo_ms", f"{where}: settings")
    # The ratio's decimal x 100, not 100 x the float (0.07 -> 7.0, not 7.000000000000001, which the stack that was
    # measured, allowing 7 %, would refuse).
    failure_pct = percent_of(_number(settings, "max_failure_ratio", f"{where}: settings") or 0.0)
    measured_at = _text(run, "started", where)[:10]
    summaries = _get(run, "summaries", where)
    if not isinstance(summaries, list):
        raise CapacityError(f"{where}: summaries: expected a list")
    conditions = run_conditions(run, where)
    records: list[CapacityRecord] = []
    skipped: list[str] = []
    for index, summary in enumerate(summaries):
        at = f"{where}: summaries[{index}]"
        variant = _text(summary, "variant", at)
        max_rps = _number(summary, "max_rps", at, optional=True)
        if max_rps is None:
            skipped.append(f"{variant}: no capacity record: no request rate met the SLO")
            continue
        values = {
            "gpu": measured.gpu,
            "variant": variant,
            "image_tag": measured.image_tag,
            "slo_latency_ms": slo_ms,
            "slo_percentile": SEARCH_PERCENTILE,
            "max_failure_percent": failure_pct,
            "max_rps_per_gpu": max_rps / measured.gpus_per_server,
            "batch": _number(summary, "batch", at, optional=True),
            "p50_ms": _number(summary, "p50_ms", at, optional=True),
            "p95_ms": _number(summary, "p95_ms", at, optional=True),
            "source": "measured",
            "method": _method(run, summary, measured, at),
            "measured_at": measured_at,
            "revision": 1,
            **conditions,
        }
        records.append(record_from_dict({"schema": 1, **values}, Path(f"{where} ({variant})")))
    return records, skipped


def run_conditions(run: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The record keys of the run's conditions (bench/metrics/conditions.py, `machine.conditions` in results.json): the
    raw ONNX Runtime baseline before and after, load average and steal over the run, and why it was marked noisy
    (null when quiet). A run from before them gives none (the record's optional keys stay out)."""
    machine = run.get("machine")
    found = machine.get("conditions") if isinstance(machine, Mapping) else None
    if found is None:
        return {}
    at = f"{where}: machine.conditions"
    if not isinstance(found, Mapping):
        raise CapacityError(f"{at}: expected an object")
    noisy = _get(found, "noisy", at)
    if not isinstance(noisy, list) or not all(isinstance(n, str) for n in noisy):
        raise CapacityError(f"{at}: noisy: expected a list of reasons, got {str(noisy)[:40]}")
    reasons = "; ".join("".join(c if c.isprintable() else " " for c in n) for n in noisy).strip()
    return {
        "baseline_before": _number(found, "baseline_before", at, optional=True),
        "baseline_after": _number(found, "baseline_after", at, optional=True),
        "load_average": _number(found, "load_average", at, optional=True),
        "cpu_steal_percent": _number(found, "steal_pct", at, optional=True),
        "noisy": reasons[: MAX_TEXT["noisy"]].strip() or None,
    }


def _method(run: Mapping[str, Any], summary: Mapping[str, Any], measured: Measured, at: str) -> str:
    try:
        return method_line(run, summary, measured, at)
    except (TypeError, ValueError, AttributeError, IndexError) as err:  # a hand-edited results.json
        raise CapacityError(f"{at}: settings, summary or machine facts malformed ({err})"[:300]) from None


def method_line(run: Mapping[str, Any], summary: Mapping[str, Any], measured: Measured, at: str) -> str:
    """How the figure was measured, in one line: tool, arrivals, search, repeats and spread, machine, command."""
    where = str(at).split(": summaries")[0]
    settings = _get(run, "settings", where)
    machine = run.get("machine") if isinstance(run.get("machine"), Mapping) else {}
    repeats, found = summary.get("repeats"), summary.get("found")
    low, high, spread = (summary.get(k) for k in ("max_rps_low", "max_rps_high", "spread_pct"))
    ranged = repeats != 1 and all(isinstance(v, int | float) for v in (low, high, spread))
    parts = [
        f"make bench ({_text(run, 'target', where)} target): Locust open loop, "
        f"{settings.get('arrival', 'poisson')} arrivals, rate climbed x{settings.get('ladder_growth', 1.5):g} "
        f"then bisected to {100 * settings.get('ladder_precision', 0.05):g} %, a rate failing after "
        f"{settings.get('stop_after', 2)} failing steps of {settings.get('step_s', 6):g} s",
        f"{found}/{repeats} repeat(s) found a rate"
        + (f", range {low:.1f}-{high:.1f} req/s (spread {spread:.1f} %)" if ranged else "")
        + (" (one search: no spread)" if repeats == 1 else ""),
    ]
    if summary.get("pa_max_rps"):
        parts.append(f"perf_analyzer's own search {summary['pa_max_rps']:.1f} req/s")
    if measured.gpus_per_server > 1:
        parts.append(f"the server's rate divided by its {measured.gpus_per_server} GPUs")
    parts.append(_machine(machine, measured))
    command = str(run.get("command", ""))
    parts.append(f"command: {command[:MAX_COMMAND]}{'...' if len(command) > MAX_COMMAND else ''}")
    line = "".join(c if c.isprintable() else " " for c in "; ".join(p for p in parts if p))  # one printable line
    return line[:MAX_METHOD].strip()


def _machine(machine: Mapping[str, Any], measured: Measured) -> str:
    facts = [measured.where] if measured.where else []
    if machine.get("cores"):
        facts.append(f"{machine['cores']} cores ({machine.get('cpu_model', 'CPU')})")
    loads = [machine.get(k) for k in ("load_start", "load_end")]
    if all(isinstance(v, list) and v for v in loads):
        facts.append(f"load average {loads[0][0]:.2f} at start, {loads[1][0]:.2f} at end")
    if machine.get("commit"):
        facts.append(f"commit {machine['commit']}")
    return ", ".join(str(f) for f in facts)
