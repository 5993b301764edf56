"""The exercises the grader knows, and which of them a solution notebook holds.

Owns: the registry (exercise id -> its contract names and its hidden checks module), reading a
hidden module's `CHECKS` table in the grader's process, and its source text (sent to the
kernel as code, never written anywhere). An exercise is graded in a notebook when the
notebook's code defines every name of its contract: no position, no extra metadata.

Must not import nbclient or the report models.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from nbformat import NotebookNode


@dataclass(frozen=True)
class HiddenCheck:
    exercise: str
    function: str
    points: float
    title: str


@dataclass(frozen=True)
class GradedExercise:
    id: str
    contract: tuple[str, ...]
    module: str  # the hidden checks: a self-contained module ending with CHECKS

    def checks(self) -> list[HiddenCheck]:
        table = importlib.import_module(self.module).CHECKS
        return [
            HiddenCheck(self.id, fn.__name__, float(points), title) for fn, points, title in table
        ]

    def source(self) -> str:
        return inspect.getsource(importlib.import_module(self.module))


EXERCISES: Final[Mapping[str, GradedExercise]] = {
    "ex1": GradedExercise("ex1", ("claim_and_delete",), "labkit.grade.hidden.ex1"),
    "ex2": GradedExercise("ex2", ("url_elicitation",), "labkit.grade.hidden.ex2"),
    "ex3": GradedExercise("ex3", ("delete_note",), "labkit.grade.hidden.ex3"),
    "ex4": GradedExercise("ex4", ("resolve_inside",), "labkit.grade.hidden.ex4"),
    "ex5": GradedExercise("ex5", ("to_legacy_requests",), "labkit.grade.hidden.ex5"),
}


@dataclass(frozen=True)
class PublicCheck:
    name: str
    points: float


def course_public_checks(exercise_id: str) -> list[PublicCheck]:
    """The public checks the course registers for an exercise
    (`labkit.course.exercises.registry`), or none when this labkit has no course checks (yet)
    or the exercise has none available."""
    try:
        course = importlib.import_module("labkit.course.exercises.registry")
    except ImportError:
        return []
    exercise = course.EXERCISES.get(exercise_id)
    if exercise is None or not exercise.available:
        return []
    return [PublicCheck(c.name, float(c.points)) for c in exercise.checks]


def defined_names(nb: NotebookNode) -> set[str]:
    """Top-level functions and classes the notebook's code cells define."""
    names: set[str] = set()
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        source = "\n".join(
            "" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.split("\n")
        )
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
    return names


def exercises_in(nb: NotebookNode, registry: Mapping[str, GradedExercise]) -> list[GradedExercise]:
    names = defined_names(nb)
    return [e for e in registry.values() if set(e.contract) <= names]


def all_checks(exercises: Sequence[GradedExercise]) -> list[HiddenCheck]:
    return [check for exercise in exercises for check in exercise.checks()]
