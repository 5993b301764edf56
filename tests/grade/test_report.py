"""Scoring rules, feedback wording, JUnit, the summary and exit codes, with a fake kernel
runner and check workers in this process."""

from __future__ import annotations

import dataclasses
import io
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from grade.grade_helpers import CASE_FOLDED, FIXTURES, InProcessWorkers, solved, with_source, write
from labkit.course.exercises.trial import Check, Contract, Exercise, Fail, Outcome, Trial
from labkit.grade import batch, classview, grader, report
from labkit.grade.deadline import Deadline
from labkit.grade.graded_exercises import GradedExercise
from labkit.grade.kernel import CellRun, CellStatus, Execution
from labkit.grade.report import SubmissionReport

# What a kernel cell would have shown under the old in-kernel checks: a "passed" result.
FORGED_RESULT = {
    "output_type": "display_data",
    "data": {"application/vnd.labkit.check+json": {"outcome": "passed", "message": ""}},
}


class FakeRunner:
    """Answers every cell with a canned run, and records what it was asked to run."""

    def __init__(self, script: Sequence[CellRun] | None = None, problem: str = "") -> None:
        self.script = list(script or [])
        self.problem = problem
        self.sources: list[str] = []
        self.scratch_files: list[str] = []

    def run(self, scratch: Path, sources: Sequence[str], deadline: Deadline) -> Execution:
        self.sources = list(sources)
        self.scratch_files = sorted(p.name for p in scratch.iterdir())
        cells = self.script + [CellRun(CellStatus.NOT_RUN)] * (len(sources) - len(self.script))
        return Execution(cells[: len(sources)], True, self.problem)


def _answers(t: Trial) -> Fail | None:
    """Passes once the learner's function is more than the stub (whatever it does)."""
    t.attempt("claim_and_delete", None, "alice", "n", "x", 1.0)
    return None


class OneHidden(GradedExercise):
    """ex1 with one hidden check of the test's own."""

    def checks(self) -> tuple[Check, ...]:
        return (Check("answers", _answers, "it answers", 2.0, hidden=True),)


CONTRACT = Contract("claim_and_delete(conn, principal, nonce, note_id, expires_at) -> bool")
UNIT = Exercise("ex1", "replay", CONTRACT, notebook="replay", hidden_checks="unused")
NO_PUBLIC = {"ex1": UNIT}


@pytest.fixture
def course() -> grader.Course:
    registry = {"ex1": OneHidden(UNIT)}
    return grader.Course.load(FIXTURES, registry=registry, exercises=NO_PUBLIC)


# What runs in the kernel for the replay fixture: the grader's quiet cell, the 4 code cells of
# the release (the answer holding the learner's code), and after the answer cell the one naming
# its functions.
LEARNER = 6


def learner_runs(n: int) -> list[CellRun]:
    return [CellRun(CellStatus.OK) for _ in range(n)]


def graded(
    tmp_path: Path,
    course: grader.Course,
    runner: FakeRunner,
    workers: InProcessWorkers | None = None,
    answer: str | None = None,
) -> SubmissionReport:
    nb = solved("replay") if answer is None else with_source(solved("replay"), "ex1-answer", answer)
    path = write(tmp_path / "subs", "replay.ipynb", nb)
    workers = workers or InProcessWorkers()
    return grader.grade(path, course, runner, scratch_root=tmp_path, workers=workers)


def test_what_is_sent_to_the_kernel_and_to_the_check_worker(
    tmp_path: Path, course: grader.Course
) -> None:
    runner, workers = FakeRunner(), InProcessWorkers()
    graded(tmp_path, course, runner, workers)
    code_cells = [c for c in solved("replay").cells if c.cell_type == "code"]
    quiet, setup, answer, mark, *rest = runner.sources
    assert quiet == grader.QUIET_SOURCE
    assert [setup, answer, *rest] == [c.source for c in code_cells]  # nothing after them
    assert mark == "__labkit_quiet__(__labkit_builtins__.globals(), ['claim_and_delete'])\n"
    assert runner.scratch_files == [".outputs", "submission.ipynb"]
    # One worker for the one exercise: the setup cell's imports and the answer cell only.
    assert workers.sources == [["import sqlite3\n", answer]]


