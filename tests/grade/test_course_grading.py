"""`labkit grade` on the real course: every notebook of `solutions/` handed in solved (the
learner copy with the solution's answer cells), the five exercise notebooks also fresh
(`notebooks/` as shipped), and exercise 1 solved once more as Colab saves it (nbformat 4.4,
no cell ids), graded in one batch with real confined kernels.

Every solved hand-in scores 100% with every public and hidden check and every checked output
passed (notebook 08 included: its export writes to `../outputs`, which the scratch copy has);
the one without cell ids scores exactly the same, with no notice; the fresh copies score 0 on
every exercise, their checks "not attempted" or failed, never passed.
"""

from __future__ import annotations

import pytest

from grade.grade_helpers import COURSE, COURSE_EXERCISES, solved, write
from grade.test_locked_cells import without_ids
from labkit import cli
from labkit.course.exercises.trial import Outcome
from labkit.grade.graded_exercises import GRADED
from labkit.grade.report import BatchReport, SubmissionReport

NOTEBOOKS = COURSE.parent / "notebooks"


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, BatchReport]:
    subs = tmp_path_factory.mktemp("course-submissions")
    out = tmp_path_factory.mktemp("course-grades")
    for path in COURSE.glob("*.ipynb"):
        write(subs / "solved", path.name, solved(path.stem, COURSE))
    for stem in COURSE_EXERCISES:
        fresh = subs / "fresh"
        fresh.mkdir(exist_ok=True)
        (fresh / f"{stem}.ipynb").write_bytes((NOTEBOOKS / f"{stem}.ipynb").read_bytes())
    first = next(iter(COURSE_EXERCISES))
    write(subs / "no-ids", f"{first}.ipynb", without_ids(solved(first, COURSE)))
    folders = [str(subs / name) for name in ("solved", "fresh", "no-ids")]
    code = cli.main(
        ["grade", *folders, "--solutions", str(COURSE)]
        + ["--out", str(out), "--jobs", "2", "--timeout", "30"]
    )
    return code, BatchReport.model_validate_json((out / "batch.json").read_text())


def _reports(batch: BatchReport, stem: str) -> list[SubmissionReport]:
    found = [s for s in batch.submissions if s.file == f"{stem}.ipynb"]
    assert len(found) == (3 if stem == next(iter(COURSE_EXERCISES)) else 2), found
    return found[:2]  # solved, fresh (folders are graded in the order given)


def test_every_course_submission_was_graded(batch: tuple[int, BatchReport]) -> None:
    code, report = batch
    assert code == 0
    solutions = len(list(COURSE.glob("*.ipynb")))
    assert report.errors == 0 and report.graded == solutions + len(COURSE_EXERCISES) + 1


@pytest.mark.parametrize("stem", sorted(p.stem for p in COURSE.glob("*.ipynb")))
def test_every_solution_handed_in_scores_full_marks(
    batch: tuple[int, BatchReport], stem: str
) -> None:
    _, report = batch
    sub = next(s for s in report.submissions if s.file == f"{stem}.ipynb")
    lost = [(c.name, c.message) for e in sub.exercises for c in e.checks if c.points < c.max_points]
    assert sub.percent == 100 and sub.max_points > 0, lost
    assert sub.solution == stem and sub.mismatch == "" and sub.notices == []


def test_a_notebook_without_cell_ids_scores_as_with_them(batch: tuple[int, BatchReport]) -> None:
    _, report = batch
    stem = next(iter(COURSE_EXERCISES))
    solved_, _, no_ids = [s for s in report.submissions if s.file == f"{stem}.ipynb"]
    assert (no_ids.points, no_ids.max_points) == (solved_.points, solved_.max_points)
    assert no_ids.percent == 100 and no_ids.notices == []


@pytest.mark.parametrize(("stem", "exercise"), COURSE_EXERCISES.items())
def test_solution_scores_full_marks_and_fresh_copy_zero(
    batch: tuple[int, BatchReport], stem: str, exercise: str
) -> None:
    _, report = batch
    best, worst = sorted(_reports(report, stem), key=lambda s: -s.percent)
    assert exercise in GRADED, f"{exercise} has no hidden checks registered"

    checks = [c for e in best.exercises for c in e.checks]
    lost = [(c.name, c.message) for c in checks if c.points < c.max_points]
    assert best.percent == 100, lost
    section = next(e for e in best.exercises if e.id == exercise)
    assert any(c.hidden for c in section.checks) and any(not c.hidden for c in section.checks)
    assert all(c.outcome is Outcome.PASSED for e in best.exercises for c in e.checks)

    fresh = next(e for e in worst.exercises if e.id == exercise)
    assert fresh.points == 0
    outcomes = {c.outcome for c in fresh.checks}
    assert Outcome.PASSED not in outcomes
    assert outcomes <= {Outcome.NOT_ATTEMPTED, Outcome.INCORRECT}
    assert not worst.notices or all("added" not in n and "deleted" not in n for n in worst.notices)
