"""Two racers, one nonce: the race exercise 1's notebook shows, as a short deterministic report.

Owns: `race_one_nonce` (a fresh exercise 1 database holding note-7 and note-8, two racers with
their own connections claiming one nonce at the same moment, one for each note, and what was
left afterwards), `RaceReport`, and `memory_claim_and_delete`, the reference server's approach
(claim in this interpreter's own `MemoryReplayStore`, then delete), kept in an importable
module so each spawned racer loads it by reference and starts with its own empty store, as a
second server process would. The racing itself is `labkit.course.exercises.race`, the machinery the
public check uses, and the verdict holds a racer to what that check holds it to: exactly one
`True`, exactly one note gone, and no racer that raised, left its transaction open, returned
something other than a bool or did not finish. Must not import ipywidgets.
"""

from __future__ import annotations

import secrets
import sqlite3
import tempfile
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from labkit.course.exercises.fixtures import (
    add_notes,
    claimed,
    connect,
    create_ex1_schema,
    note_ids,
)
from labkit.course.exercises.race import Racer, RaceSpec, race
from labkit.stores import Claim
from labkit.stores.memory import MemoryReplayStore

PRINCIPAL: Final = "alice"
NOTES: Final = ("note-7", "note-8")
# A fixed clock and expiry: the in-memory store never prunes the claim during a race.
EXPIRES_AT: Final = 1_800_000_300.0
_CLOCK_NOW: Final = 1_800_000_000.0

# One per interpreter, like the replay store a server process keeps in memory.
PROCESS_REPLAY: Final = MemoryReplayStore(clock=lambda: _CLOCK_NOW)


def memory_claim_and_delete(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """The reference's way: claim the nonce in this process's memory, then delete the note
    from the shared database. Exactly once per process; nothing stops another process."""
    if PROCESS_REPLAY.claim(principal, nonce, expires_at) is not Claim.CLAIMED:
        return False
    return conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount == 1


_SAID: Final = {
    "stub": "still the starter stub",
    "timeout": "timed out",
    "crashed": "died without a word",
    "no_start": "never started",
    "unportable": "could not travel to another process",
}


def _words(racer: Racer) -> str:
    if racer.kind == "returned":
        return f"returned {racer.value_repr}"
    if racer.kind == "raised":
        return f"raised {racer.exception}"
    return _SAID.get(racer.kind, racer.kind)


def _faults(racer: Racer) -> list[str]:
    """What keeps a racer's run from counting, whatever the notes say (the public check's
    rules): an exception, an open transaction, a value that is not a bool, no answer."""
    if racer.kind == "raised":
        return [f"a racer raised {racer.exception}"]
    if racer.kind != "returned":
        return [f"a racer {_words(racer)}"]
    faults = []
    if racer.in_transaction:
        faults.append("a racer left its transaction open (no COMMIT or ROLLBACK)")
    if not (racer.value_is_true or racer.value_is_false):
        faults.append(f"a racer returned {racer.value_repr}, not True or False")
    return faults


@dataclass(frozen=True)
class RaceReport:
    """What a race left. Printing it never says *which* racer won (that varies from run to
    run), only how many did and how many notes are gone, which a correct store fixes, and
    what a racer did wrong (`faults`)."""

    outcomes: tuple[str, ...]
    winners: int
    notes_left: tuple[str, ...]
    claims: int
    processes: bool
    why_threads: str = ""
    faults: tuple[str, ...] = ()

    @property
    def deleted(self) -> int:
        return len(NOTES) - len(self.notes_left)

    @property
    def exactly_once(self) -> bool:
        return self.winners == 1 and self.deleted == 1 and not self.faults

    def __str__(self) -> str:
        where = (
            "two processes, each with its own connection"
            if self.processes
            else f"two threads (not processes: {self.why_threads})"
        )
        counted: dict[str, int] = {}
        for outcome in self.outcomes:
            counted[outcome] = counted.get(outcome, 0) + 1
        said = ", ".join(f"{n} {what}" for what, n in sorted(counted.items()))
        verdict = "exactly once" if self.exactly_once else "NOT exactly once"
        if self.faults:
            verdict += ": " + "; ".join(dict.fromkeys(self.faults))
        if _SAID["stub"] in self.outcomes:
            verdict = "not attempted: write the function first, then race it again"
        return "\n".join(
            [
                f"raced in:        {where}",
                f"racers:          {said}",
                f"notes deleted:   {self.deleted} of {len(NOTES)} (one confirmation)",
                f"claims recorded: {self.claims}",
                f"verdict:         {verdict}",
            ]
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def _world(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
    with closing(connect(path)) as conn:
        create_ex1_schema(conn)
        add_notes(conn, [(n, f"file:///work/notes/{n}.md", f"TPS {n}") for n in NOTES])


def race_one_nonce(
    fn: Callable[..., Any],
    *,
    timeout: float = 30.0,
    lock_timeout: float = 5.0,
    delay: float = 0.05,
) -> RaceReport:
    """Race `fn(conn, principal, nonce, note_id, expires_at)` twice at once with one fresh
    nonce (one call for note-7, one for note-8) in a new temporary database, and report.

    Each racer runs in its own spawned process when `fn` can travel there (the report says
    when it had to use threads). `delay` slows every SQL statement, so the racers' statements
    overlap as they would under load."""
    nonce = f"n-{secrets.token_hex(4)}"  # fresh, so a rerun in one process is a new race
    calls = [(PRINCIPAL, nonce, note, EXPIRES_AT) for note in NOTES]
    with tempfile.TemporaryDirectory(prefix="labkit-race-") as folder:
        path = Path(folder) / "replay.sqlite3"
        _world(path)
        spec = RaceSpec(
            getattr(fn, "__name__", "fn"),
            path,
            tuple(calls),
            timeout=timeout,
            lock_timeout=lock_timeout,
            delay=delay,
            reset=lambda: _world(path),
        )
        result = race(fn, spec)
        with closing(sqlite3.connect(path, timeout=lock_timeout)) as conn:
            left = tuple(note_ids(conn))
            claims = len(claimed(conn))
    return RaceReport(
        outcomes=tuple(_words(r) for r in result.racers),
        winners=sum(r.value_is_true for r in result.racers),
        notes_left=left,
        claims=claims,
        processes=result.processes,
        why_threads=result.why_threads,
        faults=tuple(fault for r in result.racers if r.kind != "stub" for fault in _faults(r)),
    )
