"""The plots the docs embed are what the bench's plotting code draws from the committed runs, byte for byte
(issue 33 part 4): re-rendered here from results/bench/, twice, against docs/results/. A change to a plot's code
fails this until the images are rendered again (`python -m triton_gke.bench.reports.doc_plots`) and committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR
from triton_gke.bench.reports import doc_plots
from triton_gke.contracts.paths import BENCH_RESULTS

DOCS_RESULTS = PROJECT_DIR / "docs" / "results"
RESULTS = PROJECT_DIR / BENCH_RESULTS


def test_the_embedded_images_are_the_committed_runs_rendered_again(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    first = doc_plots.render(RESULTS, tmp_path / "first")
    second = doc_plots.render(RESULTS, tmp_path / "second")
    assert [p.name for p in first] == list(doc_plots.IMAGES)
    for fresh, again in zip(first, second, strict=True):
        assert fresh.read_bytes() == again.read_bytes(), f"{fresh.name}: two renderings differ"
        assert (DOCS_RESULTS / fresh.name).read_bytes() == fresh.read_bytes(), (
            f"docs/results/{fresh.name} differs from the committed run rendered again: "
            "run python -m triton_gke.bench.reports.doc_plots and commit the images"
        )


def test_the_committed_bench_runs_carry_the_same_plots_as_the_docs() -> None:
    """bench report's own files in the run folders (rps_vs_p95.png, ranking.png) are the docs' images."""
    pairs = {
        "dev-2026-11-30-alone/rps_vs_p95.png": "bench-dev-2026-11-30-alone.png",
        "dev-2026-11-30/rps_vs_p95.png": "bench-dev-2026-11-30.png",
        "dev-2026-11-30/ranking.png": "bench-dev-2026-11-30-ranking.png",
    }
    for run_file, image in pairs.items():
        assert (RESULTS / run_file).read_bytes() == (DOCS_RESULTS / image).read_bytes(), run_file
