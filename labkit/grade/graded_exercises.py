"""The exercises the grader knows, and which of them a solution notebook holds.

Owns: the registry (exercise id -> its contract names and its hidden checks module), reading a
hidden module's `CHECKS` (`labkit.course.exercises.trial.Check`s with `hidden=True`) in the
grader's process, where they run against the check worker, and its source text (only for the
course version's digest: it is never sent anywhere). An exercise is graded in a notebook when
the notebook's code defines every name of its contract: no position, no extra metadata.

Must not import nbclient or the report models.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from nbformat import NotebookNode

from labkit.course.exercises.trial import Check


@dataclass(frozen=True)
class GradedExercise:
    id: str
    contract: tuple[str, ...]
    module: str  # the hidden checks: a module ending with CHECKS

    def checks(self) -> tuple[Check, ...]:
        table: tuple[Check, ...] = tuple(importlib.import_module(self.module).CHECKS)
        return table

    def source(self) -> str:
        return inspect.getsource(importlib.import_module(self.module))


EXERCISES: Final[Mapping[str, GradedExercise]] = {
    "ex1": GradedExercise("ex1", ("claim_and_delete",), "labkit.grade.hidden.ex1"),
    "ex2": GradedExercise("ex2", ("url_elicitation",), "labkit.grade.hidden.ex2"),
    "ex3": GradedExercise("ex3", ("delete_note",), "labkit.grade.hidden.ex3"),
    "ex4": GradedExercise("ex4", ("resolve_inside",), "labkit.grade.hidden.ex4"),
    "ex5": GradedExercise("ex5", ("to_legacy_requests",), "labkit.grade.hidden.ex5"),
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
