"""SQLite note and replay store: the embedded default for anything persistent.

Owns: the schema of one database file, a connection per thread, the retry of "database is
locked", and the one-transaction claim-and-delete used when the notes and the nonces live in
the same file. Must not import the server or a transport.

Why it is built this way (SECURITY.md, "Exactly-once replay store", measured with 16 processes
x 100 rounds): WAL plus `BEGIN IMMEDIATE` plus a busy timeout gave one winner per round and no
errors, while a deferred `BEGIN` failed "database is locked" on 1,271 of 1,600 attempts. A
locked database is retried here and never reported as a replay: only a conflicting insert of
`(principal, nonce)` means "already used".
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Final, TypeVar

from labkit.clock import Clock, system_clock
from labkit.scope import Path, parse_file_uri
from labkit.stores import (
    DEFAULT_CAPACITY,
    DEFAULT_PER_PRINCIPAL,
    Claim,
    Confirmation,
    Deletion,
    Note,
    ReplayStore,
    StoreBusy,
    claim_then_delete,
    replay_bounds,
)
from labkit.stores.sql import (
    NOTE_COLUMNS,
    Row,
    ThreadConnections,
    below,
    decide_found,
    generation_of,
    new_epoch,
    note_from_row,
    path_text,
)

log = logging.getLogger("labkit.stores.sqlite")

SCHEMA_VERSION: Final = 1
BUSY_TIMEOUT_SECONDS: Final = 5.0
LOCK_DEADLINE_SECONDS: Final = 60.0
_FIRST_BACKOFF: Final = 0.002
_MAX_BACKOFF: Final = 0.1
_BUSY_CODES: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value NOT NULL)",
    "CREATE TABLE IF NOT EXISTS notes ("
    " id TEXT PRIMARY KEY, path TEXT NOT NULL, title TEXT NOT NULL,"
    " title_folded TEXT NOT NULL, generation INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS notes_path ON notes (path)",
    "CREATE TABLE IF NOT EXISTS claims ("
    " principal TEXT NOT NULL, nonce TEXT NOT NULL, expires_at REAL NOT NULL,"
    " PRIMARY KEY (principal, nonce)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS claims_expiry ON claims (expires_at)",
)

_T = TypeVar("_T")
Unit = Callable[[sqlite3.Connection], tuple[bool, _T]]
"""One transaction's work: returns (commit?, result). False rolls everything back."""


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in _BUSY_CODES


