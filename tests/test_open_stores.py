"""`open_stores`: spec strings to stores, one object per database, clear refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from store_backends import require_postgres, unique_schema

from labkit.clock import FakeClock
from labkit.stores import Claim, Confirmation, Deletion, commit_deletion
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.stores.open import (
    NOTE_BACKENDS,
    REPLAY_BACKENDS,
    Backend,
    Opening,
    StoreOpenError,
    UnsafeLayout,
    check_layout,
    open_stores,
    spec_file,
)
from labkit.stores.postgres import PostgresStore
from labkit.stores.sqlite import SqliteStore

TTL = 300.0
FORMS = ("memory", "sqlite:///ABSOLUTE/PATH.db", "postgresql://")


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    return require_postgres()


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    """Stores a test opened; closed at the end."""
    stores: list[Any] = []
    yield stores
    for store in stores:
        if hasattr(store, "close"):
            store.close()


@pytest.fixture
def schema(postgres_dsn: str) -> Iterator[str]:
    name = unique_schema()
    yield name
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_memory_gives_two_memory_stores_on_the_given_clock(
    opened: list[Any], clock: FakeClock
) -> None:
    notes, replay = open_stores("memory", "memory", clock=clock)
    assert isinstance(notes, MemoryNoteStore) and isinstance(replay, MemoryReplayStore)
    assert replay.claim("alice", "n", clock() + 10) is Claim.CLAIMED
    clock.advance(10)
    assert replay.claim("alice", "n", clock() + 10) is Claim.CLAIMED  # expired on that clock


def test_one_sqlite_file_is_one_store(tmp_path: Path, opened: list[Any], clock: FakeClock) -> None:
    spec = f"sqlite://{tmp_path}/stores.db"
    notes, replay = open_stores(spec, spec, clock=clock)
    opened.append(notes)
    assert isinstance(notes, SqliteStore) and notes is replay
    assert notes.path == f"{tmp_path}/stores.db"


def test_two_spellings_of_one_file_are_one_store(tmp_path: Path, opened: list[Any]) -> None:
    (tmp_path / "db").mkdir()
    notes, replay = open_stores(
        f"sqlite://{tmp_path}/db/stores.db", f"sqlite://{tmp_path}/db/../db/stores.db"
    )
    opened.append(notes)
    assert notes is replay


def test_two_sqlite_files_are_two_stores_and_still_delete_once(
    tmp_path: Path, opened: list[Any], clock: FakeClock
) -> None:
    notes, replay = open_stores(
        f"sqlite://{tmp_path}/notes.db", f"sqlite://{tmp_path}/claims.db", clock=clock
    )
    opened += [notes, replay]
    assert isinstance(notes, SqliteStore) and isinstance(replay, SqliteStore)
    assert notes is not replay and not notes.shares_database(replay)
    note = notes.add("n", "file:///work/notes/a.md", "a")
    for expected in [(Deletion.DELETED, note), (Deletion.USED, None)]:
        outcome = commit_deletion(
            notes,
            replay,
            Confirmation(
                principal="alice",
                nonce="n1",
                expires_at=clock() + TTL,
                note_id=note.id,
                recheck=lambda live: True,
            ),
        )
        assert outcome == expected


def test_sqlite_notes_may_use_memory_claims(tmp_path: Path, opened: list[Any]) -> None:
    notes, replay = open_stores(f"sqlite://{tmp_path}/notes.db", "memory")
    opened.append(notes)
    assert isinstance(notes, SqliteStore) and isinstance(replay, MemoryReplayStore)


def test_the_replay_bounds_reach_the_store(tmp_path: Path, opened: list[Any]) -> None:
    spec = f"sqlite://{tmp_path}/stores.db"
    notes, replay = open_stores(spec, spec, capacity=5, per_principal=2)
    opened.append(notes)
    assert isinstance(replay, SqliteStore)
    assert (replay.capacity, replay.per_principal) == (5, 2)


def test_one_postgres_database_is_one_store(
    postgres_dsn: str, schema: str, opened: list[Any]
) -> None:
    notes, replay = open_stores(postgres_dsn, postgres_dsn, schema=schema)
    opened.append(notes)
    assert isinstance(notes, PostgresStore) and notes is replay
    assert notes.schema == schema


def test_postgres_and_postgresql_name_the_same_database(
    postgres_dsn: str, schema: str, opened: list[Any]
) -> None:
    other = postgres_dsn.replace("postgresql://", "postgres://", 1)
    notes, replay = open_stores(postgres_dsn, other, schema=schema)
    opened.append(notes)
    assert notes is replay


def test_an_unreachable_postgres_is_an_open_error_not_a_spec_error() -> None:
    with pytest.raises(StoreOpenError) as caught:
        open_stores("memory", "postgresql://alice:hunter2@127.0.0.1:1/test")
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)
    message = str(caught.value)
    assert message.startswith(
        "cannot open the replay store 'postgresql://alice:***@127.0.0.1:1/test': "
    )
    assert "hunter2" not in message and "PostgreSQL server is running" in message


@pytest.mark.parametrize("role", ["notes", "replay"])
@pytest.mark.parametrize("slashes", ["///", "////"])
def test_a_sqlite_file_in_a_missing_directory_names_the_path_and_what_to_do(
    tmp_path: Path, role: str, slashes: str
) -> None:
    spec = f"sqlite:{slashes}{str(tmp_path / 'no-such-dir' / 'r.db').lstrip('/')}"
    specs = {"notes": "memory", "replay": "memory", role: spec}
    with pytest.raises(StoreOpenError) as caught:
        open_stores(specs["notes"], specs["replay"])
    assert caught.value.role == role
    assert str(caught.value) == (
        f"cannot open the {role} store {spec!r}: unable to open database file. Check that its "
        "directory exists and that this user may create files in it (SQLite keeps -wal and "
        "-shm files beside the database)."
    )


@pytest.mark.parametrize("slashes", ["///", "////"])
def test_both_absolute_forms_open_the_same_file(
    tmp_path: Path, slashes: str, opened: list[Any]
) -> None:
    path = tmp_path / "stores.db"
    notes, replay = open_stores(f"sqlite:{slashes}{str(path).lstrip('/')}", "memory")
    opened.append(notes)
    assert isinstance(notes, SqliteStore) and notes.path == str(path)
    assert path.exists()


@pytest.mark.parametrize("slashes", ["///", "////"])
def test_both_absolute_forms_name_a_filesystem_journal(
    tmp_path: Path, slashes: str, opened: list[Any]
) -> None:
    from labkit.stores.filesystem import FilesystemNoteStore

    work = tmp_path / "work"
    work.mkdir()
    journal = tmp_path / "journal.db"
    notes, _ = open_stores(
        f"filesystem:{slashes}{str(journal).lstrip('/')}", "memory", workspaces=[f"file://{work}"]
    )
    opened.append(notes)
    assert isinstance(notes, FilesystemNoteStore)
    assert journal.exists()


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ("sqlite:///var/lib/labkit/r.db", "/var/lib/labkit/r.db"),
        ("sqlite:////var/lib/labkit/r.db", "/var/lib/labkit/r.db"),
        ("filesystem:///var/lib/labkit/j.db", "/var/lib/labkit/j.db"),
        ("filesystem:////var/lib/labkit/j.db", "/var/lib/labkit/j.db"),
        ("sqlite://relative.db", None),
        ("sqlite://host/var/r.db", None),
        ("sqlite://///var/r.db", None),
        ("filesystem://relative.db", None),
        ("postgresql://postgres@127.0.0.1/test", None),
        ("memory", None),
    ],
)
def test_the_file_a_spec_names(spec: str, path: str | None) -> None:
    assert spec_file(spec) == path


BAD_SPECS = [
    "",
    "Memory",
    "memory:",
    "sqlite:stores.db",
    "sqlite://stores.db",  # relative: refused, never resolved against the working directory
    "sqlite://///var/stores.db",  # five slashes: neither absolute form
    "sqlite://host/var/stores.db",  # a host: refused
    "sqlite:///var/lib/",
    "sqlite:///var/stores.db?mode=ro",
    "redis://127.0.0.1:6379/0",
    "file:///work/notes",
    "mysql://root@127.0.0.1/test",
]


@pytest.mark.parametrize("spec", BAD_SPECS)
@pytest.mark.parametrize("role", ["notes", "replay"])
def test_a_bad_spec_names_the_value_and_the_accepted_forms(role: str, spec: str) -> None:
    specs = {"notes": "memory", "replay": "memory", role: spec}
    with pytest.raises(ValueError) as caught:
        open_stores(specs["notes"], specs["replay"])
    message = str(caught.value)
    assert message.startswith(f"{role} store spec {spec!r}")
    assert all(form in message for form in FORMS), message


def test_a_malformed_postgres_uri_never_echoes_its_password() -> None:
    with pytest.raises(ValueError, match="not a valid libpq connection URI") as caught:
        open_stores("postgresql://alice:hunter2@[::1/test", "memory")
    assert "hunter2" not in str(caught.value)
    assert "alice:***@" in str(caught.value)


def open_descriptors(path: Path) -> int:
    """How many of this process's file descriptors point at `path`."""
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += fd.readlink() == path
        except OSError:
            continue  # closed while listing (the directory's own descriptor)
    return count


