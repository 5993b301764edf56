"""One total deadline per submission (`labkit.grade.deadline`): every wait of its checks (a
call, a worker start, each racer's start, the race) is bounded by what is left of it, and
once it has passed, the checks left end "did not run" with the notice, whatever each wait's
own bound allows.

Real workers on labkit's view (`ViewWorkers`: no job, the channel as graded) where the answer
sleeps; a counting clock where the order of events is the point.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from grade.grade_helpers import SETUP, InProcessWorkers, ViewWorkers, reference_answers
from labkit.course.exercises.checks import SAFETY_CHECK
from labkit.course.exercises.trial import Outcome
from labkit.grade import grader
from labkit.grade.deadline import Deadline, unlimited
from labkit.grade.grader import Course


@pytest.fixture(scope="module")
def course() -> Course:
    return Course.load(Path(__file__).resolve().parents[2] / "solutions")


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    tmp_path.chmod(0o777)
    return tmp_path


def test_a_deadline_bounds_and_says_so() -> None:
    now = [100.0]
    deadline = Deadline(10, clock=lambda: now[0])
    assert deadline.left() == 10 and deadline.bound(30) == 10 and deadline.bound(4) == 4
    now[0] = 111.0
    assert deadline.passed() and deadline.left() == 0 and deadline.bound(4) == 0
    assert deadline.notice == "the submission's total time limit (10 s) was reached"
    assert not unlimited().passed()


def test_calls_each_under_their_own_bound_stop_at_the_total(course: Course, scratch: Path) -> None:
    """Every call sleeps just under the per-call bound: without a total, twelve checks would
    take twelve bounds; with it, the checks past the total did not run."""
    slow = "import time\ndef url_elicitation(capabilities, message, url):\n"
    slow += "    time.sleep(0.9)\n    raise NotImplementedError\n"
    deadline = Deadline(3.0)
    results = grader.check_exercise(
        course,
        course.registry["ex2"],
        [SETUP, slow],
        ViewWorkers(call_timeout=1.0),
        scratch,
        deadline,
    )
    outcomes = [r.outcome for r in results]
    assert outcomes[0] is Outcome.NOT_ATTEMPTED  # the stub, seen in time
    assert outcomes[-1] is Outcome.DID_NOT_RUN
    assert deadline.notice in results[-1].message
    assert set(outcomes) == {Outcome.NOT_ATTEMPTED, Outcome.DID_NOT_RUN}


def test_racers_that_take_their_whole_start_bound_stop_at_the_total(
    course: Course, scratch: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The first worker starts at once; every later one (each racer) sleeps at definition
    time longer than what is left of the total: the race did not run, nor anything after."""
    marks = tmp_path_factory.mktemp("marks")  # the worker's user may write here, not in scratch
    marks.chmod(0o777)
    started = str(marks / "started")
    answer = (
        "import os, time\n"
        f"if os.path.exists({started!r}):\n"
        "    time.sleep(30)\n"
        "else:\n"
        f"    open({started!r}, 'w').close()\n" + reference_answers("ex1")[0]
    )
    deadline = Deadline(8.0)
    results = grader.check_exercise(
        course,
        course.registry["ex1"],
        [SETUP, answer],
        ViewWorkers(start_timeout=20),
        scratch,
        deadline,
    )
    race = next(r for r in results if r.name == "two processes race")
    assert race.outcome is Outcome.DID_NOT_RUN and deadline.notice in race.message
    assert results[0].outcome is Outcome.PASSED  # the answer is right: only time stopped it
    *checks, safety = results  # no fault in the checks that ran: the safety points hold
    assert safety.name == SAFETY_CHECK and safety.outcome is Outcome.PASSED
    assert all(r.outcome is Outcome.DID_NOT_RUN for r in checks[checks.index(race) :])


def test_each_check_past_the_total_did_not_run_in_order(course: Course, scratch: Path) -> None:
    """A clock that moves one second each time it is read: the checks run until the total
    has passed, and every later one says why it did not run."""
    ticks = itertools.count()
    deadline = Deadline(12, clock=lambda: float(next(ticks)))
    answer = reference_answers("ex2")[0]
    workers = InProcessWorkers()
    results = grader.check_exercise(
        course, course.registry["ex2"], [SETUP, answer], workers, scratch, deadline
    )
    *checks, safety = results  # the safety points: no fault seen in the checks that ran
    assert safety.name == SAFETY_CHECK and safety.outcome is Outcome.PASSED
    passed = [r for r in checks if r.outcome is Outcome.PASSED]
    stopped = [r for r in checks if r.outcome is Outcome.DID_NOT_RUN]
    assert passed and stopped and len(passed) + len(stopped) == len(checks)
    assert checks[: len(passed)] == passed  # in order: the first ones ran
    assert all(deadline.notice in r.message for r in stopped)
