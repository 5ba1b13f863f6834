"""No document, example requirements file or message recommends installing triton-gke by a package-index name.

triton-gke is published on no package index, so `pip install triton-gke` (or `triton-gke[local]`, or a bare
`triton-gke` line in a requirements file) would install whatever someone else registered under that name (issue
33). Installs name a wheel, a checkout (`.`) or a direct reference (`triton-gke @ git+...@vX.Y.Z`, `... @ file:...`).
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from tests.support.checkout import PROJECT_DIR

BARE = re.compile(r"triton[-_.]gke(\[[^\]]*\])?", re.I)


def bare_installs(text: str) -> list[str]:
    """Every `pip install` (or `uv pip install`, `pip3 install`) in the text whose arguments name triton-gke bare."""
    found = []
    for match in re.finditer(r"(?=(pip3? install\b([^\n`]*)))", text):  # a lookahead: each install of a line
        arguments = re.split(r"&&|\|\||;|\|", match[2], maxsplit=1)[0]  # its own words only
        try:
            words = shlex.split(arguments, comments=True)
        except ValueError:
            words = arguments.split()
        for i, word in enumerate(words):
            if BARE.fullmatch(word) and (i + 1 == len(words) or words[i + 1] != "@"):
                found.append(match[1].strip())
    return found


def bare_requirements(text: str) -> list[str]:
    """Requirement lines naming triton-gke without a direct reference (`NAME @ URL`)."""
    found = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")) and BARE.match(line) and "@" not in line:
            found.append(line)
    return found


def python_strings(path: Path) -> list[str]:
    """Every string literal of a module; an f-string's replacement fields read as `x`."""
    texts = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            texts.append("".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values))
    return texts


def documents() -> list[Path]:
    return [
        PROJECT_DIR / "README.md",
        PROJECT_DIR / "CHANGELOG.md",
        *sorted((PROJECT_DIR / "docs").rglob("*.md")),
        *sorted((PROJECT_DIR / "examples").rglob("*.md")),
        *sorted((PROJECT_DIR / "examples").rglob("Pulumi.yaml")),
    ]


def requirement_files() -> list[Path]:
    return sorted(
        {*PROJECT_DIR.glob("examples/*/requirements.txt"), *PROJECT_DIR.glob("triton_gke/**/requirements.txt")}
    )


def package_modules() -> list[Path]:
    return sorted((PROJECT_DIR / "triton_gke").rglob("*.py"))


def unwrapped(text: str) -> str:
    """Markdown with each paragraph's wrapped lines joined: an inline command may break across two lines."""
    return re.sub(r"(?<!\n)\n(?!\n)", " ", text)


def test_no_document_recommends_an_index_name() -> None:
    found = [
        f"{path.relative_to(PROJECT_DIR)}: {command}"
        for path in documents()
        for command in bare_installs(unwrapped(path.read_text(encoding="utf-8")))
    ]
    assert found == []


def test_a_command_wrapped_across_lines_is_found() -> None:
    assert bare_installs(unwrapped("says so (`error: needs the extra: pip install\n'triton-gke[local]'`), exit 2"))


def test_no_requirements_file_names_the_package_bare() -> None:
    files = requirement_files()
    assert PROJECT_DIR / "examples" / "on-cluster-python" / "requirements.txt" in files
    found = [f"{p.relative_to(PROJECT_DIR)}: {line}" for p in files for line in bare_requirements(p.read_text("utf-8"))]
    assert found == []


def test_no_message_of_the_package_recommends_an_index_name() -> None:
    found = [
        f"{module.relative_to(PROJECT_DIR)}: {command}"
        for module in package_modules()
        for text in python_strings(module)
        for command in bare_installs(text)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("text", "bare"),
    [
        ("pip install triton-gke", True),
        ("run `pip install 'triton-gke[local]'` first", True),
        ("uv pip install --upgrade triton_gke", True),
        ('pip install "triton-gke[models] @ git+https://example.org/o/r@v0.2.0"', False),
        ("pip install triton-gke @ file:///tmp/triton_gke-0.2.0-py3-none-any.whl", False),
        ("pip install dist/triton_gke-0.2.0-py3-none-any.whl", False),
        ("pip install '.[local]'", False),
        ("pip install . # not triton-gke", False),
        ("bash -c 'pip install -q . && triton-gke gpu-check'", False),  # the next command names the console script
        ("pip install -q numpy && pip install triton-gke", True),
    ],
)
def test_the_check_tells_bare_names_from_direct_references(text: str, bare: bool) -> None:
    assert bool(bare_installs(text)) is bare


def test_a_bare_requirement_line_is_found() -> None:
    assert bare_requirements("# a comment naming triton-gke\n../..\ntriton-gke[local]\n") == ["triton-gke[local]"]
    assert bare_requirements("triton-gke @ git+https://example.org/o/r@v0.2.0\n-e ../..\n") == []


def test_the_f_string_hint_is_read_with_its_fields() -> None:
    source = "def f(extra):\n    return f\"pip install 'triton-gke[{extra}]'\"\n"
    tree = ast.parse(source)
    (joined,) = [n for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)]
    text = "".join(v.value if isinstance(v, ast.Constant) else "x" for v in joined.values)
    assert bare_installs(text) == ["pip install 'triton-gke[x]'"]
