"""Hidden checks for ex1, `claim_and_delete(conn, principal, nonce, note_id, expires_at) -> bool`.

Owns: the grading-only checks of exercise 1 (`CHECKS`). They add inputs, not rules: every rule
they grade is one the task states and a public check already shows
(`labkit.course.exercises.ex1_replay`).

- Two differential checks (`labkit.course.exercises.differ`): the learner's function and the
  reference answer on the same generated worlds (notes, earlier claims, a note the database
  refuses to delete), the same calls (principals, nonces and notes from small alphabets that
  collide on purpose, one or two connections), and, in the second, a rival writer that claims
  the same nonce just before one of the learner's statements (it gets in only when the
  learner's code does not hold the write lock then, as a real second process would): the
  answers, the transactions left open, and the notes and claims left are compared (with a
  rival that got in, the reference's run with the rival first is as right).
- One race: six racers, each with its own worker process and connection and a note of its
  own, claim one nonce at once, in two rounds; exactly one may win and one note go.
Must not import the kernel runner or the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hypothesis import strategies as st

from labkit.course.exercises import ex1_replay as public
from labkit.course.exercises.calls import SqliteConnection
from labkit.course.exercises.differ import (
    CRASHED,
    Cause,
    Observation,
    Search,
    Side,
    differential,
    observed,
)
from labkit.course.exercises.fixtures import claimed, note_ids
from labkit.course.exercises.trial import (
    Check,
    Fail,
    Outcome,
    Raised,
    Trial,
    not_a_bool_next,
    stub_message,
)

CONTRACT = public.CONTRACT
RACERS = 6
ROUNDS = 2
# Seconds before each SQL statement of a racer: enough for six racers' statements to overlap,
# short enough that six serialized transactions stay well inside the lock timeout.
STATEMENT_DELAY = 0.02
EXPIRES = 4_102_444_800.0  # 2100-01-01
RACE_NEXT = (
    "decide whether the nonce is new inside the one transaction that deletes, after BEGIN "
    "IMMEDIATE, so each rival waits and then finds the nonce taken"
)
NOTES = ("note-1", "note-2", "note-3")
HELD_ERROR = {"raised": f"IntegrityError{CRASHED}"}
# How long a call waits for the write lock: nothing else holds it between calls, so a wait
# means the learner's previous call left it held.
WAIT = 0.3


@dataclass(frozen=True)
class Call:
    principal: str
    nonce: str
    note: str
    connection: str = "A"
    expires_at: float = EXPIRES


@dataclass(frozen=True)
class Claims:
    """A world and the calls made in it. `held` is a note the database refuses to delete (a
    trigger raises); `rival` = (call number, statement number): before that statement of that
    call, another writer claims the call's (principal, nonce) and deletes the note `rival`."""

    calls: tuple[Call, ...]
    notes: tuple[str, ...] = NOTES
    claimed: tuple[tuple[str, str], ...] = ()
    held: str | None = None
    rival: tuple[int, int] | None = None


def describe(s: Claims) -> str:
    world = f"notes {list(s.notes)}" + (f", claims {list(s.claimed)}" if s.claimed else "")
    if s.held:
        world += f", deleting {s.held} fails with an error"
    calls = "; ".join(
        f"call {n + 1} ({c.connection}): {c.principal!r}, {c.nonce!r}, {c.note!r}"
        + (f", {c.expires_at!r}" if c.expires_at != EXPIRES else "")
        for n, c in enumerate(s.calls)
    )
    rival = ""
    if s.rival is not None:
        call, statement = s.rival
        rival = (
            f"; another process claims call {call + 1}'s nonce (and deletes its own note) just "
            f"before statement {statement} of that call"
        )
    return f"{world}; {calls}{rival}"


def _build(s: Claims) -> Any:
    base = public.build_world((*s.notes, "rival"), s.claimed)

    def build(conn: Any) -> None:
        base(conn)
        if s.held:
            conn.execute(public.HELD.replace("'held'", f"'{s.held}'"))

    return build


def play(side: Side, s: Claims) -> Observation:
    path = side.folder.place_db(public.DB, _build(s))
    calls = []
    for number, call in enumerate(s.calls):
        rival = None
        key = call.connection
        if s.rival is not None and s.rival[0] == number:
            key = f"rival-{number}"
            rival = (
                s.rival[1],
                (
                    (
                        "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
                        "ON CONFLICT DO NOTHING",
                        (call.principal, call.nonce, EXPIRES),
                    ),
                    ("DELETE FROM notes WHERE id = 'rival' AND changes() = 1", ()),
                ),
            )
        marker = SqliteConnection(str(path), key=key, lock_timeout=WAIT, rival=rival)
        outcome = side.attempt(
            CONTRACT, marker, call.principal, call.nonce, call.note, call.expires_at
        )
        seen = observed(outcome)
        if isinstance(outcome, Raised) and "database is locked" in outcome.error.message:
            seen["raised"] += ": database is locked"
        elif call.note == s.held and seen in ({"returned": False}, HELD_ERROR):
            # The database refuses this DELETE: its error may reach the caller, or the call
            # may roll back and return False (the task allows both).
            seen = {"refused": "False, or the database's error"}
        seen["transaction left open"] = bool(outcome.effects.get("in_transaction", {}).get(key))
        calls.append(seen)
    with side.folder.read_db(public.DB) as conn:
        rows = conn.execute("SELECT principal, nonce, expires_at FROM claims ORDER BY 1, 2, 3")
        claims = [tuple(r) for r in rows]
        notes = note_ids(conn)
    return {"calls": calls, "notes left": notes, "claims": claims}


