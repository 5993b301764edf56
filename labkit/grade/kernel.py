"""One confined kernel per submission, run cell by cell: `KernelRunner`.

Owns: the grading kernelspec (argv starts with `labkit.grade.launcher`, which applies the
limits and Landlock before ipykernel starts), the kernel's environment, and the run itself:
nbclient with a per-cell timeout that interrupts the kernel, the submission's deadline, a dead
kernel turning every later cell into "did not run" (never "passed", nbgrader #427), and the
bounds on what the grader reads and keeps of the kernel's messages (a run past them is cut).
Each run is one job of `containment`, in the mode grading asked for (full: its own network, PID
and mount namespaces, cgroup and uid; container: its own uid inside the platform's container;
unconfined: neither); the kernel binds IPC sockets in the scratch directory, and the grader
reaches them only through `relay`.

The runner knows nothing about notebooks, solutions or checks: it takes a scratch directory
(the kernel's working directory, the only place it may write) and a list of code strings,
and returns one `CellRun` per string. The clock is injected.

Must not import the report models, the hidden checks or nbval.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import enum
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import landlockpy
import zmq
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_notebook, new_output

from labkit.grade import relay
from labkit.grade.containment import (
    KERNEL_MODULE,
    ContainerJobs,
    Containment,
    ContainmentUnavailable,
    Job,
    Jobs,
    Mode,
    Survey,
    Unconfined,
    launcher_argv,
    survey,
)
from labkit.grade.containment import Limits as Limits  # one submission's limits are its job's
from labkit.grade.deadline import Deadline

KERNEL_NAME: Final = "labkit-grade"
TIMEOUT_ENAME: Final = "CellTimeout"
PROBE_TIMEOUT: Final = 5
MAX_OUTPUT: Final = 1_000_000  # characters of output kept per cell
TRUNCATED: Final = (
    "[the grader kept the first 1,000,000 characters (or 5,000 outputs) of this cell's output]\n"
)
# Run in the kernel before the first cell: from then on, at the start of each cell (IPython's
# `pre_execute` event), the cell's stdout and stderr writes are wrapped so that past
# `MAX_OUTPUT` characters they are cut, with one line saying so. Both `print` and what
# ipykernel forwards from the process's file descriptors go through the stream's `write`, so a
# 200 MB print is never serialized, sent, kept in IPython's output history, or received: the
# kernel stays well inside its memory limit and goes on with the next cell. Per cell, because
# IPython puts back the write it saw before each cell when the cell ends; a wrapper marks its
# layer (`_labkit_inner`) so that wrappers never pile up. The grader's own bound
# (`_BoundedClient`) stays for output that does not pass through these streams.
_KEPT: Final = MAX_OUTPUT - len(TRUNCATED) - 1
CAP_SOURCE: Final = f"""
def __labkit_cap__():
    import sys
    from IPython import get_ipython
    seen = [0]
    def capped(write):
        def capped_write(text):
            if not isinstance(text, str):
                return write(text)
            before = seen[0]
            seen[0] = before + len(text)
            if seen[0] <= {_KEPT}:
                return write(text)
            if before <= {_KEPT}:
                write(text[: {_KEPT} - before] + "\\n")
                write({TRUNCATED!r})
            return len(text)
        capped_write._labkit_inner = write
        capped_write._labkit_layer = "cap"
        return capped_write
    def each_cell():
        seen[0] = 0
        for stream in (sys.stdout, sys.stderr):
            write = stream.write
            while hasattr(write, "_labkit_inner"):
                write = write._labkit_inner
            stream.write = capped(write)
    get_ipython().events.register("pre_execute", each_cell)
__labkit_cap__()
del __labkit_cap__
"""
STUCK: Final = "the kernel stayed busy after a cell timed out (the interrupt was ignored)"
# nbclient logs every timeout and interrupt as an error; the grader reports them itself.
_quiet = logging.getLogger("labkit.grade.nbclient")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


class CellStatus(enum.StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    DEAD = "kernel died"
    CUT = "cut"  # its messages passed the run's bound (`RUN_BYTES`, `RUN_MESSAGES`)
    NOT_RUN = "did not run"


@dataclass
class CellRun:
    status: CellStatus
    outputs: list[dict[str, Any]] = field(default_factory=list)
    ename: str = ""
    evalue: str = ""


@dataclass
class Execution:
    """The cells' fate, in order; `problem` says why a run stopped early (or never started)."""

    cells: list[CellRun]
    started: bool
    problem: str = ""


