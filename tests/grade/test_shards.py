"""Sharded batches: `labkit grade --shard I/N`, `labkit grade merge` (missing shards named), the
course version, and the deploy examples: a CI matrix checked by actionlint; the two Kubernetes
variants validated offline against the bundled schemas, the restricted one against the
"restricted" Pod Security Standard's rules, the full one stating its privilege, both denying
egress; the full variant's container commands run here (as root, with the index set by hand).
tests/platforms/test_kubernetes_model.py runs the restricted variant under a restricted pod's
confinement."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


K8S = ROOT / "deploy" / "k8s"
RESTRICTED = K8S / "grade-job-restricted.yaml"
FULL = K8S / "grade-job-full.yaml"


def _docs(path: Path) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(path.read_text()))


def _k8s(path: Path = FULL) -> list[dict[str, Any]]:
    return [d for d in _docs(path) if d["kind"] == "Job"]


def _command(job: dict[str, Any]) -> list[str]:
    return list(job["spec"]["template"]["spec"]["containers"][0]["command"])


def _env(job: dict[str, Any]) -> dict[str, str]:
    container = job["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"]}


def test_the_kubernetes_manifests_validate_offline_against_the_schemas(tmp_path: Path) -> None:
    check = [str(BIN / "kubernetes-validate"), "--strict", "--kubernetes-version", "1.30.0"]
    env = {**os.environ, "no_proxy": "", "https_proxy": "http://127.0.0.1:9"}  # no network
    for manifest in (RESTRICTED, FULL):
        done = subprocess.run([*check, str(manifest)], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.count("passed") == 4  # namespace, network policy, two jobs
        assert _k8s(manifest)[0]["spec"]["completionMode"] == "Indexed"
    bad = tmp_path / "bad.yaml"
    bad.write_text(RESTRICTED.read_text().replace("restartPolicy", "restartPolicey"))
    assert subprocess.run([*check, str(bad)], capture_output=True, env=env).returncode != 0


# The Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards),
# as the rules a pod template must pass: "baseline", then what "restricted" adds.
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip


def pod_security_violations(pod: dict[str, Any], level: str) -> list[str]:
    """What a pod spec breaks of the Pod Security Standard `level` (baseline or restricted)."""
    found: list[str] = []
    pod_context = pod.get("securityContext", {})
    containers = [*pod.get("initContainers", []), *pod.get("containers", [])]
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            found.append(f"host namespaces: {key}")
    if pod_context.get("windowsOptions", {}).get("hostProcess"):
        found.append("HostProcess")
    found += [f"sysctl {s['name']}" for s in pod_context.get("sysctls", [])
              if s["name"] not in SAFE_SYSCTLS]  # fmt: skip
    for volume in pod.get("volumes", []):
        kind = next(k for k in volume if k != "name")
        if kind == "hostPath":
            found.append(f"hostPath volume {volume['name']}")
        elif level == "restricted" and kind not in RESTRICTED_VOLUMES:
            found.append(f"volume type {kind}")

    def seccomp(context: dict[str, Any]) -> str | None:
        profile = context.get("seccompProfile")
        return None if profile is None else str(profile.get("type"))

    def app_armor(context: dict[str, Any]) -> str | None:
        profile = context.get("appArmorProfile")
        return None if profile is None else str(profile.get("type"))

    if seccomp(pod_context) == "Unconfined" or app_armor(pod_context) == "Unconfined":
        found.append("pod: seccomp or AppArmor Unconfined")
    for container in containers:
        name, context = container["name"], container.get("securityContext", {})
        if context.get("privileged"):
            found.append(f"{name}: privileged")
        if context.get("windowsOptions", {}).get("hostProcess"):
            found.append(f"{name}: HostProcess")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            found.append(f"{name}: hostPort")
        if context.get("procMount", "Default") != "Default":
            found.append(f"{name}: procMount")
        if seccomp(context) == "Unconfined" or app_armor(context) == "Unconfined":
            found.append(f"{name}: seccomp or AppArmor Unconfined")
        selinux = context.get("seLinuxOptions", {})
        if selinux.get("user") or selinux.get("role"):
            found.append(f"{name}: SELinux user or role")
        added = set(context.get("capabilities", {}).get("add", []))
        if added - BASELINE_CAPABILITIES:
            found.append(f"{name}: adds {sorted(added - BASELINE_CAPABILITIES)}")
        if level != "restricted":
            continue
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation is not false")
        non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
        if non_root is not True:
            found.append(f"{name}: runAsNonRoot is not true")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            found.append(f"{name}: runAsUser 0")
        if (seccomp(context) or seccomp(pod_context)) not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile is not RuntimeDefault or Localhost")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            found.append(f"{name}: capabilities do not drop ALL")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: adds capabilities beyond NET_BIND_SERVICE")
    return found


def _pods(path: Path) -> list[dict[str, Any]]:
    return [job["spec"]["template"]["spec"] for job in _k8s(path)]


def test_the_restricted_variant_meets_the_restricted_pod_security_standard() -> None:
    docs = _docs(RESTRICTED)
    (namespace,) = [d for d in docs if d["kind"] == "Namespace"]
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for pod in _pods(RESTRICTED):
        assert pod_security_violations(pod, "restricted") == []
    for job in _k8s(RESTRICTED):
        assert job["metadata"]["namespace"] == namespace["metadata"]["name"]
    assert "--containment container" in " ".join(_command(_k8s(RESTRICTED)[0]))
    # The rules catch what they are there for: each field removed is a violation.
    pod = copy.deepcopy(_pods(RESTRICTED)[0])
    del pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"]
    del pod["securityContext"]["seccompProfile"]
    pod["containers"][0]["securityContext"]["capabilities"] = {"add": ["SYS_ADMIN"]}
    pod["securityContext"]["runAsNonRoot"] = False
    assert pod_security_violations(pod, "restricted") == [
        "grade: adds ['SYS_ADMIN']",
        "grade: allowPrivilegeEscalation is not false",
        "grade: runAsNonRoot is not true",
        "grade: seccompProfile is not RuntimeDefault or Localhost",
        "grade: capabilities do not drop ALL",
        "grade: adds capabilities beyond NET_BIND_SERVICE",
    ]


def test_the_nested_full_variant_states_its_privilege() -> None:
    docs = _docs(FULL)
    (namespace,) = [d for d in docs if d["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    grade = _pods(FULL)[0]
    assert pod_security_violations(grade, "baseline") == ["grade: privileged"]
    assert "--containment full" in " ".join(_command(_k8s(FULL)[0]))
    header = FULL.read_text().split("apiVersion")[0]
    assert "CAP_SYS_ADMIN" in header and "read-only" in header and "privileged" in header


def test_the_grading_pods_may_send_nothing_out() -> None:
    for manifest in (RESTRICTED, FULL):
        docs = _docs(manifest)
        (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
        grade_labels = _k8s(manifest)[0]["spec"]["template"]["metadata"]["labels"]
        selected = policy["spec"]["podSelector"]["matchLabels"]
        assert selected.items() <= grade_labels.items()
        assert "Egress" in policy["spec"]["policyTypes"] and policy["spec"]["egress"] == []
        assert policy["metadata"]["namespace"] == _k8s(manifest)[0]["metadata"]["namespace"]


def test_the_ci_matrix_passes_actionlint_and_grades_as_root_in_full_mode() -> None:
    matrix = ROOT / "deploy/github/grade-matrix.yml"
    done = subprocess.run([str(BIN / "actionlint"), str(matrix)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    text = matrix.read_text()
    assert 'sudo env "PATH=$PATH" labkit grade submissions --containment full' in text
    assert text.index("apt-get update") < text.index("apt-get install")
    assert "cache: pip" in text


def test_merge_names_the_shards_that_are_missing(tmp_path: Path) -> None:
    folders = []
    for index in (0, 2):
        folder = tmp_path / f"shard-{index}"
        batch = _batch([f"{index}.ipynb"])
        folder.mkdir()
        (folder / "batch.json").write_text(batch.model_dump_json())
        shards.write_marker(shards.Shard(index, 4), folder)
        folders.append(str(folder))
    code = cli.main(["grade", "merge", *folders, "--out", str(tmp_path / "merged")])
    assert code == 2 and not (tmp_path / "merged").exists()
    with pytest.raises(shards.MergeError, match=r"shard 1/4, 3/4 missing"):
        shards.complete([(f, shards.marker(Path(f))) for f in folders])


def test_a_shard_whose_grading_failed_fails_and_one_without_its_folder_refuses(
    tmp_path: Path,
) -> None:
    """Exit 3 (grading itself failed) and 2 (refused) fail a pod whose command keeps only 1
    (`|| test $? -eq 1`); a shard's reports folder carries its marker either way."""
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    source = json.loads((FIXTURES / "paths.ipynb").read_text())
    setup = next(c for c in source["cells"] if c.get("id") == "setup")
    setup["source"] = "import labkit_package_not_installed\n" + "".join(setup["source"])
    (solutions / "paths.ipynb").write_text(json.dumps(source))
    write(tmp_path / "subs", "paths.ipynb", solved("paths", solutions))
    args = ["grade", str(tmp_path / "subs"), "--solutions", str(solutions), "--shard", "0/1"]
    assert cli.main([*args, "--out", str(tmp_path / "out")]) == 3
    assert shards.marker(tmp_path / "out") == shards.Shard(0, 1)
    missing = ["grade", str(tmp_path / "absent"), "--solutions", str(FIXTURES), "--shard", "0/2"]
    assert cli.main([*missing, "--out", str(tmp_path / "o")]) == 2


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
    grade_job, merge_job = _k8s(FULL)
    base = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    paths = {"SUBMISSIONS": str(subs), "REPORTS": str(tmp_path / "reports"), "COURSE": str(course)}
    for index in range(4):
        env = {**base, **_env(grade_job), **paths, "JOB_COMPLETION_INDEX": str(index)}
        done = subprocess.run(_command(grade_job), env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    env = {**base, **_env(merge_job), **paths}
    done = subprocess.run(_command(merge_job), env=env, capture_output=True, text=True)
    # The corrupt file was not graded: the submission's doing (exit 1), so the Job succeeds.
    assert done.returncode == 0, done.stdout + done.stderr
    merged = BatchReport.model_validate_json((tmp_path / "reports/merged/batch.json").read_text())
    assert merged.errors == 1 and not any(s.infrastructure for s in merged.submissions)
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
