"""What crosses between a check and the learner's code: plain data, argument markers, and
answers encoded by exact type.

Owns: the argument markers (`SqliteConnection`, `RootsAuthorizer`, `IdSource`) a check passes
instead of live objects, `Materialized` (what the learner's side makes of them, and the side
effects it reports: transactions left open, ids drawn), `encode`/`decode` (JSON-able data with
exact types: a `bool` is not an `int`, a `dict` or `str` subclass is not its base type and
comes back as an `Opaque` with its type name and a bounded repr), `LearnerError` (an exception
as data: type, module, the names of its classes, `code`, `data`, message, the learner's frames
as text, and whether it was raised on purpose), `Answer`, and `perform` (one call on the
learner's side: materialize, call, encode).

Both runners use `perform`: the in-kernel runner (`check("exN")`, feedback only) and the
grader's worker process; so a check sees the same values either way and never a learner
object. Encoding reads learner values by exact `type(x) is ...` tests only, and runs where the
learner's code runs; the judge only ever decodes JSON. Also owns the learner-frames-only
traceback (`learner_traceback`), which an exception carries as text, and the learner's frames
as data (`frames_to_json`), which a racer asked for them adds to its exception. Imports only
the standard library and `labkit.scope` (what the authorizer marker becomes). Must not import
ipywidgets or the checks.
"""

from __future__ import annotations

import base64
import contextlib
import dis
import math
import os
import sqlite3
import sys
import sysconfig
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PosixPath, PurePath, PurePosixPath
from typing import Any

import labkit

MAX_ITEMS = 10_000
MAX_DEPTH = 40
MAX_REPR = 300
_TAG = "$"

# --- argument markers ------------------------------------------------------------------------


@dataclass(frozen=True)
class SqliteConnection:
    """A connection to the SQLite file at `path` the way the exercises' `connect` makes it
    (autocommit, a bounded wait for the write lock). The same `key` within one check run is the
    same connection. `statement_delay` sleeps before each statement (races);
    `before_first_work` is one statement another connection runs just before the learner's
    first statement that starts work (BEGIN, DELETE, ...), as a concurrent writer would;
    `record` reports the SQL statements the learner's code ran (an effect); `rival` is a
    concurrent writer's transaction (statements with their parameters) run by another
    connection just before the learner's statement number `rival[0]` (1 for the first), which
    happens only if the learner's code does not hold the write lock then, as a rival process
    would find it."""

    path: str
    key: str = "conn"
    lock_timeout: float = 5.0
    statement_delay: float = 0.0
    before_first_work: tuple[str, tuple[Any, ...]] | None = None
    record: bool = False
    rival: tuple[int, tuple[tuple[str, tuple[Any, ...]], ...]] | None = None


@dataclass(frozen=True)
class RootsAuthorizer:
    """An authorizer (`labkit.scope.Authorizer`): `grants` maps a principal to the workspace
    URIs it may use; `roots` (plain paths) are given to every principal when set."""

    grants: tuple[tuple[str, tuple[str, ...]], ...] = ()
    roots: tuple[str, ...] | None = None


@dataclass(frozen=True)
class IdSource:
    """A zero-argument function returning ids: `start`, `start + 1`, ... as ints, or
    `prefix` + number as strings when `prefix` is set; the ids in `script` (ints or strs) come
    first, when given, so the ids need not count up. The ids drawn come back as an effect."""

    key: str
    start: int = 1
    prefix: str | None = None
    script: tuple[int | str, ...] = ()


Marker = SqliteConnection | RootsAuthorizer | IdSource
_MARKERS: dict[str, type[Any]] = {
    "sqlite": SqliteConnection,
    "authorizer": RootsAuthorizer,
    "ids": IdSource,
}
_MARKER_NAMES = {cls: name for name, cls in _MARKERS.items()}


# --- encoding by exact type --------------------------------------------------------------------


@dataclass(frozen=True)
class Opaque:
    """A value that is not plain data (a learner's class, a subclass of a builtin): its type
    name and a bounded repr, never the object itself."""

    type: str
    repr: str

    def __repr__(self) -> str:
        return self.repr


def type_name(value: Any) -> str:
    """The name of a learner value's type as the learner wrote it (an `Opaque` names the type
    it stands for)."""
    return value.type if isinstance(value, Opaque) else type(value).__name__


class EncodingError(ValueError):
    pass


