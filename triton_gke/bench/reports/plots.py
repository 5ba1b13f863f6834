"""The plots of the bench's tuning commands, and what every bench plot shares: a readable, byte-reproducible PNG.

    plt = pyplot()                                   # None without matplotlib
    tune_plot(json.loads(tune_json), out / "tune.png", plt)
    compare_plot(json.loads(comparison_json), out / "comparison.png", plt)

Every figure uses matplotlib's constrained layout (titles, labels and legends are fitted inside the figure, never cut
off) and is written by save(): a fixed DPI and no "Software" metadata (the only PNG text chunk that names a
version), so the same results render to the same bytes with the same matplotlib and fonts; the drift test of the
images embedded in the docs relies on it (bench/reports/doc_plots.py).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from triton_gke.bench.plans.results import MAX_RESULTS_BYTES
from triton_gke.bounded_files import parse_json, read_text_file

DPI = 90
# PNG metadata: matplotlib writes "Software: matplotlib version X, https://matplotlib.org/" unless told not to.
PNG_METADATA: dict[str, str | None] = {"Software": None}
NONE_NOTE = "x at 0: none (no rate met the SLO)"


def pyplot() -> Any | None:
    """matplotlib.pyplot on the file-only Agg backend, or None where matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display here
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def wrap(text: str, width: int) -> str:
    """A title broken into lines of at most `width` characters (a long one is wrapped, never cut)."""
    return "\n".join(textwrap.wrap(text, width)) or text


def title_width(figure: Any) -> int:
    """How many characters of a 10-11 pt title fit on one line of the figure (about 0.11 inch a character)."""
    return max(30, int(figure.get_figwidth() / 0.11))


def key(label: str, **style: Any) -> Any:
    """A legend entry drawn nowhere else: a marker (no line unless `linestyle` is given) in the style given."""
    from matplotlib.lines import Line2D

    return Line2D([], [], label=label, **{"linestyle": "", **style})


def capacity_label(slo_ms: float, predicted: bool = False) -> str:
    """The axis of every capacity plot: what a search's figure is (or a screen's prediction)."""
    if predicted:
        return f"predicted capacity: requests/s at p95 <= {slo_ms:g} ms (SLO) by M/D/c, from closed loop"
    return f"capacity: achieved requests/s at the highest rate with p95 <= {slo_ms:g} ms (SLO)"


def save(figure: Any, path: Path) -> Path:
    figure.savefig(path, dpi=DPI, metadata=PNG_METADATA)
    return path


def _short(candidate: dict[str, Any]) -> str:
    """A configuration in a few words: delay 5 ms, batch 64/64, 1 instance (2 threads)."""
    delay = candidate["max_queue_delay_us"] / 1000
    label = (
        f"delay {delay:g} ms, batch {candidate['preferred_batch_size']}/{candidate['max_batch_size']}, "
        f"{candidate['instance_count']} inst."
    )
    threads = candidate.get("intra_op_threads")
    client = (", gRPC" if candidate.get("protocol") == "grpc" else "") + (
        ", other payload" if candidate.get("other_payload") else ""
    )
    return label + (f", {threads} thr." if threads else "") + client


def _same(a: dict[str, Any], b: dict[str, Any] | None) -> bool:
    keys = ("max_queue_delay_us", "preferred_batch_size", "max_batch_size", "instance_count", "intra_op_threads")
    client = (("protocol", "http"), ("other_payload", False))
    return (
        b is not None
        and all(a.get(k) == b.get(k) for k in keys)
        and all(a.get(k, none) == b.get(k, none) for k, none in client)
    )


def tune_plot(report: dict[str, Any], path: Path, plt: Any) -> Path:
    """bench tune's search: one row per configuration, one marker per rate search (its capacity at the SLO: the
    achieved rate at the highest rate whose p95 met it), the median as a bar; the default and the recommended or
    best measured configuration marked in the labels and colours."""
    candidates = sorted(report["candidates"], key=lambda c: c.get("median") or 0)
    best, recommended = report.get("best"), report.get("recommended")
    figure, ax = plt.subplots(figsize=(9, 0.55 * len(candidates) + 2.4), layout="constrained")
    for y, candidate in enumerate(candidates):
        is_default, is_best = bool(candidate.get("default")), _same(candidate, best)
        colour = "tab:grey" if is_default else "tab:green" if is_best else "tab:blue"
        median = candidate.get("median")
        if median:
            ax.barh(y, median, color=colour, alpha=0.35, height=0.6)
        for order, value in enumerate(candidate["capacities"]):
            if value:
                ax.plot(value, y, "o", color=colour, markersize=6, markeredgecolor="black", markeredgewidth=0.5)
            else:
                ax.plot(0, y, "x", color="tab:red", markersize=8)
            if order == 0 and value:
                ax.plot(value, y, "o", markersize=12, fillstyle="none", color=colour)
        if median:
            ax.text(median, y + 0.33, f"{median:.1f}", ha="center", fontsize=8)
    labels = []
    for candidate in candidates:
        tags = [t for t, on in (("default", candidate.get("default")), ("pick", _same(candidate, best))) if on]
        labels.append(_short(candidate) + (f"  [{', '.join(tags)}]" if tags else ""))
    ax.set_yticks(range(len(candidates)), labels, fontsize=8)
    ax.set_xlim(left=0)
    predicted = report.get("search") == "screen"
    short, many = ("measurement", "measurements") if predicted else ("search", "searches")
    unit = "one closed-loop measurement's prediction" if predicted else "one rate search"
    ax.set_xlabel(capacity_label(report["slo_ms"], predicted))
    ax.grid(True, axis="x", alpha=0.3)
    pick = "recommended" if _same(best or {}, recommended) else "best measured (not recommended: see README)"
    handles = [
        key(unit, marker="o", color="tab:blue", markeredgecolor="black"),
        key(f"ringed: its first {short} (rung 1)", marker="o", markersize=12, fillstyle="none", color="tab:blue"),
        key(f"bar: median of its {many}", linestyle="-", linewidth=8, color="tab:blue", alpha=0.35),
        key(f"[pick]: the {pick}", marker="o", color="tab:green"),
        key("[default]: the stack's configuration", marker="o", color="tab:grey"),
        key(NONE_NOTE, marker="x", color="tab:red"),
    ]
    figure.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8)
    searches = sum(len(c["capacities"]) for c in report["candidates"])
    kind = "closed-loop measurements (screen)" if predicted else "rate searches"
    ax.set_title(
        wrap(
            f"bench tune: {report['variant']} on {report['stack']} (CPU twin), {len(report['candidates'])} "
            f"configurations, {searches} {kind}, ratio {report['ratio']:.2f}x the default"
            if report.get("ratio")
            else f"bench tune: {report['variant']} on {report['stack']} (CPU twin), {searches} {kind}",
            title_width(figure),
        ),
        fontsize=10,
    )
    return save(figure, path)


