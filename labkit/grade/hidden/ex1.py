"""Hidden checks for ex1, `claim_and_delete(conn, principal, nonce, note_id, expires_at) -> bool`.

The replay store is SQLite with the course's tables (`labkit.course.exercises.fixtures`):
`claims(principal, nonce, expires_at)` keyed by (principal, nonce) and `notes(id, uri, title)`.
The connection is in autocommit mode (`isolation_level=None`), so the function owns its
transaction. The public checks run one process; these race eight.
Imports nothing from labkit (the kernel runs this source from a string).
"""

import os
import sqlite3
import tempfile
from typing import Any

RACERS = 8
ROUNDS = 10
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


def _race(claim_and_delete: Any, path: Any, nonce: Any, note_id: Any) -> Any:
    """RACERS processes call at once; returns each one's result: True, False or an error."""
    start_r, start_w = os.pipe()
    done_r, done_w = os.pipe()
    children = []
    for _ in range(RACERS):
        pid = os.fork()
        if pid == 0:  # the child: wait for the start, claim, report one line, leave
            code = 0
            try:
                os.close(start_w)
                conn = _connect(path)
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
    os.write(start_w, b"x" * RACERS)  # every child wakes on one byte
    results = []
    with os.fdopen(done_r, "rb") as lines:
        os.close(done_w)
        results = [line.decode().strip() for line in lines]
    for pid in children:
        os.waitpid(pid, 0)
    os.close(start_r)
    os.close(start_w)
    return results


def racing_claims(claim_and_delete: Any) -> Any:
    path, conn = _database()
    for number in range(ROUNDS):
        note_id = f"note-{number}"
        conn.execute(
            "INSERT INTO notes VALUES (?, ?, ?)", (note_id, _uri(note_id), f"report {number}")
        )
        results = _race(claim_and_delete, path, f"nonce-{number}", note_id)
        errors = [r[1:] for r in results if r.startswith("E")]
        if any(e.startswith("NotImplementedError") for e in errors):
            raise NotImplementedError
        assert not errors, (
            f"expected no errors from {RACERS} processes claiming the same nonce at once, got "
            f"{errors[0]!r} (claim with BEGIN IMMEDIATE; 'database is locked' is retryable)"
        )
        winners = results.count("T")
        assert winners == 1, (
            f"expected exactly one winner among {RACERS} racing processes, got {winners} "
            f"in round {number + 1} of {ROUNDS}"
        )
        assert not _note_exists(conn, note_id), (
            f"expected the note deleted by the winner, got it still there in round {number + 1}"
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
    _, conn = _database()
    conn.execute("INSERT INTO notes VALUES ('a', ?, 'A')", (_uri("a"),))
    claim_and_delete(conn, "alice", "n-1", "a", EXPIRES)
    assert not conn.in_transaction, (
        "expected no open transaction after a successful claim, got one left open (COMMIT)"
    )
    claim_and_delete(conn, "alice", "n-1", "a", EXPIRES)
    assert not conn.in_transaction, (
        "expected no open transaction after a refused replay, got one left open (ROLLBACK)"
    )


CHECKS = (
    (racing_claims, 3, f"exactly one winner among {RACERS} racing processes"),
    (nonces_per_principal, 1, "nonces are per principal; a replay keeps the note"),
    (transaction_closed, 1, "the transaction is closed on every path"),
)