def encode(value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """JSON-able data for `value`, deciding by exact type; anything else is opaque."""
    budget = [MAX_ITEMS] if budget is None else budget
    budget[0] -= 1
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if abs(value) < 2**53 else {_TAG: "int", "v": str(value)}
    if kind is float:
        return value if math.isfinite(value) else {_TAG: "float", "v": repr(value)}
    if depth >= MAX_DEPTH or budget[0] < 0:
        return _opaque(value, "(too deep or too large to compare)")
    if kind is list:
        return [encode(v, depth + 1, budget) for v in list.__iter__(value)]
    if kind is tuple:
        return {_TAG: "tuple", "v": [encode(v, depth + 1, budget) for v in tuple.__iter__(value)]}
    if kind is dict:
        items = dict.items(value)
        return {
            _TAG: "dict",
            "v": [[encode(k, depth + 1, budget), encode(v, depth + 1, budget)] for k, v in items],
        }
    if kind is set or kind is frozenset:
        name = "set" if kind is set else "frozenset"
        return {_TAG: name, "v": [encode(v, depth + 1, budget) for v in kind.__iter__(value)]}
    if kind is bytes:
        return {_TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}
    if kind is PosixPath or kind is PurePosixPath:
        return {_TAG: "path", "type": kind.__name__, "v": PurePath.__str__(value)}
    if kind in _MARKER_NAMES:
        fields = {k: encode(v, depth + 1, budget) for k, v in vars(value).items()}
        return {_TAG: "marker", "kind": _MARKER_NAMES[kind], "v": fields}
    return _opaque(value)


def _opaque(value: Any, note: str = "") -> dict[str, Any]:
    kind = type(value)
    name = (
        f"{type.__getattribute__(kind, '__module__')}.{type.__getattribute__(kind, '__qualname__')}"
    )
    try:
        text = repr(value)
        if type(text) is not str:
            text = "<repr did not return a str>"
    except BaseException as exc:  # the learner's __repr__ may raise anything
        text = f"<repr raised {type(exc).__name__}>"
    if len(text) > MAX_REPR:
        text = text[:MAX_REPR] + "..."
    return {_TAG: "opaque", "type": str.__str__(name), "repr": text + note}


def decode(data: Any) -> Any:
    """Plain Python values for `encode`'s output (markers come back as markers)."""
    if data is None or isinstance(data, bool | int | float | str):
        return data
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict) or not isinstance(data.get(_TAG), str):
        raise EncodingError(f"not an encoded value: {str(data)[:80]}")
    tag = data[_TAG]
    v: Any = data.get("v")
    if tag == "int":
        return int(v)
    if tag == "float":
        return float(v)
    if tag == "tuple":
        return tuple(decode(x) for x in v)
    if tag == "dict":
        return {_hashable(decode(k)): decode(x) for k, x in v}
    if tag in ("set", "frozenset"):
        items = [_hashable(decode(x)) for x in v]
        return set(items) if tag == "set" else frozenset(items)
    if tag == "bytes":
        return base64.b64decode(v)
    if tag == "path":
        return PurePosixPath(v) if data.get("type") == "PurePosixPath" else Path(v)
    if tag == "opaque":
        return Opaque(str(data.get("type")), str(data.get("repr")))
    if tag == "marker":
        cls = _MARKERS[str(data.get("kind"))]
        fields = {k: _tuples(decode(x)) for k, x in v.items()}
        return cls(**fields)
    raise EncodingError(f"unknown tag {tag!r}")


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return Opaque("list", repr(value))
    return value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list | tuple) else value


def roundtrip(value: Any) -> Any:
    return decode(encode(value))


# --- exceptions as data --------------------------------------------------------------------------


@dataclass(frozen=True)
class LearnerError:
    """An exception raised by the learner's code, as data. `classes` are the qualified names of
    its type and its bases (`builtins.PermissionError`, `labkit.errors.ProtocolError`).

    `deliberate` is True when the learner's own code raised it on purpose: the innermost frame
    of its traceback is the learner's and that line is a `raise` statement (a refusal), not a
    call that failed inside Python, a library or labkit (a crash)."""

    type: str
    module: str
    classes: tuple[str, ...]
    message: str
    summary: str
    traceback: str
    code: Any = None
    data: Any = None
    deliberate: bool = False

    def is_a(self, qualified: str) -> bool:
        """True when the exception is (a subclass of) the class named `module.qualname`;
        builtins may be named bare (`PermissionError`)."""
        return qualified in self.classes or f"builtins.{qualified}" in self.classes

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "module": self.module,
            "classes": list(self.classes),
            "message": self.message,
            "summary": self.summary,
            "traceback": self.traceback,
            "code": encode(self.code),
            "data": encode(self.data),
            "deliberate": self.deliberate,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LearnerError:
        return cls(
            type=str(data["type"]),
            module=str(data["module"]),
            classes=tuple(str(c) for c in data["classes"]),
            message=str(data["message"]),
            summary=str(data["summary"]),
            traceback=str(data["traceback"]),
            code=decode(data.get("code")),
            data=decode(data.get("data")),
            deliberate=data.get("deliberate") is True,
        )


