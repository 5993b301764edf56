"""The check worker as the grader starts it: a process of a confined job, like the kernel.

The learner's answer cells run in the worker, so it must see what the kernel sees and no
more: its own uid from the job pool, no network, labkit without the hidden checks, nothing
outside its scratch folder; and a worker that cannot start makes every check "did not run".
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from grade.conftest import TEST_LIMITS
from grade.grade_helpers import FIXTURES
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import Outcome
from labkit.grade import grader, launcher
from labkit.grade.containment import FIRST_UID, SLOTS
from labkit.grade.deadline import unlimited
from labkit.grade.kernel import jobs_for, sandbox_mode

HIDDEN = Path(launcher.__file__).parent / "hidden" / "ex1.py"
# Each function answers with data: what the worker's process could do.
PROBES = """
import os, socket
def uid():
    return os.getuid()
def read(path):
    try:
        return open(path).read()[:20]
    except OSError as error:
        return type(error).__name__
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as error:
        return type(error).__name__
def connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x", ("1.1.1.1", 53))
        return "sent"
    except OSError as error:
        return type(error).__name__
def hidden_import():
    try:
        from labkit.grade.hidden.ex1 import CHECKS
        return [check.name for check in CHECKS]
    except Exception as error:
        return type(error).__name__
"""


@pytest.fixture
def scratch(work: Path) -> Path:
    area = Path(tempfile.mkdtemp(dir=work, prefix="checks-"))
    area.chmod(0o711)
    return area


def test_the_worker_runs_in_a_confined_job(scratch: Path) -> None:
    workers = grader.JobWorkers(jobs_for(TEST_LIMITS), sandbox=sandbox_mode())
    with workers.runner(scratch, [PROBES], unlimited()) as worker:
        assert {"uid", "read", "listing", "connect"} <= worker.start()

        def ask(name: str, *args: object) -> object:
            answer = worker.call(name, args, 10)
            assert answer is not None and answer.error is None, answer
            return answer.value

        assert FIRST_UID <= int(str(ask("uid"))) < FIRST_UID + SLOTS  # a job uid, not root
        assert ask("read", str(HIDDEN)) in ("FileNotFoundError", "PermissionError")
        assert ask("read", str(FIXTURES / "replay.ipynb")) in ("FileNotFoundError",)
        # labkit's view in the worker withholds everything but the building blocks.
        assert ask("hidden_import") == "ReferenceWithheld"
        shown = ask("listing", str(HIDDEN.parent.parent))
        assert "hidden" not in shown and "grader.py" not in shown, shown
        assert ask("connect") == "OSError"  # no network namespace to send from


def test_a_worker_that_cannot_start_is_grading_that_failed_not_a_score(scratch: Path) -> None:
    """No learner code ran: the checks are not scored 0, the submission is not graded."""
    workers = grader.JobWorkers(
        jobs_for(TEST_LIMITS), sandbox=sandbox_mode(), python="/nonexistent/python"
    )
    course = grader.Course.load(FIXTURES)
    exercise = course.registry["ex2"]
    answer = "def url_elicitation(*args):\n    return {}\n"
    with pytest.raises(grader.GradingFailed, match="the check worker did not start"):
        grader.check_exercise(course, exercise, [answer], workers, scratch)


def test_a_worker_whose_answer_cells_end_it_fails_every_check_as_did_not_run(
    scratch: Path,
) -> None:
    """The learner's own code ended the worker: every check "did not run", 0 points."""
    workers = grader.JobWorkers(jobs_for(TEST_LIMITS), sandbox=sandbox_mode())
    course = grader.Course.load(FIXTURES)
    exercise = course.registry["ex2"]
    answer = "import os\nos._exit(0)\n"
    results = grader.check_exercise(course, exercise, [answer], workers, scratch)
    assert {r.outcome for r in results} == {Outcome.DID_NOT_RUN}
    # each public and hidden check, and the safety points
    assert len(results) == len(EXERCISES["ex2"].checks) + len(exercise.checks()) + 1
    assert any(r.hidden for r in results) and any(not r.hidden for r in results)
    assert all(r.points == 0 for r in results)
