"""The confined kernel: what a submission can read, write and break (real kernels, Landlock)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import landlockpy

from grade.grade_helpers import FIXTURES
from labkit.grade import launcher
from labkit.grade.kernel import CellStatus, KernelRunner, Limits, sandbox_mode

HIDDEN = Path(launcher.__file__).parent / "hidden" / "ex1.py"


def test_landlock_is_required_here() -> None:
    # The machines this project runs on offer Landlock (ABI 7); grading there must use it.
    assert landlockpy.abi_version() >= 1
    assert sandbox_mode() == "required"


def test_reads_and_writes_outside_the_scratch_copy_fail(runner: KernelRunner, work: Path) -> None:
    outside = Path(tempfile.mkdtemp(dir=work.parent, prefix="outside-"))
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    run = runner.run(
        scratch,
        [
            f"open({str(FIXTURES / 'replay.ipynb')!r}).read()",
            f"open({str(HIDDEN)!r}).read()",
            "import labkit.grade.hidden.ex1",
            f"open({str(outside / 'planted.txt')!r}, 'w').write('x')",
            "open('/etc/hostname').read()",
            f"import os; os.listdir({str(FIXTURES)!r})",
            "open('mine.txt', 'w').write('ok'); print(open('mine.txt').read())",
            "import labkit.scope; print('scope ok')",
        ],
    )
    names = [(c.status, c.ename) for c in run.cells]
    assert names[0] == (CellStatus.ERROR, "PermissionError")  # a solution notebook
    assert names[1] == (CellStatus.ERROR, "PermissionError")  # the hidden checks' source
    assert names[2][0] is CellStatus.ERROR  # nor importable
    assert names[2][1] in ("PermissionError", "ModuleNotFoundError")
    assert names[3] == (CellStatus.ERROR, "PermissionError")  # a write outside scratch
    assert not (outside / "planted.txt").exists()
    assert names[4] == (CellStatus.ERROR, "PermissionError")  # any other file
    assert names[5] == (CellStatus.ERROR, "PermissionError")  # not even a listing
    assert run.cells[6].status is CellStatus.OK
    assert run.cells[6].outputs[0]["text"] == "ok\n"  # its own scratch copy works
    assert run.cells[7].outputs[0]["text"] == "scope ok\n"  # labkit outside grade/ imports


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
    ticks = iter([0.0, 0.0, 1000.0, 1000.0, 1000.0])
    timed = KernelRunner(runner.spec_dir, Limits(total_timeout=10), clock=lambda: next(ticks))
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="sub-"))
    run = timed.run(scratch, ["print(1)", "print(2)"])
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