def describe(exc: BaseException) -> LearnerError:
    """`exc` as data, read on the learner's side (its message and attributes may run learner
    code, which is why this never runs in the judge)."""
    kind = type(exc)
    classes = tuple(f"{c.__module__}.{c.__qualname__}" for c in kind.__mro__)

    def attribute(name: str) -> Any:
        try:
            return decode(encode(getattr(exc, name, None)))
        except BaseException:  # a learner's property may raise anything
            return None

    def guarded(make: Callable[[], str]) -> str:
        try:
            text = make()
            return text if type(text) is str else "<not a str>"
        except BaseException as error:
            return f"<could not be shown: {type(error).__name__}>"

    return LearnerError(
        type=kind.__qualname__,
        module=kind.__module__,
        classes=classes,
        message=guarded(lambda: str(exc))[:2000],
        summary=guarded(lambda: exception_line(exc))[:2000],
        traceback=guarded(lambda: learner_traceback(exc))[:8000],
        code=attribute("code"),
        data=attribute("data"),
        deliberate=raised_on_purpose(exc),
    )


def raised_on_purpose(exc: BaseException) -> bool:
    """Whether the learner's code raised `exc` itself: the innermost frame of its traceback is
    the learner's and stopped at a `raise` statement (the RAISE_VARARGS instruction, read from
    the bytecode, so no source text is needed). An exception from Python, a library or labkit
    ends in their frames, or (C code such as sqlite3, an index into None) at the learner's call
    or subscript, which is not a `raise`; a bare `raise` keeps the original frame and line."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if not is_learner_file(code.co_filename):
        return False
    try:
        for instruction in dis.get_instructions(code):
            if instruction.offset == tb.tb_lasti:
                return instruction.opname == "RAISE_VARARGS" and (instruction.arg or 0) >= 1
    except Exception:  # bytecode that cannot be read: not provably deliberate
        return False
    return False


# --- one call on the learner's side --------------------------------------------------------------


@dataclass
class Materialized:
    """The objects markers became, by key, for one check run (a connection used by two calls
    is one connection), and what they report after each call."""

    connections: dict[str, sqlite3.Connection] = field(default_factory=dict)
    drawn: dict[str, list[Any]] = field(default_factory=dict)
    statements: dict[str, list[str]] = field(default_factory=dict)
    # The containers earlier calls of this check run returned, kept alive so that an answer
    # handed out again is recognised by identity (encoding copies it into data).
    returned: list[Any] = field(default_factory=list)

    def make(self, value: Any) -> Any:
        if isinstance(value, SqliteConnection):
            return self._connection(value)
        if isinstance(value, RootsAuthorizer):
            return _authorizer(value)
        if isinstance(value, IdSource):
            return self._ids(value)
        if isinstance(value, list):
            return [self.make(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.make(v) for v in value)
        if isinstance(value, dict):
            return {k: self.make(v) for k, v in value.items()}
        return value

    def _connection(self, marker: SqliteConnection) -> sqlite3.Connection:
        if marker.key in self.connections:
            return self.connections[marker.key]
        conn = sqlite3.connect(
            marker.path,
            isolation_level=None,
            timeout=marker.lock_timeout,
            check_same_thread=False,
        )
        delay, staged = marker.statement_delay, marker.before_first_work
        recorded = self.statements.setdefault(marker.key, []) if marker.record else None
        if delay > 0 or staged is not None or recorded is not None or marker.rival is not None:
            conn.set_trace_callback(_tracer(marker, delay, staged, recorded))
        self.connections[marker.key] = conn
        return conn

    def _ids(self, marker: IdSource) -> Callable[[], Any]:
        drawn = self.drawn.setdefault(marker.key, [])

        def next_id() -> Any:
            if len(drawn) < len(marker.script):
                drawn.append(marker.script[len(drawn)])
                return drawn[-1]
            n = marker.start + len(drawn)
            value: Any = n if marker.prefix is None else f"{marker.prefix}{n}"
            drawn.append(value)
            return value

        return next_id

    def effects(self) -> dict[str, Any]:
        return {
            "in_transaction": {k: c.in_transaction for k, c in self.connections.items()},
            "drawn": {k: [encode(v) for v in ids] for k, ids in self.drawn.items()},
            "statements": {k: list(sql) for k, sql in self.statements.items()},
        }

    def close(self) -> None:
        for conn in self.connections.values():
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self.connections.clear()


_STARTS_WORK = ("BEGIN", "SAVEPOINT", "DELETE", "UPDATE", "INSERT", "REPLACE")


def _tracer(
    marker: SqliteConnection,
    delay: float,
    staged: tuple[str, tuple[Any, ...]] | None,
    recorded: list[str] | None = None,
) -> Callable[[str], None]:
    done: list[bool] = []
    counted: list[str] = []

    def on_statement(statement: str) -> None:
        if recorded is not None and len(recorded) < 200:
            recorded.append(statement[:500])
        if delay > 0:
            time.sleep(delay)
        if marker.rival is not None and not statement.startswith("--"):
            counted.append(statement)
            if len(counted) == marker.rival[0]:
                _rival(marker.path, marker.rival[1])
        if staged is None or done or not statement.lstrip().upper().startswith(_STARTS_WORK):
            return
        done.append(True)
        try:
            with sqlite3.connect(marker.path, isolation_level=None, timeout=1.0) as other:
                other.execute(staged[0], staged[1])
            other.close()
        except sqlite3.Error:  # the learner already holds the lock: nothing to stage
            pass

    return on_statement


def _rival(path: str, statements: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
    """Another writer's transaction, at once or not at all (the write lock is taken)."""
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        for sql, params in statements:
            other.execute(sql, params)
        other.execute("COMMIT")
    except sqlite3.Error:
        if other.in_transaction:
            other.execute("ROLLBACK")
    finally:
        other.close()


