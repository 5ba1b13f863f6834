"""Every plot the bench writes is readable: its title inside the figure, a legend for every marker and line, the
SLO named, no unmeasured metric drawn as zeros; and the PNG bytes depend on the data only (no version metadata)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkout import PROJECT_DIR
from triton_gke.bench.reports import plots, report
from triton_gke.bench.tuners import model_analyzer
from triton_gke.contracts.paths import BENCH_RESULTS

RESULTS = PROJECT_DIR / BENCH_RESULTS
TUNE = RESULTS / "tune-dev-2026-12-02c"
TUNERS = RESULTS / "tuners-dev-2026-12-02d"
ALONE = RESULTS / "dev-2026-11-30-alone"


@pytest.fixture
def plt() -> Any:
    found = plots.pyplot()
    if found is None:
        pytest.skip("matplotlib is not installed")
    yield found
    found.close("all")


def _fits(figure: Any) -> None:
    """The titles, axis labels and legend entries lie inside the figure: nothing is cut off."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    box = figure.bbox
    texts = [figure._suptitle, *(t for legend in figure.legends for t in legend.get_texts())]
    for ax in figure.axes:
        low, high = sorted(ax.get_ylim())
        shown = [t for t in ax.get_yticklabels() if low <= t.get_position()[1] <= high]  # ticks in view only
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *shown]
    for text in texts:
        if text is None or not text.get_visible() or not text.get_text():
            continue
        extent = text.get_window_extent(renderer)
        assert box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1, f"{text.get_text()!r} is cut off"
        assert box.y0 - 1 <= extent.y0 and extent.y1 <= box.y1 + 1, f"{text.get_text()!r} is cut off"


def _legend_texts(figure: Any) -> list[str]:
    return [t.get_text() for legend in figure.legends for t in legend.get_texts()]


def test_the_single_variant_curve_fits_its_title_and_explains_its_markers(plt: Any, tmp_path: Path) -> None:
    run = report.read_run(ALONE / "results.json")
    report._curves(run, tmp_path / "curves.png", plt)
    figure = plt.gcf()
    _fits(figure)
    legend = _legend_texts(figure)
    assert "SLO: p95 100 ms" in legend and "ringed: the chosen step (the capacity)" in legend
    assert {"filled: the step met the SLO", "open: it missed the SLO"} <= set(legend)
    assert [t for t in legend if t.startswith("repeat ")] == [
        "repeat 1 (steps by offered rate)",
        "repeat 2 (steps by offered rate)",
    ]
    ax = figure.axes[0]
    assert "requests/s" in ax.get_xlabel() and "ms" in ax.get_ylabel()
    assert [line.get_ydata()[0] for line in ax.lines if line.get_linestyle() == "--"] == [100]  # the SLO line


def test_the_ranking_names_its_payloads_and_whisker(plt: Any, tmp_path: Path) -> None:
    run = report.read_run(RESULTS / "dev-2026-11-30" / "results.json")
    report._ranking(run, tmp_path / "ranking.png", plt)
    _fits(plt.gcf())
    legend = _legend_texts(plt.gcf())
    assert legend == [
        "bar: median of repeats, FP32 payload",
        "bar: median of repeats, UINT8 payload",
        "whisker: lowest to highest repeat",
    ]
    assert "p95 <= 100 ms" in plt.gca().get_xlabel()


def test_the_tuning_plot_shows_every_search_the_default_and_the_pick(plt: Any, tmp_path: Path) -> None:
    tuning = json.loads((TUNE / "tune.json").read_text())
    plots.tune_plot(tuning, tmp_path / "tune.png", plt)
    figure = plt.gcf()
    _fits(figure)
    ax = figure.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "delay 20 ms, batch 64/64, 1 inst.  [default]"  # the lowest median first
    assert labels[-1] == "delay 5 ms, batch 64/64, 1 inst.  [pick]"
    searches = [line for line in ax.lines if line.get_markersize() == 6]
    assert len(searches) == tuning["units_spent"] == 13  # one marker per rate search
    assert "[pick]: the recommended" in _legend_texts(figure)
    assert "p95 <= 100 ms" in ax.get_xlabel()


