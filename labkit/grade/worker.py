"""The check worker: the learner's answer cells in a process of their own, called through a
narrow channel (JSON lines on pipes), and the grader's side of that channel.

    python -m labkit.grade.worker --memory BYTES --cpu SECONDS --nproc N --fsize BYTES
        [--user UID] [--sandbox required|best_effort|off]

Owns: the worker's loop (`serve`: "define" executes the answer-cell sources and the setup
imports in a fresh namespace; "call" turns data and markers into arguments, calls one
function and answers with `calls.perform`'s encoding; "end_check" closes what markers opened),
`WorkerRunner` (the grader's `CheckRunner`: one worker per exercise, a time bound per call
enforced by killing the worker, races with one fresh worker per racer), and `Spawn`, the one
place a worker process is started (argv + scratch directory -> a process with pipes), so a
stronger job launcher can replace `plain_spawn`.

The worker applies the kernel launcher's confinement first (`launcher.prepare`: limits, uid,
Landlock), then reads its requests. Its protocol is its stdout as started; the learner's prints
go to stderr. Must not import the hidden checks, the checks or the report models: the
worker holds learner code and the judge's code never enters it.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import linecache
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from labkit.course.exercises.calls import (
    Answer,
    Materialized,
    decode,
    encode,
    perform,
    perform_live,
)
from labkit.course.exercises.race import Racer, RaceResult

Spawn = Callable[[Sequence[str], Path], "subprocess.Popen[bytes]"]


# --- the worker's side ---------------------------------------------------------------------------


def _runnable(source: str) -> str:
    # IPython magics and shell escapes are not Python: blank them, keeping line numbers.
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )


def serve(stdin: IO[str], out: IO[str]) -> None:
    """Answer requests, one JSON line each, until stdin closes."""
    namespace: dict[str, Any] = {"__name__": "__learner__", "__builtins__": builtins}
    made = Materialized()

    def reply(message: dict[str, Any]) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    for line in stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        op = request.get("op")
        if op == "define":
            errors = []
            for number, source in enumerate(request.get("sources", []), start=1):
                filename = f"<answer cell {number}>"
                text = _runnable(str(source))
                linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
                try:
                    exec(compile(text, filename, "exec"), namespace)
                except BaseException as exc:  # the learner's cell may raise anything
                    errors.append(f"{type(exc).__name__}: {exc}"[:500])
            defined = sorted(k for k, v in namespace.items() if callable(v))
            reply({"defined": defined, "errors": errors})
        elif op == "call":
            fn = namespace.get(str(request.get("name")))
            args = [decode(a) for a in request.get("args", [])]
            if request.get("wait"):
                live = [made.make(a) for a in args]
                reply({"ready": True})
                if stdin.readline().strip() != '{"op": "go"}':
                    return
                reply(perform_live(fn if callable(fn) else _missing, live, made))
            else:
                reply(perform(fn if callable(fn) else _missing, args, made))
        elif op == "end_check":
            made.close()
            made = Materialized()
            reply({"ok": True})


def _missing(*args: Any) -> Any:
    raise NotImplementedError("not defined")


def main(argv: Sequence[str] | None = None) -> None:
    from labkit.grade import launcher

    args, _ = launcher.parse(sys.argv[1:] if argv is None else argv)
    launcher.prepare(args)
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Confined and ready, before any learner code: a worker that never says so failed to start
    # for a reason of the grading environment (`WorkerNotStarted`), not of the submission.
    protocol.write(json.dumps({"ready": True}) + "\n")
    protocol.flush()
    serve(sys.stdin, protocol)


# --- the grader's side ---------------------------------------------------------------------------


def plain_spawn(argv: Sequence[str], scratch: Path) -> subprocess.Popen[bytes]:
    """Start a worker with pipes in `scratch`, with none of the grader's environment."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
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
) -> list[str]:
    """The command of a check worker: the launcher's options (`launcher.flags`), which the
    worker applies itself before it reads a line."""
    from labkit.grade import launcher

    options = launcher.flags(
        memory=memory, cpu=cpu, nproc=nproc, fsize=fsize, sandbox=sandbox, user=user, keep=keep
    )
    return [python, "-P", "-m", "labkit.grade.worker", *options]


class WorkerGone(Exception):
    pass


class WorkerNotStarted(WorkerGone):
    """The worker ended before it was confined and ready: no learner code had run in it."""


