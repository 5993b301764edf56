"""Executing the authored solution notebooks in place: `labkit course execute`.

Owns: Restart & Run All of one solution notebook in a fresh kernel of the current environment
(working directory: the notebook's folder), with a per-cell timeout, widget state stored so a
saved form still renders, cell timings recorded, and the file replaced only when every cell
ran without an error (a failed run leaves the saved notebook as it was).

The solutions are the grading references, so their saved outputs must come from a clean run,
never from a learner-style session of cells run out of order. `slow_cells` reads the recorded
timings back, so the "no cell over 10 s" rule can be checked on the saved file.

Lives in `labkit.grade` because this package is the only part of labkit that runs kernels.
Must not import the report models or the hidden checks.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from traitlets.config import Config

from labkit.course import build

DEFAULT_CELL_TIMEOUT: Final = 10
KERNEL_NAME: Final = build.KERNELSPEC["name"]


class ExecuteError(RuntimeError):
    """A solution notebook did not run clean; the message names the file and the cell."""


@dataclass(frozen=True)
class CellTime:
    index: int
    cell_id: str
    seconds: float


@dataclass(frozen=True)
class Executed:
    path: Path
    seconds: float
    slowest: CellTime | None


def cell_times(nb: NotebookNode) -> list[CellTime]:
    """Each executed code cell's recorded duration (execute_input to execute_reply)."""
    times: list[CellTime] = []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        execution = cell.get("metadata", {}).get("execution", {})
        start = execution.get("iopub.execute_input")
        end = execution.get("shell.execute_reply")
        if not (isinstance(start, str) and isinstance(end, str)):
            continue
        seconds = (_timestamp(end) - _timestamp(start)).total_seconds()
        times.append(CellTime(index, str(cell.get("id", "")), seconds))
    return times


def slow_cells(nb: NotebookNode, limit: float = DEFAULT_CELL_TIMEOUT) -> list[CellTime]:
    return [t for t in cell_times(nb) if t.seconds > limit]


def _timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def execute(path: Path, *, cell_timeout: int = DEFAULT_CELL_TIMEOUT) -> Executed:
    """Run `path` top to bottom in a fresh kernel and save it with its new outputs."""
    try:
        nb = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    except (OSError, ValueError) as error:
        raise ExecuteError(f"{path}: cannot be read as a notebook ({error})") from None
    started = datetime.now()
    with tempfile.TemporaryDirectory(prefix="labkit-execute-") as sockets:
        # IPC sockets in a private folder: no TCP port, no plain-text warning per start.
        # nbclient owns the kernel manager it makes, so it also closes the client's sockets.
        config = Config()
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = str(Path(sockets) / "kernel")
        config.KernelManager.connection_file = str(Path(sockets) / "kernel.json")
        client = NotebookClient(
            nb,
            config=config,
            kernel_name=KERNEL_NAME,
            timeout=cell_timeout,
            record_timing=True,
            store_widget_state=True,
            resources={"metadata": {"path": str(path.parent.resolve())}},
        )
        _run(client, path, cell_timeout)
    elapsed = (datetime.now() - started).total_seconds()
    nb.metadata["kernelspec"] = dict(build.KERNELSPEC)  # as JupyterLab writes it
    nbformat.validate(nb)
    _replace(path, nbformat.writes(nb) + "\n")  # type: ignore[no-untyped-call]
    times = cell_times(nb)
    slowest = max(times, key=lambda t: t.seconds) if times else None
    return Executed(path, elapsed, slowest)


def _run(client: NotebookClient, path: Path, cell_timeout: int) -> None:
    try:
        client.execute()
    except CellTimeoutError as error:
        raise ExecuteError(
            f"{path}: a cell ran over {cell_timeout} s ({_first_line(error)})"
        ) from None
    except CellExecutionError as error:
        raise ExecuteError(f"{path}: a cell raised {error.ename}: {error.evalue}") from None
    except DeadKernelError as error:
        raise ExecuteError(f"{path}: the kernel died ({error})") from None


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _replace(path: Path, text: str) -> None:
    """Write `path` anew in one step, keeping its permissions (mkstemp's file is 0600, and a
    solution readable only by its author could not be packaged or graded by anyone else)."""
    mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
