"""No figure without its source (issue 48): every measured quantity in README.md and docs/ is backed in its paragraph.

A measured quantity is a number with a unit of time, rate, share, ratio, size or money (`54 s`, `2.4 min`,
`7.9 requests/s`, `42 %`, `2.12x`, `10 GB`, `$0.42`; `RATE_UNITS`, `TIME_UNITS`, ... below). Its paragraph backs it
with either
- evidence: a Markdown link, or a path in backticks, to a file, or a folder with files of its own, that exists in the
  checkout (CI's clean clone holds only committed files) under one of
  `EVIDENCE_ROOTS` (a committed run or report under results/, a transcript or plot under docs/results/, a capacity
  record, a data file whose header names its sources; a test is not a record of a measurement), or
- a citation: a web address, an arXiv number, or a `project#1234` issue or pull request (`CITATION`).

Not scanned, because they are not claims about a measurement: fenced code blocks (commands, configuration and
transcripts: the prose around a transcript links its committed file), inline code (`--set targetRps=500`,
`-t 12s`), headings, the header and delimiter rows of tables, link targets, HTML comments. A table's body rows are
backed by the row itself or by the paragraph that introduces the table (the one right above it).

Settings are not measurements. One rule, kept narrow: a quantity is a setting when its clause (the text between
`,`, `;`, a sentence's end and a colon, so `(30 ms by default` and `the default is 30 s` but not `the default's first
search took 138 s`) says `default`/`defaults`, or names a setting key in backticks (`sloLatencyMs`, camelCase).
Anything else that is not a measurement (a value this project chose, a worked example of a formula) is a phrase in
`NOT_MEASURED`, keyed by page with its reason: only the quantities inside that exact phrase are skipped, so that a new
one is a deliberate, reviewed entry and the same number elsewhere on the page is still checked.

A paragraph is a block between blank lines, and each list item starts one of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR

DOCS = PROJECT_DIR / "docs"


def documents() -> list[Path]:
    return [PROJECT_DIR / "README.md", *sorted(DOCS.rglob("*.md"))]


EVIDENCE_ROOTS = ("results/", "docs/results/", "triton_gke/capacity/records/", "triton_gke/infra/data/")


TIME_UNITS = r"ms|s|sec|seconds?|min|minutes?|h|hours?"
RATE_UNITS = r"req/s|requests/s|inferences/s|infer/s|img/s|/s|/hour|/h|per GPU-hour|/GiB"
SIZE_UNITS = r"[KMGT]i?B"
NUMBER = r"\d[\d,]*(?:\.\d+)?"
QUANTITY = re.compile(
    rf"(?<![\w.$/-])(?:\$\s?{NUMBER}(?:\s?(?:-|to)\s?\$?{NUMBER})?(?:\s?(?:{RATE_UNITS}))?"
    rf"|{NUMBER}(?:\s?(?:-|to)\s?{NUMBER})?\s?(?:{RATE_UNITS}|{TIME_UNITS}|%|{SIZE_UNITS})(?![\w/])"
    rf"|{NUMBER}(?:-{NUMBER})?x(?!\w))"
)


CITATION = re.compile(r"https?://|\barXiv \d{4}\.\d{4,5}\b|\b[\w.-]+ ?#\d{3,}\b")


SETTING_CONTEXT = re.compile(r"\bdefaults?\b(?!')|`[a-z]+[A-Z]\w*`")


NOT_MEASURED: dict[tuple[str, str], str] = {
    ("docs/capacity.md", "5 nodes x floor(253 / 1.25) = 1010 would turn away 2 of 1012 req/s"): (
        "a worked example of the rate formula above it"
    ),
    ("docs/gpu-twin.md", "95 % Student-t interval"): "the confidence level of the twin's error bound, a choice",
    ("docs/gpu-twin.md", "paired 95 % bound"): "the confidence level of the twin's error bound, a choice",
    ("docs/gpu-twin.md", "(-2 %, +8 ms)"): "the live test's tolerance (LOW, HIGH_MS in the test), a setting",
    ("docs/lifecycle.md", "prod's GPU pools wait 306 minutes"): (
        "the timeout infra/node_recreation.py computes from prod's settings (a plan output, not a measurement)"
    ),
    ("docs/measure-and-tune.md", "beyond 30 %"): "a noisy-run threshold (bench/metrics/conditions.py)",
    ("docs/measure-and-tune.md", "above 25 % of the CPU"): "a noisy-run threshold (bench/metrics/conditions.py)",
    ("docs/measure-and-tune.md", "steal above 5 %"): "a noisy-run threshold (bench/metrics/conditions.py)",
    ("docs/model-repository.md", "in 8 MiB resumable chunks"): "the sync's chunk size, a setting (model_repo/sync.py)",
    ("docs/serving.md", "up to 25 minutes"): "the node start-up budget infra/negs.py sets",
    ("docs/serving.md", "i.e. 50/s"): "lbRateLimitPerMinute's default, per second",
    ("docs/tuning.md", "e.g. at 2.5 minutes a search, 20 minutes pay for 8"): "a worked example of the budget rule",
    ("docs/tuning.md", "by chance at most 5 %"): ("the recommendation rule's threshold, a setting"),
    ("docs/tuning.md", "not as a 5 % test"): "the recommendation rule's threshold, a setting",
}


@dataclass(frozen=True)
class Paragraph:
    page: str
    line: int
    text: str
    backing: str  # the text whose links and citations count for it: itself, or a table row and its introduction


def _strip_fences(text: str) -> str:
    """Fenced blocks and HTML comments blanked line for line, so line numbers stay."""

    def blank(match: re.Match[str]) -> str:
        return "\n" * match.group(0).count("\n")

    text = re.sub(r"<!--.*?-->", blank, text, flags=re.S)
    return re.sub(r"^(```|~~~).*?^\1[^\n]*$", blank, text, flags=re.M | re.S)


_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s")


def paragraphs(text: str, page: str) -> list[Paragraph]:
    found: list[Paragraph] = []
    block: list[tuple[int, str]] = []
    previous = ""
    for number, line in enumerate([*_strip_fences(text).splitlines(), ""], start=1):
        starts_item = bool(_ITEM.match(line)) and bool(block) and not block[0][1].startswith("|")
        if line.strip() and not starts_item:
            block.append((number, line))
            continue
        if block:
            found += _units(block, page, previous)
            previous = " ".join(text for _, text in block)
        block = [(number, line)] if starts_item else []
    return found


def _units(block: list[tuple[int, str]], page: str, introduction: str) -> list[Paragraph]:
    first, head = block[0]
    if head.lstrip().startswith("#"):
        return []
    if not head.startswith("|"):
        joined = " ".join(line.strip() for _, line in block)
        return [Paragraph(page, first, joined, joined)]
    return [Paragraph(page, number, row.strip(), f"{introduction} {row}") for number, row in block[2:]]


_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE = re.compile(r"`([^`]+)`")


def _evidence(target: str, page: str) -> bool:
    target = target.split("#")[0]
    if not target:
        return False
    for base in ((PROJECT_DIR / page).parent, PROJECT_DIR):
        path = (base / target).resolve()
        if path.exists() and path.is_relative_to(PROJECT_DIR):
            relative = path.relative_to(PROJECT_DIR).as_posix() + ("/" if path.is_dir() else "")
            return relative.startswith(EVIDENCE_ROOTS) and relative not in EVIDENCE_ROOTS and _holds_a_file(path)
    return False


def _holds_a_file(path: Path) -> bool:
    """A file, or a folder with a file of its own: `results/bench/`, which only holds runs, names none of them."""
    return path.is_file() or any(child.is_file() for child in path.iterdir())


def backed(paragraph: Paragraph) -> bool:
    text = paragraph.backing
    if CITATION.search(_CODE.sub("", text)) or any(t.startswith("http") for t in _LINK.findall(text)):
        return True
    targets = _LINK.findall(text) + [code.strip() for code in _CODE.findall(text)]
    return any(_evidence(target, paragraph.page) for target in targets)


def _prose(text: str) -> str:
    """What a reader reads as claims: no inline code, no link targets."""
    return _LINK.sub("]", _CODE.sub(" ", text))


_CLAUSE_END = re.compile(r"[,;]\s|\.\s|:\s|[.,;:]$")


def measured_quantities(paragraph: Paragraph) -> list[str]:
    text = _LINK.sub("]", paragraph.text)
    for page, phrase in NOT_MEASURED:
        if page == paragraph.page:
            text = text.replace(phrase, " ")
    quantities = []
    for clause in _CLAUSE_END.split(text):
        if not SETTING_CONTEXT.search(clause):
            quantities += [match.group(0).strip() for match in QUANTITY.finditer(_prose(clause))]
    return quantities


def unbacked(text: str, name: str) -> list[str]:
    """`page:line: quantities` for each paragraph of `text` (the page `name`, for its links) with nothing behind it."""
    return [
        f"{name}:{p.line}: {', '.join(found)}"
        for p in paragraphs(text, name)
        if (found := measured_quantities(p)) and not backed(p)
    ]


@pytest.mark.parametrize("page", documents(), ids=lambda path: path.relative_to(PROJECT_DIR).as_posix())
def test_every_measured_quantity_is_backed_in_its_paragraph(page: Path) -> None:
    name = page.relative_to(PROJECT_DIR).as_posix()
    assert unbacked(page.read_text(encoding="utf-8"), name) == []


UNBACKED = "On a quiet machine the whole suite took 14 min 5 s, and the sandbox served 31.2 requests/s."


@pytest.mark.parametrize("page", ["README.md", "docs/testing.md", "docs/tuning.md"])
def test_an_added_unbacked_figure_fails_its_page(page: str) -> None:
    text = page_text(page)
    assert unbacked(text, page) == []
    found = unbacked(f"{text}\n{UNBACKED}\n", page)
    assert len(found) == 1
    assert found[0].endswith(": 14 min, 5 s, 31.2 requests/s")


@pytest.mark.parametrize(
    ("backing", "is_backed"),
    [
        ("(`results/bench/dev-2026-11-30/`)", True),
        ("([its run](results/sandbox-dev-2026-12-01.txt))", True),
        ("([its run](../results/bench/dev-2026-11-30/README.md))", True),
        ("([pricing](https://cloud.google.com/vpc/network-pricing))", True),
        ("(pulumi-kubernetes#2926)", True),
        ("(arXiv 2604.14552)", True),
        ("(`results/bench/dev-2099-01-01/`)", False),  # a run that was never committed
        ("(`results/bench/`)", False),  # the folder of all runs names none
        ("(`tests/unit/docs/test_figures.py`)", False),  # a test is not a record of a measurement
        ("([the sandbox](sandbox.md))", False),  # another page is not a source
        ("(`https://example.com`)", False),  # an address in code is not a citation
    ],
)
def test_a_figure_is_backed_by_a_committed_run_or_a_citation_only(backing: str, is_backed: bool) -> None:
    assert (unbacked(f"{UNBACKED} {backing}\n", "docs/testing.md") == []) is is_backed


@pytest.mark.parametrize(
    ("sentence", "quantities"),
    [
        ("Above `autoscaleQueueTimeMs` (30 ms by default, just above it) a pod is added.", []),
        ("The default is 30 s, after which the balancer answers.", []),
        ("The default's first search took 138 s.", ["138 s"]),
        ("Run `--set sloLatencyMs=100` or `-t 12s`; it stopped after 9.4 s.", ["9.4 s"]),
        (
            "It served 2.12x the default's rate, 7.9 req/s, on k8s 1.30 (2026-12-03, v0.3.0) in 1,747 s.",
            [
                "2.12x",
                "7.9 req/s",
                "1,747 s",
            ],
        ),
        (
            "It costs $0.42/hour and 42 % of 10 GB; 79 requests.",
            [
                "$0.42/hour",
                "42 %",
                "10 GB",
            ],
        ),
    ],
)
def test_which_quantities_count_as_measured(sentence: str, quantities: list[str]) -> None:
    assert measured_quantities(Paragraph("docs/x.md", 1, sentence, sentence)) == quantities


def test_code_blocks_headings_and_table_headers_are_not_scanned() -> None:
    text = "# Done in 5 min\n\n```text\nLocust 4.0 req/s\n```\n\n| p95 100 ms | rate |\n|---|---|\n| a | b |\n"
    assert unbacked(text, "docs/x.md") == []
    assert unbacked(text.replace("| a | b |", "| a | 7 s |"), "docs/x.md") == ["docs/x.md:9: 7 s"]


def test_every_not_measured_phrase_is_on_its_page() -> None:
    """A phrase whose text changed would skip nothing and hide nothing: it must go, or follow the page."""
    texts = {page: " ".join(p.text for p in paragraphs(page_text(page), page)) for page, _ in NOT_MEASURED}
    assert [key for key in NOT_MEASURED if key[1] not in texts[key[0]]] == []


def page_text(page: str) -> str:
    return (PROJECT_DIR / page).read_text(encoding="utf-8")
