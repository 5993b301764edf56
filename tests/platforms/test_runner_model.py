"""The GitHub Classroom workflow's Grade step, as the packaged template writes it, run on a
model of a GitHub ubuntu-24.04 runner: an unprivileged `runner` user with passwordless sudo,
whose new user namespaces are refused (as AppArmor's
`kernel.apparmor_restrict_unprivileged_userns=1` makes them fail for bubblewrap). The step
grades in full containment through sudo: the real solutions score 100%, a wrong answer loses
points, a forgery gains nothing, the job cannot read the solutions or the hidden checks, every
report names the mode, the points reach `$GITHUB_OUTPUT` as Classroom's reporter reads them,
and the job is red only when grading itself failed."""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from labkit.grade.report import BatchReport
from platforms.conftest import Image, Packaged
from platforms.models import (
    COURSE,
    Model,
    adversarial,
    assert_adversarial,
    assert_full_marks,
    by_file,
    solved_course,
)

RUNNER_UID = 1042  # any uid this machine does not use; GitHub's runner user is 1001 there
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def workflow(template: Path) -> dict[str, Any]:
    flow: dict[str, Any] = yaml.safe_load(
        (template / ".github/workflows/classroom.yml").read_text()
    )
    return flow


def grade_step(template: Path) -> tuple[str, dict[str, str]]:
    job = workflow(template)["jobs"]["run-autograding-tests"]
    step = next(s for s in job["steps"] if s.get("name") == "Grade")
    return step["run"], dict(job.get("env", {}))


def runner(image: Image, base: Path, *, sudo: bool = True) -> Model:
    """The runner VM: its own /etc/passwd, group, shadow and sudoers (the `runner` user,
    with passwordless sudo unless `sudo` is False), the Python the workflow installed labkit
    into (the same wheel and extra, in /opt/labkit)."""
    etc = base / "etc"
    etc.mkdir(parents=True)
    (etc / "passwd").write_text(
        Path("/etc/passwd").read_text()
        + f"runner:x:{RUNNER_UID}:{RUNNER_UID}::/home/runner:/bin/bash\n"
    )
    (etc / "group").write_text(Path("/etc/group").read_text() + f"runner:x:{RUNNER_UID}:\n")
    # No password (sudo needs none), but an account PAM can validate.
    (etc / "shadow").write_text(Path("/etc/shadow").read_text() + "runner:*:20000:0:99999:7:::\n")
    (etc / "shadow").chmod(0o640)
    rules = f'Defaults env_reset\nDefaults secure_path="{SECURE_PATH}"\nroot ALL=(ALL:ALL) ALL\n'
    if sudo:
        rules += "runner ALL=(ALL) NOPASSWD:ALL\n"
    (etc / "sudoers").write_text(rules)
    (etc / "sudoers").chmod(0o440)
    files = {f"/etc/{name}": str(etc / name) for name in ("passwd", "group", "shadow", "sudoers")}
    extra = {"files": files, "tmpfs": ["/opt"], "uid": RUNNER_UID, "gid": RUNNER_UID}
    return Model("runner", base / "model", {"/opt/labkit": image.opt / "labkit"}, extra)


def owned(path: Path) -> Path:
    for item in [path, *path.rglob("*")]:
        os.chown(item, RUNNER_UID, RUNNER_UID, follow_symlinks=False)
    return path


def checkout(packaged: Packaged, course_bundle: Path, base: Path) -> dict[str, Path]:
    """The learner's repository as the template made it, and the runner's temporary folder
    with the course bundle, as the earlier steps leave them."""
    repo = base / "checkout"
    shutil.copytree(packaged.template, repo)
    shutil.rmtree(repo / "notebooks")
    temp = base / "runner-temp"
    shutil.copytree(course_bundle, temp / "course")
    summary, output = base / "summary.md", base / "output"
    summary.write_text("")
    output.write_text("")
    (base / "home").mkdir()
    for path in (repo, temp, summary, output, base / "home"):
        owned(path)
    return {"repo": repo, "temp": temp, "summary": summary, "output": output, "home": base / "home"}


def run_step(model: Model, packaged: Packaged, where: dict[str, Path]) -> tuple[int, str]:
    script, env = grade_step(packaged.template)
    owned(where["repo"])
    env |= {
        "PATH": f"/opt/labkit/bin:{SECURE_PATH}",
        "HOME": str(where["home"]),
        "RUNNER_TEMP": str(where["temp"]),
        "GITHUB_STEP_SUMMARY": str(where["summary"]),
        "GITHUB_OUTPUT": str(where["output"]),
        "LANG": "C.UTF-8",
    }
    done = model.run(["bash", "-e", "-c", script], env, cwd=str(where["repo"]))
    return done.returncode, done.stdout + done.stderr


