"""The confined kernel: what a submission can read, write and break (real kernels, Landlock)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import landlockpy
import pytest

import labkit
from grade.grade_helpers import FIXTURES
from labkit.grade import launcher
from labkit.grade.containment import Mode
from labkit.grade.kernel import (
    MAX_OUTPUT,
    STUCK,
    TRUNCATED,
    CellStatus,
    KernelRunner,
    Limits,
    jobs_for,
    kernel_env,
    sandbox_mode,
    write_kernelspec,
)

HIDDEN = Path(launcher.__file__).parent / "hidden" / "ex1.py"


def test_landlock_is_required_here() -> None:
    # The machines this project runs on offer Landlock (ABI 7); grading there must use it.
    assert landlockpy.abi_version() >= 1
    assert sandbox_mode() == "required"


# Confined, a file outside the job's mount view is absent; unconfined, Landlock refuses it.
REFUSED = ("PermissionError", "FileNotFoundError")


@pytest.mark.parametrize("confined", [True, False], ids=["confined", "landlock-only"])
def test_reads_and_writes_outside_the_scratch_copy_fail(
    runner: KernelRunner, work: Path, confined: bool
) -> None:
    if not confined:
        runner = KernelRunner(
            runner.spec_dir, runner.limits, jobs=jobs_for(runner.limits, Mode.UNCONFINED)
        )
    outside = Path(tempfile.mkdtemp(dir=work.parent, prefix="outside-"))
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    run = runner.run(
        scratch,
        [
            f"open({str(FIXTURES / 'replay.ipynb')!r}).read()",
            f"open({str(HIDDEN)!r}).read()",
            "import labkit.grade.hidden.ex1",
            f"open({str(outside / 'planted.txt')!r}, 'w').write('x')",
            f"open({str(Path(labkit.__file__).parents[1] / 'pyproject.toml')!r}).read()",
            f"import os; os.listdir({str(FIXTURES)!r})",
            "open('mine.txt', 'w').write('ok'); print(open('mine.txt').read())",
            "import labkit.scope; print('scope ok')",
            f"open({str(Path(launcher.__file__))!r}).read()",
        ],
    )
    names = [(c.status, c.ename) for c in run.cells]
    expected = "FileNotFoundError" if confined else "PermissionError"
    assert names[0] == (CellStatus.ERROR, expected)  # a solution notebook
    assert names[1] == (CellStatus.ERROR, expected)  # the hidden checks' source
    assert names[2][0] is CellStatus.ERROR  # nor importable
    assert names[2][1] in ("PermissionError", "ModuleNotFoundError")
    assert names[3] == (CellStatus.ERROR, expected)  # a write outside scratch
    assert not (outside / "planted.txt").exists()
    assert names[4] == (CellStatus.ERROR, expected)  # any other file
    assert names[5] == (CellStatus.ERROR, expected)  # not even a listing
    assert run.cells[6].status is CellStatus.OK
    assert run.cells[6].outputs[0]["text"] == "ok\n"  # its own scratch copy works
    assert run.cells[7].outputs[0]["text"] == "scope ok\n"  # labkit outside grade/ imports
    # The launcher is in the mount view (it starts the job) but Landlock closes it after.
    assert names[8] == (CellStatus.ERROR, "PermissionError")


def test_limits_timeouts_and_the_next_cell(runner: KernelRunner, work: Path) -> None:
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    run = runner.run(
        scratch,
        [
            "big = bytearray(6 * 1024**3)",
            "print('after the allocation')",
            "while True:\n    pass",
            "print('after the loop')",
            "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[0])",
        ],
    )
    assert (run.cells[0].status, run.cells[0].ename) == (CellStatus.ERROR, "MemoryError")
    assert run.cells[1].outputs[0]["text"] == "after the allocation\n"
    assert run.cells[2].status is CellStatus.TIMEOUT
    assert run.cells[3].outputs[0]["text"] == "after the loop\n"
    assert int(run.cells[4].outputs[0]["text"]) == runner.limits.memory


def test_os_exit_marks_the_rest_did_not_run(runner: KernelRunner, work: Path) -> None:
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    run = runner.run(scratch, ["x = 1", "import os\nos._exit(0)", "print(x)", "print(2)"])
    assert [c.status for c in run.cells] == [
        CellStatus.OK,
        CellStatus.DEAD,
        CellStatus.NOT_RUN,
        CellStatus.NOT_RUN,
    ]
    assert run.started and run.problem == "the kernel died"


def test_a_kernel_killed_by_a_signal(runner: KernelRunner, work: Path) -> None:
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    run = runner.run(scratch, ["import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "1"])
    assert [c.status for c in run.cells] == [CellStatus.DEAD, CellStatus.NOT_RUN]


def test_total_deadline_from_an_injected_clock(runner: KernelRunner, work: Path) -> None:
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    # The clock jumps past the total once the first cell has run (it leaves a file behind).
    timed = KernelRunner(
        runner.spec_dir,
        Limits(total_timeout=10),
        clock=lambda: 1000.0 if (scratch / "ran").exists() else 0.0,
    )
    run = timed.run(scratch, ["open('ran', 'w').close(); print(1)", "print(2)"])
    assert [c.status for c in run.cells] == [CellStatus.OK, CellStatus.NOT_RUN]
    assert run.problem == "the total time limit was reached"


def test_readable_rules_leave_the_protected_tree_out(tmp_path: Path) -> None:
    root = tmp_path / "site"
    (root / "labkit" / "grade" / "hidden").mkdir(parents=True)
    (root / "labkit" / "scope.py").write_text("")
    (root / "other").mkdir()
    protected = root / "labkit" / "grade"
    rules = dict(launcher.readable_rules([root, tmp_path / "elsewhere"], protected))
    assert rules[root] == landlockpy.AccessFS.READ_DIR  # names only
    assert rules[root / "other"] == launcher.READ_ONLY
    assert rules[root / "labkit" / "scope.py"] == launcher.READ_ONLY
    assert rules[tmp_path / "elsewhere"] == launcher.READ_ONLY
    assert not any(p == protected or p.is_relative_to(protected) for p in rules)
    assert launcher.readable_rules([protected / "hidden"], protected) == []


def test_a_loop_that_swallows_the_interrupt_stops_the_run(runner: KernelRunner, work: Path) -> None:
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    stubborn = "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
    stubborn += "    except KeyboardInterrupt:\n        pass"
    run = runner.run(scratch, [stubborn, "print('never')"])
    assert [c.status for c in run.cells] == [CellStatus.TIMEOUT, CellStatus.NOT_RUN]
    assert run.problem == STUCK


def test_no_capabilities_no_grader_environment_no_stdin(runner: KernelRunner, work: Path) -> None:
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    run = runner.run(
        scratch,
        [
            "open('mine.txt', 'w').close()\nimport os\nos.chown('mine.txt', 1, 1)",
            "import os\nprint(' '.join(sorted(os.environ)))",
            "input('your name? ')",
            "print(os.getuid())",
        ],
    )
    assert int(run.cells[3].outputs[0]["text"]) != 0  # never root, so RLIMIT_NPROC binds
    assert (run.cells[0].status, run.cells[0].ename) == (CellStatus.ERROR, "PermissionError")
    seen = set(run.cells[1].outputs[0]["text"].split())
    assert not seen & {"VIRTUAL_ENV", "PWD", "USER", "SHELL", "PGPASSWORD"}
    assert set(kernel_env()) <= seen and {"HOME", "TMPDIR"} <= seen
    assert run.cells[2].status is CellStatus.ERROR  # nothing interactive: no stdin at grading
    assert run.cells[2].ename == "StdinNotImplementedError"


def test_process_count_is_limited(work: Path) -> None:
    limits = Limits(cell_timeout=60, nproc=32)
    runner = KernelRunner(write_kernelspec(work / "spec-nproc", limits), limits)
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    bomb = """import os
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
os.close(hold_w)
for pid in pids:
    os.waitpid(pid, 0)
