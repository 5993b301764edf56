"""Reading submissions, matching them to their solutions, and naming what a learner changed.

Owns: `load` (a file becomes a notebook or a clear "corrupt" / "not a notebook" error naming
the file), `match` (by file name, else by the `labkit` metadata the course build stamps, so a
renamed notebook still finds its solution), and `structure` (cells added, deleted,
duplicated or retyped, compared by cell id, never by position).

Reads the raw JSON itself instead of nbformat's validating reader: a learner's notebook with
a duplicated cell id is still gradable, and the validator would "repair" (rename) the very
ids that say which cell is which.

Must not run a kernel or import nbclient.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import nbformat
from nbformat import NotebookNode
from nbformat.v4.rwbase import rejoin_lines

from labkit.course.build import ANSWER_TAG, METADATA_KEY

SOLUTION_BEGIN: Final = "# BEGIN SOLUTION"
CELL_ID: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_BYTES: Final = 64 * 2**20


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
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        raise Unreadable(f"{path.name}: not a notebook (no list of cells)")
    if raw.get("nbformat") != 4:
        raise Unreadable(
            f"{path.name}: not a notebook in format 4 (nbformat {raw.get('nbformat')!r})"
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
    how: str  # "name" or "metadata"


def match(path: Path, nb: NotebookNode, solutions: Mapping[str, NotebookNode]) -> Match | None:
    if path.stem in solutions:
        return Match(path.stem, "name")
    stamped = stamp(nb).get("notebook")
    if isinstance(stamped, str) and stamped in solutions:
        return Match(stamped, "metadata")
    return None


def answer_ids(solution: NotebookNode) -> list[str]:
    return [
        str(c.get("id"))
        for c in solution.cells
        if c.get("cell_type") == "code" and SOLUTION_BEGIN in c.source and c.get("id")
    ]


def structure(learner: NotebookNode, solution: NotebookNode) -> list[str]:
    """Plain notices, one per change a learner made to the notebook's cells."""
    answers = set(answer_ids(solution))
    expected = {str(c.get("id")): c.get("cell_type") for c in solution.cells if c.get("id")}
    notices: list[str] = []
    positions: dict[str, list[int]] = {}
    for number, cell in enumerate(learner.cells, start=1):
        cell_id = str(cell.get("id") or "")
        positions.setdefault(cell_id, []).append(number)
        if cell_id and cell_id in expected:
            if cell.get("cell_type") != expected[cell_id]:
                kind = "answer cell" if cell_id in answers else "cell"
                notices.append(
                    f"{kind} `{cell_id}` was changed from {expected[cell_id]} to "
                    f"{cell.get('cell_type')} (cell {number}): it no longer runs as before"
                )
        elif ANSWER_TAG in cell.metadata.get("tags", []):
            notices.append(f"cell {number} is a copy of an answer cell (added by you)")
        elif cell.get("cell_type") == "code":
            notices.append(f"cell {number} was added (it runs before the checks)")
    counts = Counter(str(c.get("id") or "") for c in learner.cells)
    for cell_id, count in counts.items():
        if cell_id and cell_id in expected and count > 1:
            where = " and ".join(str(n) for n in positions[cell_id])
            notices.append(
                f"cell `{cell_id}` appears {count} times (cells {where}); the last one wins"
            )
    for cell_id in expected:
        if cell_id not in counts:
            if cell_id in answers:
                notices.append(
                    f"answer cell `{cell_id}` was deleted: its exercise's checks cannot find "
                    "your code"
                )
            else:
                notices.append(f"cell `{cell_id}` was deleted")
    return notices


def code_cells(nb: NotebookNode) -> list[NotebookNode]:
    return [c for c in nb.cells if c.get("cell_type") == "code"]