def test_a_screens_plot_says_its_figures_are_predictions_and_names_the_client_side(plt: Any, tmp_path: Path) -> None:
    """bench tune --search screen: the axis and the legend say what a marker is (a closed-loop measurement's
    prediction, not a rate search) and a gRPC or other-payload configuration is told apart from its HTTP twin."""
    tuning = json.loads((TUNE / "tune.json").read_text())
    tuning["search"] = "screen"
    tuning["candidates"][1] = {**tuning["candidates"][1], "protocol": "grpc", "other_payload": True}
    plots.tune_plot(tuning, tmp_path / "tune.png", plt)
    figure = plt.gcf()
    _fits(figure)
    ax = figure.axes[0]
    assert ax.get_xlabel().startswith("predicted capacity") and "from closed loop" in ax.get_xlabel()
    assert "one closed-loop measurement's prediction" in _legend_texts(figure)
    assert any(", gRPC, other payload" in t.get_text() for t in ax.get_yticklabels())
    assert "closed-loop measurements (screen)" in " ".join(ax.get_title().split())  # wrapped to fit


def test_the_comparison_plot_marks_none_and_leaves_gaps(plt: Any, tmp_path: Path) -> None:
    comparison = json.loads((TUNERS / "comparison.json").read_text())
    plots.compare_plot(comparison, tmp_path / "comparison.png", plt)
    _fits(plt.gcf())
    ax = plt.gca()
    crosses = [line for line in ax.lines if line.get_marker() == "x"]
    assert len(crosses) == 2  # the default's two Locust rounds that met no rate; perf_analyzer's two gaps: no mark
    assert all(line.get_xdata()[0] == 0 for line in crosses)


@pytest.mark.parametrize("run", ["tuners-dev-2026-12-02d", "tuners-twin-2026-12-03"])
def test_the_comparison_plots_value_labels_sit_clear_of_the_markers(plt: Any, tmp_path: Path, run: str) -> None:
    """Issue 48: the labels sat on the markers. In display units (pixels, through matplotlib's transforms), each
    label's box starts at least plots.LABEL_GAP_POINTS right of the centre of every marker in its row, which is more
    than the widest marker's half-width: its text never covers a marker."""
    plots.compare_plot(json.loads((RESULTS / run / "comparison.json").read_text()), tmp_path / "c.png", plt)
    figure, ax = plt.gcf(), plt.gca()
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    gap = plots.LABEL_GAP_POINTS * figure.dpi / 72
    widest = max(line.get_markersize() for line in ax.lines) * figure.dpi / 72
    assert gap >= widest / 2 + 2 * figure.dpi / 72  # at least 2 points clear of a marker's edge
    labels = [text for text in ax.texts if text.get_text()]
    assert len(labels) == 2 * len(ax.get_yticks())  # one per tool per configuration
    for label in labels:
        box = label.get_window_extent(renderer)
        row = [
            ax.transData.transform((x, y))
            for line in ax.lines
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
            if box.y0 <= ax.transData.transform((x, y))[1] <= box.y1
        ]
        assert row, label.get_text()  # every label has markers in its row (a median comes from rounds)
        assert all(box.x0 - centre_x >= gap - 0.5 for centre_x, _ in row), (label.get_text(), box.x0, row)
        assert box.x1 <= ax.get_window_extent(renderer).x1, label.get_text()  # inside the axes


def test_bench_report_draws_a_tuning_folder_s_plot_and_nothing_else(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    folder = tmp_path / "tune"
    shutil.copytree(TUNE, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert report.main([str(folder)]) == 0
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert after.keys() - before.keys() == {"tune.png"} and all(after[k] == v for k, v in before.items())


def test_a_png_carries_no_software_version_and_renders_to_the_same_bytes(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    for folder in ("a", "b"):
        shutil.copytree(TUNERS, tmp_path / folder)
        plots.write_tuning_plots(tmp_path / folder)
    first, second = ((tmp_path / f / "comparison.png").read_bytes() for f in ("a", "b"))
    assert first == second and b"Software" not in first and b"matplotlib" not in first


def test_model_analyzer_s_unmeasured_memory_plot_is_dropped_with_a_note(tmp_path: Path) -> None:
    plot = tmp_path / "plots" / "simple" / "original"
    plot.mkdir(parents=True)
    (plot / "cpu_mem_v_latency.png").write_bytes(b"zeros")
    (plot / "throughput_v_latency.png").write_bytes(b"measured")
    assert model_analyzer.drop_unmeasured_plots(tmp_path) == [plot / "cpu_mem_v_latency.png"]
    assert [p.name for p in plot.iterdir()] == ["throughput_v_latency.png"]
    assert "collect_cpu_metrics" in (tmp_path / "plots" / "README.md").read_text()
    committed = RESULTS / "model-analyzer-dev-2026-12-02" / "plots"
    assert not list(committed.rglob("cpu_mem_v_latency.png")) and (committed / "README.md").is_file()
