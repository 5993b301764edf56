"""Exercise 1, the SQLite replay store: public checks and hints for `claim_and_delete`.

Contract: `claim_and_delete(conn, principal, nonce, note_id, expires_at) -> bool` records the
(principal, nonce) claim and deletes the note in one transaction; True when both happened,
otherwise nothing changes and it returns False (docs/LESSON.md section 9,
docs/security.md "Exactly-once replay store").

Each check builds a fresh SQLite file in its own temporary folder, reads the result through a
separate connection, and never depends on another check. Must not import ipywidgets.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.course.exercises.calls import SqliteConnection
from labkit.course.exercises.fixtures import add_notes, claimed, create_ex1_schema, note_ids
from labkit.course.exercises.race import Racer
from labkit.course.exercises.trial import (
    Check,
    Contract,
    Exercise,
    Fail,
    Outcome,
    Pass,
    Raised,
    Returned,
    Rule,
    Safety,
    Trial,
    not_a_bool_next,
    sql_in_any_case,
    stub_message,
)

CONTRACT = "claim_and_delete"
PRINCIPAL = "alice"
EXPIRES_AT = 1_800_000_300.0

OPEN_TRANSACTION_NEXT = "end every path through your function with COMMIT or ROLLBACK"


@dataclass(frozen=True)
class _Seen:
    notes: frozenset[str]
    claims: frozenset[tuple[str, str]]


DB = "replay.sqlite3"


def build_world(
    notes: tuple[str, ...], claims: tuple[tuple[str, str], ...] = ()
) -> Callable[[sqlite3.Connection], None]:
    """What `Folder.place_db` runs to build exercise 1's tables with `notes` and `claims`."""

    def build(conn: sqlite3.Connection) -> None:
        create_ex1_schema(conn)
        add_notes(conn, [(n, f"file:///work/notes/{n}.md", f"TPS {n}") for n in notes])
        conn.executemany(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            [(principal, nonce, EXPIRES_AT) for principal, nonce in claims],
        )

    return build


def _world(
    t: Trial, notes: tuple[str, ...] = ("note-7", "note-8"), claims: tuple[str, ...] = ()
) -> Path:
    return t.folder().place_db(DB, build_world(notes, tuple((PRINCIPAL, c) for c in claims)))


def _learner_connection(t: Trial, path: Path, key: str = "conn") -> SqliteConnection:
    # A marker: the learner's side opens it (once per check, whatever the number of calls).
    return SqliteConnection(str(path), key=key, lock_timeout=t.settings.lock_timeout)


def _look(t: Trial, path: Path) -> _Seen:
    with t.folder().read_db(path.name) as conn:
        return _Seen(frozenset(note_ids(conn)), frozenset(claimed(conn)))


def _claim(
    t: Trial,
    conn: SqliteConnection,
    nonce: str,
    note_id: str,
    *,
    expected: str,
    wanted: bool,
    refuse_next: str,
    on_integrity_error: str | None = None,
    principal: str = PRINCIPAL,
) -> Any:
    """The learner's answer, or a `Fail` when it raised on purpose (`refuse_next`); any other
    exception ends the check as an error in the learner's code, whose next step is
    `on_integrity_error` for the IntegrityError the database raises for a taken nonce."""
    outcome = t.attempt(CONTRACT, conn, principal, nonce, note_id, EXPIRES_AT)
    if isinstance(outcome, Raised):
        crash_next = None
        if on_integrity_error and outcome.error.is_a("sqlite3.IntegrityError"):
            crash_next = on_integrity_error
        return t.raised_instead(outcome, expected, repr(wanted), refuse_next, crash_next)
    return outcome.value


REPLAY_REFUSE_NEXT = "a replay is answered with False, not an exception: ROLLBACK and return False"
REPLAY_CRASH_NEXT = (
    "a replay is an expected case, not an error: let the database report it without an "
    "exception (INSERT ... ON CONFLICT DO NOTHING, then cursor.rowcount), or catch exactly "
    "sqlite3.IntegrityError around that INSERT, ROLLBACK and return False"
)


