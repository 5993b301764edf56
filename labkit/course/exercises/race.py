"""Racing a learner's SQLite function in separate processes, each with its own connection:
the one racing protocol and the one parent-side race procedure both runners use.

Owns: the race procedure (`race_in_processes`: start each racer, send it the racing "call"
(`call_message`, with "wait"), wait for every "ready" within the deadline, release all with
"go", collect each answer within the deadline, kill every racer at the end; when one racer
does not start, every racer is `no_start`), the one decoder of a racer's answer
(`racer_from_answer`), what a racer process must offer the procedure (`RacingProcess`), and
the notebook kernel's runner of it (`race`): carrying a function to a child interpreter (by
reference when its module is importable, by source when it lives in a notebook's `__main__`,
which no other process can import), and the child's "define" (`define_carried`, which
rebuilds it; the child itself is `labkit.course.exercises.answers`' loop, started as `python -m
labkit.course.exercises.racer`). Falls back to threads, each with its own connection, only when
the function cannot travel; the result says which was used. The grader's runner
(`labkit.grade.worker`) races with the same procedure, its racers being check workers.

The protocol is JSON lines, the check worker's (`labkit.course.exercises.answers`): the child
says `{"ready": true}`, "define" loads the function (`{"defined", "errors"}`), "call" with
"wait" makes the markers (the racer's own connection) and says `{"ready": true}`, "go" calls and
answers with `calls.perform`'s encoding. The kernel's racers ask for the learner's frames
(`"frames": true`), which the notebook shows; the grader's do not. A carried function travels
as JSON; only what has no JSON form is pickled inside it (a by-reference function, which pickle
names by module and qualified name, and the values a notebook function uses), and only the
parent writes a pickle: it never reads what a child sends but as JSON.

Why a fresh interpreter (spawn-like), not fork: a forked child would inherit the parent's open
SQLite handles and locks (SQLite forbids using a connection across fork). Why a delay
per statement: a trace callback sleeps before each SQL statement so the two racers'
statements overlap on a busy two-core machine, the way they would under load; a correct
single transaction (`BEGIN IMMEDIATE`) makes the second racer wait and is unaffected.

The racing child's channel is `labkit.course.exercises.channel`'s (bounded: the raced function
runs in the child and can write on it), said here in the race's words (`RacerGone`,
`RacerBrokeBounds`, a racer that crashed with the reason).

Must not import ipywidgets: children import this module, so it imports only the stdlib,
`labkit.course.exercises.calls` and `labkit.course.exercises.channel`.
"""

from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import importlib
import inspect
import linecache
import pickle
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Protocol

from labkit.course.exercises.calls import (
    Answer,
    EncodingError,
    Frame,
    Materialized,
    SqliteConnection,
    encode,
    exception_line,
    format_frames,
    frames_from_json,
    perform_live,
)
from labkit.course.exercises.channel import ChannelBroken, ChannelEnded, ChildChannel, NotAnObject

_MAIN_MODULES = ("__main__", "__mp_main__")
GO: Final = {"op": "go"}  # releases a racer that said it is ready


class NotPortable(Exception):
    """The function cannot be sent to another process; the reason is for the learner."""


# --- carrying a function to a child process ---------------------------------------------


@dataclass(frozen=True)
class ByReference:
    """A function in an importable module: pickle sends its module and name."""

    pickled: bytes

    def rebuild(self) -> Callable[..., Any]:
        fn: Callable[..., Any] = pickle.loads(self.pickled)
        return fn

    def to_json(self) -> dict[str, Any]:
        return {"by": "reference", "pickled": _text(self.pickled)}


