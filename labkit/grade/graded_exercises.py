"""The exercises the grader knows, and which of them a solution notebook holds.

Owns: the hidden checks module of each exercise of the course's registry
(`labkit.course.exercises.registry`, where the contract names live: one registry), the hidden
checks themselves (`GradedExercise.checks()`: the module's `CHECKS`, `Check` objects run in
the grader's process through a `CheckRunner`, never sent anywhere), the module's text (for
the grader's version fingerprint), and which checks each checked-output cell showing the
exercise at work depends on (`GradedExercise.outputs`). An exercise is graded in a notebook
when the notebook's code defines every name of its contract: no position, no extra metadata.

Must not import nbclient or the report models.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from nbformat import NotebookNode

from labkit.course.exercises.registry import EXERCISES as COURSE
from labkit.course.exercises.trial import Check
from labkit.grade import syntax


@dataclass(frozen=True)
class GradedExercise:
    id: str
    module: str  # the hidden checks: a module whose CHECKS are `Check(..., hidden=True)`
    # The checked-output cells that show this exercise's functions at work, by cell id, each
    # with the checks (public or hidden, by name) that exercise what the cell shows: the
    # cell's output point counts only when all of them passed.
    outputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)

    @property
    def contract(self) -> tuple[str, ...]:
        """The names the learner's code defines, as the course's registry states them."""
        return COURSE[self.id].contracts

    def checks(self) -> tuple[Check, ...]:
        checks: tuple[Check, ...] = importlib.import_module(self.module).CHECKS
        return checks

    def source(self) -> str:
        """The module's text (a version fingerprint input; never run anywhere)."""
        return inspect.getsource(importlib.import_module(self.module))


EXERCISES: Final[Mapping[str, GradedExercise]] = {
    "ex1": GradedExercise(
        "ex1",
        "labkit.grade.hidden.ex1",
        outputs={
            "ex1-try": (
                "fresh claim",
                "replay refused",
                "missing note keeps the nonce",
                "transaction closed on every path",
            ),
            "ex1-race": ("two processes race", "six racing processes"),
        },
    ),
    "ex2": GradedExercise(
        "ex2",
        "labkit.grade.hidden.ex2",
        outputs={
            "ex2-try": (
                "url offered when declared",
                "url offered beside form",
                "form only refused",
                "empty elicitation refused",
                "no capabilities refused",
                "refusal names only url",
                "message and url unchanged",
            ),
        },
    ),
    "ex3": GradedExercise(
        "ex3",
        "labkit.grade.hidden.ex3",
        outputs={
            "ex3-try": (
                "inside deleted",
                "moved after the form",
                "prefix sibling kept",
                "unauthorized principal",
                "missing note",
            ),
        },
    ),
    "ex4": GradedExercise(
        "ex4",
        "labkit.grade.hidden.ex4",
        outputs={
            "try": (
                "plain file inside",
                "escapes refused",
                "file symlink to outside refused",
                "symlink inside allowed",
                "directory symlink to outside refused",
            ),
        },
    ),
    "ex5": GradedExercise(
        "ex5",
        "labkit.grade.hidden.ex5",
        outputs={
            "try": (
                "one form entry",
                "order and fresh ids",
                "url entry gets an elicitationId",
                "input left unchanged",
                "every entry sent",
            ),
        },
    ),
}


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
            tree = syntax.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
    return names


def exercises_in(nb: NotebookNode, registry: Mapping[str, GradedExercise]) -> list[GradedExercise]:
    names = defined_names(nb)
    return [e for e in registry.values() if set(e.contract) <= names]