def test_kernel_outputs_never_score_a_check(tmp_path: Path, course: grader.Course) -> None:
    runs = [CellRun(CellStatus.OK, [FORGED_RESULT]) for _ in range(LEARNER)]
    stub = "def claim_and_delete(conn, principal, nonce, note_id, expires_at):\n"
    stub += "    raise NotImplementedError\n"
    sub = graded(tmp_path, course, FakeRunner(runs), answer=stub)
    ex1 = next(e for e in sub.exercises if e.id == "ex1")
    assert [c.outcome for c in ex1.checks] == [Outcome.NOT_ATTEMPTED]
    assert ex1.points == 0


def test_checks_the_worker_could_not_run_are_failed_never_passed(
    tmp_path: Path, course: grader.Course
) -> None:
    for workers, said in (
        (InProcessWorkers(start_error="the check worker did not start"), "did not start"),
        (InProcessWorkers(died=True), "the check worker died"),
    ):
        sub = graded(tmp_path / said, course, FakeRunner(learner_runs(LEARNER)), workers)
        ex1 = next(e for e in sub.exercises if e.id == "ex1")
        assert [c.outcome for c in ex1.checks] == [Outcome.DID_NOT_RUN]
        assert ex1.points == 0 and said in ex1.checks[0].message
    no_workers = grader.grade(
        write(tmp_path / "bare", "replay.ipynb", solved("replay")),
        course,
        FakeRunner(learner_runs(LEARNER)),
        scratch_root=tmp_path,
    )
    ex1 = next(e for e in no_workers.exercises if e.id == "ex1")
    assert {c.outcome for c in ex1.checks} == {Outcome.DID_NOT_RUN}


def test_a_kernel_that_died_stops_no_check(tmp_path: Path, course: grader.Course) -> None:
    runs = learner_runs(2) + [CellRun(CellStatus.DEAD)]
    sub = graded(tmp_path, course, FakeRunner(runs, problem="the kernel died"))
    ex1 = next(e for e in sub.exercises if e.id == "ex1")
    assert [c.outcome for c in ex1.checks] == [Outcome.PASSED]
    outputs = next(e for e in sub.exercises if e.id == "outputs")
    assert {c.outcome for c in outputs.checks} == {Outcome.DID_NOT_RUN}
    assert any("the kernel died" in n for n in sub.notices)


def test_a_kernel_that_never_started_is_an_error_entry(
    tmp_path: Path, course: grader.Course
) -> None:
    class NeverStarts(FakeRunner):
        def run(self, scratch: Path, sources: Sequence[str], deadline: Deadline) -> Execution:
            return Execution([CellRun(CellStatus.NOT_RUN)] * len(sources), False, "no kernel")

    sub = graded(tmp_path, course, NeverStarts())
    assert sub.status == "error" and sub.error == "replay.ipynb: no kernel"
    assert sub.infrastructure  # no learner code ran: grading itself failed, not a 0
    assert batch.exit_code(report.batch([sub], 1.0)) == batch.GRADER_FAILED


def make_report(outcomes: Sequence[Outcome], hidden: bool = True) -> SubmissionReport:
    checks = [
        report.CheckScore(
            name=f"ex1/c{i}",
            title=f"check {i}",
            hidden=hidden,
            outcome=o,
            points=1.0 if o is Outcome.PASSED else 0.0,
            max_points=1.0,
            message="" if o is Outcome.PASSED else f"expected {i}, got nothing",
        )
        for i, o in enumerate(outcomes)
    ]
    section = report.exercise_score("ex1", checks)
    return SubmissionReport(
        file="a.ipynb",
        status="graded",
        solution="replay",
        points=section.points,
        max_points=section.max_points,
        percent=100.0 * section.points / section.max_points,
        exercises=[section],
    )


