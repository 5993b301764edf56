"""Learner copies from the authored solution notebooks: `labkit course build`.

Owns: finding the marked solution regions in `solutions/*.ipynb`, replacing each with the
learner's stub line, stripping outputs, stamping the metadata the grader matches a renamed
notebook by, and the authoring rules a region must keep (balanced markers, at most
`MAX_REGION_LINES` lines each, at most `MAX_REGIONS` per notebook, the stub inside a function
so a fresh learner copy runs top to bottom without an error).

A region is marked inside a code cell:

    def claim_and_delete(...) -> bool:
        \"\"\"The contract and one example stay in the learner's copy.\"\"\"
        # BEGIN SOLUTION: claim the nonce, then delete the note
        ...the solution lines...
        # END SOLUTION

and becomes, in the learner's copy, one line at the marker's indentation:

        raise NotImplementedError()  # learner: claim the nonce, then delete the note

The documents a solution links to in its Markdown (a link to `docs/LESSON.md` written from
`solutions/`, so starting with `../`) are copied beside the learner copies, into
`notebooks/docs/`, with the documents they name beside themselves, and the links are
rewritten to match: JupyterLab is rooted at `notebooks/`, so every document a notebook cites
opens from the notebook with one click.

nbval markers travel as cell tags, never as a comment in the learner's code: a solution cell
whose first lines are `# NBVAL_CHECK_OUTPUT` (or another nbval comment marker) loses those lines
in the learner's copy and gains the tag nbval reads instead (`nbval-check-output`, ...).
Solutions should carry the tag themselves; the conversion keeps an old marker from reaching a
learner.

Must not run a kernel (the grader owns kernels) nor import ipywidgets: this is file work only.
Imports nothing from labkit.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import nbformat
from nbformat import NotebookNode

MAX_REGION_LINES: Final = 25
MAX_REGIONS: Final = 3
ANSWER_TAG: Final = "answer"
METADATA_KEY: Final = "labkit"
FORMAT_VERSION: Final = 1
DEFAULT_PROMPT: Final = "write this part, then run the public checks"

_BEGIN: Final = re.compile(r"^(?P<indent>[ \t]*)# BEGIN SOLUTION\b:?[ \t]*(?P<prompt>.*?)[ \t]*$")
_END: Final = re.compile(r"^[ \t]*# END SOLUTION[ \t]*$")
# nbval's comment markers and the cell tags that say the same (nbval reads both).
NBVAL_MARKERS: Final = {
    "NBVAL_CHECK_OUTPUT": "nbval-check-output",
    "NBVAL_IGNORE_OUTPUT": "nbval-ignore-output",
    "NBVAL_SKIP": "nbval-skip",
    "NBVAL_RAISES_EXCEPTION": "nbval-raises-exception",
}
_MARKER: Final = re.compile(r"^[ \t]*#[ \t]*(?P<name>NBVAL_[A-Z_]+)[ \t]*$")
# The kernelspec as JupyterLab records it for ipykernel's `python3`: a notebook saved with any
# other display name opens already marked modified.
KERNELSPEC: Final = {
    "display_name": "Python 3 (ipykernel)",
    "language": "python",
    "name": "python3",
}
# A Markdown link to a repository document, as written in a solution (relative to solutions/).
DOC_LINK: Final = re.compile(r"\]\(\.\./(docs/[\w.-]+\.md)\)")
DOCS: Final = "docs"
# A document another document names as its neighbour in docs/ (the lesson names one).
SIBLING: Final = re.compile(r"(?<![\w./-])([\w.-]+\.md)(?![\w/])")
# Per-cell metadata that records a run, never authored content.
_RUN_METADATA: Final = ("execution", "collapsed", "scrolled")


class BuildError(ValueError):
    """An authoring mistake in a solution notebook; the message names the file and cell."""


@dataclass(frozen=True)
class Built:
    """One learner notebook (or copied page) as it should be on disk."""

    name: str
    text: str


def stub_line(indent: str, prompt: str) -> str:
    return f"{indent}raise NotImplementedError()  # learner: {prompt or DEFAULT_PROMPT}"


def strip_regions(source: str, where: str) -> tuple[str, int]:
    """The learner's version of one cell's source, and how many regions it held."""
    out: list[str] = []
    regions = 0
    lines = source.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        begin = _BEGIN.match(line)
        if begin is None:
            if _END.match(line):
                raise BuildError(f"{where}: '# END SOLUTION' without a matching BEGIN")
            out.append(line)
            index += 1
            continue
        end = _find_end(lines, index + 1, where)
        body = end - index - 1
        if body == 0:
            raise BuildError(f"{where}: an empty solution region")
        if body > MAX_REGION_LINES:
            raise BuildError(
                f"{where}: a solution region of {body} lines (at most {MAX_REGION_LINES}): "
                "split the idea or give more of it as scaffolding"
            )
        out.append(stub_line(begin.group("indent"), begin.group("prompt")))
        regions += 1
        index = end + 1
    return "\n".join(out), regions


def markers_to_tags(source: str, tags: Sequence[str], where: str) -> tuple[str, list[str]]:
    """The cell's source without its leading nbval comment lines, and its tags with the
    matching nbval tags added (each once)."""
    lines = source.split("\n")
    out_tags = list(tags)
    index = 0
    while index < len(lines):
        marker = _MARKER.match(lines[index])
        if marker is None:
            break
        tag = NBVAL_MARKERS.get(marker.group("name"))
        if tag is None:
            raise BuildError(f"{where}: unknown nbval marker {marker.group('name')}")
        if tag not in out_tags:
            out_tags.append(tag)
        index += 1
    return "\n".join(lines[index:]), out_tags


def _find_end(lines: Sequence[str], start: int, where: str) -> int:
    for index in range(start, len(lines)):
        if _BEGIN.match(lines[index]):
            raise BuildError(f"{where}: solution regions cannot nest")
        if _END.match(lines[index]):
            return index
    raise BuildError(f"{where}: '# BEGIN SOLUTION' is never closed by '# END SOLUTION'")


def _check_stub_placement(source: str, where: str) -> None:
    """A stub at module level would raise as soon as the learner runs the cell: every region
    must sit inside a function (or method) body, where it raises only when called."""
    try:
        tree = ast.parse(_without_magics(source))
    except SyntaxError as error:
        raise BuildError(f"{where}: the learner's cell does not parse: {error.msg}") from None
    for node in _outside_functions(tree):
        if isinstance(node, ast.Raise) and _is_stub(node):
            raise BuildError(
                f"{where}: a solution region at line {node.lineno} is not inside a function; "
                "a fresh learner copy must run without an error"
            )


def _outside_functions(node: ast.AST) -> Iterator[ast.AST]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        yield child
        yield from _outside_functions(child)


def _is_stub(node: ast.Raise) -> bool:
    exc = node.exc
    target = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(target, ast.Name) and target.id == "NotImplementedError"


def _without_magics(source: str) -> str:
    """IPython lines (`%time`, `!ls`, `%%capture`) are not Python; blank them for parsing."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )


