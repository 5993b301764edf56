"""The Kubernetes Jobs' container commands, as the manifests write them, under the confinement
of the pods they describe: the restricted variant (uid 1000, no capability, no privilege
escalation, the runtime's default seccomp profile) grades every solution of the course across
its 4 shards and merges them; a default pod (Docker's defaults, root) runs the same command.
In both: the real solutions score 100%, a wrong answer loses points, a forgery gains nothing,
the job cannot read the solutions or the hidden checks, every report names container mode.
The nested-full variant's command, in a pod that is not privileged, fails its pod."""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from grade.grade_helpers import COURSE

from labkit.grade.report import BatchReport
from platforms.conftest import ROOT, Image
from platforms.models import (
    NOTEBOOKS,
    Model,
    adversarial,
    assert_adversarial,
    assert_full_marks,
    by_file,
    solved_course,
)

RESTRICTED = ROOT / "deploy" / "k8s" / "grade-job-restricted.yaml"
FULL = ROOT / "deploy" / "k8s" / "grade-job-full.yaml"


def jobs(manifest: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(manifest.read_text()) if d["kind"] == "Job"]


def container(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]["containers"][0]
    return spec


def env_of(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container(job)["env"]}


def build_pod_image(opt: Path, base: Path) -> Path:
    """The Kubernetes image (deploy/k8s/Dockerfile): the same venv of labkit[grade] from the
    same wheel (`opt`), readable by every user (the restricted pod's grader is uid 1000), and
    the course in /course."""
    shutil.copytree(opt, base / "opt", symlinks=True)
    for path in (base / "opt").rglob("*"):
        if not path.is_symlink():
            readable = stat.S_IRGRP | stat.S_IROTH
            path.chmod(path.stat().st_mode | readable | (readable >> 2 if path.is_dir() else 0))
    for name, source in (("solutions", COURSE), ("notebooks", NOTEBOOKS)):
        (base / "course" / name).mkdir(parents=True)
        for notebook in source.glob("*.ipynb"):
            shutil.copy(notebook, base / "course" / name / notebook.name)
    return base


@pytest.fixture(scope="module")
def pod_image(image: Image, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pod_image(image.opt, tmp_path_factory.mktemp("pod-image"))


def pod(kind: str, pod_image: Path, image: Image, data: Path, uid: int) -> Model:
    data.mkdir(parents=True, exist_ok=True)
    for path in [data, *data.rglob("*")]:
        os.chown(path, uid, uid)  # the volume, group-owned through fsGroup
    binds = {
        "/opt": pod_image / "opt",
        "/usr/local/bin": image.bin,
        "/course": pod_image / "course",
        "/data": data,
    }
    extra = {"uid": uid, "gid": uid} if kind == "restricted" else {}
    return Model(kind, data.parent / f"model-{kind}", binds, extra)


def run_job(model: Model, job: dict[str, Any], env: dict[str, str]) -> tuple[int, str]:
    full = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
    done = model.run(container(job)["command"], {**full, **env_of(job), **env})
    return done.returncode, done.stdout + done.stderr


def test_the_restricted_variant_grades_every_shard_and_merges_them(
    image: Image, pod_image: Path, baseline: BatchReport, tmp_path: Path
) -> None:
    grade, merge = jobs(RESTRICTED)
    data = tmp_path / "data"
    solved = solved_course(data / "submissions")
    adversarial(data / "submissions", "/course/solutions")
    uid = grade["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    model = pod("restricted", pod_image, image, data, uid)
    shards = int(env_of(grade)["SHARDS"])
    for index in range(shards):
        code, said = run_job(model, grade, {"JOB_COMPLETION_INDEX": str(index)})
        assert code == 0, said
        assert f"containment: container: uid {uid} " in said
        assert "the grader's own (not root: no uid per job)" in said
    code, said = run_job(model, merge, {})
    assert code == 0, said
    merged = BatchReport.model_validate_json((data / "reports/merged/batch.json").read_text())
    assert merged.graded == len(solved) + 3 and merged.errors == 0
    assert_full_marks(merged, [p.name for p in solved])
    assert_adversarial(merged, by_file(baseline)["04-ex2-url-mode.ipynb"], "container")
    junit = (data / "reports/merged/junit.xml").read_text()
    assert 'name="labkit.containment" value="container"' in junit


def test_a_default_pod_runs_the_same_command_with_a_uid_per_job(
    image: Image, pod_image: Path, baseline: BatchReport, tmp_path: Path
) -> None:
    grade, _ = jobs(RESTRICTED)
    data = tmp_path / "data"
    adversarial(data / "submissions", "/course/solutions")
    model = pod("docker", pod_image, image, data, 0)
    code, said = run_job(model, grade, {"JOB_COMPLETION_INDEX": "0", "SHARDS": "1"})
    assert code == 0, said
    assert re.search(r"containment: container: uid-per-job\(\d+-\d+\) via setuid", said), said
    batch = BatchReport.model_validate_json((data / "reports/shard-0/batch.json").read_text())
    assert_adversarial(batch, by_file(baseline)["04-ex2-url-mode.ipynb"], "container")


def test_the_nested_full_variant_fails_its_pod_where_it_is_not_privileged(
    image: Image, pod_image: Path, tmp_path: Path
) -> None:
    grade, _ = jobs(FULL)
    assert container(grade)["securityContext"] == {"privileged": True}
    data = tmp_path / "data"
    solved_course(data / "submissions")
    model = pod("docker", pod_image, image, data, 0)
    code, said = run_job(model, grade, {"JOB_COMPLETION_INDEX": "0"})
    assert code != 0, said
    assert "bwrap: Creating new namespace failed: Operation not permitted" in said
