"""Pending claims of the two-step deletion never wedge a state, a note or a principal.

In process, over every pair of stores that deletes in two steps (memory, two SQLite files,
SQLite or filesystem notes with SQLite or PostgreSQL claims), with real files and databases:

- an attempt parked between its claim and its deletion is never recovered by another request
  of the same state: that request waits, then answers what happened (the deletion, or "in
  progress" while it lasts), and the parked attempt deletes once it goes on;
- a claim whose holder is gone (an attempt that stopped, a killed process, a lease past its
  end) is recovered by the next request that meets it, by the sweep and at start-up;
- an attempt fenced under it (its lease ended while it was parked) claims again, never
  answering "used" for a deletion that did not happen;
- a cancel or a decline meeting a pending claim is honoured once it is released;
- a full replay store recovers gone holders' claims before it refuses.

Time is a `FakeClock` shared by the stores and the holders; waits for a live holder are either
zero (the "in progress" answer) or end when the parked attempt is let go.
"""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from store_backends import require_postgres, unique_schema

from labkit.clock import FakeClock
from labkit.scope import parse_file_uri
from labkit.stores import (
    Claim,
    ClaimHolder,
    ClaimInProgress,
    Completed,
    Confirmation,
    Deletion,
    Note,
    PendingReplay,
    Receipts,
    Ticket,
    commit_deletion,
    pause_for,
    recover_pending,
    resolve_pending,
)
from labkit.stores.filesystem import FilesystemNoteStore
from labkit.stores.instance import instance_name, process_gone
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.stores.postgres import PostgresStore
from labkit.stores.sqlite import SqliteStore
from labkit.stores.sweeper import PendingSweeper

TTL = 300.0
WAIT = 30.0  # the longest a test waits for a thread it let go
PAIRS = ["memory+memory", "sqlite+sqlite", "sqlite+postgres", "filesystem+sqlite"]
PAIRS += ["filesystem+postgres"]


@dataclass
class Pair:
    notes: Any
    replay: Any
    add: Callable[[str], Note]
    clock: FakeClock

    def holder(
        self, name: str, wait: float = 0.0, waiting: threading.Event | None = None
    ) -> ClaimHolder:
        """Instance `name` on this pair's clock, waiting `wait` seconds at most for a live
        holder (`waiting` is set when it starts to)."""

        def pause(ticket: Ticket, seconds: float) -> None:
            if waiting is not None:
                waiting.set()
            pause_for(ticket, seconds)

        return ClaimHolder(clock=self.clock, instance=name, wait_seconds=wait, pause=pause)

    @property
    def pending(self) -> PendingReplay:
        assert isinstance(self.replay, PendingReplay)
        return self.replay

    @property
    def receipts(self) -> Receipts:
        assert isinstance(self.notes, Receipts)
        return self.notes


@pytest.fixture(params=PAIRS)
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    clock = FakeClock()
    notes_kind, replay_kind = request.param.split("+")
    with ExitStack() as stack:
        replay: Any
        if replay_kind == "memory":
            replay = MemoryReplayStore(clock=clock)
        elif replay_kind == "sqlite":
            replay = stack.enter_context(SqliteStore(tmp_path / "replay.db", clock=clock))
        else:
            replay = PostgresStore(require_postgres(), schema=unique_schema(), clock=clock)
            stack.enter_context(replay)
            stack.callback(replay.drop_schema)
        notes: Any
        if notes_kind in ("memory", "sqlite"):
            notes = (
                MemoryNoteStore()
                if notes_kind == "memory"
                else stack.enter_context(SqliteStore(tmp_path / "notes.db", clock=clock))
            )

            def add(title: str) -> Note:
                return notes.add(f"id-{title}", f"file:///work/notes/{title}.md", title)

        else:
            work = tmp_path / "work"
            work.mkdir()
            notes = FilesystemNoteStore(
                [f"file://{work}"], journal_path=tmp_path / "journal.db", clock=clock
            )
            stack.enter_context(notes)

            def add(title: str) -> Note:
                path = work / f"{title}.md"
                path.write_text(f"# {title}\n")
                note = notes.locate(parse_file_uri(f"file://{path}"))
                assert note is not None
                return note

        yield Pair(notes, replay, add, clock)


