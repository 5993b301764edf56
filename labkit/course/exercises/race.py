"""Racing a learner's SQLite function in separate processes, each with its own connection.

Owns: carrying a function to a child interpreter (by reference when its module is importable,
by source when it lives in a notebook's `__main__`, which no other process can import), the
child's side (`child_main`, run by `python -m labkit.course.exercises.racer`), and the race with
bounded waits: each child connects, says "ready", and all are released together with "go".
Falls back to threads, each with its own connection, only when the function cannot travel;
the result says which was used.

Why a fresh interpreter (spawn-like), not fork: a forked child would inherit the parent's open
SQLite handles and locks (SQLite forbids using a connection across fork). Why a delay
per statement: a trace callback sleeps before each SQL statement so the two racers'
statements overlap on a busy two-core machine, the way they would under load; a correct
single transaction (`BEGIN IMMEDIATE`) makes the second racer wait and is unaffected.

Must not import ipywidgets: children import this module, so it imports only the stdlib and
`labkit.course.exercises.calls`.
"""

from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import dataclasses
import importlib
import inspect
import json
import linecache
import pickle
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from labkit.course.exercises.calls import Frame, exception_line, format_frames, learner_frames

_MAIN_MODULES = ("__main__", "__mp_main__")
# Every line of the parent-child protocol starts with this; the child's own prints go to its
# stderr (racer.py), and anything else on the channel is ignored.
_MARK = "labkit-racer"


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


Carrier = ByReference | BySource


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

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Racer:
        data = json.loads(text)
        data["frames"] = tuple(Frame(**f) for f in data["frames"])
        return cls(**data)


def _slow_statements(conn: sqlite3.Connection, delay: float) -> None:
    if delay > 0:
        conn.set_trace_callback(lambda _statement: time.sleep(delay))


def _outcome(fn: Callable[..., Any], conn: sqlite3.Connection, args: Sequence[Any]) -> Racer:
    try:
        value = fn(conn, *args)
    except NotImplementedError:
        return Racer("stub")
    except BaseException as exc:  # the learner's code may raise anything
        return Racer(
            "raised",
            exception=exception_line(exc),
            frames=tuple(learner_frames(exc)),
            in_transaction=conn.in_transaction,
        )
    return Racer(
        "returned",
        value_repr=repr(value),
        value_is_true=value is True,
        value_is_false=value is False,
        in_transaction=conn.in_transaction,
    )


@dataclass(frozen=True)
class Entry:
    """What a racing child needs, sent pickled on its stdin."""

    carrier: Carrier
    database: str
    args: tuple[Any, ...]
    lock_timeout: float
    delay: float
    sys_path: tuple[str, ...]


def child_main(stdin: IO[bytes], stdout: IO[str]) -> None:
    """A racing child (`python -m labkit.course.exercises.racer`): read its `Entry`, rebuild the
    function, connect, say "ready", wait for "go", call once, write what happened as JSON."""
    entry: Entry = pickle.loads(base64.b64decode(stdin.readline()))
    # Like multiprocessing's spawn: the parent's import path, so by-reference functions load.
    sys.path[:0] = [p for p in entry.sys_path if p not in sys.path]
    try:
        fn = entry.carrier.rebuild()
    except Exception as exc:
        print(_MARK, Racer("unportable", exception=exception_line(exc)).to_json(), file=stdout)
        return
    conn = sqlite3.connect(entry.database, isolation_level=None, timeout=entry.lock_timeout)
    try:
        _slow_statements(conn, entry.delay)
        print(_MARK, "ready", file=stdout, flush=True)
        if stdin.readline().strip() != b"go":
            return
        print(_MARK, _outcome(fn, conn, entry.args).to_json(), file=stdout, flush=True)
    finally:
        conn.close()


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


def race(fn: Callable[..., Any], spec: RaceSpec) -> RaceResult:
    """Run `fn(conn, *args)` for each `args` in `spec.calls` at once, each racer in its own
    spawned process with its own connection to `spec.database`; threads when `fn` cannot
    travel. `spec.reset` rebuilds the database before a thread rerun (a child may have
    started)."""
    try:
        carrier = carry(fn)
    except NotPortable as exc:
        return _race_threads(fn, spec, str(exc))
    result = _race_processes(carrier, spec)
    unportable = [r for r in result.racers if r.kind == "unportable"]
    if unportable:
        spec.reset()
        why = f"it could not be rebuilt in another process ({unportable[0].exception})"
        return _race_threads(fn, spec, why)
    return result