class SqliteStore(ThreadConnections[sqlite3.Connection]):
    """A `NoteStore`, a `ReplayStore` and an `AtomicDeleter` over one SQLite file.

    Claims are keyed by `(principal, nonce)`, bounded by `capacity` and a per-principal share
    with the same `Claim.FULL` rules as `MemoryReplayStore`, and purged once expired. Notes
    carry a generation: replacing a note gives it a new identity.

    `sleep` and the two time limits are injectable so tests can hold the write lock and watch
    the retry without timing anything.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock = system_clock,
        capacity: int = DEFAULT_CAPACITY,
        per_principal: int = DEFAULT_PER_PRINCIPAL,
        busy_timeout: float = BUSY_TIMEOUT_SECONDS,
        lock_deadline: float = LOCK_DEADLINE_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.path = os.fspath(path)
        if self.path in ("", ":memory:") or self.path.startswith("file:"):
            raise ValueError(
                f"SqliteStore needs a database file path, not {self.path!r} "
                "(every thread opens its own connection; use the memory stores instead)"
            )
        self.capacity, self.per_principal = replay_bounds(capacity, per_principal)
        self._clock = clock
        self._busy_timeout = busy_timeout
        self._lock_deadline = lock_deadline
        self._sleep = sleep
        super().__init__()
        try:
            self._epoch = self._run(self._create_schema, write=True)
            stat = os.stat(self.path)
        except BaseException:
            self.close()
            raise
        # The file's identity tells whether another SqliteStore shares this database.
        self._file_id = (stat.st_dev, stat.st_ino)

    # -- connections and the retry loop ------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout,
            isolation_level=None,  # no implicit transactions: every unit says BEGIN itself
            check_same_thread=False,  # close() runs on another thread; use stays per thread
        )
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise ValueError(
                    f"{self.path!r}: SQLite could not use WAL journaling (got {mode!r})"
                )
            # FULL: a committed claim survives a power cut, so a deleted note's nonce does too.
            conn.execute("PRAGMA synchronous=FULL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _run(self, unit: Unit[_T], *, write: bool) -> _T:
        """Run `unit` in one transaction, retrying the whole of it while the file is locked.

        `BEGIN IMMEDIATE` takes the write lock up front, so two writers queue in the busy
        handler instead of deadlocking on a read-to-write upgrade.
        """
        waited = 0.0
        delay = _FIRST_BACKOFF
        while True:
            try:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    commit, result = unit(conn)
                    conn.execute("COMMIT" if commit else "ROLLBACK")
                    return result
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                if waited >= self._lock_deadline:
                    # Not a replay: nothing was claimed or deleted (stores.StoreBusy).
                    raise StoreBusy(
                        f"{self.path!r} stayed locked for {waited:.1f}s; nothing was changed"
                    ) from exc
                log.debug("%s locked (%s); retrying", self.path, exc)
                pause = delay * random.uniform(0.5, 1.0)  # jitter: waiters do not retry in step
                self._sleep(pause)
                waited += pause + self._busy_timeout
                delay = min(delay * 2, _MAX_BACKOFF)

    def _create_schema(self, conn: sqlite3.Connection) -> tuple[bool, str]:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise ValueError(
                f"{self.path!r} holds labkit schema version {version}; "
                f"this labkit reads version {SCHEMA_VERSION}"
            )
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('epoch', ?)", (new_epoch(),))
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('generation', 0)")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        epoch: str = conn.execute("SELECT value FROM meta WHERE key = 'epoch'").fetchone()[0]
        return True, epoch

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    # -- NoteStore -----------------------------------------------------------------------------

    def find(self, workspace: Path, title: str, limit: int) -> Sequence[Note]:
        low, high = below(workspace)

        def unit(conn: sqlite3.Connection) -> tuple[bool, list[Row]]:
            rows = conn.execute(
                f"SELECT {NOTE_COLUMNS} FROM notes"
                " WHERE path >= ? AND path < ? AND instr(title_folded, ?) > 0"
                " ORDER BY title_folded, id LIMIT ?",
                (low, high, title.casefold(), max(limit, 0)),
            ).fetchall()
            return True, rows

        return decide_found(self._epoch, self._run(unit, write=False), workspace, title, limit)

    def get(self, note_id: str) -> Note | None:
        def unit(conn: sqlite3.Connection) -> tuple[bool, Row | None]:
            query = f"SELECT {NOTE_COLUMNS} FROM notes WHERE id = ?"
            return True, conn.execute(query, (note_id,)).fetchone()

        row = self._run(unit, write=False)
        return None if row is None else note_from_row(self._epoch, row)

    def delete(self, note: Note) -> bool:
        generation = generation_of(self._epoch, note.identity)
        if generation is None:
            return False

        def unit(conn: sqlite3.Connection) -> tuple[bool, bool]:
            deleted = conn.execute(
                "DELETE FROM notes WHERE id = ? AND generation = ? AND path = ? AND title = ?",
                (note.id, generation, path_text(note.path), note.title),
            ).rowcount
            return True, deleted == 1

        return self._run(unit, write=True)

    def add(self, note_id: str, uri: str, title: str) -> Note:
        """Create or replace a note (a replaced note gets a new identity)."""
        return self.add_many([(note_id, uri, title)])[0]

    def add_many(self, notes: Iterable[tuple[str, str, str]]) -> list[Note]:
        """Import `(id, uri, title)` rows in one transaction; every URI is parsed first, so a
        bad one imports nothing."""
        parsed = [(note_id, parse_file_uri(uri), title) for note_id, uri, title in notes]

        def unit(conn: sqlite3.Connection) -> tuple[bool, list[Note]]:
            last = conn.execute(
                "UPDATE meta SET value = value + ? WHERE key = 'generation' RETURNING value",
                (len(parsed),),
            ).fetchall()[0][0]
            rows = [
                (note_id, path_text(path), title, title.casefold(), last - len(parsed) + i + 1)
                for i, (note_id, path, title) in enumerate(parsed)
            ]
            conn.executemany(
                "INSERT INTO notes (id, path, title, title_folded, generation)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET path = excluded.path,"
                " title = excluded.title, title_folded = excluded.title_folded,"
                " generation = excluded.generation",
                rows,
            )
            return True, [note_from_row(self._epoch, (r[0], r[1], r[2], r[4])) for r in rows]

        return self._run(unit, write=True)

    def move(self, note_id: str, uri: str) -> Note:
        """Move a note to another path, keeping its identity (a rename on disk)."""
        text = path_text(parse_file_uri(uri))

        def unit(conn: sqlite3.Connection) -> tuple[bool, Row | None]:
            rows = conn.execute(
                f"UPDATE notes SET path = ? WHERE id = ? RETURNING {NOTE_COLUMNS}",
                (text, note_id),
            ).fetchall()
            return True, rows[0] if rows else None

        row = self._run(unit, write=True)
        if row is None:
            raise KeyError(note_id)
        return note_from_row(self._epoch, row)

    def ids(self) -> list[str]:
        def unit(conn: sqlite3.Connection) -> tuple[bool, list[str]]:
            return True, [r[0] for r in conn.execute("SELECT id FROM notes")]

        return sorted(self._run(unit, write=False))

    # -- ReplayStore ---------------------------------------------------------------------------

    def claim(self, principal: str, nonce: str, expires_at: float) -> Claim:
        def unit(conn: sqlite3.Connection) -> tuple[bool, Claim]:
            claim = self._claim_in(conn, principal, nonce, expires_at)
            return claim is not Claim.FULL, claim

        return self._run(unit, write=True)

    def release(self, principal: str, nonce: str) -> None:
        def unit(conn: sqlite3.Connection) -> tuple[bool, None]:
            conn.execute("DELETE FROM claims WHERE principal = ? AND nonce = ?", (principal, nonce))
            return True, None

        self._run(unit, write=True)

    def used(self, principal: str, nonce: str) -> bool:
        def unit(conn: sqlite3.Connection) -> tuple[bool, bool]:
            query = "SELECT 1 FROM claims WHERE principal = ? AND nonce = ? AND expires_at > ?"
            row = conn.execute(query, (principal, nonce, self._clock())).fetchone()
            return True, row is not None

        return self._run(unit, write=False)

    def live_claims(self) -> int:
        """How many claims have not expired (what counts against the capacity)."""

        def unit(conn: sqlite3.Connection) -> tuple[bool, int]:
            query = "SELECT count(*) FROM claims WHERE expires_at > ?"
            return True, conn.execute(query, (self._clock(),)).fetchone()[0]

        return self._run(unit, write=False)

    def _claim_in(
        self, conn: sqlite3.Connection, principal: str, nonce: str, expires_at: float
    ) -> Claim:
        """The claim inside the caller's write transaction. On FULL the caller rolls back."""
        # Expired claims go first, so they neither block their own nonce nor count as used.
        conn.execute("DELETE FROM claims WHERE expires_at <= ?", (self._clock(),))
        inserted = conn.execute(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)"
            " ON CONFLICT (principal, nonce) DO NOTHING",
            (principal, nonce, expires_at),
        ).rowcount
        if inserted != 1:
            return Claim.USED
        owned, total = conn.execute(
            "SELECT (SELECT count(*) FROM claims WHERE principal = ?),"
            " (SELECT count(*) FROM claims)",
            (principal,),
        ).fetchone()
        # Counted with the new row, hence ">": the same limits as MemoryReplayStore's ">=".
        if total > self.capacity or owned > self.per_principal:
            return Claim.FULL
        return Claim.CLAIMED

    # -- AtomicDeleter -------------------------------------------------------------------------

    def shares_database(self, other: object) -> bool:
        return other is self or (isinstance(other, SqliteStore) and other._file_id == self._file_id)

    def claim_and_delete(
        self, replay: ReplayStore, confirmation: Confirmation
    ) -> tuple[Deletion, Note | None]:
        """Claim the nonce and delete the note in one `BEGIN IMMEDIATE` transaction when
        `replay` is this database; otherwise claim first, then delete (`claim_then_delete`)."""
        if not isinstance(replay, SqliteStore) or not self.shares_database(replay):
            return claim_then_delete(self, replay, confirmation)
        claims = replay  # same file: its bounds and clock, this store's connection

        def unit(conn: sqlite3.Connection) -> tuple[bool, tuple[Deletion, Note | None]]:
            claim = claims._claim_in(
                conn, confirmation.principal, confirmation.nonce, confirmation.expires_at
            )
            if claim is Claim.USED:
                return True, (Deletion.USED, None)
            if claim is Claim.FULL:
                return False, (Deletion.FULL, None)
            rows = conn.execute(
                f"DELETE FROM notes WHERE id = ? RETURNING {NOTE_COLUMNS}", (confirmation.note_id,)
            ).fetchall()
            live = note_from_row(self._epoch, rows[0]) if rows else None
            # Authorization, containment and identity, re-checked on the live row while the
            # write lock is held. A stale note rolls back the delete *and* the claim.
            if live is None or not confirmation.recheck(live):
                return False, (Deletion.STALE, live)
            return True, (Deletion.DELETED, live)

        return self._run(unit, write=True)
