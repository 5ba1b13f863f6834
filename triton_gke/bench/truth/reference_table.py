"""The reference's table on the GPU twin (issue 46, item 5): its five variants, measured by the project's procedure.

    python -m triton_gke.bench.truth.reference_table --out results/bench/twin-reference-2026-12-07 [--k 20] [--seed 46]

Each of the five variants is served as the stack serves it (model_repo/settings.py REFERENCE_VARIANTS: its maximum and
preferred batch, its queue delay, its instances) on the GPU twin at time scale k, every time and the SLO x k. Its
capacity at p95 <= 100 ms x k is measured as twin_check measures (its `serve` and `measure`: the real tritonserver,
perf_analyzer --async, Poisson arrivals, binary search from 0.3 to 1.3 x the ground truth), --rounds rounds in an
order drawn from the seed; the ground truth is batcher_sim's (twin_check's `truth`). Capacities are divided back by
k to T4 requests/s and set beside the reference's figures, read from their one home, the capacity records whose
source is "reference" (triton_gke/capacity/records/, the tutorial's table on one T4).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from triton_gke.bench.truth import twin_check
from triton_gke.bench.tuners.tune_candidates import Candidate
from triton_gke.model_repo.gpu_twin import read_curves
from triton_gke.model_repo.settings import REFERENCE_VARIANTS, VariantSettings

T4 = "nvidia-tesla-t4"
ROUNDS = 3


def candidate(variant: VariantSettings, k: float) -> Candidate:
    """The variant's served batching and instances as a twin configuration; its queue delay x k (twin time)."""
    v = variant
    return Candidate(round(v.max_queue_delay_us * k), v.preferred_batch_size, v.max_batch_size, v.instance_count)


def reference_figures() -> dict[str, float]:
    """The tutorial's requests/s per variant on one T4 at p95 <= 100 ms: the capacity records of source reference."""
    from triton_gke.capacity.records import load_records

    found = {}
    for r in load_records():
        if r.source == "reference" and r.gpu == T4 and r.slo_latency_ms == twin_check.SLO_T4_MS:
            found[r.variant] = r.max_rps_per_gpu
    return found


def table_rows(measured: dict[str, list[float | None]], truth: dict[str, float], reference: dict[str, float],
               k: float) -> list[dict[str, Any]]:  # fmt: skip
    """One row per variant in REFERENCE_VARIANTS' order, in T4 requests/s (the twin runs k times slower than a T4, so
    a twin rate x k). A round where no rate met the SLO counts as 0."""
    rows = []
    for v in REFERENCE_VARIANTS:
        values = [value or 0.0 for value in measured[v.name]]
        median = statistics.median(values) * k
        ref = reference.get(v.name)
        rows.append({
            "variant": v.name, "measured_t4": round(median, 1), "rounds_t4": [round(x * k, 1) for x in values],
            "truth_t4": round(truth[v.name] * k, 1), "reference": ref,
            "ratio": round(median / ref, 3) if ref else None,
        })  # fmt: skip
    return rows


def ordering(rows: list[dict[str, Any]], key: str) -> list[str]:
    """Variants from the highest to the lowest `key` (ties keep REFERENCE_VARIANTS' order)."""
    return [r["variant"] for r in sorted(rows, key=lambda r: -(r[key] or 0.0))]