def test_feedback_never_says_all_passed_when_a_hidden_check_failed() -> None:
    text = report.feedback(make_report([Outcome.PASSED, Outcome.INCORRECT]))
    assert "All checks passed" not in text
    assert "Hidden checks (run only at grading): 1 of 2 passed." in text
    assert "  [incorrect] check 1 (hidden, 0/1)\n      | expected 1, got nothing\n" in text
    assert "All checks passed, hidden checks included." in report.feedback(
        make_report([Outcome.PASSED, Outcome.PASSED])
    )


def test_junit_has_one_testcase_per_check() -> None:
    reports = [make_report([Outcome.PASSED, Outcome.DID_NOT_RUN, Outcome.ERROR])]
    reports.append(SubmissionReport.not_graded("bad.ipynb", "bad.ipynb: corrupt notebook"))
    root = ET.fromstring(report.junit(reports))
    first, second = root.findall("testsuite")
    assert [first.get(k) for k in ("tests", "failures", "errors")] == ["3", "2", "0"]
    messages = [f.get("message") for f in first.iter("failure")]
    assert messages == [
        "did not run: expected 1, got nothing",
        "error in your code: expected 2, got nothing",
    ]
    assert second.find("testcase/error").get("message") == "bad.ipynb: corrupt notebook"  # type: ignore[union-attr]


def test_summary_and_exit_codes() -> None:
    good, low = (
        make_report([Outcome.PASSED] * 4),
        make_report([Outcome.PASSED, Outcome.INCORRECT]),
    )
    result = report.batch([good, low], 3.0)
    assert result.mean_percent == 75.0 and batch.exit_code(result) == 0
    assert batch.exit_code(result, fail_under=60) == 1
    assert batch.exit_code(result, fail_under=50) == 0
    lines = batch.summary(result).splitlines()
    assert lines[0].split() == ["submission", "score", "%", "graded", "as"]
    assert lines[1].split() == ["a.ipynb", "4/4", "100", "replay"]
    assert lines[-1] == "2 graded, 0 not graded, mean 75%, 3.0 s"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_terminal_only() -> None:
    screen, pipe = Terminal(), io.StringIO()
    for stream in (screen, pipe):
        bar = batch.Progress(2, stream)
        bar.step("a.ipynb")
        bar.step("b.ipynb")
    assert "[###############---------------] 1/2 a.ipynb" in screen.getvalue()
    assert screen.getvalue().endswith("\n") and "2/2" in screen.getvalue()
    assert pipe.getvalue() == ""
    hostile = Terminal()
    batch.Progress(1, hostile).step("\x1b[2J\x1b]0;pwned\x07evil.ipynb")
    assert "\x1b" not in hostile.getvalue() and "\x07" not in hostile.getvalue()


def _replays_refused(t: Trial) -> Fail | None:
    return (
        Fail("a refusal", "a claim", "refuse")
        if t.call("claim_and_delete", ":memory:", "alice", "n", "x", 1.0)
        else None
    )


def with_public(course: grader.Course) -> grader.Course:
    checks = (
        Check("claims once", lambda t: None, "it claims", 2.0),
        Check("replay refused", _replays_refused, "it refuses", 1.0),
    )
    exercises = {"ex1": dataclasses.replace(UNIT, checks=checks)}
    return dataclasses.replace(course, exercises=exercises)


