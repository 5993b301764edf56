"""Containment per job: no network, no socket outside the scratch folder, no surviving process,
limits for the whole process tree, and a uid per job (real jobs, through `Containment.start`).

Each job runs the standard library's interactive console (`python -m code`, started by the
launcher like any job process) and is fed Python on stdin; it answers on stdout with lines
starting "RESULT". The test side holds the listeners, markers and clocks.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from grade.grade_helpers import FIXTURES, solved, write
from labkit import cli
from labkit.grade import launcher
from labkit.grade.containment import (
    LEAF,
    NO_CGROUP,
    SLOTS,
    UNCONFINED,
    CgroupRoots,
    Cgroups,
    ContainerJobs,
    Containment,
    ContainmentUnavailable,
    Job,
    Jobs,
    Limits,
    Mode,
    Probe,
    Survey,
    UidPool,
    Unconfined,
    end_processes_of,
    launcher_argv,
    survey,
)
from labkit.grade.kernel import CellStatus, KernelRunner, jobs_for
from labkit.grade.report import SubmissionReport, feedback

MIB = 1024**2
LIMITS = Limits(memory=256 * MIB, nproc=24)
CONSOLE = "code"


@pytest.fixture(scope="module")
def contained() -> Containment:
    return Containment(LIMITS)


@pytest.fixture
def scratch(work: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=work, prefix="job-"))


def run_job(contained: Containment, scratch: Path, code: str, timeout: float = 30) -> str:
    """Run `code` in a fresh job; its stdout (console prompts included)."""
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with contained.start(scratch, CONSOLE, **pipes) as process:
        out, err = process.communicate(f"exec({code!r})\n".encode(), timeout=timeout)
    text = out.decode()
    assert "RESULT" in text, err.decode()[-2000:]
    return text


def result(text: str) -> list[str]:
    return text.split("RESULT", 1)[1].split("\n", 1)[0].split()


def read_result(process: subprocess.Popen[bytes], timeout: float = 30) -> list[str]:
    """Read a running job's stdout up to its next RESULT line."""
    assert process.stdout is not None
    seen = b""
    deadline = time.monotonic() + timeout
    while b"RESULT" not in seen or not seen.split(b"RESULT", 1)[1].count(b"\n"):
        ready, _, _ = select.select([process.stdout], [], [], max(0, deadline - time.monotonic()))
        assert ready, f"no RESULT within {timeout} s: {seen!r}"
        chunk = os.read(process.stdout.fileno(), 4096)
        assert chunk, f"the job ended: {seen!r}"
        seen += chunk
    return result(seen.decode())


def send(process: subprocess.Popen[bytes], line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line.encode() + b"\n")
    process.stdin.flush()