def digest(nb: NotebookNode) -> str:
    """A digest of the authored content (sources and cell ids, not outputs), so the grader can
    tell which version of a solution a learner copy was made from."""
    h = hashlib.sha256()
    for cell in nb.cells:
        h.update(cell.get("id", "").encode())
        h.update(b"\0")
        h.update(cell.source.encode())
        h.update(b"\0")
    return h.hexdigest()


def learner_copy(solution: NotebookNode, name: str) -> NotebookNode:
    """The learner's notebook: regions stubbed, outputs stripped, metadata stamped."""
    nb = copy.deepcopy(solution)
    total = 0
    answer_cells: list[str] = []
    for number, cell in enumerate(nb.cells, start=1):
        cell_id = cell.get("id")
        where = f"{name}, cell {number}" + (f" (id {cell_id})" if cell_id else "")
        if cell.cell_type == "code":
            source, tags = markers_to_tags(cell.source, cell.metadata.get("tags", []), where)
            if tags:
                cell.metadata["tags"] = tags
            source, regions = strip_regions(source, where)
            if regions:
                if not cell_id:
                    raise BuildError(f"{where}: a cell with a solution region needs a cell id")
                _check_stub_placement(source, where)
                tags = list(cell.metadata.get("tags", []))
                if ANSWER_TAG not in tags:
                    tags.append(ANSWER_TAG)
                cell.metadata["tags"] = tags
                answer_cells.append(cell_id)
                total += regions
            cell.source = source
            cell.outputs = []
            cell.execution_count = None
        elif "# BEGIN SOLUTION" in cell.source:
            raise BuildError(f"{where}: solution markers belong in code cells only")
        elif cell.cell_type == "markdown":
            cell.source = DOC_LINK.sub(r"](\1)", cell.source)
        for key in _RUN_METADATA:
            cell.metadata.pop(key, None)
    if total > MAX_REGIONS:
        raise BuildError(f"{name}: {total} solution regions (at most {MAX_REGIONS} per notebook)")
    nb.metadata.pop("widgets", None)  # saved widget state belongs to the executed solution
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata[METADATA_KEY] = {
        "format": FORMAT_VERSION,
        "notebook": name,
        "role": "learner",
        "solution_digest": digest(solution),
        "answer_cells": answer_cells,
    }
    return nb


