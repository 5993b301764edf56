"""Scoring rules, feedback wording, JUnit, the summary and exit codes, with a fake runner."""

from __future__ import annotations

import dataclasses
import io
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from grade.grade_helpers import FIXTURES, solved, write
from labkit.grade import batch, classview, grader, report
from labkit.grade.graded_exercises import PublicCheck
from labkit.grade.kernel import CellRun, CellStatus, Execution
from labkit.grade.probe import MIME, PUBLIC_MIME
from labkit.grade.report import GradedOutcome, SubmissionReport


def check_output(outcome: str, message: str = "") -> dict[str, object]:
    return {"output_type": "display_data", "data": {MIME: {"outcome": outcome, "message": message}}}


class FakeRunner:
    """Answers every cell with a canned run, and records what it was asked to run."""

    def __init__(self, script: Sequence[CellRun] | None = None, problem: str = "") -> None:
        self.script = list(script or [])
        self.problem = problem
        self.sources: list[str] = []
        self.scratch_files: list[str] = []

    def run(self, scratch: Path, sources: Sequence[str]) -> Execution:
        self.sources = list(sources)
        self.scratch_files = sorted(p.name for p in scratch.iterdir())
        cells = self.script + [CellRun(CellStatus.NOT_RUN)] * (len(sources) - len(self.script))
        return Execution(cells[: len(sources)], True, self.problem)


@pytest.fixture
def course() -> grader.Course:
    # Public checks are injected per test: the canned runs below are cell by cell.
    return grader.Course.load(FIXTURES, public=lambda exercise: [])


# What runs before the checks for the replay fixture: the grader's quiet cell, the 4 code
# cells of the release (the answer holding the learner's code), and after the answer cell the
# one naming its functions.
LEARNER = 6


def learner_runs(n: int) -> list[CellRun]:
    return [CellRun(CellStatus.OK) for _ in range(n)]


def graded(tmp_path: Path, course: grader.Course, runner: FakeRunner) -> SubmissionReport:
    path = write(tmp_path / "subs", "replay.ipynb", solved("replay"))
    return grader.grade(path, course, runner, scratch_root=tmp_path)


def test_what_is_sent_to_the_kernel(tmp_path: Path, course: grader.Course) -> None:
    runner = FakeRunner()
    graded(tmp_path, course, runner)
    code_cells = [c for c in solved("replay").cells if c.cell_type == "code"]
    quiet, setup, answer, mark, *rest = runner.sources[: len(code_cells) + 2]
    assert quiet == grader.QUIET_SOURCE
    assert [setup, answer, *rest] == [c.source for c in code_cells]
    assert mark == "__labkit_quiet__(__labkit_builtins__.globals(), ['claim_and_delete'])\n"
    loader, *checks = runner.sources[len(code_cells) + 2 :]
    assert "__labkit_builtins__.exec(__labkit_builtins__.compile(" in loader
    assert "racing_claims" in loader
    assert [c.split("[")[-1].split("]")[0] for c in checks] == [
        "'racing_claims'",
        "'nonces_per_principal'",
        "'transaction_closed'",
    ]
    # The hidden source is never a file; `../outputs` is a folder the kernel may write.
    assert runner.scratch_files == [".outputs", "submission.ipynb"]


def test_checks_that_did_not_run_are_failed_never_passed(
    tmp_path: Path, course: grader.Course
) -> None:
    runs = learner_runs(LEARNER) + [CellRun(CellStatus.OK), CellRun(CellStatus.DEAD)]
    sub = graded(tmp_path, course, FakeRunner(runs, problem="the kernel died"))
    ex1 = next(e for e in sub.exercises if e.id == "ex1")
    assert [c.outcome for c in ex1.checks] == [GradedOutcome.DID_NOT_RUN] * 3
    assert ex1.points == 0
    assert ex1.checks[0].message.startswith("did not run: the kernel died")
    assert ex1.checks[1].message == "did not run: the kernel died"


def test_a_check_cell_without_a_result_did_not_run(tmp_path: Path, course: grader.Course) -> None:
    runs = learner_runs(LEARNER) + [CellRun(CellStatus.OK), CellRun(CellStatus.OK)]  # no output
    runs += [CellRun(CellStatus.OK, [check_output("passed")])]
    runs += [CellRun(CellStatus.OK, [check_output("passed and more")])]  # forged outcome
    sub = graded(tmp_path, course, FakeRunner(runs))
    outcomes = [c.outcome for c in sub.exercises[0].checks]
    assert outcomes == [GradedOutcome.DID_NOT_RUN, GradedOutcome.PASSED, GradedOutcome.DID_NOT_RUN]
    assert sub.exercises[0].points == 1


