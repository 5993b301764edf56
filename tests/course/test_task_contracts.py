"""The contract a learner reads in three places says the same thing in each: the signature in
the task cell of the solution notebook ("Write `name(params) -> type`"), the answer cell's
`def` and docstring in the learner's copy (notebooks/), and the exercise's declared contract
(`Exercise.contract`), which the checks are written to. Every behaviour a check grades is a
rule of that contract, stated word for word in the task cell, and shown by a public check.

Read-only: the notebooks are parsed, never changed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from labkit.course.exercises.registry import EXERCISES, graded
from labkit.grade.graded_exercises import GRADED

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {e.id: f"{e.notebook}.ipynb" for e in graded()}
# The task cell of ex5 ("the faded end of the course: only the contract is given") states the
# signature without a return type and describes the returned pairs in prose; the answer
# cell's annotation states the type. Every other task cell states `-> type`.
RETURN_IN_PROSE = {"ex5"}


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[str, ...]
    returns: str | None


def _parse_signature(text: str) -> Signature:
    match = re.fullmatch(r"\s*(\w+)\(([^)]*)\)\s*(?:->\s*(.+?))?\s*", text, re.S)
    assert match, f"not a signature: {text!r}"
    params = tuple(p.strip() for p in match.group(2).split(",") if p.strip())
    returns = " ".join(match.group(3).split()) if match.group(3) else None
    return Signature(match.group(1), params, returns)


def _answer_index(nb: nbformat.NotebookNode) -> int:
    found = [i for i, c in enumerate(nb.cells) if "answer" in c.metadata.get("tags", [])]
    assert len(found) == 1, f"expected one answer cell, found {len(found)}"
    return found[0]


def task_signature(exercise_id: str) -> Signature:
    """The signature the task cell (the markdown cell just before the answer cell) of the
    solution notebook states after "Write"."""
    nb = nbformat.read(ROOT / "solutions" / NOTEBOOKS[exercise_id], as_version=4)
    task = nb.cells[_answer_index(nb) - 1]
    assert task.cell_type == "markdown"
    match = re.search(r"Write `([^`]+)`", task.source)
    assert match, f"{exercise_id}: the task cell states no `Write `name(...)`` signature"
    return _parse_signature(match.group(1))


def answer_function(folder: str, exercise_id: str) -> ast.FunctionDef:
    nb = nbformat.read(ROOT / folder / NOTEBOOKS[exercise_id], as_version=4)
    tree = ast.parse(nb.cells[_answer_index(nb)].source)
    name = EXERCISES[exercise_id].contracts[0]
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(defs) == 1, f"{folder}/{NOTEBOOKS[exercise_id]} defines {name} {len(defs)} times"
    return defs[0]


def module_contract(exercise_id: str) -> Signature:
    """The exercise's declared contract."""
    contract = EXERCISES[exercise_id].contract
    assert contract is not None
    return _parse_signature(contract.signature)


def task_text(exercise_id: str) -> str:
    nb = nbformat.read(ROOT / "solutions" / NOTEBOOKS[exercise_id], as_version=4)
    return " ".join(nb.cells[_answer_index(nb) - 1].source.split())


@pytest.mark.parametrize("exercise_id", sorted(NOTEBOOKS))
def test_every_rule_a_check_grades_is_stated_in_the_task_and_shown_publicly(
    exercise_id: str,
) -> None:
    exercise = EXERCISES[exercise_id]
    assert exercise.contract is not None
    rules = {r.id for r in exercise.contract.rules}
    text = task_text(exercise_id)
    for rule in exercise.contract.rules:
        assert " ".join(rule.states.split()) in text, (rule.id, rule.states)
    every = [*exercise.checks, *GRADED[exercise_id].checks()]
    for check in every:
        assert check.rules, f"{check.name} names no rule of the contract"
        assert set(check.rules) <= rules, (check.name, set(check.rules) - rules)
    public = {r for c in exercise.checks for r in c.rules}
    assert public == rules, f"rules no public check shows: {rules - public}"


def _last_name(annotation: str) -> str:
    """`pathlib.Path` and `Path` name the same type; `list[...]` is a list."""
    return annotation.split("[")[0].split(".")[-1]


def _docstring_calls(doc: str, name: str) -> list[ast.Call]:
    calls = []
    for start in (m.start() for m in re.finditer(rf"\b{name}\(", doc)):
        depth = 0
        for end in range(start + len(name), len(doc)):
            depth += {"(": 1, ")": -1}.get(doc[end], 0)
            if depth == 0:
                break
        text = " ".join(doc[start : end + 1].split())
        calls.append(ast.parse(text, mode="eval").body)
    return [c for c in calls if isinstance(c, ast.Call)]


@pytest.mark.parametrize("exercise_id", sorted(NOTEBOOKS))
def test_the_task_cell_states_the_contract_the_checks_are_written_to(exercise_id: str) -> None:
    task, contract = task_signature(exercise_id), module_contract(exercise_id)
    assert task.name == contract.name == EXERCISES[exercise_id].contracts[0]
    assert task.params == contract.params
    if exercise_id in RETURN_IN_PROSE:
        assert task.returns is None
    else:
        assert task.returns is not None
        assert _last_name(task.returns) == _last_name(contract.returns or "")


@pytest.mark.parametrize("exercise_id", sorted(NOTEBOOKS))
def test_the_learners_answer_cell_has_the_task_signature(exercise_id: str) -> None:
    task = task_signature(exercise_id)
    learner = answer_function("notebooks", exercise_id)
    args = learner.args
    assert not (args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs)
    assert tuple(a.arg for a in args.args) == task.params
    contract = module_contract(exercise_id)
    if learner.returns is not None:
        assert _last_name(ast.unparse(learner.returns)) == _last_name(contract.returns or "")
    else:
        assert task.returns is not None, "neither the task nor the answer cell names the type"
    # The learner's copy has the solution's signature, annotations included.
    solution = answer_function("solutions", exercise_id)
    assert ast.unparse(learner.args) == ast.unparse(solution.args)
    returns = [None if f.returns is None else ast.unparse(f.returns) for f in (learner, solution)]
    assert returns[0] == returns[1]


@pytest.mark.parametrize("exercise_id", sorted(NOTEBOOKS))
def test_the_answer_cells_docstring_describes_that_signature(exercise_id: str) -> None:
    task = task_signature(exercise_id)
    learner = answer_function("notebooks", exercise_id)
    doc = ast.get_docstring(learner)
    assert doc, "the answer cell's function has no docstring"
    assert doc == ast.get_docstring(answer_function("solutions", exercise_id))
    for param in task.params:
        assert re.search(rf"\b{param}\b", doc), f"the docstring never mentions {param}"
    calls = _docstring_calls(doc, task.name)
    assert calls, "the docstring shows no example call"
    for call in calls:
        assert len(call.args) + len(call.keywords) == len(task.params), ast.unparse(call)
