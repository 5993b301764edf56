"""The course's exercises: the one registry, and what derives from it.

Owns: `EXERCISES`, one `Exercise` per notebook exercise, in lesson order (docs/LESSON.md
section 11), plus `checkpoints`. Each is declared once, in its own module (`EXERCISE`): id,
title, notebook, contract (signature and the rules the checks grade), public checks, the
module of its hidden checks, safety points, hints. From them: the grader's graded set
(`labkit.grade.graded_exercises`), the README's exercise table (`exercise_table`), every
test's exercise list, and the reference answer (`reference_answer`: the solution notebook's
answer cells, with the setup cell's imports).

A new exercise is its module (added to `UNITS` below), its notebook cells and its hidden
module, and nothing else.

Imports the exercise modules and never the check engine (`labkit.course.exercises.checks`
reads it), nor the hidden checks (only their module names). Must not import ipywidgets.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from labkit.course.exercises import (
    checkpoints,
    ex1_replay,
    ex2_url,
    ex3_notes,
    ex4_symlinks,
    ex5_legacy,
)
from labkit.course.exercises.trial import Exercise

UNITS: tuple[Exercise, ...] = (
    ex1_replay.EXERCISE,
    ex2_url.EXERCISE,
    ex3_notes.EXERCISE,
    ex4_symlinks.EXERCISE,
    ex5_legacy.EXERCISE,
    checkpoints.EXERCISE,
)


def registry(units: Iterable[Exercise]) -> Mapping[str, Exercise]:
    return MappingProxyType({e.id: e for e in units})


EXERCISES: Mapping[str, Exercise] = registry(UNITS)

ANSWER_TAG = "answer"
SETUP_ID = "setup"


def graded(units: Iterable[Exercise] | None = None) -> list[Exercise]:
    """The exercises graded with hidden checks, in lesson order."""
    return [e for e in (UNITS if units is None else units) if e.hidden]


def answer_cells(notebook: Any) -> list[str]:
    """The answer cells' sources (cells tagged `answer`) of a notebook, in order."""
    return [
        str(c.source)
        for c in notebook.cells
        if c.get("cell_type") == "code" and ANSWER_TAG in c.get("metadata", {}).get("tags", [])
    ]


def setup_imports(notebook: Any) -> str:
    """The import statements of the notebook's setup cell (id `setup`, else the first code
    cell): what the notebook gives its answer cells."""
    code = [c for c in notebook.cells if c.get("cell_type") == "code"]
    cell = next((c for c in code if c.get("id") == SETUP_ID), code[0] if code else None)
    if cell is None:
        return ""
    source = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.split("\n")
    )
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    lines = [
        ast.get_source_segment(source, node) or ""
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    return "".join(f"{text}\n" for text in lines)


def reference_answer(exercise: Exercise, solution: Any) -> dict[str, Callable[..., Any]]:
    """The exercise's contract functions as the solution notebook `solution` defines them:
    its setup imports and answer cells, run in a namespace of their own (the course's own,
    trusted code; never a learner's)."""
    namespace: dict[str, Any] = {"__name__": f"__reference_{exercise.id}__"}
    sources = [setup_imports(solution), *answer_cells(solution)]
    for number, source in enumerate(sources):
        exec(compile(source, f"<reference {exercise.id} cell {number}>", "exec"), namespace)
    missing = [n for n in exercise.contracts if not callable(namespace.get(n))]
    if missing:
        raise ValueError(f"the solution {exercise.notebook} does not define {', '.join(missing)}")
    return {n: namespace[n] for n in exercise.contracts}


def exercise_table(units: Sequence[Exercise] | None = None) -> str:
    """The README's exercise table (Markdown), one row per graded exercise."""
    rows = [
        "| exercise | notebook | you write | public checks | hidden checks | safety |",
        "|---|---|---|---|---|---|",
    ]
    for e in graded(units):
        assert e.contract is not None and e.safety is not None
        public = sum(c.points for c in e.checks)
        rows.append(
            f"| {e.id}: {e.title} | `{e.notebook}` | `{e.contract.signature}` | "
            f"{len(e.checks)} ({public:g} points) | `{e.hidden}` | "
            f"{e.safety.points:g} points: {e.safety.faults} |"
        )
    return "\n".join(rows) + "\n"