def test_a_failed_loader_fails_its_checks(tmp_path: Path, course: grader.Course) -> None:
    runs = learner_runs(LEARNER) + [CellRun(CellStatus.ERROR, ename="NameError")]
    runs += [CellRun(CellStatus.OK, [check_output("passed")])] * 3
    sub = graded(tmp_path, course, FakeRunner(runs))
    assert {c.outcome for c in sub.exercises[0].checks} == {GradedOutcome.DID_NOT_RUN}


def test_a_kernel_that_never_started_is_an_error_entry(
    tmp_path: Path, course: grader.Course
) -> None:
    class NeverStarts(FakeRunner):
        def run(self, scratch: Path, sources: Sequence[str]) -> Execution:
            return Execution([CellRun(CellStatus.NOT_RUN)] * len(sources), False, "no kernel")

    sub = graded(tmp_path, course, NeverStarts())
    assert sub.status == "error" and sub.error == "replay.ipynb: no kernel"
    assert batch.exit_code(report.batch([sub], 1.0)) == 1


def make_report(outcomes: Sequence[GradedOutcome], hidden: bool = True) -> SubmissionReport:
    checks = [
        report.CheckScore(
            name=f"ex1/c{i}",
            title=f"check {i}",
            hidden=hidden,
            outcome=o,
            points=1.0 if o is GradedOutcome.PASSED else 0.0,
            max_points=1.0,
            message="" if o is GradedOutcome.PASSED else f"expected {i}, got nothing",
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
    text = report.feedback(make_report([GradedOutcome.PASSED, GradedOutcome.INCORRECT]))
    assert "All checks passed" not in text
    assert "Hidden checks (run only at grading): 1 of 2 passed." in text
    assert "  [incorrect] check 1 (hidden, 0/1)\n      | expected 1, got nothing\n" in text
    assert "All checks passed, hidden checks included." in report.feedback(
        make_report([GradedOutcome.PASSED, GradedOutcome.PASSED])
    )


def test_junit_has_one_testcase_per_check() -> None:
    reports = [make_report([GradedOutcome.PASSED, GradedOutcome.DID_NOT_RUN, GradedOutcome.ERROR])]
    reports.append(SubmissionReport.failed("bad.ipynb", "bad.ipynb: corrupt notebook"))
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
        make_report([GradedOutcome.PASSED] * 4),
        make_report([GradedOutcome.PASSED, GradedOutcome.INCORRECT]),
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


def public_output(*results: tuple[str, str]) -> dict[str, object]:
    rows = [
        {"name": n, "outcome": o, "message": f"ex1 · {n}: {o}", "points": 0} for n, o in results
    ]
    return {"output_type": "display_data", "data": {PUBLIC_MIME: {"results": rows}}}


def with_public(course: grader.Course) -> grader.Course:
    registered = [PublicCheck("claims once", 2.0), PublicCheck("replay refused", 1.0)]
    return dataclasses.replace(course, public=lambda exercise: registered)


def test_public_checks_are_scored_beside_the_hidden_ones(
    tmp_path: Path, course: grader.Course
) -> None:
    runs = learner_runs(LEARNER) + [CellRun(CellStatus.OK)]
    runs += [CellRun(CellStatus.OK, [public_output(("claims once", "passed"))])]  # one missing
    runs += [CellRun(CellStatus.OK, [check_output("passed")])] * 3
    runner = FakeRunner(runs)
    sub = graded(tmp_path, with_public(course), runner)
    public_cell = "__labkit_checks__['ex1']['public']('ex1', __labkit_builtins__.globals())\n"
    assert runner.sources[LEARNER + 1] == public_cell
    ex1 = sub.exercises[0]
    assert [(c.title, c.hidden, c.outcome) for c in ex1.checks[:2]] == [
        ("claims once", False, GradedOutcome.PASSED),
        ("replay refused", False, GradedOutcome.DID_NOT_RUN),
    ]
    assert (ex1.points, ex1.max_points) == (7.0, 8.0)


def test_public_checks_did_not_run_when_the_kernel_died(
    tmp_path: Path, course: grader.Course
) -> None:
    runs = learner_runs(LEARNER) + [CellRun(CellStatus.OK), CellRun(CellStatus.DEAD)]
    sub = graded(tmp_path, with_public(course), FakeRunner(runs, problem="the kernel died"))
    outcomes = [c.outcome for c in sub.exercises[0].checks]
    assert outcomes == [GradedOutcome.DID_NOT_RUN] * 5


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
    other = make_report([GradedOutcome.PASSED]).model_copy(update={"exercises": []})
    broken = SubmissionReport.failed("<b>bad</b>.ipynb", "<b>bad</b>.ipynb: corrupt notebook")
    page = classview.render(
        report.batch([make_report([GradedOutcome.INCORRECT]), other, broken], 1.0)
    )
    assert "<td>check 0</td><td class=n>1 of 1</td>" in page
    assert "&lt;b&gt;bad&lt;/b&gt;.ipynb" in page and "<b>bad" not in page
    assert ">0%</text>" in page  # ex1's bar
