"""`labkit course package github-classroom`: the template passes actionlint, holds no solution,
and its grading step, run on a checkout laid out as the template, grades, writes the job summary
and the reports, and fails under `--fail-under`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from grade.grade_helpers import FIXTURES, learner, solved, write
from labkit import cli
from labkit.grade.report import BatchReport

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


def _step(template: Path, name: str) -> tuple[str, dict[str, str]]:
    flow = yaml.safe_load((template / ".github/workflows/classroom.yml").read_text())
    job = flow["jobs"]["grade"]
    step = next(s for s in job["steps"] if s.get("name") == name)
    return step["run"], dict(job.get("env", {}))


@pytest.mark.parametrize(("solve", "code"), [(True, 0), (False, 1)], ids=["solved", "fresh"])
def test_the_grading_step_grades_summarizes_and_fails_under(
    template: Path, tmp_path: Path, solve: bool, code: int
) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(template, checkout)
    if solve:
        write(checkout / "notebooks", "paths.ipynb", solved("paths"))
    runner_temp = tmp_path / "runner"
    (runner_temp / "course").mkdir(parents=True)
    with tarfile.open(template.parent / "template-course.tar.gz") as archive:
        archive.extractall(runner_temp / "course", filter="data")
    script, env = _step(template, "Grade")
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    env |= {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert done.returncode == code, done.stdout + done.stderr
    text = summary.read_text()
    assert text.startswith("earlier step\n## labkit grade: 1 graded")
    assert "```text\nlabkit grade: paths.ipynb" in text
    batch = BatchReport.model_validate_json((checkout / "grades" / "batch.json").read_text())
    (sub,) = batch.submissions
    row = f"| paths.ipynb | {sub.points:g}/{sub.max_points:g} | {sub.percent:g} |"
    assert row in text and (sub.percent == 100) is solve
    assert batch.course is not None and (checkout / "grades" / "junit.xml").exists()


def test_the_bundle_is_refused_inside_the_template(tmp_path: Path) -> None:
    write(tmp_path / "notebooks", "paths.ipynb", learner("paths"))
    args = ["course", "package", "github-classroom", "--out", str(tmp_path / "t")]
    args += ["--solutions", str(FIXTURES), "--notebooks", str(tmp_path / "notebooks")]
    args += ["--source", str(ROOT), "--bundle", str(tmp_path / "t" / "course.tar.gz")]
    assert cli.main(args) == 1
    assert not (tmp_path / "t").exists()
