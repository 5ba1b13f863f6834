"""Each image the docs embed exists, is one doc_plots renders, and is embedded; every image link in the README and
the docs pages names a file that exists (the drift test that re-renders them: tests/live/bench/test_doc_plots.py)."""

from __future__ import annotations

import re

from tests.support.checkout import PROJECT_DIR
from triton_gke.bench.reports import doc_plots
from triton_gke.contracts.paths import BENCH_RESULTS

DOCS = PROJECT_DIR / "docs"
IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def _links(page: str) -> list[str]:
    return IMAGE_LINK.findall((PROJECT_DIR / page).read_text(encoding="utf-8"))


def test_every_rendered_image_is_committed_and_embedded_in_measure_and_tune_or_tuning() -> None:
    embedded = _links("docs/measure-and-tune.md") + _links("docs/tuning.md")
    for name, (run, _) in doc_plots.IMAGES.items():
        assert (DOCS / "results" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"results/{name}" in embedded, f"neither docs/measure-and-tune.md nor docs/tuning.md embeds {name}"
        assert (PROJECT_DIR / BENCH_RESULTS / run).is_dir(), run
    assert sorted(p.name for p in (DOCS / "results").glob("*.png")) == sorted(doc_plots.IMAGES)


def test_every_image_link_names_a_file_that_exists() -> None:
    pages = ["README.md", *(f"docs/{p.name}" for p in sorted(DOCS.glob("*.md")))]
    for page in pages:
        for link in _links(page):
            if link.startswith(("http://", "https://")):
                continue
            assert ((PROJECT_DIR / page).parent / link).is_file(), f"{page}: {link} does not exist"