def processes_of(uid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.stat(entry.path).st_uid == uid:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


# -- network -------------------------------------------------------------------------------------


def test_udp_send_fails(contained: Containment, scratch: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        # The job's own loopback swallows the first datagram; the second has no route at all.
        code = f"""import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for address in [("127.0.0.1", {port}), ("192.0.2.1", 53)]:
    try:
        s.sendto(b"the hidden checks", address)
        print("RESULT", "sent", end=" ")
    except OSError as error:
        print("RESULT", type(error).__name__, end=" ")
print()"""
        text = run_job(contained, scratch, code)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.recv(100)  # nothing arrived
    assert "RESULT OSError" in text  # ENETUNREACH: the job's namespace has no route out


def test_tcp_connect_to_a_loopback_listener_fails(contained: Containment, scratch: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        code = f"""import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5)
    print("RESULT connected")
except OSError as error:
    print("RESULT", type(error).__name__)"""
        answer = result(run_job(contained, scratch, code))
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert answer[0] != "connected" and answer[0].endswith("Error")


def test_an_abstract_unix_socket_is_unreachable(contained: Containment, scratch: Path) -> None:
    name = f"\0labkit-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(name)
        listener.listen(1)
        code = f"""import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect({name!r})
    print("RESULT connected")
except OSError as error:
    print("RESULT", type(error).__name__)"""
        answer = result(run_job(contained, scratch, code))
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert answer == ["ConnectionRefusedError"]  # another network namespace: no such name


def test_a_pathname_unix_socket_outside_the_scratch_folder_is_unreachable(
    contained: Containment, scratch: Path
) -> None:
    # Beside the scratch folder, open to everyone, like a database server's socket.
    path = scratch.parent / f"server-{uuid.uuid4().hex[:8]}.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        path.chmod(0o777)
        listener.listen(1)
        code = f"""import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect({str(path)!r})
    print("RESULT connected")
except OSError as error:
    print("RESULT", type(error).__name__)"""
        answer = result(run_job(contained, scratch, code))
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    path.unlink()
    assert answer == ["FileNotFoundError"]  # not in the job's mount view


# -- processes -----------------------------------------------------------------------------------

DAEMON = """import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(1.5)
        open(MARKER, "w").write("still here")
        time.sleep(60)
        os._exit(0)
    os._exit(0)
os.wait()
print("RESULT", os.getuid())"""

# Which pids exist, as far as signals tell (ESRCH: none; EPERM: one the job may not signal).
ALIVE = """import os
def exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
print("RESULT", os.getuid(), *[p for p in range(1, 4096) if exists(p)])"""


def test_a_double_forked_daemon_ends_with_its_job(contained: Containment, scratch: Path) -> None:
    marker = scratch / "daemon-was-here"
    answer = result(run_job(contained, scratch, DAEMON.replace("MARKER", repr(str(marker)))))
    uid = int(answer[0])
    assert processes_of(uid) == []  # the job's uid runs nothing any more
    assert contained.host.cgroups is not None
    assert not any((p / f"labkit-job-{uid}").exists() for p in contained.host.cgroups.parents)
    # The next job gets the same uid slot, and sees no process but its own.
    other = Path(tempfile.mkdtemp(dir=scratch.parent, prefix="job-"))
    later = result(run_job(contained, other, ALIVE))
    assert int(later[0]) == uid
    assert len(later[1:]) <= 2  # the namespace's init and the job's own process
    time.sleep(2.0)  # past the moment the daemon would have written its marker
    assert not marker.exists()
    assert processes_of(uid) == []


FORK_TREE = """import os, select, time
ready_r, ready_w = os.pipe()
hold_r, hold_w = os.pipe()
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        os.close(hold_w)
        block = b"x" * (100 * 1024 * 1024)  # touched: 100 MiB each, 400 MiB in all
        os.write(ready_w, b"1")
        os.read(hold_r, 1)
        os._exit(0)
    children.append(pid)
got, ended, deadline = 0, {}, time.monotonic() + 10
while got < 4 and not ended and time.monotonic() < deadline:
    if select.select([ready_r], [], [], 0.2)[0]:
        got += len(os.read(ready_r, 4))
    for pid in children:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            ended[pid] = os.waitstatus_to_exitcode(status)
os.close(hold_w)
for pid in children:
    if pid not in ended:
        ended[pid] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print("RESULT", got, *ended.values())"""


def test_a_fork_tree_over_the_job_memory_is_stopped(contained: Containment, scratch: Path) -> None:
    # Each child (100 MiB) stays under the per-process limit (256 MiB); together they do not.
    assert 100 * MIB < LIMITS.memory < 4 * 100 * MIB
    answer = [int(a) for a in result(run_job(contained, scratch, FORK_TREE))]
    ready, statuses = answer[0], answer[1:]
    assert ready < 4
    assert -signal.SIGKILL in statuses  # the cgroup's out-of-memory killer ended a child


HOLD = """import os, sys
hold_r, hold_w = os.pipe()
pids, refused = [], None
try:
    for _ in range(200):
        pid = os.fork()
        if pid == 0:
            os.close(hold_w)
            os.read(hold_r, 1)
            os._exit(0)
        pids.append(pid)
except OSError as error:
    refused = type(error).__name__
print("RESULT", len(pids), refused, flush=True)
sys.stdin.readline()
os.close(hold_w)
for pid in pids:
    os.waitpid(pid, 0)
print("RESULT released", flush=True)"""


def test_two_jobs_at_once_each_keep_their_full_process_budget(
    contained: Containment, work: Path
) -> None:
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
    with ExitStack() as stack:
        jobs = [
            stack.enter_context(
                contained.start(Path(tempfile.mkdtemp(dir=work, prefix="job-")), CONSOLE, **pipes)
            )
            for _ in range(2)
        ]
        for job in jobs:  # both are running (limits set) before either forks
            send(job, "import os; print('RESULT', os.getuid(), flush=True)")
        uids = [read_result(job)[0] for job in jobs]
        counts = []
        for job in jobs:  # the first holds all it could fork while the second forks
            send(job, f"exec({HOLD!r})")
            counts.append(read_result(job))
        for job in jobs:
            send(job, "")
            assert read_result(job) == ["released"]
    for count, refused in counts:
        assert refused == "BlockingIOError"  # EAGAIN: the job's own process limit
        assert LIMITS.nproc - 3 <= int(count) <= LIMITS.nproc
    assert uids[0] != uids[1]


# -- what the machine offers, and saying so ------------------------------------------------------


def test_this_machine_contains_jobs_and_the_survey_says_what_it_tried(
    capsys: pytest.CaptureFixture[str],
) -> None:
    host = survey()
    assert host.missing(Mode.FULL) == []
    assert host.cgroups is not None and host.cgroups.version in (1, 2)
    assert host.bwrap.ok and host.setuid.ok and host.launcher[Mode.FULL].ok
    assert host.landlock >= 1
    assert cli.main(["grade", "--check-containment"]) == 0
    printed = capsys.readouterr().out
    for piece in ("bubblewrap namespaces", "job cgroup", "setuid to a job uid", "Landlock"):
        assert piece in printed
    assert "full        available" in printed


def test_container_mode_needs_an_interpreter_the_job_uid_can_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """This checkout's interpreter lives under /root (0700): a job uid without read-search
    cannot start it, so the survey refuses container mode here and says why."""
    interpreter = os.path.realpath(sys.executable)
    assert interpreter.startswith("/root/"), f"{interpreter}: expected under /root (0700)"
    host = survey()
    probe = host.launcher[Mode.CONTAINER]
    assert not probe.ok and "cannot read" in probe.detail and "/opt" in probe.detail
    assert cli.main(["grade", "--check-containment", "--containment", "container"]) == 1
    printed = capsys.readouterr().out
    assert "container   UNAVAILABLE" in printed and "cannot read" in printed


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _mountinfo(root: Path, *mounts: tuple[str, str, str]) -> str:
    """Mount table lines: (mount point beneath root, file system type, super options)."""
    return "".join(
        f"{30 + n} 1 0:{40 + n} / {root / point} rw,relatime shared:{n} - {fs} cgroup {opts}\n"
        for n, (point, fs, opts) in enumerate(mounts)
    )


def _roots(tmp_path: Path, own: str, *mounts: tuple[str, str, str]) -> CgroupRoots:
    _tree(tmp_path, {"self": own, "mountinfo": _mountinfo(tmp_path, *mounts)})
    return CgroupRoots(tmp_path / "mountinfo", tmp_path / "self")


def test_cgroup_v2_is_found_where_it_is_mounted_on_a_unified_host(tmp_path: Path) -> None:
    """Ubuntu 22.04/24.04, GitHub runners, most Kubernetes nodes: cgroup2 at /sys/fs/cgroup."""
    _tree(
        tmp_path,
        {
            "cgroup/grader/cgroup.controllers": "cpu memory pids\n",
            "cgroup/grader/cgroup.subtree_control": "memory pids\n",
            "cgroup/grader/cgroup.procs": "",
        },
    )
    roots = _roots(tmp_path, "0::/grader\n", ("cgroup", "cgroup2", "rw,nsdelegate"))
    cgroups, _ = Cgroups.usable(roots)
    assert cgroups == Cgroups(2, (tmp_path / "cgroup" / "grader",))
    group = cgroups.create("labkit-job-61001", Limits(memory=512 * MIB, nproc=10))
    made = tmp_path / "cgroup" / "grader" / "labkit-job-61001"
    assert (made / "memory.max").read_text() == str(512 * MIB)
    assert int((made / "pids.max").read_text()) >= 10
    assert group.procs == [made / "cgroup.procs"]


class _V2Rule:
    """cgroup v2's no-internal-process rule over plain files: enabling controllers for the
    children of a cgroup that holds processes is refused (EBUSY); writing a pid to a cgroup's
    cgroup.procs moves it there."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, path: Path, value: str) -> None:
        if path.name == "cgroup.subtree_control" and (path.parent / "cgroup.procs").read_text():
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
        if path.name == "cgroup.procs":
            for procs in self.root.rglob("cgroup.procs"):
                kept = [p for p in procs.read_text().split() if p != value]
                procs.write_text("".join(f"{p}\n" for p in kept))
            value = path.read_text() + value + "\n" if path.exists() else value + "\n"
        path.write_text(value)


def test_the_grader_moves_into_a_leaf_before_it_enables_job_controllers(tmp_path: Path) -> None:
    """Inside a container whose cgroup holds the grader and its parent shell: every process
    moves into the leaf `labkit-grader`, then memory and pids are enabled for job cgroups."""
    _tree(
        tmp_path,
        {
            "cgroup/cgroup.controllers": "cpu memory pids\n",
            "cgroup/cgroup.subtree_control": "",
            "cgroup/cgroup.procs": "1\n40\n",
        },
    )
    roots = _roots(tmp_path, "0::/\n", ("cgroup", "cgroup2", "rw"))
    cgroups, reasons = Cgroups.usable(roots, write=_V2Rule(tmp_path / "cgroup"))
    assert cgroups == Cgroups(2, (tmp_path / "cgroup",)), reasons
    assert (tmp_path / "cgroup" / "cgroup.procs").read_text() == ""
    assert (tmp_path / "cgroup" / LEAF / "cgroup.procs").read_text().split() == ["1", "40"]
    assert (tmp_path / "cgroup" / "cgroup.subtree_control").read_text() == "+memory +pids"


def test_cgroup_v2_of_a_hybrid_host_then_v1_then_none(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "unified/cgroup.controllers": "",
            "unified/cgroup.subtree_control": "",
            "memory/grader/cgroup.procs": "",
            "pids/cgroup.procs": "",
        },
    )
    roots = _roots(
        tmp_path,
        "0::/\n4:memory:/grader\n8:pids:/\n",
        ("unified", "cgroup2", "rw"),
        ("memory", "cgroup", "rw,memory"),
        ("pids", "cgroup", "rw,pids"),
    )
    cgroups, reasons = Cgroups.usable(roots)
    assert cgroups == Cgroups(1, (tmp_path / "memory" / "grader", tmp_path / "pids"))
    assert f"v2 at {tmp_path / 'unified'} offers no controller" in reasons[0]
    group = cgroups.create("labkit-job-61002", Limits(memory=512 * MIB, nproc=10))
    assert (tmp_path / "memory/grader/labkit-job-61002/memory.limit_in_bytes").read_text() == str(
        512 * MIB
    )
    assert int((tmp_path / "pids/labkit-job-61002/pids.max").read_text()) >= 10
    assert len(group.procs) == 2
    (tmp_path / "pids" / "cgroup.procs").unlink()
    assert Cgroups.usable(roots)[0] is None
    nothing = _roots(tmp_path / "bare", "0::/\n")
    assert Cgroups.usable(nothing) == (None, ["no cgroup hierarchy is mounted"])


def _host(**changes: object) -> Survey:
    return dataclasses.replace(survey(), **changes)  # type: ignore[arg-type]


def test_a_mode_this_machine_cannot_give_is_refused_naming_what_and_the_flags() -> None:
    docker = Probe(False, "bwrap: Creating new namespace failed: Operation not permitted")
    host = _host(bwrap=docker)
    with pytest.raises(ContainmentUnavailable) as refused:
        Containment(LIMITS, host=host)
    message = str(refused.value)
    assert "containment `full`" in message and docker.detail in message
    assert "--containment container" in message and "--check-containment" in message
    assert "--containment unconfined" in message
    no_landlock = _host(landlock=0, launcher={Mode.CONTAINER: Probe(True, "keeps none")})
    assert any("Landlock" in gap for gap in no_landlock.missing(Mode.CONTAINER))
    not_root = _host(root=False, bwrap=Probe(True, ""))
    assert not_root.missing(Mode.FULL) == ["root (to give each job its own uid and cgroup)"]
    assert not_root.missing(Mode.UNCONFINED) == []


def test_container_mode_without_root_runs_jobs_as_the_graders_uid_and_says_so() -> None:
    host = _host(root=False, landlock=7)
    jobs = ContainerJobs(LIMITS, host=host)
    assert jobs.description.startswith("uid ")
    assert "the grader's own (not root: no uid per job)" in jobs.description
    with jobs.job(Path("/nonexistent")) as job:
        assert job.uid == os.getuid() and job.keep == ()
        argv = job.command(launcher_argv(LIMITS, CONSOLE))
    assert f"--user={os.getuid()}" in argv and "--keep=" in argv


def test_every_process_of_a_jobs_uid_ends_with_it(tmp_path: Path) -> None:
    """Container mode has no PID namespace: a job's double-forked daemon is found by its uid."""
    uid = 61000 + SLOTS - 1
    daemon = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "setsid", "-f"]
    subprocess.run([*daemon, "sleep", "300"], check=True, timeout=30)
    subprocess.run([*daemon, "sleep", "301"], check=True, timeout=30)
    deadline = time.monotonic() + 10
    while len(processes_of(uid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes_of(uid)) == 2
    end_processes_of(uid)
    deadline = time.monotonic() + 10
    while processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.05)  # killed, being reaped by init
    assert processes_of(uid) == []


def test_without_a_cgroup_a_job_is_still_contained_and_every_report_says_so(
    scratch: Path,
) -> None:
    host = _host(cgroups=None, cgroup=Probe(False, "v1 not writable at /x"))
    contained = Containment(LIMITS, host=host)
    assert contained.description.startswith(NO_CGROUP)
    assert (
        "per process only" in contained.description
        and "v1 not writable at /x" in contained.description
    )
    code = "import os, socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ntry:\n"
    code += "    s.sendto(b'x', ('192.0.2.1', 53))\n"
    code += "except OSError as error:\n    print('RESULT', os.getuid(), type(error).__name__)"
    uid, error = result(run_job(contained, scratch, code))
    assert int(uid) >= contained.pool.first and error == "OSError"
    sub = SubmissionReport(file="a.ipynb", status="graded", sandbox=contained.description)
    assert f"Sandbox: {contained.description}" in feedback(sub)


def test_uid_slots_are_distinct_while_held_and_skip_accounts(tmp_path: Path) -> None:
    accounts = {70001}.__contains__  # as if 70001 named a user in /etc/passwd
    pool = UidPool(first=70000, size=3, locks=tmp_path, patience=0.2, is_account=accounts)
    with pool.slot() as first, pool.slot() as second:
        assert (first, second) == (70000, 70002)
        with pytest.raises(ContainmentUnavailable, match="70000-70002"), pool.slot():
            pass
    with pool.slot() as again:
        assert again == 70000  # released slots come back


def test_unconfined_grading_says_so_in_every_report_with_the_uid_that_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "subs", "paths.ipynb", solved("paths"))
    out = tmp_path / "out"
    args = ["grade", str(tmp_path / "subs"), "--solutions", str(FIXTURES), "--out", str(out)]
    assert cli.main([*args, "--containment", "unconfined", "--junit", str(out / "j.xml")]) == 0
    summary = capsys.readouterr().out
    sub = SubmissionReport.model_validate_json((out / "submissions" / "paths.json").read_text())
    assert sub.sandbox.startswith(UNCONFINED) and "uid 65534 (nobody)" in sub.sandbox
    assert sub.containment == "unconfined"
    assert f"sandbox: {sub.sandbox}" in summary and "containment: unconfined" in summary
    text = (out / "submissions" / "paths.feedback.txt").read_text()
    assert f"Sandbox: {sub.sandbox}" in text and "Containment: unconfined" in text
    assert 'name="labkit.containment" value="unconfined"' in (out / "j.xml").read_text()
    assert "<td>unconfined</td>" in (out / "class.html").read_text()
    assert jobs_for(LIMITS).description.startswith("bubblewrap(net,pid,mount) cgroup-v")
    as_user = Unconfined(LIMITS, root=False)
    assert f"uid {os.getuid()}" in as_user.description and "the grader's own" in as_user.description


def test_the_cli_refuses_to_grade_without_containment(tmp_path: Path) -> None:
    # The same grader as an unprivileged user (read-search kept to reach the interpreter):
    # no uid to hand out, no cgroup to write.
    notebook = write(tmp_path / "subs", "paths.ipynb", solved("paths"))
    tmp_path.chmod(0o755)
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    user += ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    labkit_cli = [sys.executable, "-m", "labkit.cli", "grade", str(notebook)]
    labkit_cli += ["--solutions", str(FIXTURES), "--out", str(tmp_path / "out")]
    done = subprocess.run([*user, *labkit_cli], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "containment `full` needs what this machine lacks" in done.stderr
    assert "root" in done.stderr and "--containment container" in done.stderr
    assert not (tmp_path / "out").exists()


class _NoSlots(Jobs):
    """Jobs whose every start fails, as when all uids stay busy."""

    def __init__(self) -> None:
        self.limits = LIMITS
        self.description = "test"

    @contextmanager
    def job(self, scratch: Path) -> Iterator[Job]:
        raise ContainmentUnavailable("all job uids 1-2 stayed in use for 0 s")
        yield Job(0, scratch)


def test_a_job_that_cannot_start_is_a_kernel_that_did_not_start(work: Path) -> None:
    runner = KernelRunner(work / "unused-spec", LIMITS, jobs=_NoSlots())
    run = runner.run(work, ["print(1)"])
    assert not run.started and [c.status for c in run.cells] == [CellStatus.NOT_RUN]
    assert run.problem == "the job could not start: all job uids 1-2 stayed in use for 0 s"


def test_links_in_a_venv_grant_nothing_of_the_hidden_checks(tmp_path: Path) -> None:
    """A venv's `lib64` links to its `lib`; a Landlock rule holds for what a link points to, so
    a rule on `lib64` (or on a link into `labkit/grade/`) would open the hidden checks."""
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    protected = site / "labkit" / "grade"
    (protected / "hidden").mkdir(parents=True)
    (site / "other").mkdir()
    (venv / "lib64").symlink_to("lib")
    (site / "shortcut").symlink_to(protected / "hidden")
    rules = dict(launcher.readable_rules([venv], protected))
    granted = [p.resolve() for p, access in rules.items() if access == launcher.READ_ONLY]
    assert site / "other" in granted
    for path in granted:
        assert not protected.is_relative_to(path) and not path.is_relative_to(protected), path