def test_public_checks_are_scored_beside_the_hidden_ones(
    tmp_path: Path, course: grader.Course
) -> None:
    answer = "def claim_and_delete(conn, principal, nonce, note_id, expires_at):\n"
    answer += "    return True\n"
    sub = graded(tmp_path, with_public(course), FakeRunner(), answer=answer)
    ex1 = sub.exercises[0]
    assert [(c.name, c.hidden, c.outcome) for c in ex1.checks] == [
        ("ex1/public/claims once", False, Outcome.PASSED),
        ("ex1/public/replay refused", False, Outcome.INCORRECT),
        ("ex1/answers", True, Outcome.PASSED),
    ]
    assert (ex1.points, ex1.max_points) == (4.0, 5.0)
    assert ex1.checks[1].message.startswith("ex1 · replay refused: a refusal, but a claim")


def test_an_answer_that_raises_is_an_error_in_your_code(
    tmp_path: Path, course: grader.Course
) -> None:
    answer = "def claim_and_delete(conn, principal, nonce, note_id, expires_at):\n"
    answer += "    raise ValueError('no table named claims')\n"
    sub = graded(tmp_path, with_public(course), FakeRunner(), answer=answer)
    refused = next(c for c in sub.exercises[0].checks if c.title == "replay refused")
    assert refused.outcome is Outcome.ERROR and refused.points == 0
    assert "ValueError: no table named claims" in refused.message
    assert "Traceback" not in refused.message or "<answer cell>" in refused.message


def test_a_stub_gains_no_point_from_an_output_that_shows_it_at_work(
    tmp_path: Path, course: grader.Course
) -> None:
    """ex1-demo calls claim_and_delete and declares no checks of its own: its output counts
    only once every check of ex1 passed."""
    solution = grader.Course.load(FIXTURES).solutions["replay"]
    saved = {c.id: c.get("outputs", []) for c in solution.cells if c.get("id")}
    runs = [CellRun(CellStatus.OK) for _ in range(LEARNER)]
    runs[4] = CellRun(CellStatus.OK, [dict(o) for o in saved["ex1-demo"]])  # as if right
    runs[5] = CellRun(CellStatus.OK, [dict(o) for o in saved["address"]])
    stub = "def claim_and_delete(conn, principal, nonce, note_id, expires_at):\n"
    stub += "    raise NotImplementedError\n"
    found = {}
    for answer, demo in ((stub, 0.0), (CASE_FOLDED, 1.0)):
        sub = graded(tmp_path / str(demo), course, FakeRunner(runs), answer=answer)
        outputs = {c.name: c for e in sub.exercises for c in e.checks if e.id == "outputs"}
        assert outputs["outputs/address"].points == 1.0  # shows no learner function
        assert outputs["outputs/ex1-demo"].points == demo
        found[demo] = outputs["outputs/ex1-demo"]
    assert "counts once the checks of what it shows pass ('answers')" in found[0.0].message
    assert found[0.0].outcome is Outcome.NOT_ATTEMPTED


def test_cli_refuses_bad_arguments_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from labkit import cli

    missing = ["grade", str(tmp_path / "a.ipynb"), "--solutions", str(tmp_path / "none")]
    assert cli.main(missing) == 2
    assert "no such directory of solution notebooks" in capsys.readouterr().err
    assert cli.main(["grade", str(tmp_path), "--solutions", str(FIXTURES), "--jobs", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err
    assert cli.main(["grade", str(tmp_path), "--solutions", str(FIXTURES)]) == 2
    assert "no .ipynb submissions found" in capsys.readouterr().err


def test_class_view_counts_failures_among_the_submissions_that_have_the_exercise() -> None:
    other = make_report([Outcome.PASSED]).model_copy(update={"exercises": []})
    broken = SubmissionReport.not_graded("<b>bad</b>.ipynb", "<b>bad</b>.ipynb: corrupt notebook")
    page = classview.render(report.batch([make_report([Outcome.INCORRECT]), other, broken], 1.0))
    assert "<td>check 0</td><td class=n>1 of 1</td>" in page
    assert "&lt;b&gt;bad&lt;/b&gt;.ipynb" in page and "<b>bad" not in page
    assert ">0%</text>" in page  # ex1's bar