def classroom_result(output: Path) -> dict[str, Any]:
    (line,) = [x for x in output.read_text().splitlines() if x.startswith("result=")]
    result: dict[str, Any] = json.loads(base64.b64decode(line.removeprefix("result=")))
    return result


def test_the_runner_user_cannot_start_bubblewrap_itself(image: Image, tmp_path: Path) -> None:
    model = runner(image, tmp_path)
    env = {"PATH": f"/opt/labkit/bin:{SECURE_PATH}", "HOME": "/tmp", "LANG": "C.UTF-8"}
    done = model.run(["bwrap", "--ro-bind", "/", "/", "true"], env)
    assert done.returncode != 0 and "bwrap" in done.stderr, done.stderr
    done = model.run(["labkit", "grade", "--check-containment"], env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"uid {RUNNER_UID} (not root)" in done.stdout
    assert "full        UNAVAILABLE: lacks root" in done.stdout


def test_the_grade_step_grades_the_real_solutions_to_full_marks_through_sudo(
    image: Image, packaged: Packaged, course_bundle: Path, tmp_path: Path
) -> None:
    where = checkout(packaged, course_bundle, tmp_path)
    solved = solved_course(where["repo"] / "notebooks")
    code, said = run_step(runner(image, tmp_path), packaged, where)
    assert code == 0, said
    batch = BatchReport.model_validate_json((where["repo"] / "grades/batch.json").read_text())
    assert_full_marks(batch, [p.name for p in solved])
    assert {s.containment for s in batch.submissions} == {"full"}
    result = classroom_result(where["output"])
    assert result["status"] == "pass" and result["max_score"] > 0
    assert sum(t["score"] for t in result["tests"]) == result["max_score"]
    assert all(t["status"] == "pass" for t in result["tests"])
    summary = where["summary"].read_text()
    assert f"## labkit grade: {len(solved)} graded, 0 not graded, mean 100%" in summary
    assert "Containment: full" in summary


def test_a_low_score_is_a_score_and_secrets_stay_unreadable(
    image: Image,
    packaged: Packaged,
    course_bundle: Path,
    baseline: BatchReport,
    tmp_path: Path,
) -> None:
    where = checkout(packaged, course_bundle, tmp_path)
    adversarial(where["repo"] / "notebooks", str(where["temp"] / "course" / "solutions"))
    code, said = run_step(runner(image, tmp_path), packaged, where)
    assert code == 0, said  # green: the job did its work; the points say how it went
    batch = BatchReport.model_validate_json((where["repo"] / "grades/batch.json").read_text())
    assert_adversarial(batch, by_file(baseline)["04-ex2-url-mode.ipynb"], "full")
    result = classroom_result(where["output"])
    assert result["status"] == "pass"
    assert 0 < sum(t["score"] for t in result["tests"]) < result["max_score"]


def test_the_job_is_red_when_grading_itself_fails(
    image: Image, packaged: Packaged, course_bundle: Path, tmp_path: Path
) -> None:
    """A runner without sudo for the workflow: no grading happened, so no points either."""
    where = checkout(packaged, course_bundle, tmp_path)
    solved_course(where["repo"] / "notebooks")
    code, said = run_step(runner(image, tmp_path, sudo=False), packaged, where)
    assert code != 0, said
    assert "result=" not in where["output"].read_text()
    assert not (where["repo"] / "grades" / "batch.json").exists()


def test_a_learner_without_root_or_sudo_gets_a_practice_score(image: Image, tmp_path: Path) -> None:
    """`labkit check` as a learner runs it: a plain account (the runner's, without sudo), a
    checkout of its own with the learner copy solved: every public check and every compared
    output passes, and nothing is written in the checkout unless asked."""
    stem = "03-ex1-sqlite-replay-store"
    # Outside pytest's folder (root's alone): the learner's own places, which it can reach.
    learner, home = (Path(tempfile.mkdtemp(prefix=f"{name}-")) for name in ("learner", "home"))
    try:
        shutil.copytree(COURSE, learner / "solutions")
        (learner / "notebooks").mkdir()
        shutil.copyfile(COURSE / f"{stem}.ipynb", learner / "notebooks" / f"{stem}.ipynb")
        owned(learner), owned(home)
        before = sorted(p.relative_to(learner) for p in learner.rglob("*"))
        env = {"PATH": f"/opt/labkit/bin:{SECURE_PATH}", "HOME": str(home), "LANG": "C.UTF-8"}
        done = runner(image, tmp_path, sudo=False).run(
            ["labkit", "check", f"notebooks/{stem}.ipynb"], env, cwd=str(learner)
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "(100%)" in done.stdout and "[passed] two processes race" in done.stdout
        assert sorted(p.relative_to(learner) for p in learner.rglob("*")) == before
    finally:
        shutil.rmtree(learner), shutil.rmtree(home)