def _authorizer(marker: RootsAuthorizer) -> Any:
    from labkit.scope import AllowlistAuthorizer

    if marker.roots is not None:
        return _FixedRoots(marker.roots)
    return AllowlistAuthorizer({p: list(uris) for p, uris in marker.grants})


class _FixedRoots:
    """labkit's authorizer contract: the same roots, as tuples of path segments, for anyone."""

    def __init__(self, roots: Sequence[str]) -> None:
        self._roots = tuple(tuple(s for s in root.split("/") if s) for root in roots)

    def roots(self, principal: str) -> tuple[tuple[str, ...], ...]:
        return self._roots


@dataclass(frozen=True)
class Answer:
    """What one call did: `kind` is "returned", "raised" or "stub" (NotImplementedError);
    `value` is decoded data, `error` the exception as data, `effects` what the markers saw."""

    kind: str
    value: Any = None
    error: LearnerError | None = None
    effects: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "value": encode(self.value),
            "error": None if self.error is None else self.error.to_json(),
            "effects": dict(self.effects),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Answer:
        kind = str(data["kind"])
        if kind not in ("returned", "raised", "stub"):
            raise EncodingError(f"unknown answer kind {kind!r}")
        error = data.get("error")
        effects = data.get("effects") or {}
        return cls(
            kind,
            decode(data.get("value")),
            None if error is None else LearnerError.from_json(error),
            {
                "in_transaction": {
                    str(k): v is True for k, v in dict(effects.get("in_transaction", {})).items()
                },
                "drawn": {str(k): decode(v) for k, v in dict(effects.get("drawn", {})).items()},
                "statements": {
                    str(k): [str(x) for x in v]
                    for k, v in dict(effects.get("statements", {})).items()
                    if isinstance(v, list)
                },
                "args": [decode(a) for a in effects.get("args", [])],
                "returned_before": effects.get("returned_before") is True,
            },
        )


def perform(fn: Callable[..., Any], args: Sequence[Any], made: Materialized) -> dict[str, Any]:
    """Call the learner's `fn` with `args` (data and markers) and encode what happened as
    JSON, with the arguments as the call left them; runs on the learner's side."""
    return perform_live(fn, [made.make(a) for a in args], made)


def perform_live(
    fn: Callable[..., Any], live: Sequence[Any], made: Materialized, *, frames: bool = False
) -> dict[str, Any]:
    """`perform` with the markers already made (a racer connects before it is released).
    With `frames`, a raised exception's error also carries the learner's frames as data
    (`frames_to_json`), for the notebook's racers, which show them."""
    try:
        value = fn(*live)
    except NotImplementedError:
        return Answer("stub", effects=_effects(made, live)).to_json()
    except BaseException as exc:  # the learner's code may raise anything, even SystemExit
        error = describe(exc).to_json()
        if frames:
            error["frames"] = frames_to_json(learner_frames(exc))
        return {"kind": "raised", "value": None, "error": error, "effects": _effects(made, live)}
    effects = _effects(made, live)
    effects["returned_before"] = _returned_before(made, value)
    return {"kind": "returned", "value": encode(value), "error": None, "effects": effects}


