"""bench/metrics/registry/: one metric, one file, and every reader of the metrics enumerates the registry.

The readers: WindowStats and window_stats (bench/metrics/probes.py), StepRow and VariantSummary (bench/plans/results.py:
results.csv, summary.csv, results.json and reading it back), the runner's step row and summary, and the README's
results table. A metric added to the registry (a temporary module) or removed from it shows in every one of them;
each reader is run from a fresh copy of its module (tests/support/fresh_modules.py) built against the changed
registry, so no other test sees the change. The committed runs read back and render byte for byte as before the
registry (tests/unit/bench/fixtures/rendered/ holds the READMEs rendered by the code before it).
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import pkgutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.checkout import PROJECT_DIR
from tests.support.fresh_modules import fresh_copy
from tests.unit.bench.test_runner import SLO_400
from tests.unit.bench.test_slo_search import RECORDED_ORIGINAL_CPU
from triton_gke.bench.metrics import registry
from triton_gke.bench.metrics.registry.base import Metric, Sample
from triton_gke.bench.plans.slo_search import rate_search
from triton_gke.bench.reports import report
from triton_gke.contracts.paths import BENCH_RESULTS
from triton_gke.model_repo.settings import REFERENCE_VARIANTS

READERS = (
    "triton_gke.bench.metrics.probes",
    "triton_gke.bench.plans.results",
    "triton_gke.bench.runners.runner",
    "triton_gke.bench.reports.report",
)  # in import order: each fresh copy imports the ones before it
RENDERED = Path(__file__).parent / "fixtures" / "rendered"
TEMPORARY_METRIC = """
from triton_gke.bench.metrics.registry.base import Metric, Window


def read(w: Window) -> float | None:
    return w.elapsed * 1000


