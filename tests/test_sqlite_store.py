"""What only the SQLite store does: WAL, retrying a locked database (never a replay),
persistence across reopening, purging expired claims, one store shared by threads.

The contract every backend keeps is in test_store_contract.py.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.clock import FakeClock
from labkit.stores import HOLDER, Claim, Confirmation, Deletion, commit_deletion, recover_pending
from labkit.stores.sqlite import SCHEMA_VERSION, SqliteStore, StoreBusy

TTL = 300.0


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "stores.db"


@pytest.fixture
def store(path: Path, clock: FakeClock) -> Iterator[SqliteStore]:
    with SqliteStore(path, clock=clock) as store:
        yield store


class Holder:
    """A second writer that takes the database's write lock, as another process would."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=0)

    def lock(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.release()
        self.conn.close()


@pytest.fixture
def holder(path: Path, store: SqliteStore) -> Iterator[Holder]:
    holder = Holder(path)
    yield holder
    holder.close()


def raw_count(path: Path, query: str) -> int:
    conn = sqlite3.connect(path)
    try:
        count: int = conn.execute(query).fetchone()[0]
        return count
    finally:
        conn.close()


def test_the_database_uses_wal(path: Path, store: SqliteStore) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_a_locked_database_is_waited_for_not_reported_as_used(
    path: Path, clock: FakeClock, store: SqliteStore, holder: Holder
) -> None:
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 3:
            holder.release()  # the other writer finishes while we back off

    with SqliteStore(path, clock=clock, busy_timeout=0, sleep=sleep) as waiting:
        holder.lock()
        assert waiting.claim("alice", "n1", clock() + TTL) is Claim.CLAIMED
    assert len(pauses) == 3
    assert store.claim("alice", "n1", clock() + TTL) is Claim.USED


def test_a_locked_deletion_is_retried_as_one_unit(
    path: Path, clock: FakeClock, store: SqliteStore, holder: Holder
) -> None:
    note = store.add("n", "file:///work/notes/a.md", "a")
    rechecks: list[str] = []

    def recheck(live: object) -> bool:
        rechecks.append("ran")
        return True

    with SqliteStore(path, clock=clock, busy_timeout=0, sleep=lambda s: holder.release()) as w:
        holder.lock()
        outcome = commit_deletion(
            w,
            w,
            Confirmation(
                principal="alice",
                nonce="n1",
                expires_at=clock() + TTL,
                note_id=note.id,
                recheck=recheck,
            ),
        )
    assert outcome == (Deletion.DELETED, note)
    assert rechecks == ["ran"]  # BEGIN IMMEDIATE met the lock before the unit ran
    assert store.claim("alice", "n1", clock() + TTL) is Claim.USED


def test_a_lock_held_past_the_deadline_raises_and_burns_nothing(
    path: Path, clock: FakeClock, store: SqliteStore, holder: Holder
) -> None:
    note = store.add("n", "file:///work/notes/a.md", "a")
    pauses: list[float] = []
    with SqliteStore(
        path, clock=clock, busy_timeout=0, lock_deadline=1.0, sleep=pauses.append
    ) as waiting:
        holder.lock()
        with pytest.raises(StoreBusy, match="stayed locked"):
            waiting.claim("alice", "n1", clock() + TTL)
        with pytest.raises(StoreBusy, match="stayed locked"):
            commit_deletion(
                waiting,
                waiting,
                Confirmation(
                    principal="alice",
                    nonce="n2",
                    expires_at=clock() + TTL,
                    note_id=note.id,
                    recheck=lambda live: True,
                ),
            )
    assert sum(pauses) >= 2.0
    holder.release()
    assert store.claim("alice", "n1", clock() + TTL) is Claim.CLAIMED
    assert store.claim("alice", "n2", clock() + TTL) is Claim.CLAIMED
    assert store.get(note.id) == note


def test_notes_and_claims_survive_reopening(path: Path, clock: FakeClock) -> None:
    with SqliteStore(path, clock=clock) as first:
        note = first.add("n", "file:///work/notes/a.md", "a")
        assert first.claim("alice", "n1", clock() + TTL) is Claim.CLAIMED
    with SqliteStore(path, clock=clock) as second:
        assert second.get("n") == note
        assert second.claim("alice", "n1", clock() + TTL) is Claim.USED
        # Generations keep counting across reopening: a replaced note is never confused
        # with the one a confirmation was minted for.
        assert second.add("n", "file:///work/notes/a.md", "a").identity != note.identity


def test_expired_claims_are_purged_from_the_file(
    path: Path, clock: FakeClock, store: SqliteStore
) -> None:
    for i in range(5):
        assert store.claim("alice", f"old-{i}", clock() + 10) is Claim.CLAIMED
    clock.advance(11)
    assert store.claim("alice", "new", clock() + 10) is Claim.CLAIMED
    assert raw_count(path, "SELECT count(*) FROM claims") == 1
    assert store.live_claims() == 1


def test_an_import_is_all_or_nothing(path: Path, store: SqliteStore) -> None:
    rows = [("a", "file:///work/a.md", "a"), ("b", "file:///work/../b.md", "b")]
    with pytest.raises(ValueError):
        store.add_many(rows)
    assert store.ids() == []
    added = store.add_many(rows[:1] + [("c", "file:///work/c.md", "c")])
    assert [n.id for n in added] == ["a", "c"] and store.ids() == ["a", "c"]


def test_threads_share_one_store_and_each_nonce_is_claimed_once(
    store: SqliteStore, clock: FakeClock
) -> None:
    results: list[Claim] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait(timeout=30)
        for i in range(20):
            claim = store.claim("alice", f"n{i}", clock() + TTL)
            with lock:
                results.append(claim)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results.count(Claim.CLAIMED) == 20
    assert results.count(Claim.USED) == 7 * 20


def test_a_newer_schema_is_refused(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    with pytest.raises(ValueError, match="schema version 7"):
        SqliteStore(path)


@pytest.mark.parametrize("bad", ["", ":memory:", "file:stores.db?mode=memory"])
def test_only_a_file_path_is_accepted(bad: str) -> None:
    with pytest.raises(ValueError, match="database file path"):
        SqliteStore(bad)


def test_a_closed_store_refuses_work(path: Path) -> None:
    store = SqliteStore(path)
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.get("x")


def test_a_version_1_database_is_migrated_keeping_its_claims_and_notes(tmp_path: Path) -> None:
    # The schema before pending claims and receipts, as labkit 1 wrote it.
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);
            CREATE TABLE notes (id TEXT PRIMARY KEY, path TEXT NOT NULL, title TEXT NOT NULL,
                title_folded TEXT NOT NULL, generation INTEGER NOT NULL);
            CREATE TABLE claims (principal TEXT NOT NULL, nonce TEXT NOT NULL,
                expires_at REAL NOT NULL, PRIMARY KEY (principal, nonce)) WITHOUT ROWID;
            INSERT INTO meta VALUES ('epoch', 'abcd'), ('generation', 1);
            INSERT INTO notes VALUES ('n1', '/work/notes/a.md', 'A', 'a', 1);
            INSERT INTO claims VALUES ('alice', 'old', 4e9);
            PRAGMA user_version = 1;
            """
        )
    with SqliteStore(path) as store:
        assert store.ids() == ["n1"] and store.used("alice", "old")
        assert store.claim("alice", "old", 4e9) is Claim.USED
        assert store.pending_claims() == []
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_version_2_pending_claim_has_no_holder_and_is_recovered(tmp_path: Path) -> None:
    # Version 2 named no holder: its pending claims were left by a server that is gone.
    path = tmp_path / "v2.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);
            CREATE TABLE notes (id TEXT PRIMARY KEY, path TEXT NOT NULL, title TEXT NOT NULL,
                title_folded TEXT NOT NULL, generation INTEGER NOT NULL);
            CREATE TABLE claims (principal TEXT NOT NULL, nonce TEXT NOT NULL,
                expires_at REAL NOT NULL, note_id TEXT, attempt TEXT,
                PRIMARY KEY (principal, nonce)) WITHOUT ROWID;
            CREATE TABLE receipts (principal TEXT NOT NULL, nonce TEXT NOT NULL,
                attempt TEXT NOT NULL, deleted INTEGER NOT NULL, expires_at REAL NOT NULL,
                PRIMARY KEY (principal, nonce, attempt)) WITHOUT ROWID;
            INSERT INTO meta VALUES ('epoch', 'abcd'), ('generation', 1);
            INSERT INTO claims VALUES ('alice', 'left', 4e9, 'n1', 'a1');
            PRAGMA user_version = 2;
            """
        )
    notes = SqliteStore(tmp_path / "notes.db")
    with SqliteStore(path) as replay:
        (ticket,) = replay.pending_claims()
        assert (ticket.holder, ticket.lease_until) == ("", 0.0)
        assert HOLDER.gone(ticket)
        assert recover_pending(notes, replay) == 1
        assert replay.claim_state("alice", "left") is None  # nothing was deleted: released
    notes.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