def sandbox_mode(abi: Callable[[], int] = landlockpy.abi_version) -> str:
    """Landlock wherever the kernel offers it; without it the kernel runs with limits only."""
    return "required" if abi() >= 1 else "best_effort"


def landlock_label(abi: Callable[[], int] = landlockpy.abi_version) -> str:
    version = abi()
    return f"landlock(abi {version})" if version >= 1 else "no landlock"


def jobs_for(limits: Limits, mode: Mode = Mode.FULL, host: Survey | None = None) -> Jobs:
    """Jobs in `mode`, after trying on this machine what it needs (`survey`); raises
    `ContainmentUnavailable` naming what is missing. Unconfined only when asked."""
    if mode is Mode.UNCONFINED:
        return Unconfined(limits, landlock=landlock_label())
    made = Containment if mode is Mode.FULL else ContainerJobs
    return made(limits, host=host or survey(), landlock=landlock_label())


def write_kernelspec(
    directory: Path,
    limits: Limits,
    *,
    python: str = sys.executable,
    sandbox: str = "required",
) -> Path:
    """Write `directory/labkit-grade/kernel.json`; returns `directory` (a kernel_dirs entry)."""
    # No history database: nothing of the run is written beside the learner's files.
    args = ["-f", "{connection_file}", "--HistoryManager.enabled=False"]
    argv = launcher_argv(limits, KERNEL_MODULE, args, python=python, sandbox=sandbox)
    spec = {
        "argv": argv,  # the job's uid is filled in, and the container put around it, per run
        "display_name": "labkit grading kernel",
        "language": "python",
        # An interrupt travels as a message: the kernel runs in its own session (bubblewrap's
        # --new-session), where the grader's SIGINT to a process group would not reach it.
        "interrupt_mode": "message",
    }
    target = directory / KERNEL_NAME
    target.mkdir(parents=True, exist_ok=True)
    (target / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    return directory


def kernel_env() -> dict[str, str]:
    """The kernel sees none of the grader's environment (tokens, credentials) beyond PATH."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        # glibc reserves 64 MiB of address space per malloc arena, up to eight per CPU: with
        # ipykernel's threads that alone took much of the address-space limit.
        "MALLOC_ARENA_MAX": "2",
    }


# What the grader keeps and reads of one kernel's message stream. The stream is the learner's
# to fill (display floods, `update_display`, widget comms with binary buffers, messages sent by
# hand on the kernel's sockets), so every part of it is bounded in the grader:
# - the kernel's sockets are never the grader's: a relay process (`labkit.grade.relay`, its
#   own memory bounded) forwards only messages of at most `relay.MAX_MESSAGE` bytes in all and
#   ends the run at a larger one; the grader's sockets queue at most `relay.QUEUED` messages;
# - nothing of a widget is kept (`store_widget_state` off: no state, no buffers), and at most
#   `MAX_COMMS` comm objects (the Output widget's) are made;
# - a cell keeps at most `MAX_OUTPUT` characters in at most `MAX_OUTPUTS` outputs, past which
#   its outputs are dropped with one note (an honest flood of prints keeps its first part);
# - a run reads at most `RUN_BYTES` bytes in `RUN_MESSAGES` messages for its cells; past either,
#   the run is cut: the kernel is stopped, the cell is "cut" and later cells did not run.
MAX_COMMS: Final = 256
MAX_OUTPUTS: Final = 5_000
# A course notebook's whole run reads under 100 KB in under 150 messages (measured on the
# solutions); an honest flood of prints is cut in the kernel at `MAX_OUTPUT` per cell.
RUN_BYTES: Final = 64 * 1024**2
RUN_MESSAGES: Final = 1_000_000
CUT: Final = (
    f"the kernel's messages passed the grader's bound for one notebook ({RUN_BYTES // 1024**2} "
    f"MiB or {RUN_MESSAGES:,} messages)"
)


def message_size(msg: dict[str, Any]) -> int:
    """Bytes a kernel message carries: its content as JSON and its binary buffers."""
    try:
        size = len(json.dumps(msg.get("content"), default=str))
    except (TypeError, ValueError, RecursionError):
        size = RUN_BYTES  # content the grader cannot even measure is over every bound
    return size + sum(memoryview(b).nbytes for b in msg.get("buffers") or [])


class _BoundedClient(NotebookClient):
    """nbclient keeps every output in memory, and reads whatever the kernel sends; the bounds
    above (`MAX_OUTPUT` ... `RUN_MESSAGES`) hold them, so a learner's flood grows nothing but
    the (limited) kernel. `cut` says why the run was cut ("" while it was not)."""

    def __init__(self, nb: NotebookNode, **kw: Any) -> None:
        super().__init__(nb, **kw)
        self.output_sizes: dict[int, int] = {}
        self.noted: set[int] = set()
        self.received = 0
        self.messages = 0
        self.cut = ""

    def process_message(
        self, msg: dict[str, Any], cell: NotebookNode, cell_index: int
    ) -> NotebookNode | None:
        if not self.cut:
            self.received += message_size(msg)
            self.messages += 1
            if self.received > RUN_BYTES or self.messages > RUN_MESSAGES:
                self.cut = CUT
                # Stop the flooding cell now; `_execute` ends the run when the cell returns.
                asyncio.get_running_loop().create_task(self._interrupt())
        if self.cut and msg.get("msg_type") != "status":
            return None  # only the cell's end still counts: nothing more is kept
        return super().process_message(msg, cell, cell_index)

    async def _interrupt(self) -> None:
        with contextlib.suppress(Exception):  # a kernel already gone needs no interrupt
            assert self.km is not None
            await ensure_async(self.km.interrupt_kernel())

    def handle_comm_msg(
        self, outs: list[NotebookNode], msg: dict[str, Any], cell_index: int
    ) -> None:
        if msg.get("msg_type") == "comm_open" and len(self.comm_objects) >= MAX_COMMS:
            return  # no more comm objects: a widget's messages are never graded
        try:
            super().handle_comm_msg(outs, msg, cell_index)
        except Exception:  # a widget message nbclient cannot read (a state without its model)
            _quiet.debug("a comm message was dropped", exc_info=True)

    def output(
        self,
        outs: list[NotebookNode],
        msg: dict[str, Any],
        display_id: str | None,
        cell_index: int,
    ) -> NotebookNode | None:
        content = msg.get("content", {})
        size = len(str(content.get("text", ""))) + sum(
            len(str(v)) for v in (content.get("data") or {}).values()
        )
        seen = self.output_sizes.get(cell_index, 0)
        self.output_sizes[cell_index] = seen + size
        if seen + size <= MAX_OUTPUT and len(outs) < MAX_OUTPUTS:
            return super().output(outs, msg, display_id, cell_index)
        # One note per cell: the kernel's own cut may have said it already (what a process
        # wrote to its descriptors can still drain after the cell's cut is lifted).
        if cell_index not in self.noted:
            self.noted.add(cell_index)
            if not any(TRUNCATED in str(o.get("text", "")) for o in outs):
                note = new_output("stream", name="stderr", text=TRUNCATED)  # type: ignore[no-untyped-call]
                outs.append(note)
        return None


class _JobKernelManager(AsyncKernelManager):
    """The kernelspec's command, run as one job: its uid filled in, its container around it;
    and its client connected through a relay (`relay_ip`: ipc paths only root can reach)."""

    job: Job | None = None
    relay_ip: str = ""
    relay: subprocess.Popen[bytes] | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        argv = super().format_kernel_cmd(extra_arguments)
        return self.job.command(argv) if self.job is not None else argv

    def _make_url(self, channel: str) -> str:
        """The manager's own sockets (its control channel: interrupts) go through the relay
        too (the kernel binds the paths of `ip`, which the connection file names)."""
        return f"ipc://{self.relay_ip}-{getattr(self, f'{channel}_port')}"

    def client(self, **kwargs: Any) -> Any:
        """A client of the relay, which is started here: the kernel's ports are known now."""
        ports = {name: getattr(self, f"{name}_port") for name in relay.CHANNELS}
        self.relay = subprocess.Popen(
            [sys.executable, "-I", relay.__file__, self.ip, self.relay_ip, json.dumps(ports)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MALLOC_ARENA_MAX": "2"},
        )
        return super().client(**{**kwargs, "ip": self.relay_ip})

    def relay_cut(self) -> str:
        """Why the relay stopped forwarding ("" while it forwards)."""
        code = None if self.relay is None else self.relay.poll()
        if code is None:
            return ""
        if code == relay.TOO_BIG:
            return (
                "the kernel sent a message of more than "
                f"{relay.MAX_MESSAGE // 1024**2} MiB, the grader's bound for one message"
            )
        return "the kernel sent a message larger than the grader takes"

    def end_relay(self) -> None:
        if self.relay is not None:
            with contextlib.suppress(OSError):
                self.relay.kill()
            self.relay.wait()


class KernelRunner:
    """Runs code strings in a fresh confined kernel per call, each call one job of `jobs`
    (default: `Containment`, which refuses to run on a machine that cannot contain a job)."""

    def __init__(
        self,
        spec_dir: Path,
        limits: Limits,
        *,
        clock: Callable[[], float] = time.monotonic,
        jobs: Jobs | None = None,
    ) -> None:
        self.spec_dir = spec_dir
        self.limits = limits
        self.clock = clock
        self.jobs = jobs if jobs is not None else jobs_for(limits)

    def run(
        self, scratch: Path, sources: Sequence[str], deadline: Deadline | None = None
    ) -> Execution:
        """`deadline` (default: the total time limit from now) bounds the kernel's start and
        every cell."""
        deadline = deadline or Deadline(self.limits.total_timeout, self.clock)
        try:
            with self.jobs.job(scratch) as job:
                return asyncio.run(self._run(scratch, list(sources), job, deadline))
        except ContainmentUnavailable as error:
            cells = [CellRun(CellStatus.NOT_RUN) for _ in sources]
            return Execution(cells, False, f"the job could not start: {error}")

    def _manager(self, scratch: Path, job: Job, relays: Path) -> _JobKernelManager:
        specs = KernelSpecManager(kernel_dirs=[str(self.spec_dir)], ensure_native_kernel=False)
        # IPC sockets in the scratch directory: no TCP port, and the kernel has no network.
        manager = _JobKernelManager(
            kernel_name=KERNEL_NAME,
            kernel_spec_manager=specs,
            transport="ipc",
            ip=str(scratch / "kernel"),
            connection_file=str(scratch / "kernel.json"),
        )
        manager.job = job
        manager.relay_ip = str(relays / "kernel")
        # Set before any socket of the kernel's client exists: the context hands them on.
        manager.context.setsockopt(zmq.MAXMSGSIZE, relay.MAX_MESSAGE)
        manager.context.setsockopt(zmq.RCVHWM, relay.QUEUED)
        return manager

    async def _run(
        self, scratch: Path, sources: list[str], job: Job, deadline: Deadline
    ) -> Execution:
        code = [new_code_cell(s) for s in sources]  # type: ignore[no-untyped-call]
        nb = new_notebook(cells=code)  # type: ignore[no-untyped-call]
        cells = [CellRun(CellStatus.NOT_RUN) for _ in sources]
        replies: dict[int, dict[str, Any]] = {}

        def on_executed(cell: NotebookNode, cell_index: int, execute_reply: Any) -> None:
            replies[cell_index] = execute_reply.get("content", {}) if execute_reply else {}

        # The relay's sockets: beside the scratch folder, in a folder of root's alone (no job
        # can reach it, or bind a socket of its own there).
        relays = Path(tempfile.mkdtemp(dir=scratch.parent, prefix=".relay-"))
        manager = self._manager(scratch, job, relays)
        client = _BoundedClient(
            nb,
            km=manager,
            timeout=self.limits.cell_timeout,
            startup_timeout=max(1, int(deadline.bound(self.limits.startup_timeout))),
            interrupt_on_timeout=True,
            error_on_timeout={"ename": TIMEOUT_ENAME, "evalue": "", "traceback": []},
            allow_errors=True,
            record_timing=False,
            iopub_timeout=2,
            shutdown_kernel="immediate",
            store_widget_state=False,
            on_cell_executed=on_executed,
            log=_quiet,
        )
        log_path = scratch.with_name(scratch.name + ".kernel.log")
        try:
            with open(log_path, "wb") as kernel_log:
                return await self._execute(
                    client, nb, cells, replies, scratch, deadline, kernel_log
                )
        except Exception as error:  # the kernel did not start, or sent what the client broke on
            started = any(c.status is not CellStatus.NOT_RUN for c in cells)
            said = str(error) or type(error).__name__
            return Execution(
                cells, started, f"the kernel could not run: {said}{_last_line(log_path)}"
            )
        finally:
            # nbclient registers an exit hook per client and leaves it behind when the kernel
            # fails to start; the run is over either way.
            atexit.unregister(client._cleanup_kernel)
            log_path.unlink(missing_ok=True)
            manager.end_relay()
            shutil.rmtree(relays, ignore_errors=True)

    async def _execute(
        self,
        client: _BoundedClient,
        nb: NotebookNode,
        cells: list[CellRun],
        replies: dict[int, dict[str, Any]],
        scratch: Path,
        deadline: Deadline,
        kernel_log: IO[bytes],
    ) -> Execution:
        # The kernel's own stderr (start-up failures) goes to a log beside the scratch copy.
        async with client.async_setup_kernel(
            cwd=str(scratch),
            env=kernel_env(),
            cleanup_kc=True,
            stdout=subprocess.DEVNULL,
            stderr=kernel_log,
        ):
            manager = client.km
            assert isinstance(manager, _JobKernelManager)
            watch = asyncio.ensure_future(_watch(manager))
            try:
                return await self._cells(client, nb, cells, replies, deadline, manager)
            finally:
                watch.cancel()

    async def _cells(
        self,
        client: _BoundedClient,
        nb: NotebookNode,
        cells: list[CellRun],
        replies: dict[int, dict[str, Any]],
        deadline: Deadline,
        manager: _JobKernelManager,
    ) -> Execution:
        """Each cell in turn, until the end, the deadline, a dead kernel or a cut."""
        await self._cap_output(client, nb)
        for index, cell in enumerate(nb.cells):
            if deadline.passed():
                return Execution(cells, True, "the total time limit was reached")
            client.timeout = max(1, int(deadline.bound(self.limits.cell_timeout)))
            try:
                await client.async_execute_cell(cell, index)
            except DeadKernelError:
                cut = manager.relay_cut()  # the watch stopped the kernel: no relay, no grading
                status = CellStatus.CUT if cut else CellStatus.DEAD
                cells[index] = CellRun(status, _plain(cell.outputs))
                return Execution(cells, True, cut or "the kernel died")
            except CellTimeoutError:
                cells[index] = CellRun(CellStatus.TIMEOUT, _plain(cell.outputs))
            else:
                cells[index] = _cell_run(cell, replies.get(index, {}))
            if client.cut:
                cells[index] = CellRun(CellStatus.CUT, _plain(cell.outputs))
                return Execution(cells, True, client.cut)
            if cells[index].status is CellStatus.TIMEOUT:
                alive = await self._responsive(client, nb, replies, deadline)
                if not alive:
                    return Execution(cells, True, STUCK)
        return Execution(cells, True)

    async def _cap_output(self, client: NotebookClient, nb: NotebookNode) -> None:
        """Run `CAP_SOURCE` before the first cell; it is not one of the caller's cells."""
        cap = new_code_cell(CAP_SOURCE)  # type: ignore[no-untyped-call]
        nb.cells.append(cap)
        try:
            await client.async_execute_cell(cap, len(nb.cells) - 1)
        finally:
            nb.cells.pop()

    async def _responsive(
        self,
        client: NotebookClient,
        nb: NotebookNode,
        replies: dict[int, dict[str, Any]],
        deadline: Deadline,
    ) -> bool:
        """After a timeout: does the kernel answer a no-op, or is it still stuck in a loop that
        swallowed the interrupt (`except KeyboardInterrupt: pass`)? Without this, every later
        cell would wait out its own timeout behind the stuck one."""
        probe = new_code_cell("pass")  # type: ignore[no-untyped-call]
        nb.cells.append(probe)
        index = len(nb.cells) - 1
        client.timeout = max(1, int(deadline.bound(PROBE_TIMEOUT)))
        try:
            await client.async_execute_cell(probe, index)
        except (DeadKernelError, CellTimeoutError):
            return False
        finally:
            nb.cells.pop()
        return replies.pop(index, {}).get("ename") != TIMEOUT_ENAME


async def _watch(manager: _JobKernelManager) -> None:
    """Once the relay ends (a message over its bound), nothing more reaches the grader: the
    kernel is killed, so the cell in progress ends as a dead kernel, which the runner reports
    as the relay's cut."""
    if manager.relay is None:
        return
    while manager.relay.poll() is None:
        await asyncio.sleep(0.1)
    with contextlib.suppress(Exception):  # a kernel already gone needs no signal
        await ensure_async(manager.signal_kernel(signal.SIGKILL))


def _last_line(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return f" ({lines[-1]})" if lines else ""


def _plain(outputs: Any) -> list[dict[str, Any]]:
    return [dict(o) for o in outputs or []]


def _cell_run(cell: NotebookNode, reply: dict[str, Any]) -> CellRun:
    outputs = _plain(cell.outputs)
    if reply.get("status") != "error":
        return CellRun(CellStatus.OK, outputs)
    if reply.get("ename") == TIMEOUT_ENAME:
        return CellRun(CellStatus.TIMEOUT, outputs)
    return CellRun(
        CellStatus.ERROR, outputs, str(reply.get("ename", "")), str(reply.get("evalue", ""))
    )
