"""The grader's side of the check worker: starting worker processes that hold the learner's
answer cells, and reading what they answer on their narrow channel (JSON lines on pipes).

Owns: `worker_argv` (a worker's command: the launcher, whose confinement the worker gets before
it reads a line, running `labkit.course.exercises.answers`, which owns the worker's own loop),
`WorkerRunner` (the grader's `CheckRunner`: one worker per exercise, a time bound per call
enforced by killing the worker, every wait within the submission's deadline, races with one
fresh worker per racer, run by the one race procedure of `labkit.course.exercises.race`, which
owns the racing protocol and the decoding of a racer's answer), what the worker's channel
(`labkit.course.exercises.channel`, which owns it and its bounds) says in the worker's words
(`WorkerGone`, `BadReply`), and `Spawn`, the one place a worker process is started (argv +
scratch directory -> a process with pipes), so a stronger job launcher can replace
`plain_spawn`.

Must not import the hidden checks or the report models.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from labkit.course.exercises.calls import Answer, encode
from labkit.course.exercises.channel import ChannelBroken, ChannelEnded, ChildChannel, NotAnObject
from labkit.course.exercises.race import RaceResult, RacerGone, RaceSpec, race_in_processes
from labkit.grade import launcher

if TYPE_CHECKING:
    from labkit.grade.deadline import Deadline

Spawn = Callable[[Sequence[str], Path], "subprocess.Popen[bytes]"]
LAUNCHER: Final = launcher.__name__
MODULE: Final = "labkit.course.exercises.answers"  # the worker's loop, run by the launcher
log = logging.getLogger("labkit.grade.worker")


def plain_spawn(
    argv: Sequence[str], scratch: Path, extra: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a worker with pipes in `scratch`, with none of the grader's environment (only
    `extra`, such as the import path of labkit's view)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **(extra or {})}
    return subprocess.Popen(
        list(argv),
        cwd=scratch,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def worker_argv(
    *,
    memory: int,
    cpu: int,
    nproc: int,
    fsize: int,
    sandbox: str,
    python: str = sys.executable,
    user: str | None = None,
    keep: str | None = None,
    hide: Path | None = None,
) -> list[str]:
    """The command of a check worker: the launcher with its options (`launcher.flags`),
    applied before the worker reads a line, the package the worker must not read (`hide`:
    labkit's real package, when the worker runs on `labkit.grade.answer_view`'s view), and the
    worker's loop as the launcher's module (`MODULE`)."""
    options = launcher.flags(
        memory=memory, cpu=cpu, nproc=nproc, fsize=fsize, sandbox=sandbox, user=user, keep=keep
    )
    hidden = [] if hide is None else [f"--hide={hide}"]
    return [python, "-P", "-m", LAUNCHER, *options, *hidden, f"--module={MODULE}"]


class WorkerGone(RacerGone):
    """The worker process ended, or its channel broke (a racer's `RacerGone`)."""


class WorkerNotStarted(WorkerGone):
    """The worker ended before it was confined and ready: no learner code had run in it."""


class BadReply(WorkerGone):
    """What came back on the worker's channel is not a reply the worker's own loop writes:
    something in the answer cells wrote to the channel (or broke the worker's encoding)."""


def _bad(error: BaseException) -> BadReply:
    return BadReply(
        "something in the answer cells wrote to the check worker's channel (what came could "
        f"not be read: {type(error).__name__})"
    )


class _Worker:
    """One worker process and its channel (bounded: the learner's code runs in the worker and
    can write on it)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.channel = ChildChannel(proc.stdin, proc.stdout, "labkit-worker")

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.channel.send(message)
        except ChannelEnded as error:
            raise WorkerGone(str(error)) from None

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next reply; None on timeout. `WorkerGone` when the process ended, `BadReply`
        when what came is not a reply or the channel broke its bounds."""
        try:
            return self.channel.receive(timeout)
        except ChannelEnded:
            raise WorkerGone(f"the worker exited (code {self.proc.poll()})") from None
        except ChannelBroken as error:
            raise BadReply(f"something in the answer cells {error}") from None
        except NotAnObject as error:
            raise _bad(error.error) from None

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        self.send(message)
        return self.receive(timeout)

    def crashed_because(self, error: Exception) -> str:
        """What a released racer whose answer could not be read says (`race.RacingProcess`)."""
        if isinstance(error, BadReply):
            return str(error)
        if isinstance(error, WorkerGone):
            return "the racer's process died"
        return str(_bad(error))

    def kill(self) -> None:
        """Kill the process, then close its channel. Its output is left to the reader, which
        ends at end of file: when the job ends, if a process the worker started still holds
        the pipe."""
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self.channel.close()


class WorkerRunner:
    """A `CheckRunner` over worker processes holding only the learner's `sources`. A call past
    its time bound kills the worker; the next call starts a fresh one. Every wait (a start, a
    call, a race) is also bounded by `deadline` (the submission's total time).

    Nothing the worker sends can raise out of it but `WorkerGone` (from `start`, or a call
    that could not start a worker): a reply the grader cannot read is that call's failure,
    said in `problem`, and the worker is killed."""

    def __init__(
        self,
        sources: Sequence[str],
        *,
        argv: Sequence[str],
        scratch: Path,
        spawn: Spawn = plain_spawn,
        start_timeout: float = 30.0,
        deadline: Deadline | None = None,
    ) -> None:
        self._sources = list(sources)
        self._argv = list(argv)
        self._scratch = scratch
        self._spawn = spawn
        self._start_timeout = start_timeout
        self._deadline = deadline
        self._worker: _Worker | None = None
        self.defined: frozenset[str] = frozenset()
        self.problem = ""

    def _start(self, bound: float | None = None) -> _Worker:
        """A fresh worker that defined the sources within `bound` seconds (default: the start
        bound), never past the deadline."""
        wait = self._bound(self._start_timeout if bound is None else bound)
        if wait <= 0:
            raise WorkerGone(self._late() or "no time was left to start it")
        try:
            worker = _Worker(self._spawn(self._argv, self._scratch))
        except OSError as error:
            raise WorkerNotStarted(f"the check worker did not start ({error})") from None
        # Before "ready" the worker runs only labkit's own code (its limits, its user, Landlock):
        # a worker that cannot get there is grading's failure, never the submission's.
        try:
            ready = worker.receive(wait)
        except WorkerGone as error:
            worker.kill()
            raise WorkerNotStarted(f"the check worker did not start ({error})") from None
        if ready is None or not ready.get("ready"):
            worker.kill()
            if self._late():
                raise WorkerGone(self._late())
            raise WorkerNotStarted(f"the check worker was not ready within {wait:g} s")
        try:
            reply = worker.request({"op": "define", "sources": self._sources}, self._bound(wait))
            if reply is None:
                raise WorkerGone(
                    self._late() or f"the answer cells did not finish defining within {wait:g} s"
                )
            self.defined = frozenset(str(n) for n in reply["defined"])
        except WorkerGone as error:
            worker.kill()
            raise WorkerGone(f"the check worker did not start ({error})") from None
        except Exception as error:  # a forged "defined": anything but a list of names
            worker.kill()
            raise WorkerGone(f"the check worker did not start: {_bad(error)}") from None
        return worker

    def _bound(self, seconds: float) -> float:
        return seconds if self._deadline is None else self._deadline.bound(seconds)

    def _late(self) -> str:
        """The deadline's notice once it has passed, else ""."""
        return self._deadline.notice if self._deadline and self._deadline.passed() else ""

    def start(self) -> frozenset[str]:
        """Start the worker; returns the names the answer cells define."""
        if self._worker is None:
            self._worker = self._start()
        return self.defined

    def call(self, name: str, args: Sequence[Any], timeout: float) -> Answer | None:
        """None when the call did not return in time, the worker died or its reply could not
        be read (then `problem` says so); `WorkerGone` when no worker could be started for
        it."""
        self.problem = ""
        worker = self._worker or self._start()
        self._worker = worker
        try:
            reply = worker.request(
                {"op": "call", "name": name, "args": [encode(a) for a in args]},
                self._bound(timeout),
            )
            if reply is not None:
                return Answer.from_json(reply)
        except BadReply as error:
            self.problem = str(error)
        except WorkerGone as error:
            self.problem = f"the check worker died during the call ({error})"
        except Exception as error:  # a reply that is JSON but not an answer: anything
            self.problem = str(_bad(error))
        worker.kill()  # hung, dead or forged: the next check gets a fresh worker
        self._worker = None
        return None

    def end_check(self) -> None:
        """Close what the check's markers opened; a worker that does not say so in time, or
        answers with anything else, is killed (the next check starts a fresh one). Never
        raises: it runs while a check closes."""
        if self._worker is None:
            return
        try:
            if self._worker.request({"op": "end_check"}, self._bound(10.0)) is not None:
                return
        except Exception:  # gone, or a forged reply of any shape
            log.debug("end_check: the worker's answer could not be read", exc_info=True)
        self._worker.kill()
        self._worker = None

    def race(self, spec: RaceSpec) -> RaceResult:
        """The race procedure (`race.race_in_processes`), each racer a fresh worker with its
        own connection. Every racer's start, and the whole race, stay within `spec.timeout`
        and the deadline; the learner's frames are not asked for (a racer's exception is its
        line)."""

        def start(seconds: float) -> _Worker:
            return self._start(min(self._start_timeout, seconds))

        return race_in_processes(start, spec, self._bound(spec.timeout), frames=False)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
