"""Hidden checks for ex1, `claim_and_delete(conn, principal, nonce, note_id, expires_at) -> bool`.

Owns: the grading-only checks of exercise 1 (`CHECKS`). The replay store is SQLite with the
course's tables (`labkit.course.exercises.fixtures`): `claims(principal, nonce, expires_at)`
keyed by (principal, nonce) and `notes(id, uri, title)`. The connection is in autocommit mode,
so the function owns its transaction.

The public race (`labkit.course.exercises.ex1_replay`) runs two racers; this one runs six,
each for a note of its own and all with the same nonce, in two rounds, so an answer that
decides outside one transaction shows as more than one winner and more than one note gone
(racers on one note would hide it: the second DELETE finds nothing). The race is
`Trial.race`: each racer has its own process and connection, its statements slowed a little
as under load so they overlap. After every call another connection must get the write lock at
once: an open transaction or a held lock is caught even when the answer returns the right
value, and a DELETE the database refuses with an error (a trigger) must leave the nonce unused.
Learner code is called only through the `Trial`, with a `SqliteConnection` marker.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from labkit.course.exercises.calls import SqliteConnection
from labkit.course.exercises.fixtures import add_notes, connect, create_ex1_schema, note_ids
from labkit.course.exercises.trial import (
    Check,
    Fail,
    Outcome,
    Raised,
    Returned,
    Trial,
    stub_message,
)

CONTRACT = "claim_and_delete"
RACERS = 6
ROUNDS = 2
# Seconds before each SQL statement of a racer: enough for six racers' statements to overlap,
# short enough that six serialized transactions stay well inside the lock timeout.
STATEMENT_DELAY = 0.02
EXPIRES = 4_102_444_800.0  # 2100-01-01: never expired during a check
OPEN_NEXT = "end every path through your function with COMMIT or ROLLBACK"
RACE_NEXT = (
    "decide whether the nonce is new inside the one transaction that deletes, after BEGIN "
    "IMMEDIATE, so each rival waits and then finds the nonce taken"
)


def _uri(note_id: str) -> str:
    return f"file:///work/notes/{note_id}.md"


def _world(t: Trial, name: str, notes: tuple[str, ...]) -> Path:
    path = t.tempdir() / f"{name}.sqlite3"
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
    with closing(connect(path)) as conn:
        create_ex1_schema(conn)
        add_notes(conn, [(n, _uri(n), f"report {n}") for n in notes])
    path.chmod(0o666)  # the learner's side may run as another user
    return path


def _notes(t: Trial, path: Path) -> frozenset[str]:
    with closing(sqlite3.connect(path, timeout=t.settings.lock_timeout)) as conn:
        return frozenset(note_ids(conn))


def _lock_free(path: Path) -> bool:
    """Whether another connection gets the write lock at once (no transaction left open)."""
    with closing(sqlite3.connect(path, isolation_level=None, timeout=0)) as other:
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False


def _racing_error(summary: str) -> str:
    if "locked" in summary:
        return "start the transaction with BEGIN IMMEDIATE, so a rival waits for the write lock"
    return (
        "a rival that finds the nonce taken is an expected case: the loser waits for the lock "
        "(BEGIN IMMEDIATE) and returns False, it does not raise"
    )


def racing_claims(t: Trial) -> Fail | None:
    for number in range(ROUNDS):
        notes = tuple(f"note-{number}-{racer}" for racer in range(RACERS))
        name = f"race-{number}"
        path = _world(t, name, notes)

        def reset(name: str = name, notes: tuple[str, ...] = notes) -> None:
            _world(t, name, notes)

        calls = [("alice", f"nonce-{number}", note, EXPIRES) for note in notes]
        outcome = t.race(CONTRACT, path, calls, reset, delay=STATEMENT_DELAY)
        racers = outcome.racers
        expected = (
            f"{RACERS} racers, each with its own connection and a note of its own, claiming "
            "the same nonce at once should give exactly one True and delete exactly one note "
            f"(round {number + 1} of {ROUNDS})"
        )
        if any(r.kind == "stub" for r in racers):
            t.stop(Outcome.NOT_ATTEMPTED, stub_message(CONTRACT))
        stuck = [r for r in racers if r.kind in ("timeout", "crashed", "no_start", "unportable")]
        if stuck:
            return Fail(
                expected,
                f"a racer {stuck[0].said} (the check waits at most {t.settings.race_timeout:g} s)",
                "make sure every path ends its transaction, so the others' wait can end",
                outcome=Outcome.ERROR,
            )
        raised = [r for r in racers if r.kind == "raised"]
        if raised:
            return Fail(
                expected,
                f"{len(raised)} of them raised an exception, the first {raised[0].exception}",
                _racing_error(raised[0].exception),
                outcome=Outcome.ERROR,
            )
        wins = sum(r.value_is_true for r in racers)
        gone = len(set(notes) - _notes(t, path))
        if wins != 1 or gone != 1:
            return Fail(expected, f"{wins} returned True and {gone} notes were deleted", RACE_NEXT)
        if any(r.in_transaction for r in racers):
            return Fail(expected, "a racer left its transaction open", OPEN_NEXT)
        if any(not (r.value_is_true or r.value_is_false) for r in racers):
            odd = next(r for r in racers if not (r.value_is_true or r.value_is_false))
            return Fail(expected, f"a racer {odd.said}", "return True or False, nothing else")
    return None


def nonces_per_principal(t: Trial) -> Fail | None:
    path = _world(t, "principals", ("a", "b", "c"))
    conn = SqliteConnection(str(path), lock_timeout=t.settings.lock_timeout)
    steps = (
        ("alice", "a", True, "alice's first use of nonce 'n-1' should return True", ""),
        (
            "bob",
            "b",
            True,
            "bob using the nonce 'n-1' that alice used should return True (claims are keyed "
            "by principal and nonce)",
            "look the claim up by principal and nonce together: another principal's nonce is "
            "not a replay",
        ),
        (
            "alice",
            "c",
            False,
            "alice replaying 'n-1' should return False and keep note c",
            "refuse a (principal, nonce) pair that is already recorded, and undo anything done "
            "before that",
        ),
    )
    for principal, note, want, expected, next_step in steps:
        result = t.call(CONTRACT, conn, principal, "n-1", note, EXPIRES)
        if t.in_transaction(conn.key):
            return Fail(
                expected, f"it returned {result!r} with its transaction still open", OPEN_NEXT
            )
        if result is not want:
            return Fail(expected, f"it returned {result!r}", next_step or "return True or False")
    if "c" not in _notes(t, path):
        return Fail(
            "a replay should leave its note alone",
            "note c is gone after alice's replay",
            "undo the delete when the claim turns out to be a replay (ROLLBACK)",
        )
    return None


HELD = (
    "CREATE TRIGGER held BEFORE DELETE ON notes WHEN OLD.id = 'held' "
    "BEGIN SELECT RAISE(ABORT, 'note held for an audit'); END"
)


def _claimed(t: Trial, path: Path, nonce: str) -> bool:
    with closing(sqlite3.connect(path, timeout=t.settings.lock_timeout)) as conn:
        row = conn.execute(
            "SELECT 1 FROM claims WHERE principal = 'alice' AND nonce = ?", (nonce,)
        ).fetchone()
        return row is not None


def transaction_closed(t: Trial) -> Fail | None:
    path = _world(t, "closed", ("a", "held"))
    with closing(connect(path)) as setup:
        setup.execute(HELD)  # the database refuses to delete 'held' with an error
    conn = SqliteConnection(str(path), lock_timeout=t.settings.lock_timeout)
    for what, nonce, note, end in (
        ("a successful claim", "n-1", "a", "COMMIT"),
        ("a refused replay", "n-1", "a", "ROLLBACK"),
        ("a claim for a missing note", "n-2", "missing", "ROLLBACK"),
    ):
        result = t.call(CONTRACT, conn, "alice", nonce, note, EXPIRES)
        expected = (
            f"after {what} the transaction should be closed and another connection should get "
            "the write lock at once"
        )
        if t.in_transaction(conn.key):
            return Fail(
                expected,
                f"it returned {result!r} with its transaction still open",
                f"end this path with {end}",
            )
        if not _lock_free(path):
            return Fail(
                expected,
                f"it returned {result!r} and another connection got 'database is locked'",
                f"end this path with {end}, and leave no statement holding the lock",
            )
    return _failing_delete(t, path, conn)


def _failing_delete(t: Trial, path: Path, conn: SqliteConnection) -> Fail | None:
    outcome = t.attempt(CONTRACT, conn, "alice", "n-3", "held", EXPIRES)
    said = (
        f"it raised {outcome.summary}"
        if isinstance(outcome, Raised)
        else f"it returned {outcome.value!r}"
    )
    expected = (
        "when the database refuses the DELETE with an error, nothing should change: the nonce "
        "'n-3' unused, the transaction closed and the write lock free (the error may reach "
        "the caller)"
    )
    if t.in_transaction(conn.key) or not _lock_free(path):
        return Fail(
            expected,
            f"{said} with its transaction still open",
            "an exception is a way out too: ROLLBACK on it before it leaves your function",
        )
    if isinstance(outcome, Returned) and outcome.value is True:
        return Fail(expected, said, "return True only once the claim and the delete committed")
    if _claimed(t, path, "n-3"):
        return Fail(
            expected,
            f"{said} and ('alice', 'n-3') is recorded in claims, so the user's retry would be "
            "refused",
            "claim and delete in one transaction, so an error in the delete undoes the claim "
            "(ROLLBACK)",
        )
    return None


CHECKS: tuple[Check, ...] = (
    Check(
        "six racing processes",
        racing_claims,
        f"{RACERS} processes racing with one nonce, a note each, should give exactly one True "
        "and delete exactly one note",
        points=3,
        hidden=True,
    ),
    Check(
        "nonces per principal",
        nonces_per_principal,
        "nonces should be per principal, and a replay should keep the note",
        hidden=True,
        on_error="a replayed nonce is an expected case, not an error: return False instead of "
        "letting the exception escape, and undo anything you started",
    ),
    Check(
        "transaction closed on every path",
        transaction_closed,
        "the transaction should be closed and the write lock free on every path",
        hidden=True,
        on_error="a replay or a missing note is an expected case, not an error: return False "
        "instead of letting the exception escape, after ROLLBACK",
    ),
)