@dataclass(frozen=True)
class BySource:
    """A function defined in a notebook cell: its source, the modules and values it uses, and
    the other notebook functions it calls, rebuilt in the child under the original file name
    and line numbers so its traceback points at the learner's own lines."""

    name: str
    source: str
    filename: str
    firstlineno: int
    modules: tuple[tuple[str, str], ...]
    values: tuple[tuple[str, bytes], ...]
    helpers: tuple[BySource, ...]

    def rebuild(self) -> Callable[..., Any]:
        namespace: dict[str, Any] = {"__name__": "__labkit_learner__", "__builtins__": builtins}
        self.define(namespace)
        fn = namespace.get(self.name)
        if not callable(fn):
            raise NotPortable(f"its source did not define {self.name!r}")
        return fn  # type: ignore[no-any-return]

    def define(self, namespace: dict[str, Any]) -> None:
        for helper in self.helpers:
            helper.define(namespace)
        for alias, module in self.modules:
            namespace[alias] = importlib.import_module(module)
        for alias, value in self.values:
            namespace[alias] = pickle.loads(value)
        padded = "\n" * (self.firstlineno - 1) + self.source
        if self.filename not in linecache.cache:
            lines = padded.splitlines(keepends=True)
            linecache.cache[self.filename] = (len(padded), None, lines, self.filename)
        exec(compile(padded, self.filename, "exec"), namespace)

    def to_json(self) -> dict[str, Any]:
        return {
            "by": "source",
            "name": self.name,
            "source": self.source,
            "filename": self.filename,
            "firstlineno": self.firstlineno,
            "modules": [[alias, module] for alias, module in self.modules],
            "values": [[alias, _text(value)] for alias, value in self.values],
            "helpers": [helper.to_json() for helper in self.helpers],
        }


Carrier = ByReference | BySource


def _text(pickled: bytes) -> str:
    return base64.b64encode(pickled).decode("ascii")


def carrier_from_json(data: dict[str, Any]) -> Carrier:
    """A carrier as its `to_json` wrote it (read in the child, from its parent)."""
    if data["by"] == "reference":
        return ByReference(base64.b64decode(data["pickled"]))
    return BySource(
        str(data["name"]),
        str(data["source"]),
        str(data["filename"]),
        int(data["firstlineno"]),
        tuple((str(alias), str(module)) for alias, module in data["modules"]),
        tuple((str(alias), base64.b64decode(value)) for alias, value in data["values"]),
        tuple(_source(helper) for helper in data["helpers"]),
    )


def _source(data: dict[str, Any]) -> BySource:
    carrier = carrier_from_json(data)
    if not isinstance(carrier, BySource):
        raise EncodingError("a helper travels by source")
    return carrier


def define_message(name: str, carrier: Carrier) -> dict[str, Any]:
    """The racing child's "define": the function to call `name`, and the parent's import path
    (like multiprocessing's spawn, so by-reference functions load)."""
    return {"op": "define", "name": name, "carrier": carrier.to_json(), "sys_path": sys.path}


def define_carried(request: dict[str, Any], namespace: dict[str, Any]) -> dict[str, Any]:
    """The racing child's `answers.Definer`: rebuild the carried function into `namespace`
    under the name the race calls; a function that cannot be rebuilt is the reply's error."""
    paths = [str(p) for p in request.get("sys_path", [])]
    sys.path[:0] = [p for p in paths if p not in sys.path]
    name = str(request.get("name"))
    try:
        namespace[name] = carrier_from_json(request["carrier"]).rebuild()
    except Exception as exc:
        return {"defined": [], "errors": [exception_line(exc)]}
    return {"defined": [name], "errors": []}


def carry(fn: Callable[..., Any]) -> Carrier:
    """How to send `fn` to a spawned child, or `NotPortable` with the reason."""
    module = getattr(fn, "__module__", None)
    if module not in _MAIN_MODULES:
        try:
            return ByReference(pickle.dumps(fn))
        except Exception as exc:
            if not isinstance(fn, types.FunctionType):
                raise NotPortable(f"it cannot be pickled ({exception_line(exc)})") from None
    if not isinstance(fn, types.FunctionType):
        raise NotPortable("it is not a plain function defined with def")
    return _by_source(fn, set())


