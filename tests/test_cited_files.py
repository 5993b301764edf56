"""Every document the repository cites is in the repository.

A citation is a `*.md`, `*.txt` or `*.ipynb` file name in prose: the Markdown files of `docs/`
and `README.md`, the Markdown cells of `notebooks/` and `solutions/`, and the comments and
docstrings of the Python sources under `labkit/` and `tests/` (code strings are data, not
citations). A name resolves relative to the citing file's folder or to the repository root.
The names that are not repository documents on purpose are listed below, each with its reason.
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CITING = ("docs", "notebooks", "solutions", "README.md", "labkit", "tests")
NAME = re.compile(r"(?<![\w.%/-])((?:[\w.-]+/)*[\w.-]+\.(?:md|txt|ipynb))(?![\w/])")

# Files the lesson's examples create in scratch workspaces (notes, symlinks, their targets):
# they exist only while an example or a check runs, never in the repository.
EXAMPLE_FILES = {
    name: "a note or link in a scratch workspace made by an example"
    for name in (
        "2024/tps.md",
        "../secret.md",
        "secret.md",
        "salary.md",
        "shared/salary.md",
        "escape.md",
        "latest.md",
        "keep.md",
        "notes/2024/tps.md",
        "notes/escape.md",
        "notes/shared/salary.md",
        "notes/tps-2025.md",
        "base/secret.md",
        "base/notes/latest.md",
        "base/notes/escape.md",
        "base/notes/2024/tps.md",
        "base/notes-private/salary.md",
        "real.md",
        "alias.md",
        "n.md",
        ".draft.md",
        "a.md",
        "file.md",
        "deep/../s.md",
    )
}
# Files a command writes or reads at run time, outside the repository.
RUNTIME_FILES = {
    "submissions/NAME.feedback.txt": "written by `labkit grade` beside each submission",
    "batch.ipynb": "a learner's submission name in the grading folder",
    "class.ipynb": "a learner's submission name in the grading folder",
}
ALLOWED = {**EXAMPLE_FILES, **RUNTIME_FILES}


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each piece of prose in `path` that may cite a file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".md", ".txt"):
        yield 1, text
    elif path.suffix == ".ipynb":
        for number, cell in enumerate(json.loads(text)["cells"], start=1):
            if cell["cell_type"] == "markdown":
                yield number, "".join(cell["source"])
    elif path.suffix == ".py":
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                yield token.start[0], token.string
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                doc = ast.get_docstring(node, clean=False)
                if doc is not None:
                    yield node.body[0].lineno, doc


def missing_citations(root: Path, files: list[Path]) -> list[str]:
    """`file:line: name` for each cited name that resolves to no file and is not allowed."""
    problems: list[str] = []
    for path in files:
        for line, text in prose(path):
            for match in NAME.finditer(text):
                name = match.group(1)
                if name in ALLOWED:
                    continue
                if (path.parent / name).exists() or (root / name).exists():
                    continue
                problems.append(f"{path.relative_to(root)}:{line}: {name}")
    return problems


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--", *CITING], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO / name for name in listed if (REPO / name).is_file()]


def test_every_cited_document_exists() -> None:
    files = tracked_files()
    assert any(f.suffix == ".ipynb" for f in files) and any(f.suffix == ".py" for f in files)
    problems = missing_citations(REPO, files)
    assert not problems, "cited files that are not in the repository:\n" + "\n".join(problems)


def test_the_allowed_names_are_still_cited() -> None:
    """An allowance nothing needs any more is removed, so the list cannot hide a new mistake."""
    cited = {
        match.group(1)
        for path in tracked_files()
        for _line, text in prose(path)
        for match in NAME.finditer(text)
    }
    unused = sorted(set(ALLOWED) - cited)
    assert not unused, f"allowed but never cited (remove them): {unused}"


def test_the_documents_the_course_points_to_exist() -> None:
    for name in ("docs/LESSON.md", "docs/protocol.md", "docs/security.md"):
        assert (REPO / name).is_file(), name


@pytest.mark.parametrize(
    ("where", "text", "missing"),
    [
        # A docs/ path resolves from the repository root, a bare name beside the citing file.
        ("docs/page.md", "See SECURITY.md, docs/other.md, other.md, README.md.", ["SECURITY.md"]),
        (
            "docs/page.md",
            "See docs/gone.md and seed-lesson-fr.txt.",
            ["docs/gone.md", "seed-lesson-fr.txt"],
        ),
        # In Python, comments and docstrings are prose; a string in the code is data.
        (
            "pkg/mod.py",
            '"""Read PROTOCOL.md."""\n# and STYLE.md\nx = "data.md"\n',
            ["STYLE.md", "PROTOCOL.md"],
        ),
        ("pkg/mod.py", '"""Read docs/other.md."""\n', []),
        # In a notebook, Markdown cells are prose; code cells are not.
        ("book.ipynb", None, ["COURSE.md"]),
    ],
)
def test_a_missing_citation_is_found_and_a_present_one_is_not(
    tmp_path: Path, where: str, text: str | None, missing: list[str]
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "docs" / "other.md").write_text("x")
    (tmp_path / "README.md").write_text("x")
    path = tmp_path / where
    if text is None:
        cells = [
            {"cell_type": "markdown", "source": ["Rules: COURSE.md, docs/other.md"]},
            {"cell_type": "code", "source": ["open('cells.md')"]},
        ]
        text = json.dumps({"cells": cells})
    path.write_text(text)
    found = [problem.rsplit(": ", 1)[1] for problem in missing_citations(tmp_path, [path])]
    assert found == missing
