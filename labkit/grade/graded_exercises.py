"""The exercises the grader knows, and which of them a solution notebook holds.

Owns: the registry (exercise id -> its contract names and its hidden checks module), the
hidden checks themselves (`GradedExercise.checks()`: the module's `CHECKS`, `Check` objects
run in the grader's process through a `CheckRunner`, never sent anywhere), a listing of them
(`HiddenCheck`: exercise, name, points) and the module's text (for the grader's version
fingerprint). An exercise is graded in a notebook when the notebook's code defines every name
of its contract: no position, no extra metadata.

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

from labkit.course.exercises.trial import Check


@dataclass(frozen=True)
class HiddenCheck:
    """One hidden check as a listing: `function` and `title` are the check's name."""

    exercise: str
    function: str
    points: float
    title: str


@dataclass(frozen=True)
class GradedExercise:
    id: str
    contract: tuple[str, ...]
    module: str  # the hidden checks: a module whose CHECKS are `Check(..., hidden=True)`

    def checks(self) -> tuple[Check, ...]:
        checks: tuple[Check, ...] = importlib.import_module(self.module).CHECKS
        return checks

    def listing(self) -> list[HiddenCheck]:
        return [HiddenCheck(self.id, c.name, float(c.points), c.name) for c in self.checks()]

    def source(self) -> str:
        """The module's text (a version fingerprint input; never run anywhere)."""
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
    return [check for exercise in exercises for check in exercise.listing()]