def test_a_failed_replay_closes_the_notes_database(tmp_path: Path) -> None:
    path = tmp_path / "stores.db"
    with pytest.raises(ValueError, match="replay store spec") as caught:
        open_stores(f"sqlite://{path}", "sqlite://relative.db")
    # The traceback still references the half-opened store: only close() frees the file.
    assert caught.value is not None
    assert path.exists() and open_descriptors(path) == 0


# -- the backend table is the whole truth ---------------------------------------------------------


@pytest.mark.parametrize(
    "notes", ["sqlite:///x/n.db", "postgresql://u@h/d", "filesystem:///x/j.db"]
)
def test_persistent_notes_beside_memory_claims_are_refused_naming_the_safe_layouts(
    notes: str,
) -> None:
    with pytest.raises(UnsafeLayout, match="Safe layouts"):
        check_layout(notes, "memory")
    check_layout(notes, "sqlite:///x/claims.db")
    check_layout("memory", "memory")


def test_a_backend_added_to_the_table_is_judged_by_its_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "Adding a backend is one entry": a persistent note store that names a file, and a
    # replay store that keeps its claims in this process only.
    vault = Backend("vault:///ABSOLUTE/PATH", _never_opened, persistent=True, names_file=True)
    ram = Backend("ram", _never_opened, persistent=False)
    monkeypatch.setitem(NOTE_BACKENDS, "vault", vault)
    monkeypatch.setitem(REPLAY_BACKENDS, "ram", ram)
    with pytest.raises(UnsafeLayout):
        check_layout("vault:///x/notes.db", "memory")
    with pytest.raises(UnsafeLayout):
        check_layout("sqlite:///x/notes.db", "ram")
    check_layout("vault:///x/notes.db", "sqlite:///x/claims.db")
    check_layout("memory", "ram")
    assert spec_file("vault:///x/notes.db") == "/x/notes.db"
    assert spec_file("vault:////x/notes.db") == "/x/notes.db"
    assert spec_file("ram") is None


def _never_opened(spec: str, opening: Opening) -> Any:
    raise AssertionError("a layout check opens nothing")