print(len(pids), refused)"""
    run = runner.run(scratch, [bomb])
    count, refused = run.cells[0].outputs[0]["text"].split()
    assert refused == "BlockingIOError"  # EAGAIN from RLIMIT_NPROC
    assert int(count) <= runner.limits.nproc


def test_a_flood_of_output_is_cut(runner: KernelRunner, work: Path) -> None:
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    flood = "for _ in range(300):\n    print('x' * 10_000)"
    run = runner.run(scratch, [flood, "print('next')"])
    kept = sum(len(o.get("text", "")) for o in run.cells[0].outputs)
    assert kept <= MAX_OUTPUT + len(TRUNCATED)
    text = "".join(o.get("text", "") for o in run.cells[0].outputs)
    assert text.endswith(TRUNCATED) and text.count(TRUNCATED) == 1
    assert run.cells[1].outputs[0]["text"] == "next\n"


CHILD = """
import ctypes, os
libc = ctypes.CDLL(None)
header = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)()
libc.capget(ctypes.byref(header), ctypes.byref(data))
ambient = libc.prctl(47, 1, 2, 0, 0)  # PR_CAP_AMBIENT_IS_SET, CAP_DAC_READ_SEARCH
print(hex(data[0] | data[3] << 32), ambient, os.getuid())
try:
    open(HIDDEN).read()
    print("read")
except PermissionError:
    print("refused")
"""


def test_a_child_process_keeps_only_read_search_and_the_same_confinement(
    runner: KernelRunner, work: Path
) -> None:
    # Exercise 1's racers are Python processes the submission starts: they must reach the
    # interpreter and the scratch copy wherever those live (a checkout under a 0700 folder),
    # with no more power than the kernel itself.
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    # The launcher's source: in the job's mount view (it starts the job), closed by Landlock.
    code = CHILD.replace("HIDDEN", repr(str(Path(launcher.__file__))))
    cell = (
        "import subprocess, sys\n"
        f"done = subprocess.run([sys.executable, '-c', {code!r}], capture_output=True, text=True)\n"
        "print(done.stdout + done.stderr)"
    )
    run = runner.run(scratch, [cell])
    assert run.cells[0].status is CellStatus.OK, run.cells[0]
    text = run.cells[0].outputs[0]["text"]
    assert text.count("\n") >= 2 and "Error" not in text, text
    effective, ambient, uid = text.split("\n")[0].split()[:3]
    assert uid != "0"
    if os.geteuid() == 0:  # the launcher became `nobody`, keeping read-search only
        assert (int(effective, 16), ambient) == (1 << 2, "1"), text
    else:
        assert int(effective, 16) == 0, text
    assert "refused" in text  # Landlock still binds the child
