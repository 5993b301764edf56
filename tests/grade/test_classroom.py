"""`labkit course package github-classroom`: the template passes actionlint, holds no solution,
and its workflow is shaped as GitHub Classroom expects (GitHub's own autograding template):
the bot's first commit is no hand-in, `checks: write`, `apt-get update` before installing, a
pip cache, the Grade step's `result` sent to Classroom by education/autograding-grading-reporter,
and the job red only when grading itself failed. The result the reporter reads is checked here;
tests/platforms/test_runner_model.py runs the Grade step as written on a model of a runner."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from grade.grade_helpers import FIXTURES, learner, write
from labkit import cli
from labkit.grade import classroom
from labkit.grade.report import BatchReport, CheckScore, ExerciseScore, SubmissionReport

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("classroom")
    write(base / "notebooks", "paths.ipynb", learner("paths"))
    args = ["course", "package", "github-classroom", "--out", str(base / "template")]
    args += ["--solutions", str(FIXTURES), "--notebooks", str(base / "notebooks")]
    args += ["--source", str(ROOT)]
    assert cli.main(args) == 0
    return base / "template"


def _flow(template: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        (template / ".github/workflows/classroom.yml").read_text()
    )
    return loaded


def _steps(template: Path) -> dict[str, dict[str, Any]]:
    job = _flow(template)["jobs"]["run-autograding-tests"]
    return {s.get("name") or s["uses"]: s for s in job["steps"]}


def test_the_workflow_passes_actionlint_and_the_template_holds_no_solution(
    template: Path,
) -> None:
    workflow = template / ".github" / "workflows" / "classroom.yml"
    done = subprocess.run([str(BIN / "actionlint"), str(workflow)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    files = {p.relative_to(template).as_posix() for p in template.rglob("*") if p.is_file()}
    assert files == {".github/workflows/classroom.yml", "README.md", "notebooks/paths.ipynb"}
    bundle = template.parent / "template-course.tar.gz"
    with tarfile.open(bundle) as archive:
        names = set(archive.getnames())
    assert {"solutions/paths.ipynb", "labkit-0.1.0-py3-none-any.whl"} <= names


def test_the_workflow_is_shaped_as_github_classrooms_own(template: Path) -> None:
    flow = _flow(template)
    job = flow["jobs"]["run-autograding-tests"]
    # The reporter looks for the check run "Autograding Tests" to put the points on.
    assert flow["name"] == job["name"] == "Autograding Tests"
    assert flow["permissions"] == {"checks": "write", "actions": "read", "contents": "read"}
    assert job["if"] == "github.actor != 'github-classroom[bot]'"
    steps = _steps(template)
    python = steps["actions/setup-python@v5"]["with"]
    assert python["cache"] == "pip" and python["python-version"] == "3.11"
    install = steps["Install labkit and the sandbox"]["run"]
    assert install.index("apt-get update") < install.index("apt-get install -y -q bubblewrap")
    assert '"labkit[grade] @ file://$wheel"' in install
    grade = steps["Grade"]
    assert grade["id"] == "labkit"
    assert 'sudo env "PATH=$PATH" labkit grade notebooks --containment full' in grade["run"]
    assert '--classroom-output "$GITHUB_OUTPUT"' in grade["run"]
    reporter = steps["Send the points to GitHub Classroom"]
    assert reporter["uses"] == "education/autograding-grading-reporter@v1"
    # The reporter reads `<RUNNER>_RESULTS` for each runner id it is given.
    assert reporter["with"]["runners"] == "labkit"
    assert reporter["env"] == {"LABKIT_RESULTS": "${{ steps.labkit.outputs.result }}"}
    assert job["env"] == {"FAIL_UNDER": ""}


def _fail_under(template: Path, tmp_path: Path, value: str) -> str:
    args = ["course", "package", "github-classroom", "--out", str(tmp_path / "t")]
    args += ["--solutions", str(FIXTURES), "--notebooks", str(template / "notebooks")]
    args += ["--source", str(ROOT), "--fail-under", value]
    assert cli.main(args) == 0
    return str(_flow(tmp_path / "t")["jobs"]["run-autograding-tests"]["env"]["FAIL_UNDER"])


@pytest.mark.parametrize(
    ("code", "fail_under", "has_reports", "red"),
    [
        (0, "", True, False),
        (1, "", True, False),  # a low score, or a notebook that could not be read: a score
        (1, "80", True, True),  # ... unless the course asked for a threshold
        (1, "", False, True),  # 1 from sudo (no reports written): grading never ran
        (2, "", False, True),
        (3, "", True, True),
    ],
)
def test_the_grade_step_is_red_only_when_grading_itself_failed(
    template: Path, tmp_path: Path, code: int, fail_under: str, has_reports: bool, red: bool
) -> None:
    """The step's own exit logic, with `sudo` standing for labkit's exit code."""
    script = _steps(template)["Grade"]["run"]
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "sudo").write_text(
        f"#!/bin/sh\n{'mkdir -p grades; echo {} > grades/batch.json' if has_reports else ''}\n"
        f"exit {code}\n"
    )
    (shim / "sudo").chmod(0o755)
    env = {"PATH": f"{shim}:/usr/bin:/bin", "FAIL_UNDER": fail_under, "RUNNER_TEMP": "/x"}
    env |= {"GITHUB_STEP_SUMMARY": "/dev/null", "GITHUB_OUTPUT": "/dev/null"}
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, check=False)
    assert (done.returncode != 0) is red
    if fail_under:
        assert _fail_under(template, tmp_path, fail_under) == fail_under


def _sub(file: str, checks: list[tuple[str, bool, float]]) -> SubmissionReport:
    scores = [
        CheckScore(
            name=f"ex1/{title}",
            title=title,
            hidden=hidden,
            outcome="passed" if points else "incorrect",
            points=points,
            max_points=2.0,
            message="" if points else "expected 1, got 2",
        )
        for title, hidden, points in checks
    ]
    exercise = ExerciseScore(
        id="ex1", points=sum(c.points for c in scores), max_points=4.0, checks=scores
    )
    return SubmissionReport(
        file=file,
        status="graded",
        points=exercise.points,
        max_points=4.0,
        exercises=[exercise],
        containment="full",
    )


def test_the_classroom_result_is_what_the_reporter_reads(tmp_path: Path) -> None:
    graded = _sub("a.ipynb", [("claims once", False, 2.0), ("per principal", True, 0.0)])
    broken = SubmissionReport.not_graded("b.ipynb", "b.ipynb: not valid JSON")
    batch = BatchReport(
        submissions=[graded, broken], graded=1, errors=1, mean_percent=50.0, seconds=1.0
    )
    output = tmp_path / "github_output"
    output.write_text("earlier=1\n")
    classroom.append_output(batch, "pass", output)
    lines = output.read_text().splitlines()
    assert lines[0] == "earlier=1" and lines[1].startswith("result=")
    result = json.loads(base64.b64decode(lines[1].removeprefix("result=")))
    assert result["version"] == 1 and result["status"] == "pass" and result["max_score"] == 4.0
    assert [(t["name"], t["status"], t["score"]) for t in result["tests"]] == [
        ("a.ipynb / ex1: claims once", "pass", 2.0),
        ("a.ipynb / ex1: per principal", "fail", 0.0),
        ("b.ipynb: grading", "error", 0.0),
    ]
    assert result["tests"][1]["message"] == "expected 1, got 2"
    assert classroom.classroom_result(batch, "error")["status"] == "error"


def test_the_bundle_is_refused_inside_the_template(tmp_path: Path) -> None:
    write(tmp_path / "notebooks", "paths.ipynb", learner("paths"))
    args = ["course", "package", "github-classroom", "--out", str(tmp_path / "t")]
    args += ["--solutions", str(FIXTURES), "--notebooks", str(tmp_path / "notebooks")]
    args += ["--source", str(ROOT), "--bundle", str(tmp_path / "t" / "course.tar.gz")]
    assert cli.main(args) == 1
    assert not (tmp_path / "t").exists()