def _returned_before(made: Materialized, value: Any) -> bool:
    """Whether `value`, or a dict or list inside it, is an object an earlier call of this check
    run returned (one template handed out on every call); records the new containers."""
    seen = {id(x) for x in made.returned}
    found = False
    pending, depth = [value], 0
    while pending and depth < MAX_DEPTH:
        level, pending = pending, []
        for item in level:
            if len(made.returned) >= MAX_ITEMS:
                return found
            if type(item) in (dict, list):
                found = found or id(item) in seen
                made.returned.append(item)
                pending.extend(item.values() if type(item) is dict else item)
            elif type(item) is tuple:
                pending.extend(item)
        depth += 1
    return found


def _effects(made: Materialized, live: Sequence[Any]) -> dict[str, Any]:
    effects = made.effects()
    effects["args"] = [encode(a) for a in live]  # objects made from markers come back opaque
    return effects


def os_path(value: Any) -> str:
    """A decoded path or str as text (a check's own values only)."""
    return os.fspath(value) if isinstance(value, PurePath) else str(value)


# --- tracebacks with only the learner's frames ------------------------------------------

_LABKIT_DIR = os.path.realpath(os.path.dirname(labkit.__file__)) + os.sep


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(sorted(os.path.realpath(d) + os.sep for d in dirs))


_LIBRARY_DIRS = _library_dirs()


def is_learner_file(filename: str) -> bool:
    """False for labkit itself, the standard library, site-packages and frozen modules."""
    if filename.startswith("<frozen"):
        return False
    if not os.path.isabs(filename):
        return True  # "<string>", "<stdin>", a cell name: written by the learner
    real = os.path.realpath(filename)
    return not (real.startswith(_LABKIT_DIR) or real.startswith(_LIBRARY_DIRS))


@dataclass(frozen=True)
class Frame:
    filename: str
    lineno: int
    name: str
    line: str


def frames_to_json(frames: Sequence[Frame]) -> list[list[Any]]:
    """Frames as JSON data: `[filename, lineno, name, line]` each."""
    return [[f.filename, f.lineno, f.name, f.line] for f in frames]


def frames_from_json(data: Any) -> tuple[Frame, ...]:
    """`frames_to_json`'s output as frames; `EncodingError` for anything else."""
    if not isinstance(data, list):
        raise EncodingError("frames are not a list")
    frames = []
    for item in data:
        if not (isinstance(item, list) and len(item) == 4):
            raise EncodingError("a frame is not [filename, lineno, name, line]")
        filename, lineno, name, line = item
        if not (isinstance(lineno, int) and all(type(x) is str for x in (filename, name, line))):
            raise EncodingError("a frame is not [filename, lineno, name, line]")
        frames.append(Frame(filename, lineno, name, line))
    return tuple(frames)


def learner_frames(exc: BaseException) -> list[Frame]:
    return [
        Frame(f.filename, f.lineno or 0, f.name, (f.line or "").strip())
        for f in traceback.extract_tb(exc.__traceback__)
        if is_learner_file(f.filename)
    ]


def exception_line(exc: BaseException) -> str:
    """The exception's type and message, verbatim, as Python prints them (searchable)."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def format_frames(frames: Sequence[Frame], last_line: str) -> str:
    lines = []
    for f in frames:
        lines.append(f"  {display_location(f.filename, f.lineno)}, in {f.name}")
        if f.line:
            lines.append(f"    {f.line}")
    lines.append(last_line)
    return "\n".join(lines)


def learner_traceback(exc: BaseException) -> str:
    """Only the learner's frames, then the exception line; never a bare library traceback."""
    return format_frames(learner_frames(exc), exception_line(exc))


def display_location(filename: str, lineno: int) -> str:
    """`Cell In[3], line 4` for a notebook cell (as IPython says it), else the file."""
    shell = _ipython()
    if shell is not None:
        try:
            kind, name = shell.compile.format_code_name(filename) or (None, None)
        except Exception:  # IPython internals changed: fall back to the file name
            kind = name = None
        if kind is not None:
            return f"{kind} {name}, line {lineno}"
    return f'File "{filename}", line {lineno}'


def _ipython() -> Any:
    module = sys.modules.get("IPython")
    if module is None:
        return None
    try:
        return module.get_ipython()
    except Exception:
        return None
