"""The check worker: the learner's answer cells run in a process of their own and the public
checks judge them through JSON only.

Every catalogued answer (tests/course/mistakes/exN/*.py) gets the same outcome per check
through the worker as in the notebook's own process (one engine, two runners, one encoding);
the correct ones pass every public check; objects that forge equality come back as opaque data
and fail; a hang is bounded by killing the worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grade.grade_helpers import (
    MISTAKES,
    WORKER_ARGV,
    judge_in_process,
    judge_in_worker,
)
from labkit.course.exercises.checks import run_checks
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import CheckSettings, Outcome
from labkit.grade.worker import WorkerRunner

# ex1's answers race two processes per run: its correct answers stand for the exercise here.
CATALOGUE = sorted(MISTAKES.glob("ex[2-5]/*.py")) + sorted(MISTAKES.glob("ex1/correct_*.py"))
ARGV = WORKER_ARGV


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    tmp_path.chmod(0o777)
    yield tmp_path


def through_worker(exercise_id: str, body: str, scratch: Path) -> dict[str, Outcome]:
    report = judge_in_worker(exercise_id, EXERCISES[exercise_id].checks, [body], scratch)
    return {r.name: r.outcome for r in report.results}


def in_process(exercise_id: str, body: str, scratch: Path) -> dict[str, Outcome]:
    report = judge_in_process(exercise_id, EXERCISES[exercise_id].checks, [body], scratch)
    return {r.name: r.outcome for r in report.results}


@pytest.mark.parametrize("answer", CATALOGUE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_worker_judges_every_catalogued_answer_as_the_kernel_does(
    answer: Path, scratch: Path
) -> None:
    exercise_id = answer.parent.name
    body = answer.read_text()
    judged = through_worker(exercise_id, body, scratch)
    assert judged == in_process(exercise_id, body, scratch)
    if answer.stem.startswith("correct"):
        assert set(judged.values()) == {Outcome.PASSED}, judged


def test_an_always_equal_dict_is_opaque_and_fails(scratch: Path) -> None:
    body = (
        "class Yes(dict):\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    def __ne__(self, other):\n"
        "        return False\n"
        "    __hash__ = None\n"
        "def url_elicitation(capabilities, message, url):\n"
        "    return Yes()\n"
    )
    judged = through_worker("ex2", body, scratch)
    assert judged["url offered when declared"] is Outcome.INCORRECT
    assert Outcome.PASSED not in judged.values()


def test_the_stub_is_not_attempted_and_a_hang_is_an_error(scratch: Path) -> None:
    stub = "def url_elicitation(capabilities, message, url):\n    raise NotImplementedError\n"
    assert set(through_worker("ex2", stub, scratch).values()) == {Outcome.NOT_ATTEMPTED}
    hang = "import time\ndef url_elicitation(c, m, u):\n    time.sleep(3600)\n"
    exercise = EXERCISES["ex2"]
    runner = WorkerRunner([hang], argv=ARGV, scratch=scratch)
    try:
        runner.start()
        report = run_checks(
            exercise,
            exercise.checks[:1],
            runner,
            lambda n: True,
            CheckSettings(call_timeout=1, tmp_parent=scratch),
        )
    finally:
        runner.close()
    # The one check, then the safety points, earned only beside a passed check.
    assert [r.outcome for r in report.results] == [Outcome.ERROR, Outcome.INCORRECT]
    assert "did not return within 1 s" in report.results[0].message
