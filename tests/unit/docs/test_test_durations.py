"""The README's and docs/testing.md's `make test` figures are the committed durations report's (issue 47, 48): the
report (results/test-durations/README.md, written by `make test-durations` on a fresh clone) says how long the test
phases took, on which commit, machine and load; the README repeats its total and links it, and a figure typed by hand
that no longer matches the report fails here."""

from __future__ import annotations

import re

from tests.support.checkout import PROJECT_DIR

REPORT = PROJECT_DIR / "results" / "test-durations" / "README.md"
TOTAL = re.compile(r"\*\*Test phases together: ([0-9.]+) min")
README_FIGURE = re.compile(
    r"`make test`.s test phases took ([0-9.]+) min \(\[report\]\(results/test-durations/README\.md\)"
)


def test_the_readme_gives_the_reports_total_and_links_it() -> None:
    (total,) = TOTAL.findall(REPORT.read_text(encoding="utf-8"))
    readme = " ".join((PROJECT_DIR / "README.md").read_text(encoding="utf-8").split())
    assert README_FIGURE.findall(readme) == [total], "README.md: state the report's total, linking the report"


def test_docs_testing_points_at_the_report() -> None:
    assert "results/test-durations/README.md" in (PROJECT_DIR / "docs" / "testing.md").read_text(encoding="utf-8")
