"""PostgreSQL note and replay store (psycopg 3): for several server processes or hosts.

Owns: the schema inside one PostgreSQL schema (namespace), a connection per thread, and the
one-transaction claim-and-delete used when the notes and the nonces live in the same schema,
and this schema's side of the two-step protocol (pending claims, receipts) when they do not.
A server that is down, unreachable or out of disk is `StoreUnavailable`.
Must not import the server or a transport.

The exactly-once unit is the pattern measured in docs/security.md (16 processes x 100 rounds, one
winner per round, no errors): in one transaction, `INSERT ... ON CONFLICT (principal, nonce)
... RETURNING` (no row back means "already used"), then `DELETE ... RETURNING` of the note. A
concurrent claimer of the same nonce waits on the unique index until the winner commits or
rolls back, so a rolled-back winner never burns the nonce.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

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
    DEFAULT_SCHEMA,
    NOTE_COLUMNS,
    PENDING_COLUMNS,
    SCHEMA_PATTERN,
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

log = logging.getLogger("labkit.stores.postgres")

CONNECT_TIMEOUT_SECONDS: Final = 10
MAX_ATTEMPTS: Final = 20
GC_BATCH: Final = 100
_SCHEMA_NAME = re.compile(SCHEMA_PATTERN)

# Every identifier below is the validated schema name, quoted by psycopg.sql.
# COLLATE "C": code point order, the order Python sorts `find` results in and the order the
# `below()` range of a workspace relies on.
_DDL: Final = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    "CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE SEQUENCE IF NOT EXISTS {s}.note_generation",
    'CREATE TABLE IF NOT EXISTS {s}.notes (id text COLLATE "C" PRIMARY KEY,'
    ' path text COLLATE "C" NOT NULL, title text NOT NULL,'
    ' title_folded text COLLATE "C" NOT NULL, generation bigint NOT NULL)',
    "CREATE INDEX IF NOT EXISTS notes_path ON {s}.notes (path)",
    "CREATE TABLE IF NOT EXISTS {s}.claims (principal text NOT NULL, nonce text NOT NULL,"
    " expires_at double precision NOT NULL, PRIMARY KEY (principal, nonce))",
    "CREATE INDEX IF NOT EXISTS claims_expiry ON {s}.claims (expires_at)",
    "CREATE TABLE IF NOT EXISTS {s}.receipts (principal text NOT NULL, nonce text NOT NULL,"
    " attempt text NOT NULL, deleted boolean NOT NULL, expires_at double precision NOT NULL,"
    " PRIMARY KEY (principal, nonce, attempt))",
)
# The two-step protocol (labkit.stores): a pending claim names its note, its attempt, the
# instance holding it and its lease. Run only when a column is missing (ALTER TABLE locks the
# table even when there is nothing to add).
_MIGRATE: Final = (
    "ALTER TABLE {s}.claims ADD COLUMN IF NOT EXISTS note_id text",
    "ALTER TABLE {s}.claims ADD COLUMN IF NOT EXISTS attempt text",
    "ALTER TABLE {s}.claims ADD COLUMN IF NOT EXISTS holder text",
    "ALTER TABLE {s}.claims ADD COLUMN IF NOT EXISTS lease_until double precision",
    "CREATE INDEX IF NOT EXISTS claims_pending ON {s}.claims (principal, nonce)"
    " WHERE attempt IS NOT NULL",
)
RECEIPT_GRACE_SECONDS: Final = 7 * 86_400

_QUERIES: Final = {
    "lock": "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
    "epoch_init": "INSERT INTO {s}.meta VALUES ('epoch', %s) ON CONFLICT DO NOTHING",
    "epoch": "SELECT value FROM {s}.meta WHERE key = 'epoch'",
    "find": f"SELECT {NOTE_COLUMNS} FROM {{s}}.notes"
    " WHERE path >= %s AND path < %s AND strpos(title_folded, %s) > 0"
    " ORDER BY title_folded, id LIMIT %s",
    "get": f"SELECT {NOTE_COLUMNS} FROM {{s}}.notes WHERE id = %s",
    "delete": "DELETE FROM {s}.notes"
    " WHERE id = %s AND generation = %s AND path = %s AND title = %s RETURNING id",
    "upsert_note": "INSERT INTO {s}.notes (id, path, title, title_folded, generation)"
    " VALUES (%s, %s, %s, %s, nextval('{s}.note_generation'))"
    " ON CONFLICT (id) DO UPDATE SET path = EXCLUDED.path, title = EXCLUDED.title,"
    " title_folded = EXCLUDED.title_folded, generation = EXCLUDED.generation"
    f" RETURNING {NOTE_COLUMNS}",
    "move": f"UPDATE {{s}}.notes SET path = %s WHERE id = %s RETURNING {NOTE_COLUMNS}",
    "ids": "SELECT id FROM {s}.notes",
    "take_note": f"DELETE FROM {{s}}.notes WHERE id = %s RETURNING {NOTE_COLUMNS}",
    # DO NOTHING, except that an expired settled claim counts as absent: it is taken over in
    # place, so its nonce is claimable again exactly as in MemoryReplayStore (which prunes
    # first). A pending one is left to its resolution.
    "claim": "INSERT INTO {s}.claims AS c (principal, nonce, expires_at) VALUES (%s, %s, %s)"
    " ON CONFLICT (principal, nonce) DO UPDATE SET expires_at = EXCLUDED.expires_at,"
    " note_id = NULL WHERE c.expires_at <= %s AND c.attempt IS NULL RETURNING 1",
    "count": "SELECT (SELECT count(*) FROM {s}.claims WHERE principal = %s AND expires_at > %s),"
    " (SELECT count(*) FROM {s}.claims WHERE expires_at > %s)",
    "release": "DELETE FROM {s}.claims WHERE principal = %s AND nonce = %s",
    "live": "SELECT count(*) FROM {s}.claims WHERE expires_at > %s",
    "used": "SELECT 1 FROM {s}.claims WHERE principal = %s AND nonce = %s AND expires_at > %s",
    # SKIP LOCKED: collecting garbage never waits, so it can never join a lock cycle.
    "gc": "DELETE FROM {s}.claims WHERE (principal, nonce) IN (SELECT principal, nonce"
    " FROM {s}.claims WHERE expires_at <= %s AND attempt IS NULL"
    " LIMIT %s FOR UPDATE SKIP LOCKED)",
    "rows": "SELECT count(*) FROM {s}.claims",
    "pending_of": f"SELECT {PENDING_COLUMNS} FROM {{s}}.claims"
    " WHERE principal = %s AND nonce = %s AND attempt IS NOT NULL",
    "state_of": f"SELECT {PENDING_COLUMNS} FROM {{s}}.claims WHERE principal = %s AND nonce = %s",
    "mark_pending": "UPDATE {s}.claims SET note_id = %s, attempt = %s, holder = %s,"
    " lease_until = %s WHERE principal = %s AND nonce = %s",
    "complete": "UPDATE {s}.claims SET attempt = NULL, holder = NULL, lease_until = NULL"
    " WHERE principal = %s AND nonce = %s AND attempt = %s",
    "abandon": "DELETE FROM {s}.claims WHERE principal = %s AND nonce = %s AND attempt = %s",
    "pending": f"SELECT {PENDING_COLUMNS} FROM {{s}}.claims WHERE attempt IS NOT NULL",
    "receipts_gc": "DELETE FROM {s}.receipts WHERE expires_at <= %s",
    "receipt_seen": "SELECT 1 FROM {s}.receipts WHERE principal = %s AND nonce = %s"
    " AND (attempt = %s OR deleted)",
    "receipt": "INSERT INTO {s}.receipts VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
    "receipt_any": "SELECT bool_or(deleted) FROM {s}.receipts WHERE principal = %s AND nonce = %s",
}


_T = TypeVar("_T")
PgConnection = psycopg.Connection[tuple[Any, ...]]


def database_key(dsn: str, schema: str) -> tuple[tuple[tuple[str, str], ...], str]:
    """What names one store's data: the connection target and the schema (the password and
    other secrets do not tell databases apart)."""
    params = conninfo_to_dict(dsn)
    target = tuple(
        sorted((k, str(v)) for k, v in params.items() if k != "password" and v is not None)
    )
    return target, schema


class PostgresStore(ThreadConnections[PgConnection]):
    """A `NoteStore`, a `ReplayStore` and an `AtomicDeleter` inside one PostgreSQL schema.

    Claims are keyed by `(principal, nonce)`; expired ones no longer count and are collected in
    small batches. A transaction-scoped advisory lock per principal serialises one principal's
    claims, so the per-principal share is exact across processes and hosts. The global
    `capacity` is counted without that lock: claims of *different* principals racing at the
    very limit can pass it by at most the number of concurrent claim transactions.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        clock: Clock = system_clock,
        capacity: int = DEFAULT_CAPACITY,
        per_principal: int = DEFAULT_PER_PRINCIPAL,
        connect_timeout: int = CONNECT_TIMEOUT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(
                f"PostgreSQL schema name {schema!r}: use 1 to 63 lowercase letters, digits "
                "and underscores, not starting with a digit"
            )
        self.schema = schema
        self.capacity, self.per_principal = replay_bounds(capacity, per_principal)
        self.database = database_key(dsn, schema)
        self._dsn = dsn
        self._connect_timeout = connect_timeout
        self._clock = clock
        self._sleep = sleep  # injected, as in SqliteStore: tests watch retries without waiting
        name = sql.Identifier(schema)
        self._q = {k: sql.SQL(v).format(s=name).as_string(None) for k, v in _QUERIES.items()}
        self._ddl = [sql.SQL(v).format(s=name).as_string(None) for v in _DDL]
        self._migrate = [sql.SQL(v).format(s=name).as_string(None) for v in _MIGRATE]
        self._opened = False  # until then a failure is the opener's to report, not FAULTS'
        super().__init__()
        try:
            self._epoch = self._run(self._create_schema)
        except BaseException:
            self.close()
            raise
        self._opened = True

    # -- connections and the transaction runner ----------------------------------------------

    def _open(self) -> PgConnection:
        return psycopg.connect(
            self._dsn,
            autocommit=True,  # transactions are explicit: conn.transaction() per unit
            connect_timeout=self._connect_timeout,
            application_name="labkit",
        )

    def _usable(self, conn: PgConnection) -> bool:
        # psycopg reports a connection the server or the network dropped as closed.
        return not conn.closed

    def _run(self, unit: Unit[PgConnection, _T], *, write: bool = False) -> _T:
        """Run `unit` in one transaction; retry it whole on a serialization failure or a
        deadlock (the server rolled it back, so nothing happened). A broken connection is
        dropped and the error raised: after a lost COMMIT nobody knows whether it committed,
        and a retry could then misreport our own claim as "already used". A committed
        `write` ends a condition of this store (`FAULTS`)."""
        delay = 0.005
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                conn = self._connection()
            except psycopg.OperationalError as exc:
                raise self._failed(self._unavailable(exc)) from exc
            try:
                with conn.transaction():
                    commit, result = unit(conn)
                    if not commit:
                        raise psycopg.Rollback()
                if write and commit and self._opened:
                    FAULTS.wrote(repr(self))
                return result
            except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected) as exc:
                if attempt == MAX_ATTEMPTS:
                    # Every attempt was rolled back: nothing happened, the caller may retry.
                    busy = StoreBusy(
                        f"{self!r}: {MAX_ATTEMPTS} attempts met {type(exc).__name__}; "
                        "nothing was changed"
                    )
                    raise self._failed(busy) from exc
                log.info("transaction retried after %s", type(exc).__name__)
                self._sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 0.2)
            except psycopg.OperationalError as exc:
                if conn.broken or conn.closed:
                    self._forget(conn)
                # Down, unreachable, out of disk: transient. After a lost COMMIT a pending
                # claim (two-step protocol) records what may have happened.
                raise self._failed(self._unavailable(exc)) from exc
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _failed(self, exc: StoreError) -> StoreError:
        return FAULTS.record(repr(self), exc) if self._opened else exc

    def _unavailable(self, exc: psycopg.OperationalError) -> StoreUnavailable:
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        return StoreUnavailable(f"PostgreSQL {self.schema!r}: {reason}")

    def _create_schema(self, conn: PgConnection) -> tuple[bool, str]:
        # Concurrent CREATE ... IF NOT EXISTS can still collide in the catalog: queue them.
        conn.execute(self._q["lock"], (f"labkit-schema:{self.schema}",))
        for statement in self._ddl:
            conn.execute(statement)
        has_holder = conn.execute(
            "SELECT 1 FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = 'claims' AND column_name = 'holder'",
            (self.schema,),
        ).fetchone()
        if has_holder is None:
            for statement in self._migrate:
                conn.execute(statement)
        conn.execute(self._q["epoch_init"], (new_epoch(),))
        row = conn.execute(self._q["epoch"]).fetchone()
        assert row is not None
        return True, str(row[0])

    def drop_schema(self) -> None:
        """Drop the whole schema and everything in it (tests and benchmarks clean up)."""

        def unit(conn: PgConnection) -> tuple[bool, None]:
            statement = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(self.schema)
            )
            conn.execute(statement)
            return True, None

        self._run(unit)

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"

    # -- NoteStore -----------------------------------------------------------------------------

    def find(self, workspace: Path, title: str, limit: int) -> Sequence[Note]:
        low, high = below(workspace)

        def unit(conn: PgConnection) -> tuple[bool, list[NoteRow]]:
            params = (low, high, title.casefold(), max(limit, 0))
            return True, conn.execute(self._q["find"], params).fetchall()

        return decide_found(self._epoch, self._run(unit), workspace, title, limit)

    def get(self, note_id: str) -> Note | None:
        def unit(conn: PgConnection) -> tuple[bool, NoteRow | None]:
            return True, conn.execute(self._q["get"], (note_id,)).fetchone()

        row = self._run(unit)
        return None if row is None else note_from_row(self._epoch, row)

    def delete(self, note: Note) -> bool:
        generation = generation_of(self._epoch, note.identity)
        if generation is None:
            return False
        params = (note.id, generation, path_text(note.path), note.title)

        def unit(conn: PgConnection) -> tuple[bool, bool]:
            return True, conn.execute(self._q["delete"], params).fetchone() is not None

        return self._run(unit, write=True)

    def add(self, note_id: str, uri: str, title: str) -> Note:
        """Create or replace a note (a replaced note gets a new identity)."""
        return self.add_many([(note_id, uri, title)])[0]

    def add_many(self, notes: Iterable[tuple[str, str, str]]) -> list[Note]:
        """Import `(id, uri, title)` rows in one transaction; every URI is parsed first, so a
        bad one imports nothing."""
        rows = [
            (note_id, path_text(parse_file_uri(uri)), title, title.casefold())
            for note_id, uri, title in notes
        ]

        def unit(conn: PgConnection) -> tuple[bool, list[Note]]:
            with conn.cursor() as cur:
                cur.executemany(self._q["upsert_note"], rows, returning=True)
                added: list[Note] = []
                while True:
                    row = cur.fetchone()
                    assert row is not None
                    added.append(note_from_row(self._epoch, row))
                    if not cur.nextset():
                        break
            return True, added

        return self._run(unit, write=True) if rows else []

    def move(self, note_id: str, uri: str) -> Note:
        """Move a note to another path, keeping its identity (a rename on disk)."""
        text = path_text(parse_file_uri(uri))

        def unit(conn: PgConnection) -> tuple[bool, NoteRow | None]:
            return True, conn.execute(self._q["move"], (text, note_id)).fetchone()

        row = self._run(unit, write=True)
        if row is None:
            raise KeyError(note_id)
        return note_from_row(self._epoch, row)

    def ids(self) -> list[str]:
        def unit(conn: PgConnection) -> tuple[bool, list[str]]:
            return True, [str(r[0]) for r in conn.execute(self._q["ids"])]

        return sorted(self._run(unit))

    # -- ReplayStore ---------------------------------------------------------------------------

    def claim(self, principal: str, nonce: str, expires_at: float) -> Claim:
        def unit(conn: PgConnection) -> tuple[bool, Claim]:
            claim = self._claim_in(conn, principal, nonce, expires_at)
            if claim is Claim.CLAIMED:
                self._collect(conn)
            return claim is Claim.CLAIMED, claim

        return self._run(unit, write=True)

    def release(self, principal: str, nonce: str) -> None:
        def unit(conn: PgConnection) -> tuple[bool, None]:
            conn.execute(self._q["release"], (principal, nonce))
            return True, None

        self._run(unit, write=True)

    def used(self, principal: str, nonce: str) -> bool:
        def unit(conn: PgConnection) -> tuple[bool, bool]:
            row = conn.execute(self._q["used"], (principal, nonce, self._clock())).fetchone()
            return True, row is not None

        return self._run(unit)

    def live_claims(self) -> int:
        """How many claims have not expired (what counts against the capacity)."""

        def unit(conn: PgConnection) -> tuple[bool, int]:
            row = conn.execute(self._q["live"], (self._clock(),)).fetchone()
            assert row is not None
            return True, int(row[0])

        return self._run(unit)

    def stored_claims(self) -> int:
        """How many claim rows exist, expired ones included (shows the collector works)."""

        def unit(conn: PgConnection) -> tuple[bool, int]:
            row = conn.execute(self._q["rows"]).fetchone()
            assert row is not None
            return True, int(row[0])

        return self._run(unit)

    def _claim_in(self, conn: PgConnection, principal: str, nonce: str, expires_at: float) -> Claim:
        """The claim inside the caller's transaction; anything but CLAIMED is rolled back."""
        now = self._clock()
        conn.execute(self._q["lock"], (f"labkit-claims:{self.schema}:{principal}",))
        if conn.execute(self._q["claim"], (principal, nonce, expires_at, now)).fetchone() is None:
            return Claim.USED
        # A new statement, so a new snapshot taken after the advisory lock: it sees every
        # claim this principal committed before us.
        row = conn.execute(self._q["count"], (principal, now, now)).fetchone()
        assert row is not None
        owned, total = row
        # Counted with the new row, hence ">": the same limits as MemoryReplayStore's ">=".
        if total > self.capacity or owned > self.per_principal:
            return Claim.FULL
        return Claim.CLAIMED

    def _collect(self, conn: PgConnection) -> None:
        """Purge a batch of expired claims. Last in the transaction and never waiting."""
        conn.execute(self._q["gc"], (self._clock(), GC_BATCH))

    # -- the two-step protocol (labkit.stores) --------------------------------------------------

    def claim_pending(self, ticket: Ticket) -> Claim | Ticket:
        key = (ticket.principal, ticket.nonce)

        def unit(conn: PgConnection) -> tuple[bool, Claim | Ticket]:
            row = conn.execute(self._q["pending_of"], key).fetchone()
            if row is not None:
                return False, pending_ticket(row)
            claim = self._claim_in(conn, *key, ticket.expires_at)
            if claim is not Claim.CLAIMED:
                return False, claim
            marks = (ticket.note_id, ticket.attempt, ticket.holder, ticket.lease_until)
            conn.execute(self._q["mark_pending"], (*marks, *key))
            self._collect(conn)
            return True, claim

        return self._run(unit, write=True)

    def settle(self, ticket: Ticket, deleted: bool) -> bool:
        query = self._q["complete" if deleted else "abandon"]

        def unit(conn: PgConnection) -> tuple[bool, bool]:
            changed = conn.execute(query, (ticket.principal, ticket.nonce, ticket.attempt))
            return True, changed.rowcount == 1

        return self._run(unit, write=True)

    def pending_claims(self) -> list[Ticket]:
        def unit(conn: PgConnection) -> tuple[bool, list[Ticket]]:
            return True, [pending_ticket(row) for row in conn.execute(self._q["pending"])]

        return self._run(unit)

    def claim_state(self, principal: str, nonce: str) -> ClaimState:
        def unit(conn: PgConnection) -> tuple[bool, ClaimState]:
            row = conn.execute(self._q["state_of"], (principal, nonce)).fetchone()
            if row is None:
                return True, None
            if row[4] is not None:
                return True, pending_ticket(row)
            return True, Completed(row[3]) if row[2] > self._clock() else None

        return self._run(unit)

    def delete_for(self, note: Note, ticket: Ticket) -> bool | None:
        generation = generation_of(self._epoch, note.identity)
        if generation is None:
            return False
        key = (ticket.principal, ticket.nonce, ticket.attempt)

        def unit(conn: PgConnection) -> tuple[bool, bool | None]:
            conn.execute(self._q["receipts_gc"], (self._clock() - RECEIPT_GRACE_SECONDS,))
            if conn.execute(self._q["receipt_seen"], key).fetchone() is not None:
                return True, None
            params = (note.id, generation, path_text(note.path), note.title)
            if conn.execute(self._q["delete"], params).fetchone() is None:
                return False, False
            # A fence committed meanwhile wins: this insert then adds nothing, and the
            # deletion rolls back with it.
            added = conn.execute(
                self._q["receipt"] + " RETURNING 1", (*key, True, ticket.expires_at)
            )
            if added.fetchone() is None:
                return False, None
            return True, True

        return self._run(unit, write=True)

    def fence(self, ticket: Ticket) -> bool:
        key = (ticket.principal, ticket.nonce, ticket.attempt)

        def unit(conn: PgConnection) -> tuple[bool, bool]:
            conn.execute(self._q["receipt"], (*key, False, ticket.expires_at))
            row = conn.execute(self._q["receipt_any"], key[:2]).fetchone()
            assert row is not None
            return True, bool(row[0])

        return self._run(unit, write=True)

    # -- AtomicDeleter -------------------------------------------------------------------------

    def shares_database(self, other: object) -> bool:
        return other is self or (
            isinstance(other, PostgresStore) and other.database == self.database
        )

    def claim_and_delete(
        self, replay: ReplayStore, confirmation: Confirmation, holder: ClaimHolder = HOLDER
    ) -> tuple[Deletion, Note | None]:
        """Claim the nonce and delete the note in one transaction when `replay` is this schema
        of this database; otherwise claim first, then delete (`claim_then_delete`)."""
        if not isinstance(replay, PostgresStore) or not self.shares_database(replay):
            return claim_then_delete(self, replay, confirmation, holder)
        claims = replay  # same schema: its bounds and clock, this store's connection

        def unit(conn: PgConnection) -> tuple[bool, tuple[Deletion, Note | None]]:
            claim = claims._claim_in(
                conn, confirmation.principal, confirmation.nonce, confirmation.expires_at
            )
            if claim is not Claim.CLAIMED:
                return False, (Deletion.USED if claim is Claim.USED else Deletion.FULL, None)
            row = conn.execute(self._q["take_note"], (confirmation.note_id,)).fetchone()
            live = None if row is None else note_from_row(self._epoch, row)
            # Authorization, containment and identity, re-checked on the live row while it is
            # locked by our DELETE. A stale note rolls back the delete *and* the claim.
            if live is None or not confirmation.recheck(live):
                return False, (Deletion.STALE, live)
            claims._collect(conn)
            return True, (Deletion.DELETED, live)

        return self._run(unit, write=True)