def confirmation(note: Note, recheck: Callable[[Note], bool] = lambda live: True) -> Confirmation:
    return Confirmation("alice", "nonce-1", 4e9, note.id, recheck)


class Parked:
    """A deletion by `holder` that stops between its claim and its deletion (in its
    re-check) until `go()`; its outcome, or what it raised, once it ends."""

    def __init__(self, pair: Pair, holder: ClaimHolder, note: Note) -> None:
        self.note = note
        self.arrived = threading.Event()
        self._go = threading.Event()
        self.outcome: tuple[Deletion, Note | None] | BaseException | None = None

        def recheck(live: Note) -> bool:
            self.arrived.set()
            assert self._go.wait(WAIT)
            return True

        def run() -> None:
            try:
                self.outcome = commit_deletion(
                    pair.notes, pair.replay, confirmation(note, recheck), holder
                )
            except BaseException as exc:  # reported by the test that reads `outcome`
                self.outcome = exc

        self._thread = threading.Thread(target=run)
        self._thread.start()
        assert self.arrived.wait(WAIT), "the attempt never reached its re-check"

    def go(self) -> tuple[Deletion, Note | None] | BaseException | None:
        self._go.set()
        self._thread.join(WAIT)
        assert not self._thread.is_alive()
        return self.outcome


def wait_while_it_goes_on(
    pair: Pair, instance: str, note: Note, parked: Parked
) -> tuple[Deletion, Note | None]:
    """What a deletion of `note` by `instance` answers when it meets the parked attempt's
    claim, waits for it, and the parked attempt then goes on (and deletes its note)."""
    waiting = threading.Event()
    patient = pair.holder(instance, wait=WAIT, waiting=waiting)
    answers: list[tuple[Deletion, Note | None]] = []
    waiter = threading.Thread(
        target=lambda: answers.append(
            commit_deletion(pair.notes, pair.replay, confirmation(note), patient)
        )
    )
    waiter.start()
    assert waiting.wait(WAIT), "it never waited"
    assert parked.go() == (Deletion.DELETED, parked.note)
    waiter.join(WAIT)
    (answer,) = answers
    return answer


def pending_attempts(pair: Pair) -> list[str]:
    return [t.attempt for t in pair.pending.pending_claims()]


# -- a live holder is waited for, never recovered ---------------------------------------------


@pytest.mark.parametrize("same_instance", [True, False], ids=["same instance", "other instance"])
def test_a_parked_attempt_is_waited_for_and_another_accept_answers_what_happened(
    pair: Pair, same_instance: bool
) -> None:
    note = pair.add("a")
    first = pair.holder("instance-A")
    parked = Parked(pair, first, note)
    (attempt,) = pending_attempts(pair)
    second = "instance-A" if same_instance else "instance-B"
    # While the holder is at work, the same state's accept changes nothing: "in progress".
    with pytest.raises(ClaimInProgress):
        commit_deletion(pair.notes, pair.replay, confirmation(note), pair.holder(second))
    assert pending_attempts(pair) == [attempt]  # not fenced, not settled
    assert pair.notes.get(note.id) == note
    # A patient one waits for the parked attempt, which then deletes; both tell the truth.
    answer = wait_while_it_goes_on(pair, second, note, parked)
    assert answer == (Deletion.DELETED, None)  # the same confirmation: deleted, not "used"
    assert pair.notes.get(note.id) is None
    assert pair.pending.claim_state("alice", "nonce-1") == Completed(note.id)
    assert pending_attempts(pair) == []


