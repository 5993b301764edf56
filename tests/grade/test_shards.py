"""Sharded batches: `labkit grade --shard I/N`, `labkit grade merge`, the course version, and the
deploy examples (a CI matrix checked by actionlint; a Kubernetes Indexed Job validated offline
against the bundled schemas and its container commands run here with the index set by hand)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grade.grade_helpers import FIXTURES, solved, write
from labkit import cli
from labkit.grade import shards, version
from labkit.grade.graded_exercises import GRADED
from labkit.grade.report import BatchReport, CourseVersion, SubmissionReport

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
V1 = CourseVersion(package="0.1.0", digest="sha256:" + "1" * 64)
V2 = CourseVersion(package="0.1.0", digest="sha256:" + "2" * 64)


def _batch(files: list[str], course: CourseVersion | None = V1) -> BatchReport:
    subs = [SubmissionReport(file=f, status="graded", course=course) for f in files]
    return BatchReport(
        submissions=subs, graded=len(subs), errors=0, mean_percent=0, seconds=1, course=course
    )


def test_shards_partition_the_files_and_keep_them_when_others_are_added() -> None:
    names = [Path(f"sub-{n:03d}.ipynb") for n in range(200)]
    parts = [shards.Shard(i, 4).select(names) for i in range(4)]
    assert sorted(p for part in parts for p in part) == sorted(names)
    assert all(30 < len(part) < 70 for part in parts)
    more = names + [Path(f"late-{n}.ipynb") for n in range(50)]
    for i, part in enumerate(parts):
        assert set(part) <= set(shards.Shard(i, 4).select(more))
    # By name only: the same file in another folder is in the same shard.
    assert shards.Shard(1, 4).holds(Path("a/x.ipynb")) == shards.Shard(1, 4).holds(Path("x.ipynb"))


@pytest.mark.parametrize("text", ["4/4", "-1/4", "1/0", "1", "a/b", "1/4/2"])
def test_a_bad_shard_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--shard"):
        shards.Shard.parse(text)


def test_merge_refuses_duplicates_other_versions_and_unversioned_reports() -> None:
    merged = shards.merge([("s0", _batch(["b.ipynb"])), ("s1", _batch(["a.ipynb"]))])
    assert [s.file for s in merged.submissions] == ["a.ipynb", "b.ipynb"]
    assert merged.course == V1 and merged.seconds == 2
    with pytest.raises(shards.MergeError, match=r"a.ipynb was graded in two shards \(s0 and s1\)"):
        shards.merge([("s0", _batch(["a.ipynb"])), ("s1", _batch(["a.ipynb"]))])
    with pytest.raises(version.VersionMismatch, match="different course versions"):
        shards.merge([("s0", _batch(["a.ipynb"])), ("s1", _batch(["b.ipynb"], V2))])
    with pytest.raises(shards.MergeError, match="s1: its reports carry no course version"):
        shards.merge([("s0", _batch(["a.ipynb"])), ("s1", _batch(["b.ipynb"], None))])


def test_course_version_changes_with_any_solution_learner_copy_or_hidden_check(
    tmp_path: Path,
) -> None:
    (tmp_path / "solutions").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "solutions" / "a.ipynb").write_text("{}")
    (tmp_path / "notebooks" / "a.ipynb").write_text("{}")
    base = version.course_version(tmp_path / "solutions", tmp_path / "notebooks", GRADED)
    assert base == version.course_version(tmp_path / "solutions", tmp_path / "notebooks", GRADED)
    (tmp_path / "notebooks" / "a.ipynb").write_text('{"x": 1}')
    learner = version.course_version(tmp_path / "solutions", tmp_path / "notebooks", GRADED)
    (tmp_path / "solutions" / "a.ipynb").write_text('{"x": 1}')
    solution = version.course_version(tmp_path / "solutions", tmp_path / "notebooks", GRADED)
    fewer = {k: v for k, v in GRADED.items() if k != "ex5"}
    hidden = version.course_version(tmp_path / "solutions", tmp_path / "notebooks", fewer)
    assert len({base.digest, learner.digest, solution.digest, hidden.digest}) == 4


def test_a_regrade_into_a_folder_of_another_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "batch.json").write_text(_batch(["a.ipynb"], V1).model_dump_json())
    version.check_reports_folder(tmp_path, V1)
    with pytest.raises(version.VersionMismatch, match="grade into an empty --out folder"):
        version.check_reports_folder(tmp_path, V2)


def _k8s() -> list[dict[str, object]]:
    return list(yaml.safe_load_all((ROOT / "deploy" / "k8s" / "grade-job.yaml").read_text()))


def _command(job: dict[str, object]) -> list[str]:
    container = job["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    return list(container["command"])


def _env(job: dict[str, object]) -> dict[str, str]:
    container = job["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    return {e["name"]: e["value"] for e in container["env"]}


def test_the_kubernetes_job_validates_offline_against_the_schemas(tmp_path: Path) -> None:
    check = [str(BIN / "kubernetes-validate"), "--strict", "--kubernetes-version", "1.30.0"]
    env = {**os.environ, "no_proxy": "", "https_proxy": "http://127.0.0.1:9"}  # no network
    done = subprocess.run(
        [*check, str(ROOT / "deploy/k8s/grade-job.yaml")], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("passed") == 2
    index = _k8s()[0]
    assert index["spec"]["completionMode"] == "Indexed"  # type: ignore[index]
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (ROOT / "deploy/k8s/grade-job.yaml").read_text().replace("restartPolicy", "restartPolicey")
    )
    assert subprocess.run([*check, str(bad)], capture_output=True, env=env).returncode != 0


def test_the_ci_matrix_passes_actionlint() -> None:
    done = subprocess.run(
        [str(BIN / "actionlint"), str(ROOT / "deploy/github/grade-matrix.yml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_four_shards_merged_equal_one_batch_apart_from_timing(tmp_path: Path) -> None:
    """The Indexed Job's container command, run with JOB_COMPLETION_INDEX 0..3 by hand, then
    the merge Job's command, against one batch of the same submissions."""
    subs = tmp_path / "submissions"
    for n in range(6):
        name = ("paths", "replay", "elicitation")[n % 3]
        write(subs, f"{name}-{n}.ipynb", solved(name))
    (subs / "corrupt.ipynb").write_text("{not json")
    course = tmp_path / "course"
    course.mkdir()
    (course / "solutions").symlink_to(FIXTURES)
    grade_job, merge_job = _k8s()
    base = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    paths = {"SUBMISSIONS": str(subs), "REPORTS": str(tmp_path / "reports"), "COURSE": str(course)}
    for index in range(4):
        env = {**base, **_env(grade_job), **paths, "JOB_COMPLETION_INDEX": str(index)}
        done = subprocess.run(_command(grade_job), env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    env = {**base, **_env(merge_job), **paths}
    done = subprocess.run(_command(merge_job), env=env, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr  # the corrupt file was not graded
    merged = BatchReport.model_validate_json((tmp_path / "reports/merged/batch.json").read_text())
    assert (tmp_path / "reports/merged/junit.xml").read_text().count("<testsuite ") == 7
    assert (tmp_path / "reports/merged/class.html").exists()
    one = tmp_path / "one"
    code = cli.main(["grade", str(subs), "--solutions", str(FIXTURES), "--out", str(one)])
    assert code == 1
    single = BatchReport.model_validate_json((one / "batch.json").read_text())

    def untimed(batch: BatchReport) -> dict[str, object]:
        data = batch.model_dump(exclude={"seconds"})
        for sub in data["submissions"]:
            sub.pop("seconds")
        return data

    assert untimed(merged) == untimed(single)
    assert merged.course is not None and merged.course.digest.startswith("sha256:")
    # The same shard twice, or a shard of another course version: refused, nothing written.
    shard = str(tmp_path / "reports" / "shard-0")
    again = ["grade", "merge", shard, shard, "--out", str(tmp_path / "twice")]
    assert cli.main(again) == 2 and not (tmp_path / "twice").exists()
    other = tmp_path / "reports" / "shard-1" / "batch.json"
    stale = BatchReport.model_validate_json(other.read_text()).model_copy(update={"course": V2})
    other.write_text(stale.model_dump_json())
    mixed = ["grade", "merge", shard, str(other.parent), "--out", str(tmp_path / "mixed")]
    assert cli.main(mixed) == 2 and not (tmp_path / "mixed").exists()