def _race_processes(carrier: Carrier, spec: RaceSpec) -> RaceResult:
    deadline = time.monotonic() + spec.timeout
    database, path = str(spec.database), tuple(sys.path)
    children = [
        _Child.start(Entry(carrier, database, args, spec.lock_timeout, spec.delay, path))
        for args in spec.calls
    ]
    try:
        for child in children:
            child.ready.wait(max(0.0, deadline - time.monotonic()))
        if all(c.ready.is_set() and c.result is None for c in children):
            for child in children:  # all are connected and waiting: release them together
                child.go()
            for child in children:
                child.reader.join(max(0.0, deadline - time.monotonic()))
    finally:
        for child in children:
            child.finish()
    return RaceResult(tuple(c.outcome() for c in children), processes=True)


class _Child:
    """One racing interpreter and the thread that reads its protocol lines. Its stderr (where
    the learner's prints go) is a file, so a chatty child never blocks on a full pipe."""

    def __init__(self, proc: subprocess.Popen[bytes], errors: IO[bytes]) -> None:
        self.proc = proc
        self.errors = errors
        self.ready = threading.Event()
        self.result: Racer | None = None
        self.released = False
        self.hung = False
        self.stderr = ""
        self.reader = threading.Thread(target=self._read, name="labkit-racer-reader", daemon=True)

    @classmethod
    def start(cls, entry: Entry) -> _Child:
        errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed in finish())
        proc = subprocess.Popen(
            [sys.executable, "-m", "labkit.course.exercises.racer"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        assert proc.stdin is not None
        proc.stdin.write(base64.b64encode(pickle.dumps(entry)) + b"\n")
        proc.stdin.flush()
        child = cls(proc, errors)
        child.reader.start()
        return child

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            mark, _, message = raw.decode("utf-8", "replace").strip().partition(" ")
            if mark != _MARK:
                continue
            if message == "ready":
                self.ready.set()
                continue
            try:
                self.result = Racer.from_json(message)
            except (ValueError, TypeError):
                continue
            self.ready.set()
            return
        self.ready.set()  # the child exited without a result

    def go(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.flush()
            self.released = True
        except OSError:  # the child already exited; its outcome says why
            pass

    def finish(self, grace: float = 1.0) -> None:
        """Close stdin (a child still waiting for "go" then exits), give it `grace` seconds,
        then kill it: past the deadline a racer is hung."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.hung = True
            self.proc.kill()
            self.proc.wait(10)
        self.reader.join(5)
        self.proc.stdout.close()
        self.errors.seek(0)
        self.stderr = self.errors.read().decode("utf-8", "replace").strip()
        self.errors.close()

    def outcome(self) -> Racer:
        if self.result is not None:
            return self.result
        if self.hung:
            return Racer("timeout")
        if not self.released:
            return Racer("no_start")
        last = self.stderr.splitlines()[-1] if self.stderr else f"exit code {self.proc.returncode}"
        return Racer("crashed", exception=last)


def _race_threads(fn: Callable[..., Any], spec: RaceSpec, why: str) -> RaceResult:
    calls, timeout = spec.calls, spec.timeout
    barrier = threading.Barrier(len(calls))
    results: dict[int, Racer] = {}

    def run(i: int, args: tuple[Any, ...]) -> None:
        conn = sqlite3.connect(spec.database, isolation_level=None, timeout=spec.lock_timeout)
        try:
            _slow_statements(conn, spec.delay)
            try:
                barrier.wait(timeout)
            except threading.BrokenBarrierError:
                results[i] = Racer("no_start")
                return
            results[i] = _outcome(fn, conn, args)
        finally:
            conn.close()

    threads = [
        threading.Thread(target=run, args=(i, args), name=f"labkit-racer-{i}", daemon=True)
        for i, args in enumerate(calls)
    ]
    deadline = time.monotonic() + timeout
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    racers = tuple(results.get(i, Racer("timeout")) for i in range(len(calls)))
    return RaceResult(racers, processes=False, why_threads=why)
