"""Opening the configured note and replay stores from their spec strings.

Owns: the spec grammar and the backend tables. Configuration code calls `open_stores` once at
start; the core never sees a spec.

Specs (the same strings in a config file and on the command line):

- `memory`: in this process only; lost at exit.
- `sqlite:///ABSOLUTE/PATH.db` or `sqlite:////ABSOLUTE/PATH.db` (SQLAlchemy's absolute form,
  which users paste): both are the file `/ABSOLUTE/PATH.db`. There is no relative form, unlike
  SQLAlchemy's `sqlite:///rel.db`: a path that depends on the working directory of a server is
  a deployment bug; and no host (`sqlite://host/path`). Resolve relative paths first.
- `postgresql://...` or `postgres://...`: a libpq connection URI.
- `filesystem:///ABSOLUTE/JOURNAL.db` or `filesystem:////ABSOLUTE/JOURNAL.db` (notes only):
  the notes are the workspaces' files; the path names the intent journal. Same path rules.

A spec that is malformed raises `ValueError`; a store that cannot be opened (a directory that
does not exist, a database that is down) raises `StoreOpenError`, naming the role, the spec
with any password masked, the reason and what to check.

A notes spec and a replay spec naming the same database (the same SQLite file, the same
PostgreSQL target and schema) give ONE store object, so a deletion claims its nonce and deletes
its note in one transaction (docs/LESSON.md section 9). Any other pair of persistent stores uses
the two-step protocol of `labkit.stores`; `open_stores` resolves the pending claims a crash
left before it returns (`recover_pending`). `check_layout` refuses the pairs that cannot keep
their promise after a crash (persistent notes with in-memory claims), naming the safe ones.

Adding a backend is one entry in `NOTE_BACKENDS` and/or `REPLAY_BACKENDS`: the entry says how
the spec is written and opened, whether what it stores survives a restart (`persistent`, read
by `check_layout`) and whether the spec names a file (`names_file`, read by `file_path` and
`spec_file`). Nothing else lists backends.
Must not import a transport, the course toolkit or the grader.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from labkit.clock import Clock, system_clock
from labkit.stores import (
    DEFAULT_CAPACITY,
    DEFAULT_PER_PRINCIPAL,
    NoteStore,
    ReplayStore,
    StoreError,
    StoreUnavailable,
    recover_pending,
)
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.stores.sql import DEFAULT_SCHEMA

if TYPE_CHECKING:
    from labkit.stores.filesystem import SymlinkPolicy

log = logging.getLogger("labkit.stores.open")

SAFE_LAYOUTS: Final = (
    "notes and replay in one SQLite file or one PostgreSQL schema (one transaction); "
    "SQLite, PostgreSQL or filesystem notes with a SQLite or PostgreSQL replay store "
    "(two steps, recovered); or memory notes with any replay store"
)


class UnsafeLayout(ValueError):
    """A notes/replay pair that cannot tell the truth after a crash."""


def check_layout(notes: str, replay: str) -> None:
    """Refuse persistent notes with a replay store that is not (`Backend.persistent`): a
    crash forgets every claim (a declined confirmation could delete after a restart, a
    pending one is never resolved) while the notes survive. Raises `UnsafeLayout` naming the
    safe layouts. Specs of unknown kinds pass: opening them says what is wrong."""
    note_backend = NOTE_BACKENDS.get(_kind(notes))
    replay_backend = REPLAY_BACKENDS.get(_kind(replay))
    if note_backend is None or replay_backend is None:
        return
    if note_backend.persistent and not replay_backend.persistent:
        raise UnsafeLayout(
            f"notes {_redact(notes)!r} with replay {_redact(replay)!r} is not crash-safe: the "
            f"claims would be lost at a crash while the notes survive. Safe layouts: "
            f"{SAFE_LAYOUTS}"
        )


def _kind(spec: str) -> str:
    """The table key of a spec: what comes before its first colon."""
    return spec.split(":", 1)[0]


class StoreOpenError(Exception):
    """A well-formed spec whose store could not be opened: the environment, not the spec.
    `role` is "notes" or "replay"; `spec` has any password masked."""

    def __init__(self, role: str, spec: str, reason: str, hint: str) -> None:
        stop = "" if reason.endswith((".", "?", "!")) else "."
        super().__init__(f"cannot open the {role} store {spec!r}: {reason}{stop} {hint}")
        self.role = role
        self.spec = spec
        self.reason = reason
        self.hint = hint

    def __repr__(self) -> str:
        return f"StoreOpenError({self.role!r}, {self.spec!r}, {self.reason!r})"


@dataclass
class Opening:
    """What every opener may use. `databases` holds the store already opened for each
    database during this call, so notes and replay on one database share one object."""

    workspaces: tuple[str, ...]
    clock: Clock
    capacity: int
    per_principal: int
    schema: str
    symlinks: SymlinkPolicy = "refuse"
    databases: dict[tuple[Any, ...], Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Backend:
    """`form` is how the spec is written (for error messages); `open` builds the store;
    `persistent`: what it stores survives the server (a file, a database server);
    `names_file`: the spec is `KIND:///ABSOLUTE/PATH`, a file beside which the store keeps
    its state (`file_path`); `hint` says what to check when a well-formed spec cannot be
    opened."""

    form: str
    open: Callable[[str, Opening], Any]
    persistent: bool
    names_file: bool = False
    hint: str = ""


def _exactly(word: str, build: Callable[[Opening], Any]) -> Callable[[str, Opening], Any]:
    def open_(spec: str, opening: Opening) -> Any:
        if spec != word:
            raise _SpecError(f"write it exactly {word!r}")
        return build(opening)

    return open_


class _SpecError(ValueError):
    """A spec of a known kind that is malformed; `open_stores` adds the value and the forms."""


def file_path(spec: str) -> str:
    """The absolute file path of a `SCHEME:///ABS/PATH` or `SCHEME:////ABS/PATH` spec of a
    backend that names a file (the second is SQLAlchemy's absolute form); relative and
    host-bearing forms are refused."""
    scheme = _kind(spec)
    if not _names_file(scheme):
        raise _SpecError(f"{scheme!r} specs name no file")
    prefix = f"{scheme}://"
    rest = spec.removeprefix(prefix)
    path = rest[1:] if rest.startswith("//") else rest
    if rest == spec or not path.startswith("/") or path.startswith("//"):
        raise _SpecError(
            f"the path after {prefix} must be absolute: {scheme}:///ABSOLUTE/PATH "
            f"(or {scheme}:////ABSOLUTE/PATH), with no host and no relative path"
        )
    if path.endswith("/") or any(c in path for c in "?#\x00"):
        raise _SpecError("the path must name a file and hold no '?', '#' or NUL")
    return path


def spec_file(spec: str) -> str | None:
    """The file a spec of a backend that names one (`sqlite:`, `filesystem:`) names, or None
    for any other spec (or a malformed one: opening it reports why)."""
    try:
        return file_path(spec)
    except _SpecError:
        return None


def _names_file(scheme: str) -> bool:
    backend = NOTE_BACKENDS.get(scheme) or REPLAY_BACKENDS.get(scheme)
    return backend is not None and backend.names_file


def _open_sqlite(spec: str, opening: Opening) -> Any:
    from labkit.stores.sqlite import SqliteStore

    path = file_path(spec)
    key = ("sqlite", os.path.realpath(path))
    if key not in opening.databases:
        opening.databases[key] = SqliteStore(
            path,
            clock=opening.clock,
            capacity=opening.capacity,
            per_principal=opening.per_principal,
        )
    return opening.databases[key]


def _open_postgres(spec: str, opening: Opening) -> Any:
    # Imported here so a deployment without PostgreSQL never loads the driver.
    import psycopg

    from labkit.stores.postgres import PostgresStore, database_key

    try:
        key = ("postgres", database_key(spec, opening.schema))
    except psycopg.ProgrammingError as exc:
        reason = " ".join(str(exc).split())
        raise _SpecError(f"not a valid libpq connection URI ({_redact(reason)})") from None
    if key not in opening.databases:
        opening.databases[key] = PostgresStore(
            spec,
            schema=opening.schema,
            clock=opening.clock,
            capacity=opening.capacity,
            per_principal=opening.per_principal,
        )
    return opening.databases[key]


def _open_filesystem(spec: str, opening: Opening) -> Any:
    # Notes are files in the configured workspaces; the spec names the intent journal.
    from labkit.stores.filesystem import FilesystemNoteStore

    journal = file_path(spec)
    key = ("filesystem", os.path.realpath(journal))
    if key not in opening.databases:
        opening.databases[key] = FilesystemNoteStore(
            opening.workspaces,
            journal_path=journal,
            clock=opening.clock,
            symlinks=opening.symlinks,
        )
    return opening.databases[key]


_SQLITE: Final = Backend(
    "sqlite:///ABSOLUTE/PATH.db",
    _open_sqlite,
    persistent=True,
    names_file=True,
    hint="Check that its directory exists and that this user may create files in it (SQLite "
    "keeps -wal and -shm files beside the database).",
)
_POSTGRES: Final = Backend(
    "postgresql://USER@HOST:PORT/DATABASE",
    _open_postgres,
    persistent=True,
    hint="Check that the PostgreSQL server is running and reachable at that address, and that "
    "the user, password and database are right.",
)

NOTE_BACKENDS: dict[str, Backend] = {
    "memory": Backend("memory", _exactly("memory", lambda o: MemoryNoteStore()), persistent=False),
    "sqlite": _SQLITE,
    "postgresql": _POSTGRES,
    "postgres": _POSTGRES,
    "filesystem": Backend(
        "filesystem:///ABSOLUTE/JOURNAL.db",
        _open_filesystem,
        persistent=True,
        names_file=True,
        hint="Check that the journal's directory exists and that this user may create files in "
        "it, and that every workspace is an existing directory.",
    ),
}
REPLAY_BACKENDS: dict[str, Backend] = {
    "memory": Backend(
        "memory",
        _exactly(
            "memory",
            lambda o: MemoryReplayStore(
                clock=o.clock, capacity=o.capacity, per_principal=o.per_principal
            ),
        ),
        persistent=False,
    ),
    "sqlite": _SQLITE,
    "postgresql": _POSTGRES,
    "postgres": _POSTGRES,
}


def open_stores(
    notes: str,
    replay: str,
    *,
    workspaces: Sequence[str] = (),
    clock: Clock = system_clock,
    capacity: int = DEFAULT_CAPACITY,
    per_principal: int = DEFAULT_PER_PRINCIPAL,
    schema: str = DEFAULT_SCHEMA,
    symlinks: SymlinkPolicy = "refuse",
) -> tuple[NoteStore, ReplayStore]:
    """The note store and the replay store named by two specs (see the module docstring).

    `workspaces` are the configured workspace URIs (a filesystem note store opens them);
    `capacity` and `per_principal` bound the replay store; `schema` is the PostgreSQL schema;
    `symlinks` is the filesystem store's symlink policy (docs/symlink-policy.md).
    A malformed or unknown spec raises `ValueError` naming the value and the accepted forms;
    a store that cannot be opened raises `StoreOpenError`.
    """
    opening = Opening(tuple(workspaces), clock, capacity, per_principal, schema, symlinks)
    try:
        note_store: NoteStore = _open("notes", notes, NOTE_BACKENDS, opening)
        replay_store: ReplayStore = _open("replay", replay, REPLAY_BACKENDS, opening)
    except BaseException:
        for store in opening.databases.values():
            store.close()
        raise
    try:
        resolved = recover_pending(note_store, replay_store)
    except StoreError as exc:
        # A full disk or a held lock: serve anyway (reads work); each pending claim is
        # resolved by the next retry of its state instead.
        log.warning("pending claims not resolved at start-up (%s); retries will resolve them", exc)
    else:
        if resolved:
            log.warning("resolved %d pending claim(s) left by a crash", resolved)
    return note_store, replay_store


def _open(role: str, spec: object, backends: Mapping[str, Backend], opening: Opening) -> Any:
    forms = ", ".join(dict.fromkeys(b.form for b in backends.values()))
    if not isinstance(spec, str):
        raise ValueError(f"{role} store spec {spec!r} must be a string, one of: {forms}")
    backend = backends.get(_kind(spec))
    if backend is None:
        raise ValueError(f"{role} store spec {_redact(spec)!r} is not one of: {forms}")
    try:
        return backend.open(spec, opening)
    except _SpecError as exc:
        raise ValueError(
            f"{role} store spec {_redact(spec)!r}: {exc}; accepted forms: {forms}"
        ) from None
    except Exception as exc:
        # The driver's own words ("unable to open database file", "connection refused"), one
        # line, any password masked; the traceback stays with the cause (`--verbose`). A
        # SQLite file the disk refused names the real cause (no space, read-only, permission)
        # and needs no generic hint.
        if isinstance(exc, StoreUnavailable) and isinstance(exc.__cause__, Exception):
            exc = exc.__cause__  # the driver's error, as for any other failure to open
        cause = _diagnosed(spec, exc)
        reason = _redact(" ".join(str(cause or exc).split())) or type(exc).__name__
        raise StoreOpenError(role, _redact(spec), reason, "" if cause else backend.hint) from exc


def _diagnosed(spec: str, exc: Exception) -> StoreUnavailable | None:
    """For a SQLite file: the real cause (no space, read-only, permission), else None."""
    import sqlite3

    path = spec_file(spec)
    if path is None or not isinstance(exc, sqlite3.Error):
        return None
    if not os.path.isdir(os.path.dirname(path)):
        return None  # the generic hint says it: check that the directory exists
    from labkit.stores.sqlite import fault

    return fault(path, exc)


def _redact(spec: str) -> str:
    """The spec with any URI password masked: error messages end up in logs."""
    masked = re.sub(r"(://[^:/@?#]*:)[^@/?#]*@", r"\1***@", spec)
    return re.sub(r"(password=)[^&\s]*", r"\1***", masked, flags=re.IGNORECASE)