def readme(r: dict[str, Any]) -> str:
    """The run folder's README: the table, the orderings, how it was measured."""
    lines = [
        f"# The reference's table on the GPU twin ({r['date'][:10]})", "",
        f"`{r['command']}`, {r['wall_s'] / 60:.1f} min.", "",
        f"Each variant served as the stack serves it (model_repo/settings.py REFERENCE_VARIANTS) on the GPU twin at "
        f"time scale k = {r['k']:g} (every time and the SLO x {r['k']:g}: p95 <= {r['slo_ms']:g} ms here is the "
        f"reference's 100 ms on a T4). Measured by {r['tool']} on the real tritonserver, {r['rounds']} rounds, order "
        f"per round {r['orders']} from seed {r['seed']}; twin requests/s x k = T4 requests/s below. Ground truth: "
        f"bench/truth/batcher_sim.py, {len(r['truth_seeds'])} seeds x {r['truth_requests']} requests. Reference: "
        "the tutorial's figures on one T4 (triton_gke/capacity/records/, source reference).", "",
        "| variant | batching, instances | measured (T4 req/s, median) | rounds | ground truth | reference | "
        "measured / reference |",
        "|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for row in r["rows"]:
        ratio = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}"
        ref = "n/a" if row["reference"] is None else f"{row['reference']:g}"
        lines.append(
            f"| `{row['variant']}` | {row['label']} | {row['measured_t4']:.0f} | {row['rounds_t4']} | "
            f"{row['truth_t4']:.0f} | {ref} | {ratio} |"
        )
    lines += [
        "", f"Ordering, measured: {' > '.join(r['order_measured'])}.",
        f"Ordering, reference: {' > '.join(r['order_reference'])}.", "",
        "Why they differ where they do: docs/gpu-twin.md, \"The reference's table on the twin\".", "",
    ]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m triton_gke.bench.truth.reference_table",
                                description=__doc__.split("\n")[0])  # fmt: skip
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--k", type=float, default=20.0, help="time scale (default 20, as twin_check)")
    p.add_argument("--seed", type=int, help="seed of the rounds' order (default: from the start time)")
    p.add_argument("--rounds", type=int, default=ROUNDS, help=f"measurements of each variant (default {ROUNDS})")
    args = p.parse_args(argv)
    from triton_gke.bench.runners import perf_analyzer

    started, stamp = time.monotonic(), datetime.datetime.now().astimezone()
    seed = args.seed if args.seed is not None else int(stamp.timestamp()) % 2**31
    log = lambda line: print(f"[{time.monotonic() - started:6.0f} s] {line}", file=sys.stderr, flush=True)  # noqa: E731
    k, curves = args.k, read_curves()
    configs = {v.name: candidate(v, k) for v in REFERENCE_VARIANTS}
    truth = {name: twin_check.truth(curves[name], c, k) for name, c in configs.items()}
    log("ground truth (twin req/s): " + ", ".join(f"{n} {e.mean:.1f}" for n, e in truth.items()))
    root, state = Path(tempfile.mkdtemp(prefix="reference-table-")), Path(tempfile.mkdtemp(dir="/dev/shm"))
    specs = [twin_check.spec(n, curves[n], c, k, state) for n, c in configs.items()]
    ranges = {n: (0.3 * e.mean, 1.3 * e.mean) for n, e in truth.items()}
    found, orders = twin_check.measure(specs, ranges, k, root, perf_analyzer.ensure_binary(), seed, args.rounds, log)
    rows = table_rows(found, {n: e.mean for n, e in truth.items()}, reference_figures(), k)
    for row in rows:
        row["label"] = twin_check.describe(configs[row["variant"]])
    report = {
        "command": " ".join(["python -m triton_gke.bench.truth.reference_table", *(argv or sys.argv[1:])]),
        "date": stamp.isoformat(timespec="seconds"), "k": k, "slo_ms": twin_check.SLO_T4_MS * k, "seed": seed,
        "rounds": args.rounds, "orders": orders, "tool": "perf_analyzer --async, Poisson, --binary-search",
        "truth_seeds": list(twin_check.SEEDS), "truth_requests": twin_check.TRUTH_REQUESTS,
        "truth_half_width_t4": {n: round(e.half_width * k, 1) for n, e in truth.items()},
        "infer_per_s_twin": found, "rows": rows,
        "order_measured": ordering(rows, "measured_t4"), "order_reference": ordering(rows, "reference"),
        "wall_s": round(time.monotonic() - started, 1),
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "reference_table.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (args.out / "README.md").write_text(readme(report), encoding="utf-8")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
