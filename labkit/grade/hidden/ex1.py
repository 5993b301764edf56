"""Hidden checks for ex1, `claim_and_delete(conn, principal, nonce, note_id, expires_at) -> bool`.

The replay store is SQLite with the course's tables (`labkit.course.exercises.fixtures`):
`claims(principal, nonce, expires_at)` keyed by (principal, nonce) and `notes(id, uri, title)`.
The connection is in autocommit mode (`isolation_level=None`), so the function owns its
transaction. The public checks race two processes; these race six, each for a note of its
own and all with the same nonce, so an answer that decides outside one transaction shows as
more than one winner and more than one note gone (racers on one note would hide it: the
second DELETE finds nothing). Each racer's statements are slowed a little, as under load, so
they overlap. After every call, another connection must get the write lock at once: an open
transaction or a held lock is caught even when the answer returns the right value.
Imports nothing from labkit (the kernel runs this source from a string).
"""

import os
import sqlite3
import tempfile
import time
from typing import Any

RACERS = 6
ROUNDS = 2
STATEMENT_DELAY = 0.01  # seconds before each SQL statement of a racer
EXPIRES = 4_102_444_800.0  # 2100-01-01: never expired during a check


def _database() -> Any:
    path = os.path.join(tempfile.mkdtemp(prefix="ex1-", dir="."), "replay.db")
    conn = _connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE claims (principal TEXT NOT NULL, nonce TEXT NOT NULL, "
        "expires_at REAL NOT NULL, PRIMARY KEY (principal, nonce))"
    )
    conn.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, uri TEXT, title TEXT)")
    return path, conn


def _connect(path: Any) -> Any:
    conn = sqlite3.connect(path, isolation_level=None, timeout=10.0)
    conn.execute("PRAGMA busy_timeout = 10000")
    return conn


def _uri(note_id: Any) -> Any:
    return f"file:///work/notes/{note_id}.md"


def _note_exists(conn: Any, note_id: Any) -> Any:
    return conn.execute("SELECT 1 FROM notes WHERE id = ?", (note_id,)).fetchone() is not None


def _lock_free(path: Any) -> Any:
    """Whether another connection gets the write lock at once (no transaction left open)."""
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


def _race(claim_and_delete: Any, path: Any, nonce: Any, note_ids: Any) -> Any:
    """One process per note calls at once; returns each one's result: True, False or an
    error."""
    start_r, start_w = os.pipe()
    done_r, done_w = os.pipe()
    children = []
    for note_id in note_ids:
        pid = os.fork()
        if pid == 0:  # the child: wait for the start, claim, report one line, leave
            code = 0
            try:
                os.close(start_w)
                conn = _connect(path)
                conn.set_trace_callback(lambda _statement: time.sleep(STATEMENT_DELAY))
                os.read(start_r, 1)
                try:
                    won = claim_and_delete(conn, "alice", nonce, note_id, EXPIRES)
                    line = "T" if won is True else ("F" if won is False else f"R{won!r}")
                except BaseException as error:
                    line = f"E{type(error).__name__}: {error}"
                os.write(done_w, (line.replace("\n", " ")[:200] + "\n").encode())
            except BaseException:
                code = 1
            os._exit(code)
        children.append(pid)
    os.write(start_w, b"x" * len(note_ids))  # every child wakes on one byte
    results = []
    with os.fdopen(done_r, "rb") as lines:
        os.close(done_w)
        results = [line.decode().strip() for line in lines]
    for pid in children:
        os.waitpid(pid, 0)
    os.close(start_r)
    os.close(start_w)
    return results


def _racing_error(error: Any) -> Any:
    if "locked" in error:
        return "start the transaction with BEGIN IMMEDIATE, so a rival waits for the write lock"
    return "a rival's claim is an expected case: return False for it"


def racing_claims(claim_and_delete: Any) -> Any:
    path, conn = _database()
    for number in range(ROUNDS):
        note_ids = [f"note-{number}-{racer}" for racer in range(RACERS)]
        conn.executemany(
            "INSERT INTO notes VALUES (?, ?, ?)", [(n, _uri(n), f"report {n}") for n in note_ids]
        )
        results = _race(claim_and_delete, path, f"nonce-{number}", note_ids)
        errors = [r[1:] for r in results if r.startswith("E")]
        if any(e.startswith("NotImplementedError") for e in errors):
            raise NotImplementedError
        assert not errors, (
            f"expected no errors from {RACERS} processes claiming the same nonce at once, got "
            f"{errors[0]!r} ({_racing_error(errors[0])})"
        )
        winners = results.count("T")
        gone = [n for n in note_ids if not _note_exists(conn, n)]
        assert winners == 1 and len(gone) == 1, (
            f"expected exactly one winner and one note deleted among {RACERS} racing processes "
            f"(one note each, the same nonce), got {winners} winner(s) and {len(gone)} note(s) "
            f"deleted in round {number + 1} of {ROUNDS} (decide whether the nonce is new inside "
            "the one transaction that deletes, after BEGIN IMMEDIATE)"
        )


def nonces_per_principal(claim_and_delete: Any) -> Any:
    _, conn = _database()
    conn.executemany(
        "INSERT INTO notes VALUES (?, ?, ?)", [(n, _uri(n), n.upper()) for n in ("a", "b", "c")]
    )
    first = claim_and_delete(conn, "alice", "n-1", "a", EXPIRES)
    assert first is True, f"expected True for alice's first use of nonce 'n-1', got {first!r}"
    other = claim_and_delete(conn, "bob", "n-1", "b", EXPIRES)
    assert other is True, (
        f"expected True when bob uses the nonce 'n-1' that alice used (claims are keyed by "
        f"principal and nonce), got {other!r}"
    )
    again = claim_and_delete(conn, "alice", "n-1", "c", EXPIRES)
    assert again is False, f"expected False when alice replays 'n-1', got {again!r}"
    assert _note_exists(conn, "c"), "expected a replay to leave the note alone, got it deleted"


def transaction_closed(claim_and_delete: Any) -> Any:
    path, conn = _database()
    conn.execute("INSERT INTO notes VALUES ('a', ?, 'A')", (_uri("a"),))
    for what, nonce, note_id, end in (
        ("a successful claim", "n-1", "a", "COMMIT"),
        ("a refused replay", "n-1", "a", "ROLLBACK"),
        ("a claim for a missing note", "n-2", "missing", "ROLLBACK"),
    ):
        claim_and_delete(conn, "alice", nonce, note_id, EXPIRES)
        assert not conn.in_transaction, (
            f"expected no open transaction after {what}, got one left open ({end})"
        )
        assert _lock_free(path), (
            f"expected another connection to get the write lock after {what}, got "
            f"'database is locked' ({end} on every path)"
        )


CHECKS = (
    (racing_claims, 3, f"one winner and one note deleted among {RACERS} racing processes"),
    (nonces_per_principal, 1, "nonces are per principal; a replay keeps the note"),
    (transaction_closed, 1, "the transaction is closed and the write lock free on every path"),
)