def test_an_accept_of_the_same_state_for_another_note_is_used_once_the_first_deleted(
    pair: Pair,
) -> None:
    note, other = pair.add("a"), pair.add("b")
    parked = Parked(pair, pair.holder("instance-A"), note)
    assert wait_while_it_goes_on(pair, "instance-B", other, parked) == (Deletion.USED, None)
    assert pair.notes.get(other.id) == other


def test_a_cancel_or_decline_meeting_a_live_holder_is_in_progress_then_the_truth(
    pair: Pair,
) -> None:
    note = pair.add("a")
    parked = Parked(pair, pair.holder("instance-A"), note)
    impatient = pair.holder("instance-B")
    with pytest.raises(ClaimInProgress):
        impatient.used(pair.notes, pair.replay, "alice", "nonce-1")  # a cancel
    with pytest.raises(ClaimInProgress):
        impatient.claim(pair.notes, pair.replay, "alice", "nonce-1", 4e9)  # a decline
    assert parked.go() == (Deletion.DELETED, note)
    assert impatient.used(pair.notes, pair.replay, "alice", "nonce-1") is True
    assert impatient.claim(pair.notes, pair.replay, "alice", "nonce-1", 4e9) is Claim.USED


# -- a gone holder's claim is recovered --------------------------------------------------------