def _by_source(fn: types.FunctionType, seen: set[str]) -> BySource:
    if fn.__closure__:
        raise NotPortable(f"{fn.__name__} uses variables of an enclosing function")
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        _, firstlineno = inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise NotPortable(f"the source of {fn.__name__} is not available ({exc})") from None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        raise NotPortable(f"the source of {fn.__name__} is not a whole definition") from None
    seen.add(fn.__name__)
    # A parameter or local shadows a notebook global of the same name (a cell's `conn`): only
    # the names the function can really read from its globals are carried.
    local = set(fn.__code__.co_varnames) | set(fn.__code__.co_cellvars)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - local
    modules: list[tuple[str, str]] = []
    values: list[tuple[str, bytes]] = []
    helpers: list[BySource] = []
    for name in sorted(used - seen):
        if name not in fn.__globals__:
            continue  # a builtin, a local, or a name the call will report as undefined
        value = fn.__globals__[name]
        if isinstance(value, types.ModuleType):
            modules.append((name, value.__name__))
        elif isinstance(value, types.FunctionType) and value.__module__ in _MAIN_MODULES:
            helpers.append(_by_source(value, seen))
        else:
            try:
                values.append((name, pickle.dumps(value)))
            except Exception:
                raise NotPortable(
                    f"{fn.__name__} uses {name!r} ({type(value).__name__}), which cannot be "
                    "sent to another process"
                ) from None
    return BySource(
        fn.__name__,
        source,
        inspect.getsourcefile(fn) or fn.__code__.co_filename,
        firstlineno,
        tuple(modules),
        tuple(values),
        tuple(helpers),
    )


# --- one racer ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Racer:
    """What one racer did. `kind`: returned, raised, stub, timeout, crashed (the process died
    without a word), no_start (the other racer never arrived), unportable."""

    kind: str
    value_repr: str = ""
    value_is_true: bool = False
    value_is_false: bool = False
    exception: str = ""
    frames: tuple[Frame, ...] = ()
    in_transaction: bool = False

    @property
    def traceback(self) -> str:
        return format_frames(self.frames, self.exception)

    @property
    def said(self) -> str:
        """What the racer did, in a few words for a check's message."""
        return {
            "returned": f"returned {self.value_repr}",
            "raised": f"raised {self.exception}",
            "timeout": "did not finish in time",
            "crashed": "died without reporting",
            "no_start": "never started",
            "unportable": "could not be started",
        }.get(self.kind, self.kind)


