"""`labkit course package gradescope`: the zip, unpacked into a root laid out as Gradescope lays
out /autograder, and `run_autograder` run on a correct, a wrong and a broken submission; every
results.json validated against the model of Gradescope's specification."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grade.grade_helpers import FIXTURES, learner, solved, with_cell, write
from labkit import cli
from labkit.grade import gradescope
from labkit.grade.gradescope import GradescopeResults
from labkit.grade.report import BatchReport, SubmissionReport

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("gradescope")
    for name in ("paths", "replay", "elicitation"):
        write(base / "notebooks", f"{name}.ipynb", learner(name))
    args = ["course", "package", "gradescope", "--out", str(base / "out")]
    args += ["--solutions", str(FIXTURES), "--notebooks", str(base / "notebooks")]
    args += ["--source", str(ROOT)]
    assert cli.main(args) == 0
    return base / "out" / "autograder.zip"


def _unpack(package: Path, root: Path) -> Path:
    """Extract as unzip does (modes kept) into ROOT/source, with submission/ and results/."""
    source = root / "source"
    with zipfile.ZipFile(package) as archive:
        for info in archive.infolist():
            target = Path(archive.extract(info, source))
            target.chmod((info.external_attr >> 16) or 0o644)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    return source


def _run(root: Path, path: str = f"{BIN}:/usr/bin:/bin") -> GradescopeResults:
    env = {"AUTOGRADER_ROOT": str(root), "PATH": path, "HOME": str(root), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [str(root / "source" / "run_autograder")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    results = root / "results" / "results.json"
    assert results.exists(), done.stdout + done.stderr
    return GradescopeResults.model_validate_json(results.read_text())


def test_the_zip_holds_the_scripts_at_its_root_the_wheel_and_the_course(package: Path) -> None:
    with zipfile.ZipFile(package) as archive:
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in archive.infolist()}
        manifest = json.loads(archive.read("course.json"))
    assert modes["setup.sh"] == modes["run_autograder"] == 0o755
    assert {"solutions/paths.ipynb", "notebooks/paths.ipynb", "labkit-0.1.0-py3-none-any.whl"} <= (
        set(modes)
    )
    assert manifest["digest"].startswith("sha256:") and manifest["package"] == "0.1.0"


def test_setup_installs_the_wheel_with_the_grade_extra_and_bubblewrap(package: Path) -> None:
    setup = zipfile.ZipFile(package).read("setup.sh").decode()
    assert "bubblewrap" in setup and "labkit[grade] @ file://" in setup
    assert "chmod -R go-rwx" in setup  # the course material is root's alone
    assert subprocess.run(["bash", "-n", "-c", setup], check=False).returncode == 0


def test_the_wheel_installs_offline_with_labkit_the_hidden_checks_and_the_command(
    package: Path, tmp_path: Path
) -> None:
    with zipfile.ZipFile(package) as archive:
        archive.extract("labkit-0.1.0-py3-none-any.whl", tmp_path)
        names = set(zipfile.ZipFile(tmp_path / "labkit-0.1.0-py3-none-any.whl").namelist())
    assert "labkit/grade/hidden/ex1.py" in names
    assert "labkit/course/skill-elicitation-form-designer.md" in names
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
        + ["--target", str(target), str(tmp_path / "labkit-0.1.0-py3-none-any.whl")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (target / "bin" / "labkit").exists()
    assert (
        'Requires-Dist: nbval==0.11.0; extra == "grade"'
        in next(target.glob("labkit-0.1.0.dist-info")).joinpath("METADATA").read_text()
    )


def test_correct_submission_scores_full_marks_with_hidden_checks_after_publishing(
    package: Path, tmp_path: Path
) -> None:
    _unpack(package, tmp_path)
    write(tmp_path / "submission", "paths.ipynb", solved("paths"))
    results = _run(tmp_path)
    assert results.tests and all(t.status == "passed" for t in results.tests)
    assert results.score == sum(t.max_score for t in results.tests) > 0
    hidden = [t for t in results.tests if t.name.endswith("(hidden)")]
    assert hidden and {t.visibility for t in hidden} == {"after_published"}
    assert {t.visibility for t in results.tests if t not in hidden} == {"visible"}
    assert results.stdout_visibility == "hidden" and results.execution_time > 0
    total = f"{results.score:g}/{results.score:g} points"
    assert f"paths.ipynb: {total}" in results.output


def test_wrong_submission_loses_points_and_cannot_read_the_packaged_solutions(
    package: Path, tmp_path: Path
) -> None:
    source = _unpack(package, tmp_path)
    peek = f"print(open({str(source / 'solutions' / 'paths.ipynb')!r}).read()[:50])"
    nb = with_cell(learner("paths"), "peek", peek, "ex3-answer")
    write(tmp_path / "submission", "paths.ipynb", nb)
    results = _run(tmp_path)
    failed = [t for t in results.tests if t.status == "failed"]
    assert failed and results.score < sum(t.max_score for t in results.tests)
    assert results.score == sum(t.score for t in results.tests)
    # The added cell's read fails: the solutions are outside the job's view or refused.
    refused = r"a cell you added raised: (FileNotFoundError|PermissionError)"
    assert re.search(refused, results.output)
    # The submission-wide output quotes no hidden check's message before publishing.
    for test in results.tests:
        if test.visibility == "after_published" and test.output != "not attempted":
            assert test.output not in results.output


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"paths.ipynb": '{"cells": [{"cell_type": "code", "sou'}, "paths.ipynb: not graded"),
        ({"notes.ipynb": '{"rows": [1, 2, 3]}'}, "notes.ipynb: not graded"),
        ({"answers.txt": "Dear grader,\n"}, "No notebook (.ipynb) was found"),
    ],
    ids=["invalid-json", "wrong-notebook", "no-notebook"],
)
def test_broken_submission_still_gets_valid_results_with_score_zero(
    package: Path, tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    _unpack(package, tmp_path)
    for name, text in files.items():
        (tmp_path / "submission" / name).write_text(text)
    results = _run(tmp_path)
    assert results.score == 0.0
    assert expected in results.output
    assert all(t.status == "failed" and t.score == 0 for t in results.tests)


def test_without_labkit_on_path_results_still_say_what_happened(
    package: Path, tmp_path: Path
) -> None:
    _unpack(package, tmp_path)
    write(tmp_path / "submission", "paths.ipynb", solved("paths"))
    results = _run(tmp_path, path="/usr/bin:/bin")
    assert results.score == 0.0 and "failed before grading" in results.output


def test_results_of_a_batch_follow_the_specification() -> None:
    graded = SubmissionReport(file="a.ipynb", status="graded", points=1.0, max_points=2.0)
    broken = SubmissionReport.failed("b.ipynb", "b.ipynb: not valid JSON")
    batch = BatchReport(
        submissions=[graded, broken], graded=1, errors=1, mean_percent=50.0, seconds=1.5
    )
    result = gradescope.results(batch)
    again = GradescopeResults.model_validate_json(result.model_dump_json(exclude_none=True))
    assert again == result
    assert result.score == 1.0 and result.tests[0].name == "b.ipynb: grading"
    with pytest.raises(ValueError, match="status"):
        GradescopeResults.model_validate(
            {
                "score": 1,
                "execution_time": 1,
                "output": "",
                "stdout_visibility": "hidden",
                "tests": [{"name": "x", "score": 1, "max_score": 1, "status": "ok"}],
            }
        )


def test_package_refuses_a_course_without_solutions(tmp_path: Path) -> None:
    args = ["course", "package", "gradescope", "--out", str(tmp_path / "out")]
    args += ["--solutions", str(tmp_path), "--notebooks", str(tmp_path), "--source", str(ROOT)]
    assert cli.main(args) == 1
    assert not (tmp_path / "out" / "autograder.zip").exists()
    assert os.listdir(tmp_path) == []
