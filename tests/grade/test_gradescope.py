"""`labkit course package gradescope`: the zip, its scripts and wheel, setup.sh's choice of
Python, results.json (validated against the model of Gradescope's specification: visible points
only in the output, the containment for staff), and no results.json when grading itself fails.
tests/platforms/test_gradescope_model.py runs setup.sh and run_autograder from the real zip
under Docker's default confinement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grade.grade_helpers import FIXTURES, learner, solved, write
from labkit import cli
from labkit.grade import gradescope
from labkit.grade.gradescope import GradescopeResults
from labkit.grade.report import BatchReport, CheckScore, ExerciseScore, SubmissionReport

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
    assert 'chmod -R go-rwx "$SOURCE" "$HIDDEN"' in setup  # course and hidden checks: root's
    run = zipfile.ZipFile(package).read("run_autograder").decode()
    assert "--containment container" in run
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
    metadata = next(target.glob("labkit-0.1.0.dist-info")).joinpath("METADATA").read_text()
    assert 'Requires-Dist: nbval==0.11.0; extra == "grade"' in metadata
    assert 'Requires-Dist: mcp==2.3.0; extra == "grade"' in metadata  # notebooks 07 and 08


def test_without_labkit_on_path_no_results_are_written_and_the_run_fails(
    package: Path, tmp_path: Path
) -> None:
    """Grading itself failed: no results.json (Gradescope then tells staff, who can rerun),
    rather than a 0 for the learner."""
    _unpack(package, tmp_path)
    write(tmp_path / "submission", "paths.ipynb", solved("paths"))
    env = {"AUTOGRADER_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    done = subprocess.run(
        [str(tmp_path / "source" / "run_autograder")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert not (tmp_path / "results" / "results.json").exists()
    assert "No score was written" in done.stdout


def test_setup_installs_python_3_11_where_the_images_python3_is_older(
    package: Path, tmp_path: Path
) -> None:
    """Ubuntu 22.04's python3 is 3.10: setup.sh installs Ubuntu's python3.11 and builds the
    venv on it (stand-ins for apt-get and the interpreters record what it asks for; the
    stand-in python3.11 stops the script before it would write /opt)."""
    _unpack(package, tmp_path)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls.log"
    stubs = {
        "apt-get": 'echo "apt-get $*" >> LOG',
        "python3": 'echo "python3 $*" >> LOG; exit 1',  # "3.10": the version test fails
        "python3.11": 'echo "python3.11 $*" >> LOG; exit 9',
    }
    for name, body in stubs.items():
        (bin_ / name).write_text("#!/bin/sh\n" + body.replace("LOG", str(log)) + "\n")
        (bin_ / name).chmod(0o755)
    env = {"AUTOGRADER_ROOT": str(tmp_path), "PATH": f"{bin_}:/usr/bin:/bin"}
    done = subprocess.run(
        ["bash", str(tmp_path / "source" / "setup.sh")], env=env, capture_output=True, check=False
    )
    assert done.returncode == 9
    calls = log.read_text().splitlines()
    assert calls[0] == "apt-get update -q"
    assert "apt-get install -y -q --no-install-recommends python3.11 python3.11-venv" in calls
    assert calls[-1] == "python3.11 -m venv /opt/labkit"


def test_a_course_whose_setup_imports_fail_is_not_graded_and_writes_no_results(
    tmp_path: Path,
) -> None:
    """The grading environment lacks a package the setup cell imports (as notebooks 07 and 08
    did without `mcp`): not graded, exit 3, no results.json, and the report says why."""
    solutions = tmp_path / "solutions"
    nb = learner("paths")
    source = json.loads((FIXTURES / "paths.ipynb").read_text())
    setup = next(c for c in source["cells"] if c.get("id") == "setup")
    setup["source"] = "import labkit_package_not_installed\n" + "".join(setup["source"])
    solutions.mkdir()
    (solutions / "paths.ipynb").write_text(json.dumps(source))
    nb = solved("paths", solutions)
    write(tmp_path / "subs", "paths.ipynb", nb)
    results = tmp_path / "results.json"
    results.write_text("{}")  # from an earlier run: removed, never left standing
    args = ["grade", str(tmp_path / "subs"), "--solutions", str(solutions)]
    args += ["--out", str(tmp_path / "out"), "--gradescope-results", str(results)]
    assert cli.main(args) == 3
    assert not results.exists()
    sub = SubmissionReport.model_validate_json(
        (tmp_path / "out" / "submissions" / "paths.json").read_text()
    )
    assert sub.status == "error" and sub.infrastructure
    assert "No module named 'labkit_package_not_installed'" in sub.error
    feedback = (tmp_path / "out" / "submissions" / "paths.feedback.txt").read_text()
    assert "grading itself failed (not your notebook)" in feedback


def test_the_output_shows_only_visible_points_and_staff_see_the_containment() -> None:
    checks = [
        CheckScore(
            name=f"ex1/{n}",
            title=n,
            hidden=hidden,
            outcome="passed",
            points=pts,
            max_points=pts,
            message="",
        )
        for n, hidden, pts in (("shown", False, 2.0), ("secret", True, 3.0))
    ]
    exercise = ExerciseScore(id="ex1", points=5.0, max_points=5.0, checks=checks)
    sub = SubmissionReport(
        file="a.ipynb",
        status="graded",
        points=5.0,
        max_points=5.0,
        percent=100.0,
        exercises=[exercise],
        containment="container",
        sandbox="uid-per-job(61000-61063) via setuid",
    )
    batch = BatchReport(submissions=[sub], graded=1, errors=0, mean_percent=100, seconds=2)
    result = gradescope.results(batch)
    assert "a.ipynb: 2/2 points on the checks shown now" in result.output
    assert "5/5" not in result.output and "1 hidden checks (3 more points)" in result.output
    assert result.score == 5.0
    staff = [t for t in result.tests if t.visibility == "hidden"]
    assert len(staff) == 1 and "container: uid-per-job(61000-61063)" in staff[0].output
    assert result.extra_data == {
        "containment": ["container"],
        "sandbox": ["uid-per-job(61000-61063) via setuid"],
    }


def test_results_of_a_batch_follow_the_specification() -> None:
    graded = SubmissionReport(file="a.ipynb", status="graded", points=1.0, max_points=2.0)
    broken = SubmissionReport.not_graded("b.ipynb", "b.ipynb: not valid JSON")
    batch = BatchReport(
        submissions=[graded, broken], graded=1, errors=1, mean_percent=50.0, seconds=1.5
    )
    result = gradescope.results(batch)
    again = GradescopeResults.model_validate_json(result.model_dump_json(exclude_none=True))
    assert again == result
    assert result.score == 1.0 and result.tests[0].name == "b.ipynb: grading"
    assert result.tests[-1].name == "labkit: grading environment"
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
