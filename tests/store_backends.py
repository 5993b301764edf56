"""The store backends the contract suite runs against, as a small factory table.

Owns: `BACKENDS` (name -> factory), `StoreSet` (what a factory hands a test), and
`require_postgres` (the PostgreSQL test server, or a loud failure: these tests never skip).

Adding a backend is one entry in `BACKENDS`: a context manager that takes `BackendArgs`,
yields a `StoreSet` and cleans up after itself. Tests only use `StoreSet`, never a backend's
own methods, so a store whose notes are files (ids and identities it chooses itself) fits.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psycopg
import pytest

from labkit.clock import FakeClock
from labkit.scope import Path as ScopePath
from labkit.scope import format_file_uri, parse_file_uri
from labkit.stores import Note, NoteStore, ReplayStore
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.stores.postgres import PostgresStore
from labkit.stores.sqlite import SqliteStore

POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DATABASE_ROOT = "file:///work"
"""Where the database-backed stores keep their (purely recorded) note paths."""


def require_postgres() -> str:
    """The DSN of the test server, after checking it answers; fails the test loudly if not."""
    try:
        with psycopg.connect(POSTGRES_DSN, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
        return POSTGRES_DSN
    except psycopg.OperationalError as exc:
        reason = " ".join(str(exc).split())
    pytest.fail(
        f"PostgreSQL is required at {POSTGRES_DSN} (trust auth, database 'test', user "
        f"'postgres') and is unreachable: {reason} Start it (`.ci/run` does) and run the "
        "tests again; they never skip.",
        pytrace=False,
    )


def unique_schema() -> str:
    return f"labkit_test_{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True)
class BackendArgs:
    tmp_path: Path  # an empty directory of this store set's own
    clock: FakeClock
    capacity: int
    per_principal: int
    postgres_dsn: Callable[[], str]  # resolved only by backends that need the server


@dataclass(frozen=True)
class StoreSet:
    """One backend under test.

    `add(relative path, title)` creates a note under `root` and returns it as stored;
    `replace(note)` rewrites it in place (same id, new identity); `move(note, relative path)`
    renames it (same identity); `reopen()` returns a second handle on the same state, as a
    second server process would hold; `one_transaction` says whether the notes and the replay
    claims share one database (so a deletion is one transaction).
    """

    name: str
    notes: NoteStore
    replay: ReplayStore
    root: str
    add: Callable[[str, str], Note]
    replace: Callable[[Note], Note]
    move: Callable[[Note, str], Note]
    reopen: Callable[[], tuple[NoteStore, ReplayStore]]
    one_transaction: bool

    def uri(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def workspace(self, relative: str = "") -> ScopePath:
        return parse_file_uri(self.uri(relative) if relative else self.root)


class _Editable(Protocol):
    def add(self, note_id: str, uri: str, title: str) -> Note: ...
    def move(self, note_id: str, uri: str) -> Note: ...


def _record_store_set(
    name: str,
    store: _Editable,
    replay: ReplayStore,
    reopen: Callable[[], tuple[NoteStore, ReplayStore]],
    *,
    one_transaction: bool,
) -> StoreSet:
    """A `StoreSet` for stores that record notes by id (memory, SQLite, PostgreSQL)."""
    notes: Any = store
    return StoreSet(
        name=name,
        notes=notes,
        replay=replay,
        root=DATABASE_ROOT,
        add=lambda rel, title: store.add(f"note:{rel}", f"{DATABASE_ROOT}/{rel}", title),
        replace=lambda note: store.add(note.id, format_file_uri(note.path), note.title),
        move=lambda note, rel: store.move(note.id, f"{DATABASE_ROOT}/{rel}"),
        reopen=reopen,
        one_transaction=one_transaction,
    )


@contextmanager
def memory_backend(args: BackendArgs) -> Iterator[StoreSet]:
    notes = MemoryNoteStore()
    replay = MemoryReplayStore(
        clock=args.clock, capacity=args.capacity, per_principal=args.per_principal
    )
    # Memory stores are shared by passing the same objects: that is their "second process".
    yield _record_store_set("memory", notes, replay, lambda: (notes, replay), one_transaction=False)


@contextmanager
def sqlite_backend(args: BackendArgs) -> Iterator[StoreSet]:
    path = args.tmp_path / "stores.db"
    with ExitStack() as stack:

        def open_() -> SqliteStore:
            store = SqliteStore(
                path, clock=args.clock, capacity=args.capacity, per_principal=args.per_principal
            )
            return stack.enter_context(store)

        def reopen() -> tuple[NoteStore, ReplayStore]:
            other = open_()
            return other, other

        store = open_()
        yield _record_store_set("sqlite", store, store, reopen, one_transaction=True)


@contextmanager
def postgres_backend(args: BackendArgs) -> Iterator[StoreSet]:
    dsn, schema = args.postgres_dsn(), unique_schema()
    with ExitStack() as stack:

        def open_() -> PostgresStore:
            store = PostgresStore(
                dsn,
                schema=schema,
                clock=args.clock,
                capacity=args.capacity,
                per_principal=args.per_principal,
            )
            return stack.enter_context(store)

        def reopen() -> tuple[NoteStore, ReplayStore]:
            other = open_()
            return other, other

        store = open_()
        stack.callback(store.drop_schema)  # runs before the stores close (LIFO)
        yield _record_store_set("postgres", store, store, reopen, one_transaction=True)


@contextmanager
def filesystem_backend(args: BackendArgs) -> Iterator[StoreSet]:
    """Notes are real files under `work/`: the store picks ids and identities itself, so `add`
    writes a file and maps it to its note, `replace` rewrites it (same inode, new mtime) and
    `move` renames it. Claims live in a SQLite file beside the intent journal."""
    from labkit.stores.filesystem import FilesystemNoteStore

    work, state = args.tmp_path / "work", args.tmp_path / "state"
    work.mkdir()
    state.mkdir()
    root = "file://" + str(work)
    with ExitStack() as stack:

        def reopen() -> tuple[NoteStore, ReplayStore]:
            notes = FilesystemNoteStore([root], journal_path=state / "journal.db", clock=args.clock)
            replay = SqliteStore(
                state / "replay.db",
                clock=args.clock,
                capacity=args.capacity,
                per_principal=args.per_principal,
            )
            return stack.enter_context(notes), stack.enter_context(replay)

        notes, replay = reopen()
        assert isinstance(notes, FilesystemNoteStore)

        def located(path: Path) -> Note:
            note = notes.locate(parse_file_uri("file://" + str(path)))
            assert note is not None, path
            return note

        def add(relative: str, title: str) -> Note:
            path = work / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# {title}\n")
            return located(path)

        def replace(note: Note) -> Note:
            path = Path("/", *note.path)
            later = path.stat().st_mtime_ns + 1_000_000_000  # saved again a second later
            path.write_text(f"# {note.title}\n\nrewritten\n")
            os.utime(path, ns=(later, later))
            return located(path)

        def move(note: Note, relative: str) -> Note:
            path = work / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            Path("/", *note.path).rename(path)
            return located(path)

        yield StoreSet(
            name="filesystem",
            notes=notes,
            replay=replay,
            root=root,
            add=add,
            replace=replace,
            move=move,
            reopen=reopen,
            one_transaction=False,
        )


BACKENDS: dict[str, Callable[[BackendArgs], AbstractContextManager[StoreSet]]] = {
    "memory": memory_backend,
    "sqlite": sqlite_backend,
    "postgres": postgres_backend,
    "filesystem": filesystem_backend,
}