def explain(s: Claims, mine: Observation, reference: Observation) -> Cause:
    """The next step from the first difference: which call, which field, which effect."""
    safety = _safety(s, mine, reference)
    for number, (got, want) in enumerate(zip(mine["calls"], reference["calls"], strict=True)):
        if got == want:
            continue
        call = s.calls[number]
        raised = str(got.get("raised", ""))
        if got["transaction left open"]:
            return Cause(public.OPEN_TRANSACTION_NEXT, safety)
        if "database is locked" in raised:
            if s.rival is not None and s.rival[0] == number:
                return Cause(public.LOCKED_NEXT, safety)
            return Cause(
                "your previous call left the write lock held: end every path with COMMIT or "
                "ROLLBACK, and leave no statement unfinished",
                safety,
            )
        if "raised" in got and "raised" not in want:
            if "IntegrityError" in raised:
                return Cause(
                    "a replay is an expected case, not an error: let the database report it "
                    "without an exception (INSERT ... ON CONFLICT DO NOTHING, then "
                    "cursor.rowcount), ROLLBACK and return False",
                    safety,
                )
            if raised.endswith(CRASHED):
                return Cause("fix the line your exception comes from", safety)
            return Cause(
                "return False for a refusal: the contract's refusal is the value False, not an "
                "exception",
                safety,
            )
        value = got.get("returned")
        if type(value) is not bool:
            return Cause(not_a_bool_next(value) or "return True or False", safety)
        if value is True and want.get("returned") is False:
            if (call.principal, call.nonce) in s.claimed or _earlier(s, number):
                return Cause(
                    "refuse a (principal, nonce) pair that is already recorded, deciding from "
                    "the database inside the transaction",
                    safety,
                )
            if s.rival is not None and s.rival[0] == number:
                return Cause(public.LOCKED_NEXT, safety)
            return Cause("return True only when the note was there and got deleted", safety)
        if value is False and want.get("returned") is True:
            if any(p != call.principal and n == call.nonce for p, n in s.claimed):
                return Cause(
                    "look the claim up by principal and nonce together: another principal's "
                    "nonce is not a replay",
                    safety,
                )
            return Cause(
                "when the nonce is new and the note exists, claim it, delete it, COMMIT and "
                "return True",
                safety,
            )
        return Cause("return False when the nonce is taken or the note is missing", safety)
    if mine["claims"] != reference["claims"]:
        extra = set(mine["claims"]) - set(reference["claims"])
        if sorted((n, p, e) for p, n, e in mine["claims"]) == reference["claims"]:
            return Cause(
                "insert the values in the columns' order: (principal, nonce, expires_at)",
                safety,
            )
        if extra and set(reference["claims"]) <= set(mine["claims"]):
            return Cause(
                "a refused claim must leave no trace: undo it (ROLLBACK) when the note is not "
                "deleted",
                safety,
            )
        return Cause(
            "record exactly (principal, nonce, expires_at) as given, in the transaction that "
            "deletes",
            safety,
        )
    return Cause(
        "delete only the note you claimed, in the transaction that records the claim", safety
    )


def _earlier(s: Claims, number: int) -> bool:
    call = s.calls[number]
    return any((c.principal, c.nonce) == (call.principal, call.nonce) for c in s.calls[:number])


def _safety(s: Claims, mine: Observation, reference: Observation) -> str:
    before = {*s.notes, "rival"}
    gone, expected = before - set(mine["notes left"]), before - set(reference["notes left"])
    if len(gone) > len(expected) or (gone - expected and len(s.calls) == 1):
        return (
            f"{', '.join(sorted(gone))} {'were' if len(gone) > 1 else 'was'} deleted where the "
            f"reference deleted {', '.join(sorted(expected)) or 'nothing'}"
        )
    return ""


PRINCIPALS = ("alice", "bob", "Alice")
NONCES = ("n-1", "n-2", "N-1")
EXPIRIES = (EXPIRES, 0.0, 1.5, -1.0, 1_800_000_300.0)


def _calls(notes: tuple[str, ...]) -> st.SearchStrategy[tuple[Call, ...]]:
    call = st.builds(
        Call,
        st.sampled_from(PRINCIPALS),
        st.sampled_from(NONCES),
        st.sampled_from((*notes, "note-404")),
        st.sampled_from(("A", "B")),
        st.sampled_from(EXPIRIES),
    )
    return st.lists(call, min_size=1, max_size=3).map(tuple)


