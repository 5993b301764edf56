"""Mutation testing of the checks (`labkit.grade.mutants`, `labkit course mutants`): the
mutants are real single edits of the reference answers, each graded by the exercise's public
and hidden checks in check workers; the course's checks catch every mutant that is not
declared equivalent, a declared equivalent that no longer survives is reported, and the
feedback a caught mutant gets is a next step in the learner's terms.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grade.grade_helpers import COURSE
from labkit.course.exercises.trial import Check, Equivalent
from labkit.grade import mutants
from labkit.grade.graded_exercises import GRADED
from labkit.grade.grader import Course
from labkit.grade.practice import PublicOnly

SOURCE = """LIMIT = 3


def bigger(a, b):
    if a < b:
        return {"which": "b", "by": b - a}
    return None
"""


@pytest.fixture(scope="module")
def course() -> Course:
    return Course.load(COURSE)


def test_each_edit_is_one_change_on_one_line_and_each_mutant_comes_once() -> None:
    made = mutants.edits(SOURCE)
    sources = [mutated for _, _, _, mutated in made]
    assert len(sources) == len(set(sources)) >= 4 and SOURCE not in sources
    for line, was, becomes, mutated in made:
        assert SOURCE.splitlines()[line - 1] == was != becomes
        assert mutated.splitlines()[line - 1] == becomes
    changes = {(was.strip(), becomes.strip()) for _, was, becomes, _ in made}
    assert ("if a < b:", "if a <= b:") in changes
    assert ('return {"which": "b", "by": b - a}', 'return {"which": "b", "by": b + a}') in changes
    assert ("LIMIT = 3", "LIMIT = 4") in changes  # module-level values are part of an answer


def test_every_exercise_is_mutated_in_its_answer_cells_only(course: Course) -> None:
    for graded in GRADED.values():
        solution = course.solutions[course.exercise(graded).notebook]
        found = mutants.mutants_of(graded, solution)
        assert found, graded.id
        setup = found[0].sources[0]
        assert all(m.sources[0] == setup for m in found)  # the setup imports are never mutated
        assert all(m.exercise == graded.id and m.was != m.becomes for m in found)


def test_the_course_checks_catch_every_mutant_not_declared_equivalent(course: Course) -> None:
    strengths = mutants.measure(course, list(GRADED.values()))
    table = mutants.table(strengths)
    assert [s.exercise for s in strengths] == list(GRADED)
    for strength in strengths:
        assert strength.holds, table
        assert strength.percent >= mutants.GOAL and not strength.stale, table
        assert len(strength.counted) >= 5, table  # enough mutants that the share means something
        for verdict in strength.counted:
            _assert_learner_feedback(verdict.message)
    assert re.search(r"\| ex1 \| \d+ \| \d+ \| \d+ \| 0 \| 100\.0% \|", table)


def _assert_learner_feedback(message: str) -> None:
    """A caught mutant's first failure reads as feedback to a learner: a next step (or the
    reason the check could not judge), no internal type, no grader path, no traceback."""
    assert "Next:" in message or "did not run" in message or "not defined" in message, message
    for internal in ("Opaque", "labkit-grade", "labkit-mutants", "Traceback", "LearnerError"):
        assert internal not in message, message


def test_weaker_checks_leave_survivors_and_the_table_names_them(course: Course) -> None:
    """ex4 with one check that never calls the answer (and no hidden checks): every mutant
    survives, the share falls under the goal, and each survivor is named by its edit."""
    unit = course.exercises["ex4"]
    weak = dataclasses.replace(unit, checks=(Check("looks only", lambda t: None, "nothing"),))
    weakened = dataclasses.replace(course, exercises={**course.exercises, "ex4": weak})
    (strength,) = mutants.measure(weakened, [PublicOnly(weak)])
    assert len(strength.survivors) == len(strength.counted) > 0 and not strength.holds
    table = mutants.table([strength])
    assert f"{strength.percent:.1f}%" in table
    for verdict in strength.survivors:
        assert f"ex4 survivor: {verdict.mutant.change}" in table


def test_a_declared_equivalent_a_check_catches_is_stale(course: Course) -> None:
    """Declared equivalent, but the checks catch it: the declaration is wrong and reported."""
    graded = GRADED["ex4"]
    solution = course.solutions[course.exercise(graded).notebook]
    caught = next(m for m in mutants.mutants_of(graded, solution) if "is_relative_to" in m.was)
    wrong = Equivalent(caught.was, caught.becomes, "said to change nothing")
    unit = dataclasses.replace(course.exercises["ex4"], equivalent_mutants=(wrong,))
    claimed = dataclasses.replace(course, exercises={**course.exercises, "ex4": unit})
    (strength,) = mutants.measure(claimed, [graded])
    assert strength.stale == (wrong,) and not strength.holds
    assert "matches no surviving mutant: remove it" in mutants.table([strength])


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labkit.cli", "course", "mutants", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_command_prints_the_table_and_writes_it(tmp_path: Path) -> None:
    done = _cli(
        "ex4", "--solutions", str(COURSE), "--markdown", str(tmp_path / "m.md"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"\| ex4 \| \d+ \| \d+ \| \d+ \| 0 \| 100\.0% \|", done.stdout)
    assert (tmp_path / "m.md").read_text() == done.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("ex9",), "no such exercise: ex9"),
        (("--solutions", "nowhere"), "nowhere: no such folder"),
        (("--jobs", "0"), "--jobs must be positive"),
        (("--solutions", str(COURSE), "--markdown", "/"), "--markdown /: exists and is a folder"),
        (
            ("--solutions", str(COURSE), "--markdown", "/proc/version/m.md"),
            "--markdown /proc/version/m.md: /proc/version is not a folder",
        ),
    ],
)
def test_bad_input_is_named_with_exit_2(args: tuple[str, ...], said: str, tmp_path: Path) -> None:
    done = _cli(*args, cwd=tmp_path)
    assert done.returncode == 2 and said in done.stderr and not done.stdout
