"""Output points are gated per cell: each checked output that shows an exercise's functions at
work names the checks that exercise what it shows (`GradedExercise.outputs`), and its point
counts only once every one of them passed. The course's declarations are complete and name
real checks; the rule holds for a cell the exercise does not declare too (every check)."""

from __future__ import annotations

import pytest

from grade.grade_helpers import COURSE
from labkit.course.exercises.checks import CheckResult
from labkit.course.exercises.registry import EXERCISES as COURSE_CHECKS
from labkit.course.exercises.trial import Outcome
from labkit.grade import graded_exercises as ex
from labkit.grade import grader

_COURSE = grader.Course.load(COURSE)


def _shown(stem: str) -> list[tuple[ex.GradedExercise, str]]:
    """(exercise, cell id) for each checked output cell of `stem` that names a contract."""
    solution = _COURSE.solutions[stem]
    exercises = ex.exercises_in(solution, _COURSE.registry)
    checked = grader.checked_outputs(
        solution, _COURSE.learner_copy(stem), {e.id for e in exercises}
    )
    found = []
    for cell in checked:
        source = next(str(c.source) for c in solution.cells if c.get("id") == cell.cell_id)
        names = grader.names_used(source)
        found += [(e, cell.cell_id) for e in exercises if names & set(e.contract)]
    return found


@pytest.mark.parametrize("stem", sorted(_COURSE.solutions))
def test_every_cell_that_shows_an_exercise_at_work_declares_its_checks(stem: str) -> None:
    for exercise, cell_id in _shown(stem):
        assert cell_id in exercise.outputs, f"{exercise.id} does not declare {cell_id}"


@pytest.mark.parametrize("exercise", ex.GRADED.values(), ids=lambda e: e.id)
def test_each_declaration_names_real_checks_of_a_checked_cell(
    exercise: ex.GradedExercise,
) -> None:
    checks = {c.name for c in (*COURSE_CHECKS[exercise.id].checks, *exercise.checks())}
    shown = {cell for stem in _COURSE.solutions for e, cell in _shown(stem) if e.id == exercise.id}
    assert exercise.outputs and set(exercise.outputs) <= shown
    for cell_id, names in exercise.outputs.items():
        assert names and set(names) <= checks, (cell_id, set(names) - checks)


def _results(passed: set[str], exercise: ex.GradedExercise) -> list[CheckResult]:
    names = [c.name for c in (*COURSE_CHECKS[exercise.id].checks, *exercise.checks())]
    return [
        CheckResult(n, Outcome.PASSED if n in passed else Outcome.INCORRECT, "", 0, 1)
        for n in names
    ]


def test_a_declared_cell_waits_for_its_own_checks_only() -> None:
    ex2 = ex.GRADED["ex2"]
    source = "url_elicitation(capabilities, 'Connect.', url)"
    declared = set(ex2.outputs["ex2-try"])
    every = {c.name for c in (*COURSE_CHECKS["ex2"].checks, *ex2.checks())}
    # Its own checks passed, another failed: it counts.
    assert grader.held_back("ex2-try", source, [ex2], {"ex2": _results(declared, ex2)}) == ""
    # One check passes, the rest of its own do not (a constant refusal): it waits.
    one = {"form only refused"}
    held = grader.held_back("ex2-try", source, [ex2], {"ex2": _results(one, ex2)})
    assert "'url offered when declared'" in held
    # A cell it does not declare that names the function waits for every check.
    assert grader.held_back("other", source, [ex2], {"ex2": _results(declared, ex2)})
    assert grader.held_back("other", source, [ex2], {"ex2": _results(every, ex2)}) == ""
