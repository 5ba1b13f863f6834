"""The plots docs/measure-and-tune.md and docs/tuning.md show, rendered from the committed runs in results/bench/
into docs/results/.

    python -m triton_gke.bench.reports.doc_plots           # (re)writes docs/results/*.png from results/bench/
    python -m triton_gke.bench.reports.doc_plots --check   # exit 1 naming each image unlike a fresh rendering

The images are the bench's own plots (bench/reports/report.py, bench/reports/plots.py) of those runs, drawn by the same
code as a run draws them; save() writes them byte-reproducibly, so tests/live/bench/test_doc_plots.py re-renders them
and compares bytes (a change to a plot's code shows up as a changed image to commit)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from triton_gke.bench.reports import plots, report
from triton_gke.contracts.paths import BENCH_RESULTS, project_dir

# image in docs/results/ -> (the run folder in results/bench/, the plot of it)
IMAGES: dict[str, tuple[str, str]] = {
    "bench-dev-2026-11-30-alone.png": ("dev-2026-11-30-alone", "curves"),
    "bench-dev-2026-11-30.png": ("dev-2026-11-30", "curves"),
    "bench-dev-2026-11-30-ranking.png": ("dev-2026-11-30", "ranking"),
    "tune-dev-2026-12-02c.png": ("tune-dev-2026-12-02c", "tune"),
    "tuners-dev-2026-12-02d.png": ("tuners-dev-2026-12-02d", "comparison"),
    "tune-twin-2026-12-03-screen.png": ("tune-twin-2026-12-03-screen", "tune"),
    "tuners-twin-2026-12-03.png": ("tuners-twin-2026-12-03", "comparison"),
}


def render(results: Path, out: Path) -> list[Path]:
    """Every image of IMAGES from the runs under `results`, into `out`."""
    plt = plots.pyplot()
    if plt is None:
        raise SystemExit("error: matplotlib is not installed (pip install matplotlib==3.11.2)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    try:
        for name, (run, kind) in IMAGES.items():
            folder, path = results / run, out / name
            if kind == "curves":
                written.append(report._curves(report.read_run(folder / "results.json"), path, plt))
            elif kind == "ranking":
                written.append(report._ranking(report.read_run(folder / "results.json"), path, plt))
            elif kind == "tune":
                written.append(plots.tune_plot(plots.read_report(folder / "tune.json"), path, plt))
            else:
                written.append(plots.compare_plot(plots.read_report(folder / "comparison.json"), path, plt))
            plt.close("all")
    finally:
        plt.close("all")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m triton_gke.bench.reports.doc_plots", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--check", action="store_true", help="compare with a fresh rendering; write nothing")
    args = parser.parse_args(argv)
    root = project_dir()
    results, docs = root / BENCH_RESULTS, root / "docs" / "results"
    if not args.check:
        for path in render(results, docs):
            print(path)
        return 0
    with tempfile.TemporaryDirectory() as fresh:
        differ = [
            p.name
            for p in render(results, Path(fresh))
            if not (docs / p.name).is_file() or (docs / p.name).read_bytes() != p.read_bytes()
        ]
    for name in differ:
        print(f"docs/results/{name}: differs from a fresh rendering (run python -m triton_gke.bench.reports.doc_plots)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
