"""A new exercise is its unit and its notebook cells: a toy exercise written in a temporary tree
(a unit module `ex9_double.py`, its hidden-check module, one solution notebook) is found by the
registry, graded end to end with a real confined kernel and check worker, listed in the
exercise table, and nothing of labkit is edited for it."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from copy import deepcopy
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grade.grade_helpers import write
from labkit.course.exercises import registry
from labkit.course.exercises.trial import Outcome
from labkit.grade import graded_exercises, grader
from labkit.grade.kernel import KernelRunner
from labkit.grade.report import SubmissionReport

UNIT = """
from labkit.course.exercises.trial import Check, Contract, Exercise, Fail, Rule, Safety, Trial


def doubles(t: Trial) -> Fail | None:
    got = t.call("double", 21)
    if got != 42:
        return Fail("double(21) should return 42", f"it returned {got!r}", "return 2 * x")
    return None


EXERCISE = Exercise(
    id="ex9",
    title="Double it",
    contract=Contract("double(x) -> int", rules=(Rule("twice", "returns twice `x`"),)),
    notebook="09-double",
    hidden_checks="toy_hidden_ex9",
    safety=Safety(1, "no call should take longer than it needs"),
    checks=(Check("doubles", doubles, "double(21) should return 42", rules=("twice",)),),
)
"""

HIDDEN = """
from labkit.course.exercises.trial import Check, Fail, Trial


def negatives(t: Trial) -> Fail | None:
    for x in (-3, 0, 10**20):
        got = t.call("double", x)
        if got != 2 * x:
            expected = f"double({x}) should return {2 * x}"
            return Fail(expected, f"it returned {got!r}", "return 2 * x")
    return None


CHECKS = (Check("any integer", negatives, "twice any integer", 2, hidden=True, rules=("twice",)),)
"""

TASK = "Write `double(x) -> int`, which returns twice `x`."
ANSWER = """\
def double(x):
    # BEGIN SOLUTION
    return 2 * x
    # END SOLUTION
"""


def solution() -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell(TASK),
        new_code_cell("import math\n"),
        new_code_cell(ANSWER, metadata={"tags": []}),
        new_code_cell("print(double(21))", metadata={"tags": ["nbval-check-output"]}),
    ]
    for cell, cell_id in zip(cells, ("task", "setup", "ex9-answer", "ex9-try"), strict=True):
        cell["id"] = cell_id
    nb = new_notebook(cells=cells)
    nb.cells[3].outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    return nb


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("toy-course")
    (root / "toy_units").mkdir()
    (root / "toy_units" / "__init__.py").write_text("")
    (root / "toy_units" / "ex9_double.py").write_text(textwrap.dedent(UNIT))
    (root / "toy_units" / "notes.py").write_text("NOT_A_UNIT = True\n")
    (root / "toy_hidden_ex9.py").write_text(textwrap.dedent(HIDDEN))
    write(root / "solutions", "09-double.ipynb", solution())
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))
    for name in ("toy_units", "toy_units.ex9_double", "toy_hidden_ex9"):
        sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def course(tree: Path) -> grader.Course:
    import toy_units

    units = registry.discover(toy_units.__path__, "toy_units")
    assert [u.id for u in units] == ["ex9"]
    return grader.Course.load(
        tree / "solutions",
        registry=graded_exercises.graded_set(units),
        exercises=registry.registry(units),
    )


def grade(course: grader.Course, runner: KernelRunner, work: Path, answer: str) -> SubmissionReport:
    copy = deepcopy(course.learner_copy("09-double"))
    for cell in copy.cells:
        if cell.get("id") == "ex9-answer":
            cell.source = answer
    path = write(work / "toy-submissions", "09-double.ipynb", copy)
    return grader.grade(path, course, runner, scratch_root=work)


def test_the_solution_scores_full_marks_end_to_end(
    course: grader.Course, runner: KernelRunner, work: Path
) -> None:
    report = grade(course, runner, work, ANSWER)
    exercise = next(e for e in report.exercises if e.id == "ex9")
    names = [(c.name, c.outcome) for c in exercise.checks]
    assert names == [
        ("ex9/public/doubles", Outcome.PASSED),
        ("ex9/any integer", Outcome.PASSED),
        ("ex9/no safety fault", Outcome.PASSED),
    ], report
    assert report.percent == 100


def test_the_learner_copy_and_a_wrong_answer_lose_points(
    course: grader.Course, runner: KernelRunner, work: Path
) -> None:
    stub = next(
        c.source for c in course.learner_copy("09-double").cells if c.get("id") == "ex9-answer"
    )
    untouched = grade(course, runner, work, stub)
    assert next(e for e in untouched.exercises if e.id == "ex9").points == 0
    # Right on the public input, wrong on the hidden ones: the hidden check says which input.
    wrong = grade(course, runner, work, "def double(x):\n    return 42\n")
    checks = next(e for e in wrong.exercises if e.id == "ex9").checks
    hidden = next(c for c in checks if c.name == "ex9/any integer")
    assert hidden.outcome is Outcome.INCORRECT
    assert "double(-3) should return -6" in hidden.message
    assert 0 < wrong.percent < 100


def test_the_exercise_table_lists_the_new_exercise(course: grader.Course) -> None:
    table = registry.exercise_table(list(course.exercises.values()))
    assert "| ex9: Double it | `09-double` | `double(x) -> int` | 1 (1 points) |" in table


def test_the_task_cell_states_every_rule_the_checks_grade(course: grader.Course) -> None:
    unit = course.exercises["ex9"]
    assert unit.contract is not None
    text = " ".join(str(c.source) for c in course.solutions["09-double"].cells)
    assert all(rule.states in text for rule in unit.contract.rules)
