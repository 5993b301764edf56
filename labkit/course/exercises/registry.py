"""The course's exercises: the one registry, and what derives from it.

Owns: `EXERCISES`, one `Exercise` per notebook exercise, in lesson order (docs/LESSON.md
section 11), plus `checkpoints`. Each is declared once, in its own module (`EXERCISE`): id,
title, notebook, contract (signature and the rules the checks grade), public checks, the
module of its hidden checks, safety points, hints. From them: the grader's graded set
(`labkit.grade.graded_exercises`), the README's exercise table (`exercise_table`), every
test's exercise list. The reference answer is the solution notebook's answer cells (read by
the grader, `labkit.grade.graded_exercises`).

A new exercise is its module (`exN_<name>.py` in this package, found by `discover`: lesson order
is N's order), its notebook cells and its hidden module, and nothing else.

Imports the exercise modules and never the check engine (`labkit.course.exercises.checks`
reads it), nor the hidden checks (only their module names). Must not import ipywidgets.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

import labkit.course.exercises as package
from labkit.course.exercises import checkpoints
from labkit.course.exercises.trial import Exercise

_UNIT_MODULE = re.compile(r"ex(\d+)_\w+")


def discover(
    path: Sequence[str] = package.__path__, prefix: str = package.__name__
) -> list[Exercise]:
    """Every `exN_*` module's `EXERCISE` under `path`, by N (lesson order)."""
    found = [
        (int(match[1]), info.name)
        for info in pkgutil.iter_modules(path)
        if (match := _UNIT_MODULE.fullmatch(info.name))
    ]
    return [importlib.import_module(f"{prefix}.{name}").EXERCISE for _, name in sorted(found)]


UNITS: tuple[Exercise, ...] = (*discover(), checkpoints.EXERCISE)


def registry(units: Iterable[Exercise]) -> Mapping[str, Exercise]:
    return MappingProxyType({e.id: e for e in units})


EXERCISES: Mapping[str, Exercise] = registry(UNITS)


def graded(units: Iterable[Exercise] | None = None) -> list[Exercise]:
    """The exercises graded with hidden checks, in lesson order."""
    return [e for e in (UNITS if units is None else units) if e.hidden]


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