def compare_plot(report: dict[str, Any], path: Path, plt: Any) -> Path:
    """bench compare-tuners: per proposed configuration, each round's capacity at the SLO by our open-loop search
    (Locust) and by perf_analyzer's own (--async), the median of each as a bar."""
    from matplotlib.patches import Patch

    rows = report["rows"]
    figure, ax = plt.subplots(figsize=(9, 1.1 * len(rows) + 2.4), layout="constrained")
    tools = (("ours", "tab:blue", "o", "Locust, open loop (ours)"), ("pa", "tab:orange", "s", "perf_analyzer --async"))
    right = max(
        [1.0] + [v or 0 for row in rows for tool, *_ in tools for v in [*row[tool]["values"], row[tool].get("median")]]
    )
    for y, row in enumerate(rows):
        for shift, (tool, colour, marker, _) in zip((-0.18, 0.18), tools, strict=True):
            figures = row[tool]
            median = figures.get("median")
            if median:
                ax.barh(y + shift, median, height=0.32, color=colour, alpha=0.35)
            text = f"median {median:.1f}" if median else "median: none" if median is not None else "no figure"
            _label_beside(ax, figure, [*figures["values"], median], y + shift, text)
            for value in figures["values"]:
                if value:
                    ax.plot(value, y + shift, marker, color=colour, markeredgecolor="black", markeredgewidth=0.5)
                elif value is not None:  # a finished search that met no rate; None is a failed one (a gap)
                    ax.plot(0, y + shift, "x", color="tab:red", markersize=8)
    labels = [f"{_source(row['source'])}\n{_short(row)}" for row in rows]
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, right * 1.22)  # room for the labels right of the rightmost marker
    ax.set_xlabel(capacity_label(report["slo_ms"]))
    ax.grid(True, axis="x", alpha=0.3)
    handles: list[Any] = [
        key(f"{label}: one round", marker=m, color=c, markeredgecolor="black") for _, c, m, label in tools
    ]
    handles += [Patch(color=c, alpha=0.35, label=f"bar: median, {label}") for _, c, _, label in tools]
    handles.append(key(NONE_NOTE + ", counted as 0", marker="x", color="tab:red"))
    handles.append(key("no mark: a round without a figure (left out of the median)"))
    figure.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8)
    ax.set_title(
        wrap(
            f"Tuners compared: {report['variant']} on {report['stack']} (CPU twin), {report['rounds']} rounds, "
            "each configuration measured by two tools",
            title_width(figure),
        ),
        fontsize=10,
    )
    return save(figure, path)


# How far a value's label starts right of the rightmost marker of its row, in points (display units): the markers
# are 6 points across (matplotlib's default markersize, an "x" 8), so 4 points of them and a gap remain clear.
LABEL_GAP_POINTS = 8.0


def _label_beside(ax: Any, figure: Any, values: Sequence[float | None], y: float, text: str) -> None:
    """The label of one row, LABEL_GAP_POINTS right of its rightmost marker or bar end (0 when it has none), so no
    marker covers it: offset_copy shifts the text's data position by a fixed distance on the display."""
    from matplotlib.transforms import offset_copy

    x = max([0.0] + [v for v in values if v])
    shifted = offset_copy(ax.transData, fig=figure, x=LABEL_GAP_POINTS, y=0, units="points")
    ax.text(x, y, text, va="center", ha="left", fontsize=8, transform=shifted)


def _source(source: str) -> str:
    """The proposer, short: "bench tune (recommended) = bench tune (best measured)" -> "bench tune (recommended)"."""
    return source.split(" = ")[0]


class PlotError(ValueError):
    """A tune.json or comparison.json that does not read; one line naming the file."""


def read_report(path: Path) -> Any:
    """A tune.json or comparison.json, through the one bounded reader; PlotError names the file."""
    return parse_json(read_text_file(path, MAX_RESULTS_BYTES, f"a bench {path.name}", PlotError), path, PlotError)


def write_tuning_plots(folder: Path, names: Sequence[str] = ("tune.json", "comparison.json")) -> list[Path]:
    """The plot of a tuning (tune.json -> tune.png) or of a comparison (comparison.json -> comparison.png) in
    `folder`, from the file there; nothing without matplotlib. A file that does not read: PlotError."""
    plt = pyplot()
    if plt is None:
        return []
    written = []
    try:
        for name in names:
            source = folder / name
            if source.is_file():
                report = read_report(source)
                draw = tune_plot if name == "tune.json" else compare_plot
                written.append(draw(report, folder / name.replace(".json", ".png"), plt))
    finally:
        plt.close("all")
    return written