def read_notebook(path: Path) -> NotebookNode:
    try:
        # nbformat ships no annotations for its readers and writers.
        nb: NotebookNode = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
        nbformat.validate(nb)
    except Exception as error:  # JSON, schema and version errors are all distinct types
        raise BuildError(f"{path.name}: not a readable notebook ({error})") from None
    return nb


def dumps(nb: NotebookNode) -> str:
    text: str = nbformat.writes(nb, version=4)  # type: ignore[no-untyped-call]
    return text if text.endswith("\n") else text + "\n"


def linked_documents(nb: NotebookNode) -> list[str]:
    """The repository documents a notebook's Markdown links to (`docs/LESSON.md`, ...)."""
    return [
        found.group(1)
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for found in DOC_LINK.finditer(cell.source)
    ]


def build(solutions: Path) -> list[Built]:
    """Every learner file made from `solutions`: notebooks converted, Markdown pages copied,
    and the documents the notebooks link to copied into `docs/` beside them."""
    if not solutions.is_dir():
        raise BuildError(f"{solutions}: no such directory of solution notebooks")
    built: list[Built] = []
    documents: dict[str, str] = {}  # document -> the first notebook that links to it
    for path in sorted(solutions.iterdir()):
        if path.suffix == ".ipynb":
            solution = read_notebook(path)
            learner = learner_copy(solution, path.stem)
            built.append(Built(path.name, dumps(learner)))
            for name in linked_documents(solution):
                documents.setdefault(name, path.name)
        elif path.suffix == ".md":
            built.append(Built(path.name, path.read_text(encoding="utf-8")))
    if not any(b.name.endswith(".ipynb") for b in built):
        raise BuildError(f"{solutions}: holds no .ipynb notebooks")
    for name, linker in documents.items():
        if not (solutions.parent / name).is_file():
            raise BuildError(f"{linker}: links to ../{name}, which does not exist")
    todo = sorted(documents)
    while todo:
        name = todo.pop()
        text = (solutions.parent / name).read_text(encoding="utf-8")
        built.append(Built(name, text))
        for sibling in SIBLING.findall(text):
            beside = f"{DOCS}/{sibling}"
            if beside not in documents and (solutions.parent / beside).is_file():
                documents[beside] = name
                todo.append(beside)
    return built


def _learner_files(out: Path) -> list[Path]:
    """The files in `out` a build owns: notebooks and pages, and the copied documents."""
    found = [*out.glob("*.ipynb"), *out.glob("*.md"), *out.glob(f"{DOCS}/*.md")]
    return sorted(path for path in found if path.is_file())


def stale(built: Sequence[Built], out: Path) -> list[str]:
    """What differs between `out` and the built copies: changed, missing and extra files."""
    problems: list[str] = []
    wanted = {b.name for b in built}
    for b in built:
        target = out / b.name
        if not target.exists():
            problems.append(f"{b.name}: missing")
        elif target.read_text(encoding="utf-8") != b.text:
            problems.append(f"{b.name}: out of date")
    if out.is_dir():
        for path in _learner_files(out):
            name = path.relative_to(out).as_posix()
            if name not in wanted:
                problems.append(f"{name}: not made from any solution (remove it)")
    return problems


def write(built: Sequence[Built], out: Path) -> list[str]:
    """Write what changed; remove learner files no solution makes any more. Returns the names
    written or removed."""
    out.mkdir(parents=True, exist_ok=True)
    changed: list[str] = []
    wanted = {b.name for b in built}
    for b in built:
        target = out / b.name
        if not target.exists() or target.read_text(encoding="utf-8") != b.text:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_text(b.text, encoding="utf-8")
            tmp.replace(target)  # never a half-written notebook
            changed.append(b.name)
    for path in _learner_files(out):
        name = path.relative_to(out).as_posix()
        if name not in wanted:
            path.unlink()
            changed.append(name)
    return changed


def metadata_of(nb: NotebookNode) -> dict[str, Any] | None:
    """The stamp `learner_copy` writes, or None for a notebook without one."""
    meta = nb.metadata.get(METADATA_KEY)
    return dict(meta) if isinstance(meta, dict) else None