def _left_open(expected: str, result: Any) -> Fail:
    return Fail(
        expected,
        f"it returned {result!r} with its transaction still open (BEGIN without COMMIT or "
        "ROLLBACK), so its changes are neither kept nor undone",
        OPEN_TRANSACTION_NEXT,
    )


def _returned_none_next(result: Any, otherwise: str) -> str:
    return not_a_bool_next(result) or otherwise


def fresh_claim(t: Trial) -> Fail | None:
    path = _world(t)
    conn = _learner_connection(t, path)
    expected = (
        "claiming the new nonce 'n-1' for note-7 should return True, delete note-7 and record "
        "('alice', 'n-1') in claims"
    )
    result = _claim(
        t,
        conn,
        "n-1",
        "note-7",
        expected=expected,
        wanted=True,
        refuse_next="the nonce is new and the note exists: nothing here calls for a refusal; "
        "make both changes, COMMIT and return True",
    )
    if isinstance(result, Fail):
        return result
    if t.in_transaction(conn.key):
        return _left_open(expected, result)
    seen = _look(t, path)
    problems = [
        (result is not True, f"it returned {result!r}", _returned_none_next(result, "")),
        (
            "note-7" in seen.notes,
            "note-7 is still there",
            "delete the note inside the transaction, before COMMIT",
        ),
        (
            (PRINCIPAL, "n-1") not in seen.claims and ("n-1", PRINCIPAL) in seen.claims,
            "the claim was recorded with its principal and nonce swapped",
            "insert the values in the columns' order: (principal, nonce, expires_at)",
        ),
        (
            (PRINCIPAL, "n-1") not in seen.claims and ("n-1", PRINCIPAL) not in seen.claims,
            "the nonce was not recorded in claims",
            "insert the (principal, nonce, expires_at) row into claims inside the transaction",
        ),
        (
            "note-8" not in seen.notes,
            "note-8 was deleted as well",
            "delete only the row whose id is note_id",
        ),
    ]
    return _first_failure(expected, problems, "return True once both changes are committed")


def replay_refused(t: Trial) -> Fail | None:
    # The refusal counts only with the acceptance it refuses to repeat: first claim n-1.
    path = _world(t)
    conn = _learner_connection(t, path)
    first = _claim(
        t,
        conn,
        "n-1",
        "note-7",
        expected="claiming the new nonce 'n-1' for note-7 should return True",
        wanted=True,
        refuse_next="the nonce is new and the note exists: make both changes, COMMIT and "
        "return True",
    )
    if isinstance(first, Fail):
        return first
    if first is not True or t.in_transaction(conn.key):
        return Fail(
            "claiming the new nonce 'n-1' for note-7 should return True with the transaction "
            "closed",
            f"it returned {first!r}" + (" with its transaction open" if first is True else ""),
            _returned_none_next(first, OPEN_TRANSACTION_NEXT if first is True else "")
            or "claim the nonce and delete the note, COMMIT, and return True",
        )
    expected = (
        "a second claim of nonce 'n-1' (already recorded) should return False and leave note-8 "
        "in place"
    )
    result = _claim(
        t,
        conn,
        "n-1",
        "note-8",
        expected=expected,
        wanted=False,
        refuse_next="return False for a replay (after ROLLBACK): the contract's refusal is the "
        "value False, not an exception",
        on_integrity_error=REPLAY_CRASH_NEXT,
    )
    if isinstance(result, Fail):
        return result
    if t.in_transaction(conn.key):
        return _left_open(expected, result)
    seen = _look(t, path)
    problems = [
        (result is not False, f"it returned {result!r}", _returned_none_next(result, "")),
        (
            "note-8" not in seen.notes,
            "note-8 is gone",
            "make the claim fail when the nonce is already recorded, and undo anything done "
            "before that",
        ),
    ]
    return _first_failure(
        expected, problems, "return False when the nonce is already recorded, changing nothing"
    )


