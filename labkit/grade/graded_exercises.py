"""The exercises the grader knows, and which of them a solution notebook holds.

Owns: the graded view of the course's one registry (`labkit.course.exercises.registry`: each
exercise declares its contract, notebook and hidden-check module there, once), the hidden
checks themselves (`GradedExercise.checks()`: the module's `CHECKS`, `Check` objects run in
the grader's process through a `CheckRunner`, never sent anywhere), the reference answer they
compare with (`GradedExercise.reference`: the solution notebook's answer cells), the module's
text (for the grader's version fingerprint), and which checks each checked-output cell showing
the exercise at work depends on (`GradedExercise.outputs`, as the unit declares it). An
exercise is graded in a notebook
when the notebook's code defines every name of its contract: no position, no extra metadata.

Must not import nbclient or the report models.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from nbformat import NotebookNode

from labkit.course.exercises import registry
from labkit.course.exercises.trial import Check, Exercise
from labkit.grade import notebooks, syntax


@dataclass(frozen=True)
class GradedExercise:
    unit: Exercise

    @property
    def id(self) -> str:
        return self.unit.id

    @property
    def module(self) -> str:
        """The hidden checks: a module whose CHECKS are `Check(..., hidden=True)`."""
        return self.unit.hidden_checks

    @property
    def outputs(self) -> Mapping[str, tuple[str, ...]]:
        """The checked-output cells that show this exercise's functions at work, by cell id,
        each with the checks (public or hidden, by name) that exercise what the cell shows:
        the cell's output point counts only when all of them passed."""
        return self.unit.outputs

    @property
    def contract(self) -> tuple[str, ...]:
        """The names the learner's code defines, as the course's registry states them."""
        return self.unit.contracts

    def checks(self) -> tuple[Check, ...]:
        checks: tuple[Check, ...] = importlib.import_module(self.module).CHECKS
        return checks

    def reference(self, solution: NotebookNode) -> dict[str, Callable[..., Any]]:
        """The contract's functions as the solution notebook defines them: its setup imports
        and answer cells, run in a namespace of their own (the course's own, trusted code;
        never a learner's)."""
        namespace: dict[str, Any] = {"__name__": f"__reference_{self.id}__"}
        sources = [notebooks.setup_imports(solution), *notebooks.answer_sources(solution)]
        for number, source in enumerate(sources):
            exec(compile(source, f"<reference {self.id} cell {number}>", "exec"), namespace)
        missing = [n for n in self.contract if not callable(namespace.get(n))]
        if missing:
            raise ValueError(
                f"the solution {self.unit.notebook} does not define {', '.join(missing)}"
            )
        return {n: namespace[n] for n in self.contract}

    def source(self) -> str:
        """The module's text (a version fingerprint input; never run anywhere)."""
        return inspect.getsource(importlib.import_module(self.module))


def graded_set(units: Iterable[Exercise] | None = None) -> dict[str, GradedExercise]:
    return {e.id: GradedExercise(e) for e in registry.graded(units)}


GRADED: Final[Mapping[str, GradedExercise]] = graded_set()


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
