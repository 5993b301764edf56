"""SQLite note and replay store: the embedded default for anything persistent.

Owns: the schema of one database file (opened without writing when it is current), a
connection per thread (through an injectable `connect`), the retry of "database is locked",
what a failed disk means (`fault`: no space, read-only, permission, I/O error, out of
descriptors, each a `StoreUnavailable`), the one-transaction claim-and-delete used when the
notes and the nonces live in the same file, and this file's side of the two-step protocol
(pending claims, receipts) when they do not. Must not import the server or a transport.

Why it is built this way (docs/security.md, "Exactly-once replay store", measured with 16 processes
x 100 rounds): WAL plus `BEGIN IMMEDIATE` plus a busy timeout gave one winner per round and no
errors, while a deferred `BEGIN` failed "database is locked" on 1,271 of 1,600 attempts. A
locked database is retried here and never reported as a replay: only a conflicting insert of
`(principal, nonce)` means "already used".
"""

from __future__ import annotations

import errno
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
    FAULTS,
    HOLDER,
    Claim,
    ClaimHolder,
    ClaimState,
    Completed,
    Confirmation,
    Deletion,
    Note,
    ReplayStore,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    Ticket,
    claim_then_delete,
    replay_bounds,
)
from labkit.stores.sql import (
    NOTE_COLUMNS,
    PENDING_COLUMNS,
    NoteRow,
    ThreadConnections,
    Unit,
    below,
    decide_found,
    generation_of,
    new_epoch,
    note_from_row,
    path_text,
    pending_ticket,
)

log = logging.getLogger("labkit.stores.sqlite")

SCHEMA_VERSION: Final = 3
BUSY_TIMEOUT_SECONDS: Final = 5.0
LOCK_DEADLINE_SECONDS: Final = 60.0
_FIRST_BACKOFF: Final = 0.002
_MAX_BACKOFF: Final = 0.1
_BUSY_CODES: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
# What the disk or the process refused (not a bug, not corruption): transient, answered -32001.
_FAULT_CODES: Final = frozenset(
    {
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_NOLFS,
        sqlite3.SQLITE_PROTOCOL,
    }
)
# A receipt outlives its confirmation by this much, so a pending claim settled late (a server
# that stayed down) still finds it.
RECEIPT_GRACE_SECONDS: Final = 7 * 86_400

# Version 1 had no pending claims and no receipts; version 2 adds them; version 3 names the
# holder of a pending claim and its lease (`_MIGRATE`).
_PENDING_INDEX: Final = (
    "CREATE INDEX IF NOT EXISTS claims_pending ON claims (principal, nonce)"
    " WHERE attempt IS NOT NULL"
)
_RECEIPTS: Final = (
    "CREATE TABLE IF NOT EXISTS receipts ("
    " principal TEXT NOT NULL, nonce TEXT NOT NULL, attempt TEXT NOT NULL,"
    " deleted INTEGER NOT NULL, expires_at REAL NOT NULL,"
    " PRIMARY KEY (principal, nonce, attempt)) WITHOUT ROWID"
)
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value NOT NULL)",
    "CREATE TABLE IF NOT EXISTS notes ("
    " id TEXT PRIMARY KEY, path TEXT NOT NULL, title TEXT NOT NULL,"
    " title_folded TEXT NOT NULL, generation INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS notes_path ON notes (path)",
    "CREATE TABLE IF NOT EXISTS claims ("
    " principal TEXT NOT NULL, nonce TEXT NOT NULL, expires_at REAL NOT NULL,"
    " note_id TEXT, attempt TEXT, holder TEXT, lease_until REAL,"
    " PRIMARY KEY (principal, nonce)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS claims_expiry ON claims (expires_at)",
    _PENDING_INDEX,
    _RECEIPTS,
)
_TO_3: Final = (
    "ALTER TABLE claims ADD COLUMN holder TEXT",
    "ALTER TABLE claims ADD COLUMN lease_until REAL",
    _PENDING_INDEX,
)
_MIGRATE: Final = {
    1: (
        "ALTER TABLE claims ADD COLUMN note_id TEXT",
        "ALTER TABLE claims ADD COLUMN attempt TEXT",
        _RECEIPTS,
        *_TO_3,
    ),
    2: _TO_3,
}