def missing_note(t: Trial) -> Fail | None:
    path = _world(t)
    conn = _learner_connection(t, path)
    expected = (
        "a claim of nonce 'n-2' for note-404, which does not exist, should return False and "
        "leave 'n-2' unused"
    )
    result = _claim(
        t,
        conn,
        "n-2",
        "note-404",
        expected=expected,
        wanted=False,
        refuse_next="return False when the note is missing (after ROLLBACK, which also undoes "
        "the claim): the contract's refusal is the value False, not an exception",
    )
    if isinstance(result, Fail):
        return result
    if t.in_transaction(conn.key):
        return _left_open(expected, result)
    seen = _look(t, path)
    problems = [
        (result is not False, f"it returned {result!r}", _returned_none_next(result, "")),
        (
            (PRINCIPAL, "n-2") in seen.claims,
            "('alice', 'n-2') is now recorded in claims, so the user's retry with that nonce "
            "would be refused",
            "when the note is not there, undo the claim (ROLLBACK) before returning False",
        ),
        (
            seen.notes != {"note-7", "note-8"},
            f"the notes left are {sorted(seen.notes)}",
            "delete only the row whose id is note_id",
        ),
    ]
    failure = _first_failure(expected, problems, "return False when the note does not exist")
    if failure is not None:
        return failure
    expected = (
        "after a refused claim for a missing note, claiming 'n-2' again for note-7 (which "
        "exists) should return True and delete note-7"
    )
    again = _claim(
        t,
        conn,
        "n-2",
        "note-7",
        expected=expected,
        wanted=True,
        refuse_next="a refused claim must leave no trace: undo it completely (ROLLBACK), so "
        "the retry finds the nonce unused",
    )
    if isinstance(again, Fail):
        return again
    if t.in_transaction(conn.key):
        return _left_open(expected, again)
    if again is not True or "note-7" in _look(t, path).notes:
        return Fail(
            expected,
            f"it returned {again!r} and note-7 is "
            f"{'still there' if 'note-7' in _look(t, path).notes else 'gone'}",
            not_a_bool_next(again)
            or "a refused claim must leave no trace: undo it completely (ROLLBACK)",
        )
    return None


def _first_failure(
    expected: str, problems: list[tuple[bool, str, str]], default_next: str
) -> Fail | None:
    failing = [(what, step) for bad, what, step in problems if bad]
    if not failing:
        return None
    got = " and ".join(what for what, _ in failing)
    next_step = next((step for _, step in failing if step), default_next)
    return Fail(expected, got, next_step)


LOCKED_NEXT = (
    "take the write lock before anything else: start with BEGIN IMMEDIATE and do every read "
    "after BEGIN IMMEDIATE, so the second process waits for the first (a deferred BEGIN that "
    "reads first cannot upgrade its lock while the other holds it: 'database is locked')"
)


def _race_next(t: Trial) -> str:
    """The next step for a lost race, from the SQL the learner's function runs for one fresh
    claim (recorded on a fresh database), so it matches what the code actually does."""
    path = _world(t)
    probe = SqliteConnection(
        str(path), key="probe", lock_timeout=t.settings.lock_timeout, record=True
    )
    t.attempt(CONTRACT, probe, PRINCIPAL, "n-probe", "note-7", EXPIRES_AT)
    statements = [" ".join(sql.split()).upper() for sql in t.statements(probe.key)]
    begins = [i for i, sql in enumerate(statements) if sql.startswith("BEGIN")]
    immediate = [
        i for i in begins if statements[i].startswith(("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE"))
    ]
    ends = [sql for sql in statements if sql.startswith(("COMMIT", "END", "ROLLBACK"))]
    if not immediate:
        return (
            "claim the nonce and delete the note in one transaction, and do every read and "
            "write after BEGIN IMMEDIATE, so the second process waits for the first and then "
            "finds the nonce taken"
        )
    if immediate[0] > 0:
        before = ", ".join(sorted({sql.split()[0] for sql in statements[: immediate[0]]}))
        return (
            f"your {before} runs before the transaction: do every read and write after BEGIN "
            "IMMEDIATE, because what you read before it can change before you write"
        )
    if len(begins) > 1 or len(ends) > 1:
        return (
            "claim and delete in one transaction (one BEGIN IMMEDIATE, one COMMIT): with two, "
            "the other process acts between them"
        )
    return (
        "your BEGIN IMMEDIATE is in place: now decide only from what the database says inside "
        "it (the claim INSERT's rowcount or IntegrityError, keyed by principal and nonce; the "
        "DELETE's rowcount), never from a value computed earlier"
    )