def racer_from_answer(reply: dict[str, Any], key: str) -> Racer:
    """The one decoder of a racer's answer (`calls.perform`'s encoding), whichever runner
    raced it: `key` names the racer's connection, whose open transaction the answer reports.
    The learner's frames come with a raised exception when the racer was asked for them."""
    answer = Answer.from_json(reply)
    open_ = bool(answer.effects.get("in_transaction", {}).get(key, False))
    if answer.kind == "stub":
        return Racer("stub")
    if answer.error is not None:
        return Racer(
            "raised",
            exception=answer.error.summary,
            frames=frames_from_json(reply["error"].get("frames", [])),
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


# --- the race -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RaceResult:
    racers: tuple[Racer, ...]
    processes: bool
    why_threads: str = ""


@dataclass(frozen=True)
class RaceSpec:
    """One race, as every runner takes it: `name(conn, *args)` for each `args` of `calls` at
    once, each racer with its own connection to `database` (waiting at most `lock_timeout`
    seconds for SQLite's lock, sleeping `delay` seconds before each statement), the whole race
    within `timeout` seconds; `reset` rebuilds the database when the race has to start again
    (with threads)."""

    name: str
    database: Path
    calls: tuple[tuple[Any, ...], ...]
    timeout: float
    lock_timeout: float
    delay: float
    reset: Callable[[], None]


class RacerGone(Exception):
    """A racer's process ended, or its channel broke."""


class RacerBrokeBounds(RacerGone):
    """Something in the raced function wrote past the bounds of the racer's channel
    (`labkit.course.exercises.channel`); the message says which."""


class RacingProcess(Protocol):
    """One racer's process, started and holding the function the race calls, as the race
    procedure speaks to it: JSON objects, one a line."""

    def send(self, message: dict[str, Any]) -> None:
        """Write one message; `RacerGone` when the process can no longer read it."""

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next reply, None after `timeout` seconds; `RacerGone` when the process ended
        or what came is not a reply."""

    def crashed_because(self, error: Exception) -> str:
        """What a released racer that gave no answer (`error` said why) left to say."""

    def kill(self) -> None:
        """End the process, whatever it is doing."""


def racer_key(n: int) -> str:
    """The key of racer number `n`'s connection (its transaction is reported by it)."""
    return f"racer-{n}"


def racing_connection(spec: RaceSpec, n: int) -> SqliteConnection:
    """Racer number `n`'s own connection, as a marker."""
    return SqliteConnection(
        str(spec.database), racer_key(n), lock_timeout=spec.lock_timeout, statement_delay=spec.delay
    )


def call_message(spec: RaceSpec, n: int, *, frames: bool) -> dict[str, Any]:
    """Racer number `n`'s racing "call": connect, say ready, call on "go"."""
    args = [racing_connection(spec, n), *spec.calls[n]]
    return {
        "op": "call",
        "name": spec.name,
        "args": [encode(a) for a in args],
        "wait": True,
        "frames": frames,
    }


def race_in_processes(
    start: Callable[[float], RacingProcess], spec: RaceSpec, timeout: float, *, frames: bool
) -> RaceResult:
    """The race procedure both runners use. `start(seconds)` starts one racer process within
    `seconds` (`RacerGone` when it cannot, `NotPortable` when the function cannot be rebuilt
    there). Every racer connects and says ready, then all are released together; the whole
    race stays within `timeout` seconds, and every racer is killed at the end."""
    deadline = time.monotonic() + timeout
    started: list[RacingProcess] = []
    failed: dict[int, Racer] = {}
    try:
        for n in range(len(spec.calls)):
            try:
                process = start(deadline - time.monotonic())
            except NotPortable as exc:
                failed[n] = Racer("unportable", exception=str(exc))
                continue
            except RacerGone:
                failed[n] = Racer("no_start")
                continue
            started.append(process)
            try:
                process.send(call_message(spec, n, frames=frames))
            except RacerGone:
                failed[n] = Racer("no_start")
        ready = [_ready(process, deadline) for process in started]
        if failed or not all(ready):
            racers = tuple(failed.get(n, Racer("no_start")) for n in range(len(spec.calls)))
            return RaceResult(racers, processes=True)
        for process in started:
            with contextlib.suppress(RacerGone):  # its answer below says it died
                process.send(GO)
        racers = tuple(_finish(p, racer_key(n), deadline) for n, p in enumerate(started))
        return RaceResult(racers, processes=True)
    finally:
        for process in started:
            process.kill()


def _ready(process: RacingProcess, deadline: float) -> bool:
    try:
        got = process.receive(deadline - time.monotonic())
    except RacerGone:
        return False
    return bool(got and got.get("ready") is True)


def _finish(process: RacingProcess, key: str, deadline: float) -> Racer:
    """What one released racer did; a racer whose answer cannot be read crashed."""
    try:
        reply = process.receive(deadline - time.monotonic())
        if reply is None:
            return Racer("timeout")
        return racer_from_answer(reply, key)
    except Exception as error:  # gone, or a reply of any shape
        return Racer("crashed", exception=process.crashed_because(error))


# --- the notebook kernel's runner -----------------------------------------------------------


def race(fn: Callable[..., Any], spec: RaceSpec) -> RaceResult:
    """Run `fn(conn, *args)` for each `args` in `spec.calls` at once, each racer in its own
    spawned process with its own connection to `spec.database`; threads when `fn` cannot
    travel. `spec.reset` rebuilds the database before a thread rerun (a child may have
    started)."""
    try:
        carrier = carry(fn)
    except NotPortable as exc:
        return _race_threads(fn, spec, str(exc))
    define = define_message(spec.name, carrier)
    result = race_in_processes(
        lambda seconds: _Child.start(define, seconds), spec, spec.timeout, frames=True
    )
    unportable = [r for r in result.racers if r.kind == "unportable"]
    if unportable:
        spec.reset()
        why = f"it could not be rebuilt in another process ({unportable[0].exception})"
        return _race_threads(fn, spec, why)
    return result


class _Child:
    """One racing interpreter (`python -m labkit.course.exercises.racer`) and its channel
    (`labkit.course.exercises.channel`: bounded, since the raced function runs in the child and
    can write on it). Its stderr (where the learner's prints go) is a file, so a chatty child
    never blocks on a full pipe; a line on its channel that is not a JSON object is skipped."""

    def __init__(self, proc: subprocess.Popen[bytes], errors: IO[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.errors = errors
        self.channel = ChildChannel(proc.stdin, proc.stdout, "labkit-racer-reader")

    @classmethod
    def start(cls, define: dict[str, Any], seconds: float) -> _Child:
        """A child that said ready and defined the function within `seconds`: `RacerGone`
        when it did not, `NotPortable` when the function could not be rebuilt there."""
        deadline = time.monotonic() + seconds
        errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed in kill())
        proc = subprocess.Popen(
            [sys.executable, "-m", "labkit.course.exercises.racer"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        child = cls(proc, errors)
        try:
            child._defined(define, deadline)
        except BaseException:
            child.kill()
            raise
        return child

    def _defined(self, define: dict[str, Any], deadline: float) -> None:
        hello = self.receive(deadline - time.monotonic())
        if hello is None or hello.get("ready") is not True:
            raise RacerGone("the racing child did not say it was ready in time")
        self.send(define)
        reply = self.receive(deadline - time.monotonic())
        if reply is None:
            raise RacerGone("the racing child did not define the function in time")
        errors = reply.get("errors")
        if errors:
            raise NotPortable(str(errors[0]))

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.channel.send(message)
        except ChannelEnded as error:
            raise RacerGone(str(error)) from None

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON object the child wrote (other lines are skipped), None after
        `timeout` seconds; `RacerGone` when the child exited, `RacerBrokeBounds` when it broke
        its channel's bounds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.channel.receive(deadline - time.monotonic())
            except NotAnObject:
                continue
            except ChannelEnded:
                raise RacerGone(f"the racing child exited (code {self.proc.poll()})") from None
            except ChannelBroken as error:
                raise RacerBrokeBounds(f"something in the raced function {error}") from None

    def crashed_because(self, error: Exception) -> str:
        """Why the channel broke, else the last line the child wrote on stderr, or its exit
        code."""
        if isinstance(error, RacerBrokeBounds):
            return str(error)
        if not isinstance(error, RacerGone):
            return f"its answer could not be read ({exception_line(error)})"
        try:
            self.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.errors.seek(0)
        stderr = self.errors.read().decode("utf-8", "replace").strip()
        return stderr.splitlines()[-1] if stderr else f"exit code {self.proc.returncode}"

    def kill(self, grace: float = 1.0) -> None:
        """Close the channel (a child waiting for a request then exits), give it `grace`
        seconds, then kill it."""
        self.channel.close()
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.errors.close()


def _race_threads(fn: Callable[..., Any], spec: RaceSpec, why: str) -> RaceResult:
    """The race in threads of this process, each with its own connection, its answer read
    by the same decoder as a process's."""
    calls, timeout = spec.calls, spec.timeout
    barrier = threading.Barrier(len(calls))
    results: dict[int, Racer] = {}

    def run(n: int, args: tuple[Any, ...]) -> None:
        made = Materialized()
        try:
            conn = made.make(racing_connection(spec, n))
            try:
                barrier.wait(timeout)
            except threading.BrokenBarrierError:
                results[n] = Racer("no_start")
                return
            answer = perform_live(fn, [conn, *args], made, frames=True)
            results[n] = racer_from_answer(answer, racer_key(n))
        finally:
            made.close()

    threads = [
        threading.Thread(target=run, args=(n, args), name=f"labkit-racer-{n}", daemon=True)
        for n, args in enumerate(calls)
    ]
    deadline = time.monotonic() + timeout
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    racers = tuple(results.get(n, Racer("timeout")) for n in range(len(calls)))
    return RaceResult(racers, processes=False, why_threads=why)
