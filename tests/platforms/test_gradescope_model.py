"""The packaged autograder under Docker's default confinement, laid out as Gradescope lays out
/autograder: setup.sh builds the image from the real zip, then `run_autograder` grades the
real course's solutions (100%), the untouched learner copies (the scores full containment gives
them here), and a wrong answer, a forgery and a notebook that tries to read the solutions and
the hidden checks. Grading itself failing leaves no results.json and a non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.grade.gradescope import GradescopeResults
from labkit.grade.report import BatchReport
from platforms.conftest import Image
from platforms.models import (
    PATH,
    Model,
    adversarial,
    by_file,
    solved_course,
)

ENV = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8"}


def gradescope(image: Image, run: Path, **extra: object) -> Model:
    """A fresh container of the autograder image: /autograder holds source/ (from the image),
    submission/ and results/."""
    (run / "autograder" / "submission").mkdir(parents=True, exist_ok=True)
    (run / "autograder" / "results").mkdir(exist_ok=True)
    binds = {
        "/opt": image.opt,
        "/usr/local/bin": image.bin,
        "/autograder": run / "autograder",
        "/autograder/source": image.source,
    }
    return Model("docker", run / "model", binds, extra)


def run_autograder(model: Model) -> tuple[int, GradescopeResults | None, str]:
    done = model.run(["/autograder/source/run_autograder"], ENV, cwd="/autograder")
    results = Path(model.binds["/autograder"]) / "results" / "results.json"
    said = done.stdout + done.stderr
    if not results.exists():
        return done.returncode, None, said
    return done.returncode, GradescopeResults.model_validate_json(results.read_text()), said


def test_setup_gives_a_python_labkit_supports_and_installs_the_grade_extra(image: Image) -> None:
    assert "apt-get update -q" in image.setup
    assert "install -y -q --no-install-recommends bubblewrap python3 python3-venv" in image.setup
    assert "Python 3.1" in image.setup  # the venv's interpreter, printed by setup.sh
    site = image.opt / "labkit" / "lib" / "python3.11" / "site-packages"
    assert (site / "mcp_types").is_dir() and (site / "mcp").is_dir() and (site / "nbval").is_dir()
    assert (image.bin / "labkit").is_symlink()
    assert (image.source.stat().st_mode & 0o077) == 0  # the course material is root's alone
    assert ((site / "labkit" / "grade" / "hidden").stat().st_mode & 0o077) == 0
    print(f"setup.sh in the model: {image.seconds:.0f} s")


def test_the_real_solutions_score_full_marks_in_container_mode(
    image: Image, tmp_path: Path
) -> None:
    model = gradescope(image, tmp_path)
    files = solved_course(tmp_path / "autograder" / "submission")
    code, results, said = run_autograder(model)
    assert code == 0 and results is not None, said
    assert results.tests and all(t.status == "passed" for t in results.tests), [
        (t.name, t.output) for t in results.tests if t.status != "passed"
    ]
    assert results.score == sum(t.max_score for t in results.tests) > 0
    for path in files:
        assert f"{path.name}: " in results.output
    assert results.extra_data is not None and results.extra_data["containment"] == ["container"]
    (environment,) = [t for t in results.tests if t.name == "labkit: grading environment"]
    assert environment.visibility == "hidden" and "container: uid-per-job" in environment.output
    # Before publication the output counts the visible checks only.
    visible = sum(t.score for t in results.tests if t.visibility == "visible")
    shown = sum(
        float(line.split(": ")[1].split("/")[0])
        for line in results.output.splitlines()
        if line.endswith("points on the checks shown now")
    )
    assert shown == visible < results.score


def test_untouched_learner_copies_get_their_expected_score(
    image: Image, baseline: BatchReport, tmp_path: Path
) -> None:
    model = gradescope(image, tmp_path)
    submission = tmp_path / "autograder" / "submission"
    for sub in baseline.submissions:
        source = Path(__file__).resolve().parents[2] / "notebooks" / sub.file
        (submission / sub.file).write_bytes(source.read_bytes())
    code, results, said = run_autograder(model)
    assert code == 0 and results is not None, said
    for sub in baseline.submissions:
        earned = sum(t.score for t in results.tests if t.name.startswith(f"{sub.file} / "))
        most = sum(t.max_score for t in results.tests if t.name.startswith(f"{sub.file} / "))
        assert (earned, most) == (sub.points, sub.max_points), sub.file


def test_a_wrong_answer_loses_points_a_forgery_gains_nothing_and_secrets_stay_unreadable(
    image: Image, baseline: BatchReport, tmp_path: Path
) -> None:
    model = gradescope(image, tmp_path)
    adversarial(tmp_path / "autograder" / "submission", "/autograder/source/solutions")
    code, results, said = run_autograder(model)
    assert code == 0 and results is not None, said
    # The reports behind results.json, regraded from the output folder would be the same; the
    # checks here read results.json itself, as Gradescope does.
    tests = results.tests

    def points(file: str) -> tuple[float, float]:
        mine = [t for t in tests if t.name.startswith(f"{file} / ")]
        return sum(t.score for t in mine), sum(t.max_score for t in mine)

    untouched = by_file(baseline)["04-ex2-url-mode.ipynb"]
    wrong, forged = points("wrong-answer.ipynb"), points("forged-patched-checker.ipynb")
    assert 0 < wrong[0] < wrong[1]
    assert any(
        t.visibility == "after_published" and t.status == "failed"
        for t in tests
        if t.name.startswith("wrong-answer.ipynb / ")
    )
    assert forged[1] == untouched.max_points and forged[0] <= untouched.points
    peeks = [line for line in results.output.splitlines() if "a cell you added raised" in line]
    assert len(peeks) == 2 and all("PermissionError" in line for line in peeks), peeks


def test_when_grading_itself_fails_no_score_is_written(image: Image, tmp_path: Path) -> None:
    """An older Docker whose seccomp profile refuses Landlock's system calls: container mode
    cannot be had, run_autograder exits non-zero and writes no results.json."""
    model = gradescope(image, tmp_path, refuse=["landlock"])
    solved_course(tmp_path / "autograder" / "submission")
    code, results, said = run_autograder(model)
    assert code != 0 and results is None, said
    assert "containment `container` needs what this machine lacks: Landlock" in said
    assert "No score was written" in said


@pytest.mark.parametrize("mode", ["full"])
def test_full_containment_is_refused_in_the_container_naming_bubblewrap(
    image: Image, tmp_path: Path, mode: str
) -> None:
    model = gradescope(image, tmp_path)
    done = model.run(["labkit", "grade", "--check-containment", "--containment", mode], ENV)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bwrap: Creating new namespace failed: Operation not permitted" in done.stdout
    assert "capability bounding set   14, Docker's default set" in done.stdout
    assert "container   available" in done.stdout
    assert "Read-only file system" in done.stdout or "not writable" in done.stdout


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"paths.ipynb": '{"cells": [{"cell_type": "code", "sou'}, "paths.ipynb: not graded"),
        ({"answers.txt": "Dear grader,\n"}, "No notebook (.ipynb) was found"),
    ],
    ids=["invalid-json", "no-notebook"],
)
def test_a_broken_submission_gets_valid_results_with_score_zero(
    image: Image, tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    """The submission's own fault: a score of 0 and why, in valid results."""
    model = gradescope(image, tmp_path)
    for name, text in files.items():
        (tmp_path / "autograder" / "submission" / name).write_text(text)
    code, results, said = run_autograder(model)
    assert code == 0 and results is not None, said
    assert results.score == 0.0 and expected in results.output
    assert all(t.score == 0 for t in results.tests)