Connect = Callable[[str, float], sqlite3.Connection]
"""How a connection is opened: `(path, busy timeout)`. Tests inject faults here."""


def connect(path: str, timeout: float) -> sqlite3.Connection:
    return sqlite3.connect(
        path,
        timeout=timeout,
        isolation_level=None,  # no implicit transactions: every unit says BEGIN itself
        check_same_thread=False,  # close() runs on another thread; use stays per thread
    )


_T = TypeVar("_T")


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in _BUSY_CODES


def fault(path: str, exc: sqlite3.Error) -> StoreUnavailable | None:
    """The `StoreUnavailable` an error of the database at `path` means, naming the real
    cause (the disk is full, read-only or not ours, an I/O error, no descriptors left), or
    None for an error that is not the environment's (a bug, a corrupt file)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int) or (code & 0xFF) not in _FAULT_CODES:
        return None
    return StoreUnavailable(f"{path}: {diagnose(path, exc)}")


def diagnose(path: str, exc: BaseException) -> str:
    """Why the file at `path` cannot be used, from the filesystem itself where it can tell
    (SQLite says "disk I/O error" when it cannot grow its shared-memory file on a full disk,
    and "unable to open database file" for a missing directory or a spent descriptor table)."""
    directory = os.path.dirname(path) or "."
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    try:
        fs = os.statvfs(directory)
    except OSError as err:
        return f"{os.strerror(err.errno or errno.EIO).lower()}: {directory}"
    if code == sqlite3.SQLITE_FULL or (fs.f_bavail == 0 and code != sqlite3.SQLITE_CANTOPEN):
        return "no space left on device (free some space on it; nothing was changed)"
    if fs.f_flag & os.ST_RDONLY:
        return "read-only file system (remount it read-write)"
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM) or not _writable(path, directory):
        return f"permission denied (this user may not write {path} or its directory)"
    if code == sqlite3.SQLITE_CANTOPEN:
        if fs.f_bavail == 0 or fs.f_favail == 0:
            return "no space left on device (no free blocks or inodes)"
        return "unable to open the database file (out of file descriptors?)"
    if code == sqlite3.SQLITE_NOMEM:
        return "out of memory"
    return f"I/O error ({getattr(exc, 'sqlite_errorname', 'SQLITE_IOERR')})"


def _writable(path: str, directory: str) -> bool:
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return False
    return os.access(directory, os.W_OK | os.X_OK)


def _remove_strays(path: str, existed: dict[str, bool]) -> None:
    """Remove the files a failed open created itself: an empty database, its -wal, and a
    -shm too small to be one SQLite finished (a full disk leaves 0 to 3 bytes)."""
    for suffix, was_there in existed.items():
        name = path + suffix
        try:
            if not was_there and os.path.getsize(name) < 32768:
                os.unlink(name)
        except OSError:
            continue


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
        connect: Connect = connect,
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
        self._connect = connect
        self._opened = False  # until then a failure is the opener's to report, not FAULTS'
        super().__init__()
        existed = {s: os.path.exists(self.path + s) for s in ("", "-wal", "-shm")}
        try:
            # A current schema is only read: a server starts (and serves reads) on a full disk.
            epoch = self._run(self._read_schema, write=False)
            self._epoch = epoch if epoch is not None else self._run(self._create_schema, write=True)
            stat = os.stat(self.path)
        except BaseException:
            self.close()
            _remove_strays(self.path, existed)
            raise
        # The file's identity tells whether another SqliteStore shares this database.
        self._file_id = (stat.st_dev, stat.st_ino)
        self._opened = True

    # -- connections and the retry loop ------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        conn = self._connect(self.path, self._busy_timeout)
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

    def _run(self, unit: Unit[sqlite3.Connection, _T], *, write: bool) -> _T:
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
                    if write and commit and self._opened:
                        FAULTS.wrote(self.path)
                    return result
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    unavailable = fault(self.path, exc)
                    if unavailable is None:
                        raise
                    # The disk or the process refused (ENOSPC, EIO, EMFILE): the transaction
                    # rolled back, so nothing changed; a short cause, no traceback.
                    raise self._failed(unavailable) from exc
                if waited >= self._lock_deadline:
                    # Not a replay: nothing was claimed or deleted (stores.StoreBusy).
                    busy = StoreBusy(
                        f"{self.path!r} stayed locked for more than {self._lock_deadline:g}s; "
                        "nothing was changed"
                    )
                    raise self._failed(busy) from exc
                log.debug("%s locked (%s); retrying", self.path, exc)
                pause = delay * random.uniform(0.5, 1.0)  # jitter: waiters do not retry in step
                self._sleep(pause)
                waited += pause + self._busy_timeout
                delay = min(delay * 2, _MAX_BACKOFF)

    def _failed(self, exc: StoreError) -> StoreError:
        return FAULTS.record(self.path, exc) if self._opened else exc

    def _read_schema(self, conn: sqlite3.Connection) -> tuple[bool, str | None]:
        """The epoch of a current database; None when the schema must be created first."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            return True, None
        row = conn.execute("SELECT value FROM meta WHERE key = 'epoch'").fetchone()
        return True, None if row is None else str(row[0])

    def _create_schema(self, conn: sqlite3.Connection) -> tuple[bool, str]:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, *_MIGRATE, SCHEMA_VERSION):
            raise ValueError(
                f"{self.path!r} holds labkit schema version {version}; "
                f"this labkit reads version {SCHEMA_VERSION}"
            )
        for statement in _MIGRATE.get(version, _SCHEMA):
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

        def unit(conn: sqlite3.Connection) -> tuple[bool, list[NoteRow]]:
            rows = conn.execute(
                f"SELECT {NOTE_COLUMNS} FROM notes"
                " WHERE path >= ? AND path < ? AND instr(title_folded, ?) > 0"
                " ORDER BY title_folded, id LIMIT ?",
                (low, high, title.casefold(), max(limit, 0)),
            ).fetchall()
            return True, rows

        return decide_found(self._epoch, self._run(unit, write=False), workspace, title, limit)

    def get(self, note_id: str) -> Note | None:
        def unit(conn: sqlite3.Connection) -> tuple[bool, NoteRow | None]:
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

        def unit(conn: sqlite3.Connection) -> tuple[bool, NoteRow | None]:
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
        # A pending claim stays until it is settled (recovery), expired or not.
        conn.execute(
            "DELETE FROM claims WHERE expires_at <= ? AND attempt IS NULL", (self._clock(),)
        )
        inserted = conn.execute(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)"
            " ON CONFLICT (principal, nonce) DO NOTHING",
            (principal, nonce, expires_at),
        ).rowcount
        if inserted != 1:
            return Claim.USED
        # Only live claims count: an expired one never refuses anybody. The settled ones went
        # above; an expired pending one (not yet resolved, whatever its holder) stays until
        # it is settled, and is subtracted, read from the small index of pending claims (a
        # whole-table count is far cheaper than a range over every live claim).
        now = self._clock()
        owned, total = conn.execute(
            "SELECT (SELECT count(*) FROM claims WHERE principal = ?)"
            " - (SELECT count(*) FROM claims INDEXED BY claims_pending"
            "    WHERE principal = ? AND attempt IS NOT NULL AND expires_at <= ?),"
            " (SELECT count(*) FROM claims)"
            " - (SELECT count(*) FROM claims INDEXED BY claims_pending"
            "    WHERE attempt IS NOT NULL AND expires_at <= ?)",
            (principal, principal, now, now),
        ).fetchone()
        # Counted with the new row, hence ">": the same limits as MemoryReplayStore's ">=".
        if total > self.capacity or owned > self.per_principal:
            return Claim.FULL
        return Claim.CLAIMED

    # -- the two-step protocol (labkit.stores) --------------------------------------------------

    def claim_pending(self, ticket: Ticket) -> Claim | Ticket:
        key = principal, nonce = ticket.principal, ticket.nonce

        def unit(conn: sqlite3.Connection) -> tuple[bool, Claim | Ticket]:
            row = conn.execute(
                f"SELECT {PENDING_COLUMNS} FROM claims"
                " WHERE principal = ? AND nonce = ? AND attempt IS NOT NULL",
                (principal, nonce),
            ).fetchone()
            if row is not None:
                return False, pending_ticket(row)
            claim = self._claim_in(conn, principal, nonce, ticket.expires_at)
            if claim is Claim.CLAIMED:
                conn.execute(
                    "UPDATE claims SET note_id = ?, attempt = ?, holder = ?, lease_until = ?"
                    " WHERE principal = ? AND nonce = ?",
                    (ticket.note_id, ticket.attempt, ticket.holder, ticket.lease_until, *key),
                )
            return claim is not Claim.FULL, claim

        return self._run(unit, write=True)

    def settle(self, ticket: Ticket, deleted: bool) -> bool:
        # Completed, a claim keeps naming its note (operators can match deletions to nonces,
        # and a request that waited on it learns which note went).
        verb = (
            "UPDATE claims SET attempt = NULL, holder = NULL, lease_until = NULL"
            if deleted
            else "DELETE FROM claims"
        )
        statement = f"{verb} WHERE principal = ? AND nonce = ? AND attempt = ?"

        def unit(conn: sqlite3.Connection) -> tuple[bool, bool]:
            changed = conn.execute(statement, (ticket.principal, ticket.nonce, ticket.attempt))
            return True, changed.rowcount == 1

        return self._run(unit, write=True)

    def pending_claims(self) -> list[Ticket]:
        def unit(conn: sqlite3.Connection) -> tuple[bool, list[Ticket]]:
            query = f"SELECT {PENDING_COLUMNS} FROM claims WHERE attempt IS NOT NULL"
            return True, [pending_ticket(row) for row in conn.execute(query)]

        return self._run(unit, write=False)

    def claim_state(self, principal: str, nonce: str) -> ClaimState:
        def unit(conn: sqlite3.Connection) -> tuple[bool, ClaimState]:
            row = conn.execute(
                f"SELECT {PENDING_COLUMNS} FROM claims WHERE principal = ? AND nonce = ?",
                (principal, nonce),
            ).fetchone()
            if row is None:
                return True, None
            if row[4] is not None:
                return True, pending_ticket(row)
            return True, Completed(row[3]) if row[2] > self._clock() else None

        return self._run(unit, write=False)

    def delete_for(self, note: Note, ticket: Ticket) -> bool | None:
        generation = generation_of(self._epoch, note.identity)
        if generation is None:
            return False

        def unit(conn: sqlite3.Connection) -> tuple[bool, bool | None]:
            conn.execute(
                "DELETE FROM receipts WHERE expires_at <= ?",
                (self._clock() - RECEIPT_GRACE_SECONDS,),
            )
            seen = conn.execute(
                "SELECT 1 FROM receipts WHERE principal = ? AND nonce = ?"
                " AND (attempt = ? OR deleted = 1)",
                (ticket.principal, ticket.nonce, ticket.attempt),
            ).fetchone()
            if seen is not None:
                return True, None
            deleted = conn.execute(
                "DELETE FROM notes WHERE id = ? AND generation = ? AND path = ? AND title = ?",
                (note.id, generation, path_text(note.path), note.title),
            ).rowcount
            if deleted != 1:
                return False, False
            conn.execute(
                "INSERT INTO receipts VALUES (?, ?, ?, 1, ?)",
                (ticket.principal, ticket.nonce, ticket.attempt, ticket.expires_at),
            )
            return True, True

        return self._run(unit, write=True)

    def fence(self, ticket: Ticket) -> bool:
        key = (ticket.principal, ticket.nonce, ticket.attempt)

        def unit(conn: sqlite3.Connection) -> tuple[bool, bool]:
            conn.execute(
                "INSERT INTO receipts VALUES (?, ?, ?, 0, ?) ON CONFLICT DO NOTHING",
                (*key, ticket.expires_at),
            )
            row = conn.execute(
                "SELECT max(deleted) FROM receipts WHERE principal = ? AND nonce = ?", key[:2]
            ).fetchone()
            return True, bool(row[0])

        return self._run(unit, write=True)

    # -- AtomicDeleter -------------------------------------------------------------------------

    def shares_database(self, other: object) -> bool:
        return other is self or (isinstance(other, SqliteStore) and other._file_id == self._file_id)

    def claim_and_delete(
        self, replay: ReplayStore, confirmation: Confirmation, holder: ClaimHolder = HOLDER
    ) -> tuple[Deletion, Note | None]:
        """Claim the nonce and delete the note in one `BEGIN IMMEDIATE` transaction when
        `replay` is this database; otherwise claim first, then delete (`claim_then_delete`)."""
        if not isinstance(replay, SqliteStore) or not self.shares_database(replay):
            return claim_then_delete(self, replay, confirmation, holder)
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