def exited_instance() -> str:
    """The instance name of a process of this host that has since exited."""
    proc = subprocess.Popen(["sleep", "30"])
    try:
        name = instance_name(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert process_gone(name)
    return name


def leave_pending(
    pair: Pair, note: Note, holder: str, *, deleted: bool, lease: float = 3600.0
) -> Ticket:
    """A claim as a holder leaves it when it stops after its claim (`deleted`: after its
    deletion too): pending, its lease ending `lease` seconds from now."""
    lease_until = pair.clock() + lease
    ticket = Ticket("alice", "nonce-1", 4e9, note.id, uuid.uuid4().hex[:16], holder, lease_until)
    assert pair.pending.claim_pending(ticket) is Claim.CLAIMED
    if deleted:
        assert pair.receipts.delete_for(note, ticket) is True
    return ticket


def test_an_exited_process_is_gone_and_a_running_one_is_not() -> None:
    assert not process_gone(instance_name())
    assert process_gone(exited_instance())
    assert not process_gone("another-host/boot/1/2/3")  # nothing to prove it: the lease decides


@pytest.mark.parametrize("deleted", [False, True], ids=["before the deletion", "after it"])
def test_the_claim_of_a_killed_instance_is_recovered_by_the_next_accept(
    pair: Pair, deleted: bool
) -> None:
    note = pair.add("a")
    leave_pending(pair, note, exited_instance(), deleted=deleted)
    outcome = commit_deletion(pair.notes, pair.replay, confirmation(note), pair.holder("new"))
    # Kept: the retry deletes it. Deleted: the retry, which found the claim pending, says so.
    assert outcome == ((Deletion.DELETED, None) if deleted else (Deletion.DELETED, note))
    assert pair.notes.get(note.id) is None
    assert pending_attempts(pair) == []
    assert pair.pending.claim_state("alice", "nonce-1") == Completed(note.id)


def test_a_claim_whose_lease_ended_is_recovered_and_a_live_one_is_not(pair: Pair) -> None:
    note = pair.add("a")
    ticket = leave_pending(pair, note, "another-host/boot/1/2/3", deleted=False)
    holder = pair.holder("new")
    assert recover_pending(pair.notes, pair.replay, holder) == 0  # alive until its lease ends
    pair.clock.advance(ticket.lease_until - pair.clock())
    assert recover_pending(pair.notes, pair.replay, holder) == 1
    assert pair.pending.claim_state("alice", "nonce-1") is None  # nothing deleted: released
    assert pair.notes.get(note.id) == note


def test_an_attempt_fenced_under_it_claims_again_and_deletes(pair: Pair) -> None:
    note = pair.add("a")
    parked = Parked(pair, pair.holder("instance-A"), note)
    (stalled,) = pair.pending.pending_claims()
    # In this process a running attempt is alive whatever its lease says. Another process
    # sees only the lease: once it has ended there, that process fences and releases the
    # claim, as a cancel meeting it would.
    pair.clock.advance(stalled.lease_until - pair.clock())
    assert resolve_pending(pair.receipts, pair.pending, stalled) is False
    assert pending_attempts(pair) == []
    # The fenced attempt goes on: its deletion is refused, it claims again and deletes,
    # never answering "used" for a deletion that did not happen.
    assert parked.go() == (Deletion.DELETED, note)
    assert pair.notes.get(note.id) is None
    assert pair.pending.claim_state("alice", "nonce-1") == Completed(note.id)


# -- backing out, a full store, the sweep -----------------------------------------------------


def test_a_decline_releases_a_gone_holders_claim_and_is_honoured(pair: Pair) -> None:
    note = pair.add("a")
    leave_pending(pair, note, exited_instance(), deleted=False)
    holder = pair.holder("new")
    assert holder.used(pair.notes, pair.replay, "alice", "nonce-1") is False  # a cancel
    leave_pending(pair, note, exited_instance(), deleted=False)
    assert holder.claim(pair.notes, pair.replay, "alice", "nonce-1", 4e9) is Claim.CLAIMED
    assert pair.notes.get(note.id) == note  # nothing deleted, the state is declined
    assert pair.pending.claim_state("alice", "nonce-1") == Completed(None)


def test_a_decline_after_a_gone_holder_deleted_is_used(pair: Pair) -> None:
    note = pair.add("a")
    leave_pending(pair, note, exited_instance(), deleted=True)
    holder = pair.holder("new")
    assert holder.claim(pair.notes, pair.replay, "alice", "nonce-1", 4e9) is Claim.USED
    assert pair.pending.claim_state("alice", "nonce-1") == Completed(note.id)


def test_a_full_store_recovers_gone_holders_claims_before_it_refuses(
    pair: Pair, tmp_path: Path
) -> None:
    replay = pair.replay
    replay.capacity = replay.per_principal = 2
    dead = exited_instance()
    for nonce in ("x1", "x2"):
        ticket = Ticket("alice", nonce, 4e9, "gone-note", nonce, dead, 4e9)
        assert pair.pending.claim_pending(ticket) is Claim.CLAIMED
    holder = pair.holder("new")
    # bob is refused by alice's claims only while they are alive; these are not.
    assert holder.claim(pair.notes, replay, "bob", "b1", 4e9) is Claim.CLAIMED
    note = pair.add("a")
    outcome = commit_deletion(pair.notes, replay, confirmation(note), holder)
    assert outcome == (Deletion.DELETED, note)
    assert pending_attempts(pair) == []


def test_the_sweep_settles_gone_holders_claims_to_match_and_leaves_live_ones(pair: Pair) -> None:
    kept, deleted, working = pair.add("a"), pair.add("b"), pair.add("c")
    dead = exited_instance()
    for note, was_deleted in ((kept, False), (deleted, True)):
        ticket = Ticket("alice", note.id, 4e9, note.id, "t-" + note.id[-8:], dead, 4e9)
        assert pair.pending.claim_pending(ticket) is Claim.CLAIMED
        if was_deleted:
            assert pair.receipts.delete_for(note, ticket) is True
    parked = Parked(pair, pair.holder("instance-A"), working)
    sweeper = PendingSweeper(pair.notes, pair.replay, holder=pair.holder("instance-B"))
    assert sweeper.sweep() == 2
    assert pair.pending.claim_state("alice", kept.id) is None  # released: nothing deleted
    assert pair.pending.claim_state("alice", deleted.id) == Completed(deleted.id)
    assert len(pending_attempts(pair)) == 1  # the live holder's, untouched
    assert parked.go() == (Deletion.DELETED, working)
    assert sweeper.sweep() == 0