def _raised_on_purpose(r: Racer) -> bool:
    # A racer's frames are the learner's only: its last line is a raise statement when the
    # learner's code raised the exception itself (a library's exception shows the calling line).
    return bool(r.frames) and r.frames[-1].line.startswith(("raise ", "raise("))


def two_processes(t: Trial) -> Fail | Pass | None:
    path = _world(t)

    def reset() -> None:
        _world(t)

    calls = [
        (PRINCIPAL, "n-race", "note-7", EXPIRES_AT),
        (PRINCIPAL, "n-race", "note-8", EXPIRES_AT),
    ]
    outcome = t.race(CONTRACT, path, calls, reset)
    racers = outcome.racers
    who = "two processes" if outcome.processes else "two threads"
    expected = (
        f"{who}, each with its own connection, claiming nonce 'n-race' at the same moment (one "
        "for note-7, one for note-8) should give exactly one True and delete exactly one note"
    )
    if any(r.kind == "stub" for r in racers):
        t.stop(Outcome.NOT_ATTEMPTED, stub_message(CONTRACT))
    said = "; ".join(f"the one for {c[2]} {r.said}" for c, r in zip(calls, racers, strict=True))
    if any(r.kind in ("timeout", "crashed", "no_start") for r in racers):
        return Fail(
            expected,
            f"{said} (the check waits at most {t.settings.race_timeout:g} s)",
            "make sure every path ends its transaction, so the other process's wait can end",
            outcome=Outcome.ERROR,
        )
    seen = _look(t, path)
    gone = sorted({"note-7", "note-8"} - seen.notes)
    wins = sum(r.value_is_true for r in racers)
    raised = next((r for r in racers if r.kind == "raised"), None)
    crash = (
        LOCKED_NEXT
        if raised is not None and "database is locked" in raised.exception
        else "fix the line shown last above"
    )
    if all(r.kind == "raised" and not _raised_on_purpose(r) for r in racers):
        return Fail(
            expected,
            f"both raised an exception; the first:\n{racers[0].traceback}\n",
            crash,
            outcome=Outcome.ERROR,
        )
    if wins != 1 or len(gone) != 1:
        gone_text = ", ".join(gone) if gone else "none"
        return Fail(expected, f"{said}, and the notes deleted are: {gone_text}", _race_next(t))
    if raised is not None and _raised_on_purpose(raised):
        return Fail(
            expected,
            f"{said}: it raised on purpose, where the contract expects False for the process "
            "that finds the nonce taken",
            "return False for the loser (after ROLLBACK): the contract's refusal is the value "
            "False, not an exception",
        )
    if raised is not None:
        return Fail(
            expected,
            f"one of them raised an exception:\n{raised.traceback}\n",
            crash,
            outcome=Outcome.ERROR,
        )
    if any(r.in_transaction for r in racers):
        return Fail(expected, f"{said}, but one left its transaction open", OPEN_TRANSACTION_NEXT)
    if any(not (r.value_is_true or r.value_is_false) for r in racers):
        return Fail(expected, said, "return True or False, real bools, nothing else")
    if not outcome.processes:
        return Pass(f"raced with threads because {outcome.why_threads}")
    return None


