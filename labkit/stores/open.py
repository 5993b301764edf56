"""Opening the configured note and replay stores from their spec strings.

Owns: the spec grammar and the backend tables. Configuration code calls `open_stores` once at
start; the core never sees a spec.

Specs (the same strings in a config file and on the command line):

- `memory`: in this process only; lost at exit.
- `sqlite:///ABSOLUTE/PATH.db`: everything after `sqlite://` is an absolute file path, taken
  literally (`sqlite:///var/lib/labkit/stores.db` is `/var/lib/labkit/stores.db`). There is no
  relative form, unlike SQLAlchemy's `sqlite:///rel.db`: a path that depends on the working
  directory of a server is a deployment bug. Resolve relative paths before building the spec.
- `postgresql://...` or `postgres://...`: a libpq connection URI.

A notes spec and a replay spec naming the same database (the same SQLite file, the same
PostgreSQL target and schema) give ONE store object, so a deletion claims its nonce and deletes
its note in one transaction (LESSON.md section 9).

Adding a backend is one entry in `NOTE_BACKENDS` and/or `REPLAY_BACKENDS`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from labkit.clock import Clock, system_clock
from labkit.stores import NoteStore, ReplayStore
from labkit.stores.memory import (
    DEFAULT_CAPACITY,
    DEFAULT_PER_PRINCIPAL,
    MemoryNoteStore,
    MemoryReplayStore,
)

DEFAULT_SCHEMA: Final = "labkit"  # the PostgreSQL schema; equal to postgres.DEFAULT_SCHEMA


@dataclass
class Opening:
    """What every opener may use. `databases` holds the store already opened for each
    database during this call, so notes and replay on one database share one object."""

    workspaces: tuple[str, ...]
    clock: Clock
    capacity: int
    per_principal: int
    schema: str
    symlinks: str = "refuse"
    databases: dict[tuple[Any, ...], Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Backend:
    """`form` is how the spec is written (for error messages); `open` builds the store."""

    form: str
    open: Callable[[str, Opening], Any]


def _exactly(word: str, build: Callable[[Opening], Any]) -> Callable[[str, Opening], Any]:
    def open_(spec: str, opening: Opening) -> Any:
        if spec != word:
            raise _SpecError(f"write it exactly {word!r}")
        return build(opening)

    return open_


class _SpecError(ValueError):
    """A spec of a known kind that is malformed; `open_stores` adds the value and the forms."""


def sqlite_path(spec: str) -> str:
    """The absolute file path of a `sqlite:///ABSOLUTE/PATH.db` spec."""
    path = spec.removeprefix("sqlite://")
    if path == spec or not path.startswith("/") or path.startswith("//"):
        raise _SpecError("the path after sqlite:// must be absolute and start with one '/'")
    if path.endswith("/") or any(c in path for c in "?#\x00"):
        raise _SpecError("the path must name a file and hold no '?', '#' or NUL")
    return path


def _open_sqlite(spec: str, opening: Opening) -> Any:
    from labkit.stores.sqlite import SqliteStore

    path = sqlite_path(spec)
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

    journal = spec.removeprefix("filesystem://")
    if journal == spec or not journal.startswith("/") or journal.startswith("//"):
        raise _SpecError("the journal path after filesystem:// must be absolute")
    if journal.endswith("/") or any(c in journal for c in "?#\x00"):
        raise _SpecError("the journal path must name a file and hold no '?', '#' or NUL")
    key = ("filesystem", os.path.realpath(journal))
    if key not in opening.databases:
        opening.databases[key] = FilesystemNoteStore(
            opening.workspaces,
            journal_path=journal,
            clock=opening.clock,
            symlinks=opening.symlinks,  # type: ignore[arg-type]  # checked by the store
        )
    return opening.databases[key]


_SQLITE: Final = Backend("sqlite:///ABSOLUTE/PATH.db", _open_sqlite)
_POSTGRES: Final = Backend("postgresql://USER@HOST:PORT/DATABASE", _open_postgres)

NOTE_BACKENDS: dict[str, Backend] = {
    "memory": Backend("memory", _exactly("memory", lambda o: MemoryNoteStore())),
    "sqlite": _SQLITE,
    "postgresql": _POSTGRES,
    "postgres": _POSTGRES,
    "filesystem": Backend("filesystem:///ABSOLUTE/JOURNAL.db", _open_filesystem),
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
    symlinks: str = "refuse",
) -> tuple[NoteStore, ReplayStore]:
    """The note store and the replay store named by two specs (see the module docstring).

    `workspaces` are the configured workspace URIs (a filesystem note store opens them);
    `capacity` and `per_principal` bound the replay store; `schema` is the PostgreSQL schema;
    `symlinks` is the filesystem store's symlink policy (docs/symlink-policy.md).
    A malformed or unknown spec raises `ValueError` naming the value and the accepted forms;
    a database that cannot be opened raises its driver's error.
    """
    opening = Opening(tuple(workspaces), clock, capacity, per_principal, schema, symlinks)
    try:
        note_store: NoteStore = _open("notes", notes, NOTE_BACKENDS, opening)
        replay_store: ReplayStore = _open("replay", replay, REPLAY_BACKENDS, opening)
    except BaseException:
        for store in opening.databases.values():
            store.close()
        raise
    return note_store, replay_store


def _open(role: str, spec: object, backends: Mapping[str, Backend], opening: Opening) -> Any:
    forms = ", ".join(dict.fromkeys(b.form for b in backends.values()))
    if not isinstance(spec, str):
        raise ValueError(f"{role} store spec {spec!r} must be a string, one of: {forms}")
    kind = spec.split(":", 1)[0]
    backend = backends.get(kind)
    if backend is None:
        raise ValueError(f"{role} store spec {_redact(spec)!r} is not one of: {forms}")
    try:
        return backend.open(spec, opening)
    except _SpecError as exc:
        raise ValueError(
            f"{role} store spec {_redact(spec)!r}: {exc}; accepted forms: {forms}"
        ) from None


def _redact(spec: str) -> str:
    """The spec with any URI password masked: error messages end up in logs."""
    masked = re.sub(r"(://[^:/@?#]*:)[^@/?#]*@", r"\1***@", spec)
    return re.sub(r"(password=)[^&\s]*", r"\1***", masked, flags=re.IGNORECASE)