METRIC = Metric(name="window_ms", header="window ms", unit="ms", read=read, better="lower", digits=0, order=35)
"""


def test_every_module_of_the_registry_is_registered_under_its_own_name() -> None:
    """A metric file missing from MODULES would be read by nobody; a METRIC named unlike its file is hard to find."""
    files = {info.name for info in pkgutil.iter_modules(registry.__path__)} - {"base"}
    assert files == {module.__name__.rsplit(".", 1)[1] for module in registry.MODULES}
    assert [m.name for m in registry.METRICS] == [module.__name__.rsplit(".", 1)[1] for module in registry.MODULES]
    assert all(m.inside is None or m.inside in {n.name for n in registry.METRICS} for m in registry.METRICS)


def _fresh_readers(monkeypatch: pytest.MonkeyPatch, metrics: tuple[Metric, ...]) -> dict[str, ModuleType]:
    """Copies of the readers built against `metrics`; sys.modules and the registry are restored after the test."""
    monkeypatch.setattr(registry, "METRICS", metrics)
    copies = {}
    for name in READERS:
        copies[name] = fresh_copy(name)
        monkeypatch.setitem(sys.modules, name, copies[name])  # the next copy imports this one
    return copies


def _samples() -> list[Sample]:
    """Two samples one second apart in which every counter moved, so every metric reads a figure."""
    return [Sample(0.0, 1.0, 10.0, 20.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5), Sample(1.0, 1.5, 25.0, 40.0, 8.0, 2.0, 4.0,
                                                                            2e5, 4e4, 0.7)]  # fmt: skip


def _seen(copies: dict[str, ModuleType], tmp: Path) -> dict[str, list[str]]:
    """The metric names each reader shows: its fields, figures, columns or keys that are registered metric names."""
    probes, results, runner, rep = (copies[name] for name in READERS)
    names = [m.name for m in registry.METRICS]

    def shown(keys: Any) -> list[str]:
        return [key for key in keys if key in names or key == "window_ms"]

    stats = probes.window_stats(_samples(), 0.2, 0.8)
    sampler = type("Sampler", (), {"window": lambda self, start, end: probes.window_stats(_samples(), start, end)})()
    result = rate_search(RECORDED_ORIGINAL_CPU, SLO_400)
    rows = [
        runner._row("original", 0, i, {"wall_start": 0.2, "wall_end": 0.8, "errors": {}, "users": s.users,
                    "offered_rps": s.offered_rps, "warmup": s.warmup, "duration_s": 6.0, "requests": s.requests,
                    "failures": s.failures, "rps": s.rps, "p50_ms": s.p50_ms, "p95_ms": s.p95_ms, "mean_ms": s.p95_ms},
                    sampler, "pass", i == result.best_index)
        for i, s in enumerate(RECORDED_ORIGINAL_CPU)
    ]  # fmt: skip
    opinion = results.PerfAnalyzerOpinion("", None, None, None, None, None, None, "skipped")
    model = runner.read_model(REFERENCE_VARIANTS[0], None)
    summary = runner.summarise(runner.VariantRun(model, [], [result], rows, opinion, None), None)
    run = results.BenchRun("bench", "dev", "sandbox", "now", 1.0, {"slo_ms": 400.0}, {}, rows, [summary])
    (tmp / "results.json").write_text(run.to_json(), encoding="utf-8")
    header = rep.results_table([summary]).splitlines()[0]
    return {
        "WindowStats": shown(f.name for f in dataclasses.fields(probes.WindowStats)),
        "window_stats": shown(k for k, v in vars(stats).items() if v is not None),
        "StepRow": shown(f.name for f in dataclasses.fields(results.StepRow)),
        "runner step row": shown(k for k, v in vars(rows[result.best_index]).items() if v is not None),
        "VariantSummary": shown(f.name for f in dataclasses.fields(results.VariantSummary)),
        "runner summary": shown(k for k, v in vars(summary).items() if v is not None),
        "results.csv": shown(_csv_header(rep.write_csv(tmp / "results.csv", rows, results.StepRow))),
        "summary.csv": shown(_csv_header(rep.write_csv(tmp / "summary.csv", [summary], results.VariantSummary))),
        "results.json": shown(json.loads(run.to_json())["summaries"][0]),
        "read back": shown(vars(rep.read_run(tmp / "results.json").steps[0])),
        "README results table": [
            m.name for m in (*registry.METRICS,) if f" {m.header} " in header or f"({m.header})" in header
        ],
    }


def _csv_header(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return next(csv.reader(handle))


def _temporary_metric(tmp: Path) -> Metric:
    """A metric file written by the test and imported from there, as a module of the registry would be."""
    path = tmp / "window_ms.py"
    path.write_text(TEMPORARY_METRIC, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("window_ms", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.METRIC


def test_every_registered_metric_is_in_every_reader(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen = _seen(_fresh_readers(monkeypatch, registry.METRICS), tmp_path)
    names = sorted(m.name for m in registry.METRICS)
    assert {reader: sorted(shown) for reader, shown in seen.items()} == dict.fromkeys(seen, names)


def test_a_metric_added_to_the_registry_is_in_every_reader(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    added = (*registry.METRICS, _temporary_metric(tmp_path))
    seen = _seen(_fresh_readers(monkeypatch, added), tmp_path)
    assert {reader: "window_ms" in shown for reader, shown in seen.items()} == dict.fromkeys(seen, True)


def test_a_metric_removed_from_the_registry_leaves_every_reader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kept = tuple(m for m in registry.METRICS if m.name != "queue_ms")
    seen = _seen(_fresh_readers(monkeypatch, kept), tmp_path)
    assert {reader: "queue_ms" in shown for reader, shown in seen.items()} == dict.fromkeys(seen, False)
    assert {reader: len(shown) for reader, shown in seen.items()} == dict.fromkeys(seen, len(kept))


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in (PROJECT_DIR / BENCH_RESULTS).glob("*/results.json")))
def test_a_committed_run_reads_back_and_renders_as_before_the_registry(folder: str, tmp_path: Path) -> None:
    """results.json, results.csv and summary.csv as committed, byte for byte; the README as rendered before."""
    source = PROJECT_DIR / BENCH_RESULTS / folder
    run = report.read_run(source / "results.json")
    assert run.to_json() == (source / "results.json").read_text(encoding="utf-8")
    written = {
        "results.csv": report.write_csv(tmp_path / "results.csv", run.steps, report.StepRow),
        "summary.csv": report.write_csv(tmp_path / "summary.csv", run.summaries, report.VariantSummary),
    }
    for name, path in written.items():
        if (source / name).is_file():
            assert path.read_bytes() == (source / name).read_bytes(), name
    before = RENDERED / f"{folder}.README.md"
    if before.is_file():
        assert report.render_readme(run, ["rps_vs_p95.png", "ranking.png"], "NOTE") == before.read_text("utf-8")


def test_the_committed_runs_compared_include_bench_runs_with_their_csvs_and_readmes() -> None:
    """The test above compares CSVs and READMEs only where they exist: at least two bench runs have all of them."""
    folders = [p.parent for p in (PROJECT_DIR / BENCH_RESULTS).glob("*/results.json")]
    full = [f for f in folders if (f / "summary.csv").is_file() and (RENDERED / f"{f.name}.README.md").is_file()]
    assert len(full) >= 2, full