class _Worker:
    """One worker process and the thread that reads its lines."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, name="labkit-worker", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace"))
        self.lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as error:
            raise WorkerGone(str(error)) from None

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next reply; None on timeout. `WorkerGone` when the process ended."""
        try:
            line = self.lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        if line is None:
            raise WorkerGone(f"the worker exited (code {self.proc.poll()})")
        reply = json.loads(line)
        if not isinstance(reply, dict):
            raise WorkerGone("the worker sent something else than a reply")
        return reply

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        self.send(message)
        return self.receive(timeout)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class WorkerRunner:
    """A `CheckRunner` over worker processes holding only the learner's `sources`. A call past
    its time bound kills the worker; the next call starts a fresh one."""

    def __init__(
        self,
        sources: Sequence[str],
        *,
        argv: Sequence[str],
        scratch: Path,
        spawn: Spawn = plain_spawn,
        start_timeout: float = 30.0,
    ) -> None:
        self._sources = list(sources)
        self._argv = list(argv)
        self._scratch = scratch
        self._spawn = spawn
        self._start_timeout = start_timeout
        self._worker: _Worker | None = None
        self.defined: frozenset[str] = frozenset()
        self.problem = ""

    def _start(self) -> _Worker:
        worker = _Worker(self._spawn(self._argv, self._scratch))
        try:
            ready = worker.receive(self._start_timeout)
        except (WorkerGone, ValueError) as error:
            worker.kill()
            raise WorkerNotStarted(f"the check worker did not start ({error})") from None
        if ready is None or not ready.get("ready"):
            worker.kill()
            raise WorkerNotStarted(
                f"the check worker was not ready within {self._start_timeout:g} s"
            )
        try:
            reply = worker.request({"op": "define", "sources": self._sources}, self._start_timeout)
        except (WorkerGone, ValueError) as error:
            worker.kill()
            raise WorkerGone(f"the check worker did not start ({error})") from None
        if reply is None:
            worker.kill()
            raise WorkerGone(
                f"the answer cells did not finish defining within {self._start_timeout:g} s"
            )
        self.defined = frozenset(str(n) for n in reply.get("defined", []))
        return worker

    def start(self) -> frozenset[str]:
        """Start the worker; returns the names the answer cells define."""
        if self._worker is None:
            self._worker = self._start()
        return self.defined

    def call(self, name: str, args: Sequence[Any], timeout: float) -> Answer | None:
        """None when the call did not return in time or the worker died (then `problem`
        says so); `WorkerGone` when no worker could be started for it."""
        self.problem = ""
        worker = self._worker or self._start()
        self._worker = worker
        try:
            reply = worker.request(
                {"op": "call", "name": name, "args": [encode(a) for a in args]}, timeout
            )
            if reply is not None:
                return Answer.from_json(reply)
        except WorkerGone as error:
            self.problem = f"the check worker died during the call ({error})"
        except (ValueError, KeyError):
            pass
        worker.kill()  # hung or dead: the next check gets a fresh worker
        self._worker = None
        return None

    def end_check(self) -> None:
        if self._worker is None:
            return
        try:
            if self._worker.request({"op": "end_check"}, 10.0) is not None:
                return
        except (WorkerGone, ValueError):
            pass
        self._worker.kill()
        self._worker = None

    def race(
        self,
        name: str,
        database: Path,
        calls: Sequence[tuple[Any, ...]],
        *,
        timeout: float,
        lock_timeout: float,
        delay: float,
        reset: Callable[[], None],
    ) -> RaceResult:
        """Each racer a fresh worker with its own connection: all connect and say ready, then
        all are released at once."""
        from labkit.course.exercises.calls import SqliteConnection

        deadline = time.monotonic() + timeout
        racers: list[_Worker | None] = []
        try:
            for n, args in enumerate(calls):
                conn = SqliteConnection(
                    str(database), f"racer-{n}", lock_timeout=lock_timeout, statement_delay=delay
                )
                try:
                    worker = self._start()
                    worker.send(
                        {
                            "op": "call",
                            "name": name,
                            "args": [encode(conn)] + [encode(a) for a in args],
                            "wait": True,
                        }
                    )
                    racers.append(worker)
                except WorkerGone:
                    racers.append(None)
            ready = []
            for maybe in racers:
                try:
                    got = maybe.receive(deadline - time.monotonic()) if maybe else None
                except (WorkerGone, ValueError):
                    got = None
                ready.append(bool(got and got.get("ready")))
            if not all(ready):
                return RaceResult(tuple(Racer("no_start") for _ in calls), processes=True)
            live = [r for r in racers if r is not None]
            for racer in live:
                racer.send({"op": "go"})
            results = []
            for n, racer in enumerate(live):
                try:
                    reply = racer.receive(deadline - time.monotonic())
                except (WorkerGone, ValueError):
                    results.append(Racer("crashed", exception="the racer's process died"))
                    continue
                if reply is None:
                    results.append(Racer("timeout"))
                    continue
                results.append(_racer(Answer.from_json(reply), f"racer-{n}"))
            return RaceResult(tuple(results), processes=True)
        finally:
            for maybe in racers:
                if maybe is not None:
                    maybe.kill()

    def close(self) -> None:
        if self._worker is not None:
            self._worker.kill()
            self._worker = None


def _racer(answer: Answer, key: str) -> Racer:
    open_ = bool(answer.effects.get("in_transaction", {}).get(key, False))
    if answer.kind == "stub":
        return Racer("stub")
    if answer.error is not None:
        return Racer(
            "raised",
            exception=answer.error.summary,
            frames=(),
            in_transaction=open_,
        )
    value = answer.value
    return Racer(
        "returned",
        value_repr=repr(value),
        value_is_true=value is True,
        value_is_false=value is False,
        in_transaction=open_,
    )


if __name__ == "__main__":
    main()