@st.composite
def _claims(draw: st.DrawFn, rival: bool) -> Claims:
    notes = tuple(draw(st.lists(st.sampled_from(NOTES), min_size=1, unique=True)))
    taken = draw(
        st.lists(st.tuples(st.sampled_from(PRINCIPALS), st.sampled_from(NONCES)), unique=True)
    )
    held = draw(st.none() | st.sampled_from(notes))
    calls = draw(_calls(notes))
    chosen = None
    if rival:
        chosen = (draw(st.integers(0, len(calls) - 1)), draw(st.integers(1, 5)))
    return Claims(calls, notes, tuple(taken), held, chosen)


# Each catalogued mistake's input (tests/course/mistakes/ex1) stays an explicit example.
SEQUENCE_EXAMPLES = (
    Claims((Call("alice", "n-1", "note-1"), Call("alice", "n-1", "note-2"))),
    Claims((Call("alice", "n-1", "note-404"), Call("alice", "n-1", "note-1"))),
    Claims((Call("alice", "n-1", "note-1"), Call("bob", "n-1", "note-2"))),
    Claims((Call("alice", "n-1", "note-1"),), held="note-1"),
    Claims((Call("alice", "n-1", "note-1"), Call("alice", "n-2", "note-2", "B"))),
    Claims((Call("alice", "n-1", "note-1", expires_at=1.5),)),
)
RIVAL_EXAMPLES = (
    Claims((Call("alice", "n-1", "note-1"),), rival=(0, 1)),
    Claims((Call("alice", "n-1", "note-1"),), rival=(0, 2)),
    Claims((Call("alice", "n-1", "note-1"),), rival=(0, 3)),
)


def claims_in_sequence(t: Trial) -> Fail | None:
    return differential(t, Search(_claims(rival=False), describe, SEQUENCE_EXAMPLES), play, explain)


def rival_first(side: Side, s: Claims) -> list[Observation]:
    """A rival that got in before the call took the write lock (the call ran a statement of
    its own before BEGIN IMMEDIATE) is as right as one that waited: the rival's claim then came
    first, and the call must find its nonce taken. Both serial orders are right."""
    if s.rival is None or s.rival[1] == 1:
        return []
    return [play(side, replace(s, rival=(s.rival[0], 1)))]


def rival_between_statements(t: Trial) -> Fail | None:
    search = Search(_claims(rival=True), describe, RIVAL_EXAMPLES)
    return differential(t, search, play, explain, also_right=rival_first)


# --- the race ----------------------------------------------------------------------------


def _racing_error(summary: str) -> str:
    if "locked" in summary:
        return "start the transaction with BEGIN IMMEDIATE, so a rival waits for the write lock"
    if "IntegrityError" not in summary:
        return "fix the line your exception comes from: it fails whoever wins the race"
    return (
        "a rival that finds the nonce taken is an expected case: the loser waits for the lock "
        "(BEGIN IMMEDIATE) and returns False, it does not raise"
    )


def racing_claims(t: Trial) -> Fail | None:
    folder = t.folder()
    for number in range(ROUNDS):
        notes = tuple(f"note-{number}-{racer}" for racer in range(RACERS))
        name = f"race-{number}.sqlite3"
        build = public.build_world(notes)
        path = folder.place_db(name, build)

        def reset(name: str = name, build: Any = build) -> None:
            folder.place_db(name, build)

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
        with folder.read_db(name) as conn:
            gone = len(set(notes) - set(note_ids(conn)))
            claims = claimed(conn)
        if wins != 1 or gone != 1:
            return Fail(
                expected,
                f"{wins} returned True, {gone} notes were deleted and {len(claims)} claims "
                "recorded",
                RACE_NEXT,
                safety=f"{gone} notes were deleted for one nonce" if gone > 1 else "",
            )
        if any(r.in_transaction for r in racers):
            return Fail(expected, "a racer left its transaction open", public.OPEN_TRANSACTION_NEXT)
        if any(not (r.value_is_true or r.value_is_false) for r in racers):
            odd = next(r for r in racers if not (r.value_is_true or r.value_is_false))
            return Fail(expected, f"a racer {odd.said}", "return True or False, nothing else")
    return None


CHECKS: tuple[Check, ...] = (
    Check(
        "claims in sequence",
        claims_in_sequence,
        "on any world and any calls, it should answer, commit and refuse as the reference does",
        points=3,
        hidden=True,
        rules=(
            "one-transaction",
            "true-when-done",
            "replay",
            "missing-note",
            "per-principal",
            "every-path-ends",
        ),
    ),
    Check(
        "a rival between your statements",
        rival_between_statements,
        "with another process claiming the same nonce during the call, it should do what the "
        "reference does",
        points=3,
        hidden=True,
        rules=("one-transaction", "two-processes", "replay"),
    ),
    Check(
        "six racing processes",
        racing_claims,
        f"{RACERS} processes racing with one nonce, a note each, should give exactly one True "
        "and delete exactly one note",
        points=2,
        hidden=True,
        rules=("two-processes", "one-transaction"),
    ),
)