def nonces_per_principal(t: Trial) -> Fail | None:
    path = _world(t, notes=("a", "b", "c"))
    conn = _learner_connection(t, path)
    other_principal = (
        "look the claim up by principal and nonce together: another principal's nonce is "
        "not a replay"
    )
    steps = (
        ("alice", "a", True, "alice's first use of nonce 'n-1' should return True", ""),
        (
            "bob",
            "b",
            True,
            "bob using the nonce 'n-1' that alice used should return True (claims are keyed "
            "by principal and nonce)",
            other_principal,
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
        result = _claim(
            t,
            conn,
            "n-1",
            note,
            expected=expected,
            wanted=want,
            refuse_next=next_step if want else REPLAY_REFUSE_NEXT,
            on_integrity_error={"b": other_principal, "c": REPLAY_CRASH_NEXT}.get(note),
            principal=principal,
        )
        if isinstance(result, Fail):
            return result
        if t.in_transaction(conn.key):
            return Fail(
                expected,
                f"it returned {result!r} with its transaction still open",
                OPEN_TRANSACTION_NEXT,
            )
        if result is not want:
            return Fail(expected, f"it returned {result!r}", next_step or "return True or False")
    if "c" not in _look(t, path).notes:
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


def _with_held(build: Callable[[sqlite3.Connection], None]) -> Callable[[sqlite3.Connection], None]:
    def with_trigger(conn: sqlite3.Connection) -> None:
        build(conn)
        conn.execute(HELD)  # the database refuses to delete 'held' with an error

    return with_trigger


def _claimed(t: Trial, path: Path, nonce: str) -> bool:
    with t.folder().read_db(path.name) as conn:
        row = conn.execute(
            "SELECT 1 FROM claims WHERE principal = 'alice' AND nonce = ?", (nonce,)
        ).fetchone()
        return row is not None


def transaction_closed(t: Trial) -> Fail | None:
    path = t.folder().place_db(DB, _with_held(build_world(("a", "held"))))
    # Each call on a connection of its own: a transaction or lock left behind by one call
    # makes the next one wait and fail with "database is locked".
    short = min(t.settings.lock_timeout, 1.0)
    steps = (
        ("a successful claim", "n-1", "a", "COMMIT"),
        ("a refused replay", "n-1", "a", "ROLLBACK"),
        ("a claim for a missing note", "n-2", "missing", "ROLLBACK"),
    )
    refuse_next = (
        "nothing here calls for a refusal: make both changes, COMMIT and return True",
        REPLAY_REFUSE_NEXT,
        "a missing note is answered with False, not an exception: ROLLBACK and return False",
    )
    for number, (what, nonce, note, end) in enumerate(steps):
        conn = SqliteConnection(str(path), key=f"call-{number}", lock_timeout=short)
        outcome = t.attempt(CONTRACT, conn, "alice", nonce, note, EXPIRES_AT)
        expected = (
            f"after {what} the transaction should be closed and another connection should get "
            "the write lock at once"
        )
        if isinstance(outcome, Raised) and "database is locked" in outcome.error.message:
            return Fail(
                expected,
                "this call, on a connection of its own, got 'database is locked': the call "
                "before it still held the write lock",
                f"end {steps[number - 1][0]} with {steps[number - 1][3]}, and leave no "
                "statement holding the lock",
            )
        if isinstance(outcome, Raised):
            replayed = number == 1 and outcome.error.is_a("sqlite3.IntegrityError")
            return t.raised_instead(
                outcome,
                expected,
                repr(number == 0),
                refuse_next[number],
                REPLAY_CRASH_NEXT if replayed else None,
            )
        if number == 0 and outcome.value is not True:
            # A closed transaction counts only with the work done inside it.
            return Fail(
                "a new nonce for an existing note should be claimed (True) before the other "
                "paths are tried",
                f"it returned {outcome.value!r}",
                not_a_bool_next(outcome.value) or "claim, delete, COMMIT and return True",
            )
        if t.in_transaction(conn.key):
            return Fail(
                expected,
                f"it returned {outcome.value!r} with its transaction still open",
                f"end this path with {end}",
            )
    conn = SqliteConnection(str(path), key="held", lock_timeout=short)
    return _failing_delete(t, path, conn)


def _failing_delete(t: Trial, path: Path, conn: SqliteConnection) -> Fail | None:
    outcome = t.attempt(CONTRACT, conn, "alice", "n-3", "held", EXPIRES_AT)
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
    if t.in_transaction(conn.key):
        return Fail(
            expected,
            f"{said} with its transaction still open",
            "an exception is a way out too: ROLLBACK on it before it leaves your function"
            if isinstance(outcome, Raised)
            else "a failed statement is a way out too: end that path with COMMIT or ROLLBACK",
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


HINTS = (
    "Everything that must happen together goes between one BEGIN IMMEDIATE and one COMMIT; "
    "every way out that is not a success goes through ROLLBACK, exceptions included.",
    "Let the database decide. An INSERT that does nothing on a conflicting (principal, nonce) "
    "tells you through cursor.rowcount whether your claim is new; the DELETE's rowcount tells "
    "you whether the note was still there. BEGIN IMMEDIATE takes the write lock first, so a "
    "second process waits instead of acting on what it read before the first one committed.",
    "The idea is an atomic claim: one transaction that takes SQLite's write lock first (BEGIN "
    "IMMEDIATE), lets constraints and rowcounts (cursor.rowcount, INSERT ... ON CONFLICT DO "
    "NOTHING) decide, and ends every path with COMMIT or ROLLBACK (docs/security.md, "
    '"Exactly-once replay store").',
)

CONTRACT_TEXT = Contract(
    "claim_and_delete(conn, principal, nonce, note_id, expires_at) -> bool",
    rules=(
        Rule("one-transaction", "**one transaction** holds both changes"),
        Rule("true-when-done", "it returns `True` only when both happened and are committed"),
        Rule("replay", "a nonce that is already claimed (a replay) deletes nothing"),
        Rule("missing-note", "a missing note leaves the nonce *unclaimed*"),
        Rule("per-principal", "the primary key `(principal, nonce)`"),
        Rule(
            "every-path-ends",
            "every path ends the transaction with `COMMIT` or `ROLLBACK`, exceptions included",
        ),
        Rule("two-processes", "the second process waits at `BEGIN`"),
    ),
)

EXERCISE = Exercise(
    id="ex1",
    title="SQLite replay store",
    contract=CONTRACT_TEXT,
    notebook="03-ex1-sqlite-replay-store",
    hidden_checks="labkit.grade.hidden.ex1",
    safety=Safety(4, "no claim should delete a second note, nor a note without its claim"),
    equivalent_mutants=(
        *sql_in_any_case(
            '"INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "',
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) ",
        ),
        *sql_in_any_case(
            '"ON CONFLICT (principal, nonce) DO NOTHING"',
            "ON CONFLICT (principal, nonce) DO NOTHING",
        ),
        *sql_in_any_case(
            'DELETE_SQL = "DELETE FROM notes WHERE id = ?"', "DELETE FROM notes WHERE id = ?"
        ),
        *sql_in_any_case(
            'conn.execute("BEGIN IMMEDIATE")  # the write lock first: a rival process waits here',
            "BEGIN IMMEDIATE",
        ),
        *sql_in_any_case('conn.execute("COMMIT")', "COMMIT"),
        *sql_in_any_case(
            'conn.execute("ROLLBACK")  # a replay, or no such note: the claim is undone too',
            "ROLLBACK",
        ),
        *sql_in_any_case(
            'conn.execute("ROLLBACK")  # an error never leaves half a claim behind', "ROLLBACK"
        ),
    ),
    outputs={
        "ex1-try": (
            "fresh claim",
            "replay refused",
            "missing note keeps the nonce",
            "transaction closed on every path",
        ),
        "ex1-race": ("two processes race", "six racing processes"),
    },
    checks=(
        Check(
            "fresh claim",
            fresh_claim,
            "claiming a new nonce for an existing note should return True, delete the note "
            "and record the claim",
            rules=("one-transaction", "true-when-done"),
        ),
        Check(
            "replay refused",
            replay_refused,
            "a second claim of an already recorded nonce should return False and delete nothing",
            rules=("replay",),
        ),
        Check(
            "missing note keeps the nonce",
            missing_note,
            "a claim for a note that does not exist should return False and leave the nonce unused",
            rules=("missing-note",),
        ),
        Check(
            "nonces per principal",
            nonces_per_principal,
            "nonces should be per principal, and a replay should keep the note",
            rules=("per-principal", "replay"),
        ),
        Check(
            "transaction closed on every path",
            transaction_closed,
            "the transaction should be closed and the write lock free on every path",
            rules=("every-path-ends", "one-transaction"),
        ),
        Check(
            "two processes race",
            two_processes,
            "two processes racing with one nonce should give exactly one True and delete "
            "exactly one note",
            points=2,
            rules=("two-processes", "one-transaction"),
        ),
    ),
    hints=HINTS,
)
