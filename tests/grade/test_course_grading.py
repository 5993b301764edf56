"""`labkit grade` on the real course: the five exercise notebooks of `solutions/`, handed in
solved (the learner copy with the solution's answer cells) and fresh (`notebooks/` as shipped),
graded in one batch with real confined kernels.

The solved hand-ins score 100% with every public and hidden check and every checked output
passed; the fresh copies score 0 on every exercise, their checks "not attempted" or failed,
never passed.
"""

from __future__ import annotations

import pytest

from grade.grade_helpers import COURSE, COURSE_EXERCISES, solved, write
from labkit import cli
from labkit.grade.graded_exercises import EXERCISES
from labkit.grade.report import BatchReport, GradedOutcome, SubmissionReport

NOTEBOOKS = COURSE.parent / "notebooks"


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, BatchReport]:
    subs = tmp_path_factory.mktemp("course-submissions")
    out = tmp_path_factory.mktemp("course-grades")
    for stem in COURSE_EXERCISES:
        write(subs / "solved", f"{stem}.ipynb", solved(stem, COURSE))
        fresh = subs / "fresh"
        fresh.mkdir(exist_ok=True)
        (fresh / f"{stem}.ipynb").write_bytes((NOTEBOOKS / f"{stem}.ipynb").read_bytes())
    code = cli.main(
        ["grade", str(subs / "solved"), str(subs / "fresh"), "--solutions", str(COURSE)]
        + ["--out", str(out), "--jobs", "2", "--timeout", "30"]
    )
    return code, BatchReport.model_validate_json((out / "batch.json").read_text())


def _reports(batch: BatchReport, stem: str) -> list[SubmissionReport]:
    found = [s for s in batch.submissions if s.file == f"{stem}.ipynb"]
    assert len(found) == 2, [s.file for s in batch.submissions]
    return found


def test_every_course_submission_was_graded(batch: tuple[int, BatchReport]) -> None:
    code, report = batch
    assert code == 0
    assert report.errors == 0 and report.graded == 2 * len(COURSE_EXERCISES)


@pytest.mark.parametrize(("stem", "exercise"), COURSE_EXERCISES.items())
def test_solution_scores_full_marks_and_fresh_copy_zero(
    batch: tuple[int, BatchReport], stem: str, exercise: str
) -> None:
    _, report = batch
    best, worst = sorted(_reports(report, stem), key=lambda s: -s.percent)
    assert exercise in EXERCISES, f"{exercise} has no hidden checks registered"

    checks = [c for e in best.exercises for c in e.checks]
    lost = [(c.name, c.message) for c in checks if c.points < c.max_points]
    assert best.percent == 100, lost
    section = next(e for e in best.exercises if e.id == exercise)
    assert any(c.hidden for c in section.checks) and any(not c.hidden for c in section.checks)
    assert all(c.outcome is GradedOutcome.PASSED for e in best.exercises for c in e.checks)

    fresh = next(e for e in worst.exercises if e.id == exercise)
    assert fresh.points == 0
    outcomes = {c.outcome for c in fresh.checks}
    assert GradedOutcome.PASSED not in outcomes
    assert outcomes <= {GradedOutcome.NOT_ATTEMPTED, GradedOutcome.INCORRECT}
    assert not worst.notices or all("added" not in n and "deleted" not in n for n in worst.notices)
