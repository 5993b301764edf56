"""No submission can end a batch: what goes wrong while one is graded (its checks, its worker,
a check's cleanup, any exception, RecursionError and MemoryError included) is that
submission's entry, and only the grader itself (an interrupt, SIGTERM) ends a run early, with
every report written for what was graded. Fake kernel runners and check workers in this
process where the order of events is the point; real workers on labkit's view where a
learner's thread is.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from grade.grade_helpers import (
    COURSE,
    FIXTURES,
    SETUP,
    InProcessWorkers,
    ViewWorkers,
    course_solution,
    reference_answers,
    solved,
    write,
)
from labkit.course.exercises.trial import Check, Contract, Exercise, Fail, Outcome, Trial
from labkit.grade import batch, grader
from labkit.grade.deadline import Deadline
from labkit.grade.kernel import CellRun, CellStatus, Execution, Limits
from labkit.grade.report import BatchReport


class Runner:
    """Every cell ran; `trouble` (by submission file name) is raised instead of running."""

    def __init__(self, trouble: dict[str, BaseException | None] | None = None) -> None:
        self.trouble = trouble or {}

    def run(self, scratch: Path, sources: Sequence[str], deadline: Deadline) -> Execution:
        original = (scratch / "submission.ipynb").read_bytes()
        for name, error in self.trouble.items():
            if name.encode() in original:
                if error is None:
                    os.kill(os.getpid(), signal.SIGTERM)  # the grader told to stop...
                    time.sleep(1)  # ...while this submission still runs
                else:
                    raise error
        return Execution([CellRun(CellStatus.OK) for _ in sources], True)


def submissions(folder: Path, names: Sequence[str]) -> list[Path]:
    """Solved copies of the `paths` fixture, each marked with its name in a cell."""
    paths = []
    for name in names:
        nb = solved("paths")
        nb.cells[-1].source += f"\n# {name}\n"
        paths.append(write(folder, f"{name}.ipynb", nb))
    return paths


def run(tmp_path: Path, names: Sequence[str], runner: Runner) -> BatchReport:
    course = grader.Course.load(FIXTURES)
    files = submissions(tmp_path / "subs", names)
    return batch.run(files, course, limits=Limits(), runner=runner)


@pytest.mark.parametrize(
    "error", [RecursionError("deep"), MemoryError(), OSError(39, "Directory not empty")]
)
def test_whatever_one_submission_raises_is_its_own_entry(
    tmp_path: Path, error: BaseException
) -> None:
    result = run(tmp_path, ["first", "hostile", "last"], Runner({"hostile": error}))
    by_name = {s.file: s for s in result.submissions}
    assert by_name["first.ipynb"].status == by_name["last.ipynb"].status == "graded"
    hostile = by_name["hostile.ipynb"]
    assert hostile.status == "error"
    assert hostile.error == f"did not run: grading this submission stopped ({type(error).__name__})"
    assert not result.stopped


@pytest.mark.parametrize("signalled", [False, True], ids=["interrupt", "SIGTERM"])
def test_the_grader_stopped_writes_what_it_graded(tmp_path: Path, signalled: bool) -> None:
    trouble: dict[str, BaseException | None] = {
        "second": None if signalled else KeyboardInterrupt()
    }
    result = run(tmp_path, ["first", "second", "third"], Runner(trouble))
    assert result.stopped.startswith("grading was stopped (")
    assert ("SIGTERM" in result.stopped) is signalled
    by_name = {s.file: s for s in result.submissions}
    assert by_name["first.ipynb"].status == "graded"
    for name in ("second.ipynb", "third.ipynb"):
        assert by_name[name].status == "error"
        assert by_name[name].error == f"did not run: {result.stopped}"
    out = tmp_path / "out"
    batch.write(result, out, out / "junit.xml")
    assert sorted(p.name for p in (out / "submissions").glob("*.json")) == [
        "first.json",
        "second.json",
        "third.json",
    ]
    # A stopped run is grading's failure, not the submissions': the infrastructure's exit code.
    assert "STOPPED" in batch.summary(result) and batch.exit_code(result) == batch.GRADER_FAILED
    assert "Stopped:" in (out / "class.html").read_text()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # given back


# -- one check's trouble stays that check's ------------------------------------------------------


def _after_the_answer(t: Trial) -> Fail | None:
    """Calls the learner's code, then stops on what it returned (a check not written for it)."""
    value = t.call("claim_and_delete", None, "alice", "n", "x", 1.0)
    int(value)
    return None


def _before_the_answer(t: Trial) -> Fail | None:
    raise KeyError("the check's own table")


def test_a_check_that_stops_on_the_answer_quotes_it_as_the_submissions_own(
    tmp_path: Path,
) -> None:
    checks = (
        Check("reads the answer", _after_the_answer, "it answers with a number", 1.0),
        Check("breaks by itself", _before_the_answer, "it answers", 1.0),
    )
    contract = Contract("claim_and_delete(conn, principal, nonce, note_id, expires_at) -> str")
    exercises = {"ex1": Exercise("ex1", "replay", contract, checks)}
    course = grader.Course.load(FIXTURES, exercises=exercises)
    answer = "def claim_and_delete(conn, principal, nonce, note_id, expires_at):\n"
    answer += "    return '<b>evil</b>'\n"
    results = grader.check_exercise(
        course, course.registry["ex1"], [answer], InProcessWorkers(), tmp_path
    )
    read, broken = results[0], results[1]
    assert read.outcome is Outcome.INCORRECT
    assert "Quoted from your answer: «ValueError: invalid literal for int() with base 10: " in (
        read.message
    )
    assert "'<b>evil</b>'" in read.message and "course team" not in read.message
    assert broken.outcome is Outcome.ERROR and "the check itself failed" in broken.message


def test_a_thread_writing_into_the_check_folders_changes_no_outcome(tmp_path: Path) -> None:
    """Started when the answer cells run, it fills every check's folder as fast as it can,
    so removing a folder at the check's end fails (it is logged and left to the grader's
    removal of the whole area); the checks judge the answer all the same."""
    writer = (
        "import os, threading\n"
        "def _fill():\n"
        "    n = 0\n"
        "    while True:\n"
        "        for name in os.listdir('.'):\n"
        "            if name.startswith('labkit-check-'):\n"
        "                n += 1\n"
        "                try:\n"
        "                    open(os.path.join(name, f'x{n % 50}'), 'w').close()\n"
        "                except OSError:\n"
        "                    pass\n"
        "threading.Thread(target=_fill, daemon=True).start()\n"
    )
    course = grader.Course.load(COURSE)
    tmp_path.chmod(0o777)
    results = grader.check_exercise(
        course,
        course.registry["ex4"],
        [SETUP, writer, *reference_answers("ex4")],
        ViewWorkers(),
        tmp_path,
        solution=course_solution("ex4"),
    )
    assert {r.outcome for r in results} == {Outcome.PASSED}


def test_a_worker_that_never_answers_is_did_not_run_not_an_exception(tmp_path: Path) -> None:
    course = grader.Course.load(FIXTURES)
    workers = InProcessWorkers(start_error="the check worker did not start (test)")
    results = grader.check_exercise(course, course.registry["ex1"], [""], workers, tmp_path)
    assert {r.outcome for r in results} == {Outcome.DID_NOT_RUN}
    assert all("(test)" in r.message for r in results)
