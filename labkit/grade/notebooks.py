"""Reading submissions, matching them to their solutions, and restoring their locked cells.

Owns: `load` (a file becomes a notebook or a clear "corrupt" / "not a notebook" error naming
the file), `match` (by file name, else by the `labkit` metadata the course build stamps, so a
renamed notebook still finds its solution), `pair` (which submitted cell is which released
cell: by cell id, and for cells without a known id, such as a notebook saved in nbformat 4.4
by Colab, by the release's cell order and source), `restore` (locked cells, as nbgrader
locks them: every released cell except the answer cells runs as released, whatever the
submission holds; the answer cells are the ones the course build stubbed, read from the
release's stamp, never from the submission's tags) and `structure` (one notice per change a
learner made: cells added, deleted, duplicated, retyped, and locked cells edited), and what a
check worker or the reference answer is made of (`setup_imports`, `answer_sources`).

Reads the raw JSON itself instead of nbformat's validating reader: a learner's notebook with
a duplicated cell id is still gradable, and the validator would "repair" (rename) the very
ids that say which cell is which.

Must not run a kernel or import nbclient.
Must not import the command line.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import nbformat
from nbformat import NotebookNode
from nbformat.v4.rwbase import rejoin_lines

from labkit.course.build import ANSWER_TAG, METADATA_KEY
from labkit.grade import syntax

SOLUTION_BEGIN: Final = "# BEGIN SOLUTION"
CELL_ID: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_BYTES: Final = 64 * 2**20
_ALIKE: Final = 0.34
SETUP_ID: Final = "setup"


class Unreadable(ValueError):
    """The file cannot be graded; the message names the file and says why."""


def load(path: Path) -> NotebookNode:
    if path.suffix != ".ipynb":
        raise Unreadable(f"{path.name}: not a notebook (expected a .ipynb file)")
    try:
        if path.stat().st_size > MAX_BYTES:
            raise Unreadable(f"{path.name}: too large to grade (over {MAX_BYTES // 2**20} MiB)")
        raw = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Unreadable(f"{path.name}: corrupt notebook (not valid JSON: {error})") from None
    except OSError as error:
        raise Unreadable(f"{path.name}: cannot be read ({error.strerror})") from None
    version = raw.get("nbformat") if isinstance(raw, dict) else None
    if type(version) is int and 1 <= version <= 3:
        # Before format 4 cells lived in "worksheets": no cell of it would be found.
        raise Unreadable(
            f"{path.name}: nbformat {version} is not supported: open and save it in "
            "JupyterLab (nbformat 4)"
        )
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        raise Unreadable(f"{path.name}: not a notebook (no list of cells)")
    if version != 4:
        raise Unreadable(
            f"{path.name}: not a notebook in format 4 (nbformat {str(version)[:20]!r})"
        )
    cells = []
    for number, cell in enumerate(raw["cells"], start=1):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise Unreadable(f"{path.name}: corrupt notebook (cell {number} has no cell type)")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise Unreadable(f"{path.name}: corrupt notebook (cell {number} has no source text)")
        metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        fixed: dict[str, Any] = {**cell, "source": source, "metadata": metadata}
        if not (isinstance(cell.get("id"), str) and CELL_ID.fullmatch(cell["id"])):
            # nbformat's id pattern: feedback names cells by id, so an id is never free text.
            fixed.pop("id", None)
        if fixed["cell_type"] == "code":
            fixed["outputs"] = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
        cells.append(fixed)
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    # Multi-line strings are stored as lists of lines; join them as nbformat's reader does.
    whole = {**raw, "cells": cells, "metadata": metadata}
    nb: NotebookNode = nbformat.from_dict(whole)  # type: ignore[no-untyped-call]
    rejoin_lines(nb)  # type: ignore[no-untyped-call]
    return nb


def stamp(nb: NotebookNode) -> dict[str, Any]:
    meta = nb.metadata.get(METADATA_KEY)
    return meta if isinstance(meta, dict) else {}


@dataclass(frozen=True)
class Match:
    stem: str
    how: str  # "name", "metadata" or "as" (`--as NAME`)


def match(path: Path, nb: NotebookNode, solutions: Mapping[str, NotebookNode]) -> Match | None:
    if path.stem in solutions:
        return Match(path.stem, "name")
    stamped = stamp(nb).get("notebook")
    if isinstance(stamped, str) and stamped in solutions:
        return Match(stamped, "metadata")
    return None


def mismatch(path: Path, nb: NotebookNode, graded: str) -> str:
    """A sentence when the file name and the notebook graded disagree, else "": a file named
    for one notebook holding another, or graded as a notebook its name does not name."""
    stamped = stamp(nb).get("notebook")
    if isinstance(stamped, str) and stamped != graded:
        return (
            f"graded as {graded}, but the notebook says it is {_quoted(stamped)} "
            "(its labkit metadata)"
        )
    if path.stem != graded:
        return f"graded as {graded}, but the file is named {_quoted(path.name)}"
    return ""


def _quoted(text: str) -> str:
    return repr(text[:80])


def answer_ids(release: NotebookNode) -> list[str]:
    """The answer cells: those the course build stubbed, as its stamp on the release lists them
    (else the `answer` tag the build puts on the same cells, else the solution's regions)."""
    stamped = stamp(release).get("answer_cells")
    if isinstance(stamped, list) and all(isinstance(i, str) for i in stamped):
        return list(stamped)
    # A solution (not yet built) marks them with its solution regions.
    return [
        str(c.get("id"))
        for c in release.cells
        if c.get("cell_type") == "code"
        and c.get("id")
        and (ANSWER_TAG in c.metadata.get("tags", []) or SOLUTION_BEGIN in c.source)
    ]


def _text(source: str) -> str:
    """A cell's source as it reads: editors differ in trailing spaces and final newlines."""
    return "\n".join(line.rstrip() for line in source.strip().split("\n"))


def pair(learner: NotebookNode, release: NotebookNode) -> dict[int, int]:
    """Submitted cell index -> released cell index, each released cell taken at most once.

    By cell id first (a duplicated id: the last copy is the cell). Cells saved without an id,
    such as every cell of a notebook in nbformat 4.4, are aligned by the release's order and
    source: identical cells anchor the alignment, and between two anchors an edited cell is
    the one of the same type that reads most like the released one."""
    positions = {str(c.get("id")): i for i, c in enumerate(release.cells) if c.get("id")}
    paired: dict[int, int] = {}
    last: dict[str, int] = {}
    for index, cell in enumerate(learner.cells):
        if cell.get("id") and str(cell.get("id")) in positions:
            last[str(cell.get("id"))] = index
    for cell_id, index in last.items():
        paired[index] = positions[cell_id]
    # A cell with an id the release does not know was added (editors give new cells new ids);
    # only cells saved without any id are aligned by order and source.
    left = [i for i, c in enumerate(learner.cells) if not c.get("id")]
    taken = set(paired.values())
    right = [i for i in range(len(release.cells)) if i not in taken]

    def key(cell: NotebookNode) -> tuple[str, str]:
        return str(cell.get("cell_type")), _text(cell.source)

    keys_l = [key(learner.cells[i]) for i in left]
    keys_r = [key(release.cells[i]) for i in right]
    matcher = difflib.SequenceMatcher(None, keys_l, keys_r, autojunk=False)
    for op, l1, l2, r1, r2 in matcher.get_opcodes():
        if op == "equal":
            paired.update({left[l1 + k]: right[r1 + k] for k in range(l2 - l1)})
        elif op == "replace":
            paired.update(_edited(learner, release, left[l1:l2], right[r1:r2]))
    return paired


def _edited(
    learner: NotebookNode, release: NotebookNode, mine: Sequence[int], theirs: Sequence[int]
) -> dict[int, int]:
    """Between two anchors: released cells paired in order with the submitted cell of the same
    type that reads most like each (at least a third alike), never crossing an earlier pair."""
    found: dict[int, int] = {}
    start = 0
    for r in theirs:
        want = release.cells[r]
        best, score = -1, _ALIKE
        for k in range(start, len(mine)):
            cell = learner.cells[mine[k]]
            if cell.get("cell_type") != want.get("cell_type"):
                continue
            ratio = difflib.SequenceMatcher(None, _text(cell.source), _text(want.source)).ratio()
            if ratio >= score:
                best, score = k, ratio
        if best >= 0:
            found[mine[best]] = r
            start = best + 1
    if not found and len(mine) == len(theirs):
        # Nothing alike, as many cells as released: a rewrite of each, in place.
        for m, r in zip(mine, theirs, strict=True):
            if learner.cells[m].get("cell_type") == release.cells[r].get("cell_type"):
                found[m] = r
    return found


@dataclass
class Restored:
    """The code that runs for a submission: released cells in the release's order, answer
    cells holding the learner's code, cells the learner added after the cell they follow."""

    cells: list[NotebookNode] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # "answer", "locked" or "added"
    notices: list[str] = field(default_factory=list)

    def add(self, cell: NotebookNode, kind: str) -> None:
        self.cells.append(cell)
        self.kinds.append(kind)


def restore(learner: NotebookNode, release: NotebookNode) -> Restored:
    paired = pair(learner, release)
    answers = set(answer_ids(release))
    by_release = {r: i for i, r in paired.items()}
    released_ids = {str(c.get("id")) for c in release.cells if c.get("id")}
    # Cells the learner added run after the released cell they follow in the submission.
    after: dict[int, list[int]] = {}
    anchor = -1
    for index, cell in enumerate(learner.cells):
        if index in paired:
            anchor = paired[index]
        elif cell.get("cell_type") == "code" and str(cell.get("id") or "") not in released_ids:
            after.setdefault(anchor, []).append(index)
    out = Restored(notices=structure(learner, release, paired))
    for index in after.get(-1, []):
        out.add(_added(learner.cells[index]), "added")
    for r, cell in enumerate(release.cells):
        if cell.get("cell_type") == "code":
            mine = learner.cells[by_release[r]] if r in by_release else None
            if str(cell.get("id")) in answers:
                code = mine.source if mine is not None and mine.cell_type == "code" else None
                out.add(_copy(cell, cell.source if code is None else code), "answer")
            else:
                out.add(_copy(cell, cell.source), "locked")
                edited = mine is not None and _text(mine.source) != _text(cell.source)
                if edited and mine is not None and mine.cell_type == "code":
                    out.notices.append(
                        f"cell `{cell.get('id')}` (cell {by_release[r] + 1}) was edited; "
                        "the released version was graded"
                    )
        for index in after.get(r, []):
            out.add(_added(learner.cells[index]), "added")
    return out


def _copy(cell: NotebookNode, source: str) -> NotebookNode:
    node: NotebookNode = nbformat.from_dict(  # type: ignore[no-untyped-call]
        {"cell_type": "code", "id": cell.get("id"), "source": source, "metadata": {}}
    )
    return node


def _added(cell: NotebookNode) -> NotebookNode:
    node: NotebookNode = nbformat.from_dict(  # type: ignore[no-untyped-call]
        {"cell_type": "code", "source": cell.source, "metadata": {}}
    )
    return node


def structure(
    learner: NotebookNode, release: NotebookNode, paired: Mapping[int, int] | None = None
) -> list[str]:
    """Plain notices, one per change a learner made to the notebook's cells."""
    if paired is None:
        paired = pair(learner, release)
    answers = set(answer_ids(release))
    released_ids = {str(c.get("id")) for c in release.cells if c.get("id")}
    notices: list[str] = []
    positions: dict[str, list[int]] = {}
    for number, cell in enumerate(learner.cells, start=1):
        cell_id = str(cell.get("id") or "")
        positions.setdefault(cell_id, []).append(number)
        if number - 1 in paired:
            want = release.cells[paired[number - 1]]
            if cell.get("cell_type") != want.get("cell_type"):
                name = str(want.get("id") or number)
                if name in answers:
                    notices.append(
                        f"answer cell `{name}` was changed from {want.get('cell_type')} to "
                        f"{cell.get('cell_type')} (cell {number}): it no longer runs as before"
                    )
                else:
                    notices.append(
                        f"cell `{name}` was changed from {want.get('cell_type')} to "
                        f"{cell.get('cell_type')} (cell {number}): the released version was "
                        "graded"
                    )
        elif cell_id in released_ids:
            continue  # an earlier copy of a duplicated cell: named below
        elif ANSWER_TAG in cell.metadata.get("tags", []):
            notices.append(f"cell {number} is a copy of an answer cell (added by you)")
        elif cell.get("cell_type") == "code":
            notices.append(
                f"cell {number} was added (it runs in the notebook; the checks see only the "
                "answer cells)"
            )
    counts = Counter(str(c.get("id") or "") for c in learner.cells)
    for cell_id, count in counts.items():
        if cell_id and cell_id in released_ids and count > 1:
            where = " and ".join(str(n) for n in positions[cell_id])
            notices.append(
                f"cell `{cell_id}` appears {count} times (cells {where}); the last one wins"
            )
    found = set(paired.values())
    for r, cell in enumerate(release.cells):
        cell_id = str(cell.get("id") or f"{r + 1}")
        if r not in found:
            if cell_id in answers:
                notices.append(
                    f"answer cell `{cell_id}` was deleted: its exercise's checks cannot find "
                    "your code"
                )
            else:
                notices.append(f"cell `{cell_id}` was deleted")
    return notices


def setup_imports(release: NotebookNode) -> str:
    """The import statements of the release's setup cell (its id is `setup`, else it is the
    first code cell): what the notebook gives its answer cells. Nothing else of it runs in a
    check worker."""
    code = code_cells(release)
    cell = next((c for c in code if c.get("id") == SETUP_ID), code[0] if code else None)
    if cell is None:
        return ""
    source = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.split("\n")
    )
    try:
        tree = syntax.parse(source)
    except SyntaxError:
        return ""
    imports = [
        ast.get_source_segment(source, node) or ""
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    return "".join(f"{text}\n" for text in imports)


def answer_sources(solution: NotebookNode) -> list[str]:
    """The answer cells' sources of a solution, in order (the reference answer)."""
    answers = set(answer_ids(solution))
    return [str(c.source) for c in code_cells(solution) if c.get("id") in answers]


def code_cells(nb: NotebookNode) -> list[NotebookNode]:
    return [c for c in nb.cells if c.get("cell_type") == "code"]
