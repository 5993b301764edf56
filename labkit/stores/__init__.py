"""The two store contracts the core depends on, and the deletion commit built on them.

Owns: `Note`, `NoteStore`, `ReplayStore` and its bounds (`DEFAULT_CAPACITY`,
`DEFAULT_PER_PRINCIPAL`, `replay_bounds`), `AtomicDeleter`, `Confirmation`, `commit_deletion`,
the two-step deletion protocol (`Ticket`, `PendingReplay`, `Receipts`, `ClaimHolder`,
`claim_then_delete`, `recover_pending`), `StoreError` with `StoreBusy`, `StoreUnavailable` and
`ClaimInProgress`, the exceptions a backend raises for "try again later", and `FaultLog`
(`FAULTS`), which logs each store's condition once. Backends live in submodules (`memory`, and
the persistent ones); the core imports only this module, so a backend never leaks into the
protocol logic.

The two-step protocol. Where the claim and the deletion cannot share one transaction (two
SQLite files, SQLite or filesystem notes with a PostgreSQL replay store, ...), the deletion is:

1. `replay.claim_pending(ticket)`: the claim commits *pending*, naming the note, a random
   attempt id, the process instance holding it and a lease (the intent: which note, for which
   state, by whom);
2. `notes.delete_for(live, ticket)`: the note store deletes the note and records a receipt for
   `(principal, nonce, attempt)` in ONE transaction of its own; a receipt already there (the
   attempt was fenced by a recovery) makes it delete nothing;
3. `replay.settle(ticket, deleted)`: the claim is completed (the nonce stays consumed) or
   released (a stale note deletes nothing and burns nothing).

A pending claim belongs to its attempt until that attempt's holder is proven gone
(`ClaimHolder.gone`: an attempt of this instance that stopped running, a previous instance
whose process exited, a lease past its end). Another request of the same state that meets a
live holder's claim waits a bounded time for it to settle and answers what really happened:
the deletion (the same note), "already used" (another note), or `ClaimInProgress` (-32001:
in progress, retry); a cancel or a decline meeting it is honoured once it is released. A claim
whose holder is gone is recovered by whoever meets it, by the background sweep
(`labkit.stores.sweeper`) and at start-up: `notes.fence(ticket)` writes an "abandoned" receipt
unless the deletion's receipt is there, in the note store's own transaction, so the answer is
final (a slow attempt still in flight can no longer delete), and the claim is completed or
released to match. A crash anywhere therefore leaves at most a pending claim, a retry tells the
truth (the deleted note's state is "already used"; a note that was kept is deleted by the
retry), and an expired claim never counts against the replay store's bounds.
Must not import a transport, the course toolkit or the grader.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol, runtime_checkable

from labkit.clock import Clock, system_clock
from labkit.scope import Path
from labkit.stores.instance import instance_name, process_gone

# The replay store's bounds (every backend, and the `[stores]` settings): how many live claims
# in all, and how many one principal may hold, so no caller can fill the store for the others
# (docs/security.md, "Exactly-once replay store"; docs/LESSON.md section 13).
DEFAULT_CAPACITY = 10_000
DEFAULT_PER_PRINCIPAL = 1_000


def replay_bounds(capacity: int, per_principal: int) -> tuple[int, int]:
    """`(capacity, per-principal share)` as every replay store applies them: both positive,
    the share never above the capacity."""
    if capacity < 1 or per_principal < 1:
        raise ValueError("replay store capacity and per-principal share must be positive")
    return capacity, min(per_principal, capacity)


@dataclass(frozen=True)
class Note:
    """A note as the store sees it.

    `path` is the decoded absolute path of the note (its `file:` URI). `identity` is an opaque
    version stamp (a generation counter, or device and inode for files): it is bound into the
    signed state so a note replaced after the form was shown is never deleted in its place.
    """

    id: str
    path: Path
    title: str
    identity: str


log = logging.getLogger("labkit.stores")


class StoreError(RuntimeError):
    """A store could not do the work now: locked, out of space, an I/O error, out of file
    descriptors, a database that went away. Nothing was claimed or deleted, or what was in
    flight is recorded as a pending claim that the next retry resolves; the caller may send
    the same request again. The core answers it with -32001 (HTTP 503 with Retry-After),
    never as an internal error, an empty result or a replay."""


class StoreBusy(StoreError):
    """The store stayed locked (another writer) longer than its deadline."""


class StoreUnavailable(StoreError):
    """The store's disk, descriptors or server failed (ENOSPC, EIO, EMFILE, a lost
    connection). `cause` is the short condition ("no space left on device ..."), the same
    for every request while it lasts, so it is logged once (`FaultLog`)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class FaultLog:
    """One warning line when a store's condition starts, none while it lasts, and one when it
    ends, for each store (`source`, its file or database): a full disk under load is one
    line, not a traceback per request.

    The end needs a committed write of that same store (hysteresis): reads often still work
    on a full disk or a failing database, and a read that succeeds between two failed writes
    must not announce an end that has not come; nor does another store's write. Stores call
    `record` where they raise and `wrote` after each committed write."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self._log = logger
        self._lock = threading.Lock()
        self._active: dict[str, str] = {}

    def record(self, source: str, exc: StoreError) -> StoreError:
        """Record `exc` as `source`'s condition (a line if it is new); returns `exc`."""
        condition = str(exc)
        with self._lock:
            if self._active.get(source) == condition:
                return exc
            self._active[source] = condition
        self._log.warning(
            "store unavailable: %s (answering -32001 until a write succeeds)", condition
        )
        return exc

    def wrote(self, source: str) -> None:
        if not self._active:  # the common case, without the lock
            return
        with self._lock:
            ended = self._active.pop(source, None)
        if ended is not None:
            self._log.warning("store available again: a write succeeded (was: %s)", ended)

    def active(self) -> dict[str, str]:
        """The conditions that have not ended: source -> cause."""
        with self._lock:
            return dict(self._active)


# Every store of this process reports to this one log.
FAULTS: Final = FaultLog()


class Claim(enum.Enum):
    CLAIMED = "claimed"
    USED = "used"
    FULL = "full"


class Deletion(enum.Enum):
    DELETED = "deleted"
    USED = "used"
    FULL = "full"
    STALE = "stale"


class Confirmation(NamedTuple):
    """What one confirmed deletion needs: the nonce to claim (`principal`, `nonce`, until
    `expires_at`), the note to delete (`note_id`), and `recheck`, run on the live record
    (authorization, containment, identity) after the claim and before the delete.

    Immutable. A NamedTuple rather than a frozen dataclass because one is built for every
    confirmed deletion, and a NamedTuple is about half the cost to build.
    """

    principal: str
    nonce: str
    expires_at: float
    note_id: str
    recheck: Callable[[Note], bool]


@runtime_checkable
class NoteStore(Protocol):
    def find(self, workspace: Path, title: str, limit: int) -> Sequence[Note]:
        """Up to `limit` notes strictly inside `workspace` whose title contains `title`
        (case-insensitive), in a deterministic order."""
        ...

    def get(self, note_id: str) -> Note | None:
        """The live record of a note, or None."""
        ...

    def delete(self, note: Note) -> bool:
        """Delete the note if its live record still equals `note`; True if it was deleted."""
        ...


@runtime_checkable
class ReplayStore(Protocol):
    def claim(self, principal: str, nonce: str, expires_at: float) -> Claim:
        """Atomically record `(principal, nonce)` until `expires_at`; CLAIMED exactly once."""
        ...

    def release(self, principal: str, nonce: str) -> None:
        """Undo a claim whose deletion did not happen (no nonce is burnt by a failed delete)."""
        ...

    def used(self, principal: str, nonce: str) -> bool:
        """Whether `(principal, nonce)` is claimed and not yet expired (a read, no claim)."""
        ...


@runtime_checkable
class AtomicDeleter(Protocol):
    """A note store that can claim the nonce and delete in one unit of work.

    A database store does it in one transaction when `replay` lives in the same database; a
    filesystem store commits the claim with an intent record, then unlinks, then marks the
    intent done. A store that cannot do better with this `replay` calls `claim_then_delete`
    with the same `holder`.
    """

    def claim_and_delete(
        self, replay: ReplayStore, confirmation: Confirmation, holder: ClaimHolder
    ) -> tuple[Deletion, Note | None]: ...


class Ticket(NamedTuple):
    """One attempt at one confirmed deletion: the claim `(principal, nonce)` until
    `expires_at`, for `note_id`, by the random `attempt` (two retries of one state are two
    attempts). `holder` names the process instance that made the attempt
    (`labkit.stores.instance`); it is presumed alive until `lease_until` (wall-clock
    seconds) unless proven gone sooner (`ClaimHolder.gone`)."""

    principal: str
    nonce: str
    expires_at: float
    note_id: str
    attempt: str
    holder: str = ""
    lease_until: float = 0.0


class Completed(NamedTuple):
    """A live claim that is settled: its nonce is consumed. `note_id` names the note whose
    deletion consumed it, or is None (a decline, a one-transaction deletion)."""

    note_id: str | None


ClaimState = Ticket | Completed | None
"""A nonce's live claim: pending (its `Ticket`), `Completed`, or None (no live claim)."""


@runtime_checkable
class PendingReplay(Protocol):
    """A replay store that can hold a claim as pending (step 1 and 3 of the protocol)."""

    def claim_pending(self, ticket: Ticket) -> Claim | Ticket:
        """Commit the claim as pending for `ticket`; CLAIMED, USED (a settled claim), FULL,
        or the pending `Ticket` of an earlier attempt of the same state."""
        ...

    def settle(self, ticket: Ticket, deleted: bool) -> bool:
        """Complete (`deleted`: the nonce stays consumed) or release the pending claim of
        `ticket`; whether it did (False: that attempt no longer holds the claim)."""
        ...

    def pending_claims(self) -> list[Ticket]:
        """Every claim still pending, expired or not."""
        ...

    def claim_state(self, principal: str, nonce: str) -> ClaimState:
        """The claim of `(principal, nonce)`: pending (whether expired or not), completed
        and live, or None."""
        ...


@runtime_checkable
class Receipts(Protocol):
    """A note store that records which attempt deleted a note (step 2 and the fence)."""

    def delete_for(self, note: Note, ticket: Ticket) -> bool | None:
        """Delete `note` (its live record still equal) and record the receipt of `ticket`, in
        one transaction. True: deleted. False: stale, nothing deleted or recorded. None: this
        attempt was fenced, or another attempt already deleted for this nonce."""
        ...

    def fence(self, ticket: Ticket) -> bool:
        """Whether a deletion happened for `ticket`'s nonce (by this attempt or another); if
        this attempt's did not, record that it never will (a later `delete_for` of this
        attempt deletes nothing)."""
        ...


class ClaimInProgress(StoreBusy):
    """Another request is carrying out the same confirmation: its claim is pending, its
    holder alive, and it did not settle within the wait. This request did nothing; the same
    request again reports what happened (-32001)."""


# A request meeting another attempt's pending claim of its state waits this long for it to
# settle before it answers "in progress, retry".
PENDING_WAIT_SECONDS: Final = 5.0
# How long a claim's holder is presumed alive when nothing proves it gone (an instance on
# another host, or one whose process cannot be checked): longer than an attempt takes between
# its claim and its settling (each store step is bounded by a lock deadline of 60 s). A lease
# that ends under a holder still at work costs nothing but a retry: the fence and the
# deletion are serialized in the note store, and a fenced attempt claims again.
LEASE_SECONDS: Final = 180.0
# A request refused for a full replay store first recovers up to this many claims whose
# holder is gone, then claims once more (the background sweep does the rest).
RECOVER_BATCH: Final = 32
# An attempt that loses its claim (fenced, or released under it) claims again, this often.
_ROUNDS: Final = 3


class ClaimHolder:
    """This process instance as the holder of pending claims (the two-step protocol of the
    module docstring), and what it does when it meets someone else's.

    Each attempt is registered as running from before its claim until after it settled, so a
    claim of this instance is alive exactly while its attempt runs here. A claim of another
    instance is alive until its lease ends, unless `instance.process_gone` proves its process
    exited (a previous instance of this server, killed). Only claims whose holder is gone are
    ever fenced and settled by anyone else: recovery never races the attempt it recovers.

    `clock` is the wall clock (leases are compared across processes); `wait_seconds` bounds
    how long a request waits for a live holder; `pause(ticket, seconds)` is one wait for the
    holder of `ticket` (default `pause_for`: until its attempt in this process ends, or a
    short sleep between two reads of another process's claim); `instance` names this
    instance (default: a fresh name).
    """

    def __init__(
        self,
        *,
        clock: Clock = system_clock,
        wait_seconds: float = PENDING_WAIT_SECONDS,
        lease_seconds: float = LEASE_SECONDS,
        pause: Callable[[Ticket, float], None] | None = None,
        instance: str | None = None,
    ) -> None:
        self._clock = clock
        self._wait_seconds = wait_seconds
        self._lease_seconds = lease_seconds
        self._pause = pause if pause is not None else pause_for
        self._name = instance
        self._pid = os.getpid()

    @property
    def id(self) -> str:
        if self._name is None or self._pid != os.getpid():  # a new process after fork()
            self._name, self._pid = instance_name(), os.getpid()
        return self._name

    # -- this instance's attempts ------------------------------------------------------------

    def ticket(self, confirmation: Confirmation) -> Ticket:
        return Ticket(
            confirmation.principal,
            confirmation.nonce,
            confirmation.expires_at,
            confirmation.note_id,
            secrets.token_hex(8),
            self.id,
            self._clock() + self._lease_seconds,
        )

    @contextlib.contextmanager
    def running(self, attempt: str) -> Iterator[None]:
        key = (self.id, attempt)
        with _SETTLED:
            _RUNNING.add(key)
        try:
            yield
        finally:
            with _SETTLED:
                _RUNNING.discard(key)
                _SETTLED.notify_all()

    def gone(self, ticket: Ticket) -> bool:
        """Whether the holder of `ticket`'s claim no longer works on it."""
        if _running_here(ticket):
            return False
        if ticket.holder == self.id:
            return True  # this instance's attempt, and it stopped
        if not ticket.holder or ticket.lease_until <= self._clock():
            return True
        return process_gone(ticket.holder)

    # -- the deletion --------------------------------------------------------------------------

    def delete(
        self, notes: Receipts, replay: PendingReplay, confirmation: Confirmation
    ) -> tuple[Deletion, Note | None]:
        """The two-step deletion (module docstring), attempt after attempt while one loses its
        claim; a pending claim of the same state by another attempt is waited for, or
        recovered if its holder is gone."""
        for _ in range(_ROUNDS):
            ticket = self.ticket(confirmation)
            with self.running(ticket.attempt):
                outcome = self._attempt(notes, replay, confirmation, ticket)
            if outcome is not None:
                return outcome
        raise ClaimInProgress("the claim of this confirmation kept changing hands; nothing done")

    def _attempt(
        self, notes: Receipts, replay: PendingReplay, confirmation: Confirmation, ticket: Ticket
    ) -> tuple[Deletion, Note | None] | None:
        """One attempt's outcome, or None when it must claim again."""
        claim = replay.claim_pending(ticket)
        if claim is Claim.FULL and self.recover(notes, replay, limit=RECOVER_BATCH):
            claim = replay.claim_pending(ticket)
        if isinstance(claim, Ticket):
            # Another attempt at this state holds the claim: what it comes to is our answer.
            state = self.await_claim(notes, replay, claim)
            if state is None:
                return None  # released: nothing was deleted, claim it ourselves
            same = state.note_id == confirmation.note_id
            return (Deletion.DELETED, None) if same else (Deletion.USED, None)
        if claim is not Claim.CLAIMED:
            return (Deletion.USED if claim is Claim.USED else Deletion.FULL), None
        # From here an exception leaves the claim pending, its holder gone once this attempt
        # stops running: the next retry of this state, the sweep or the next start-up fences
        # and settles it (releasing it now could race a commit we cannot see, e.g. a lost
        # COMMIT acknowledgement).
        store: NoteStore = notes  # type: ignore[assignment]
        try:
            live = store.get(confirmation.note_id)
            stale = live is None or not confirmation.recheck(live)
        except BaseException:
            # This attempt never reached the note store's deletion and never will: release (if
            # even that fails, the claim stays pending and is resolved later).
            with contextlib.suppress(Exception):
                replay.settle(ticket, deleted=False)
            raise
        if stale:
            replay.settle(ticket, deleted=False)
            return Deletion.STALE, live
        assert live is not None
        deleted = notes.delete_for(live, ticket)
        if deleted is None:
            # Fenced (a recovery took this attempt for gone: its lease ended under it), or
            # this nonce already deleted a note. Only the second consumes the nonce; after the
            # first the claim was released under us, and we claim again.
            happened = notes.fence(ticket)
            replay.settle(ticket, deleted=happened)
            return (Deletion.USED, None) if happened else None
        replay.settle(ticket, deleted=deleted)
        return (Deletion.DELETED if deleted else Deletion.STALE), live

    # -- meeting another attempt's claim -------------------------------------------------------

    def await_claim(self, notes: Receipts, replay: PendingReplay, ticket: Ticket) -> ClaimState:
        """What the pending claim `ticket` comes to: None (released: the nonce is free again)
        or `Completed`. A gone holder's claim is recovered at once; a live holder is waited
        for, at most `wait_seconds`, then `ClaimInProgress` is raised."""
        deadline = time.monotonic() + self._wait_seconds
        state: ClaimState = ticket
        while isinstance(state, Ticket):
            if self.gone(state):
                resolve_pending(notes, replay, state)
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ClaimInProgress(
                        f"a confirmation of {ticket.principal!r} is still being carried out "
                        "by another request; nothing was done"
                    )
                self._pause(state, left)
            state = replay.claim_state(ticket.principal, ticket.nonce)
        return state

    def claim(
        self, notes: object, replay: ReplayStore, principal: str, nonce: str, expires_at: float
    ) -> Claim:
        """Claim a nonce outright (a decline): a pending claim of the same state is waited
        for, or recovered when its holder is gone, and claimed again if it was released; a
        full store first recovers claims whose holder is gone."""
        claim = replay.claim(principal, nonce, expires_at)
        pair = _two_step_pair(notes, replay)
        if pair is None:
            return claim
        receipts, pending = pair
        if claim is Claim.FULL and self.recover(receipts, pending, limit=RECOVER_BATCH):
            claim = replay.claim(principal, nonce, expires_at)
        if claim is Claim.USED:
            state = pending.claim_state(principal, nonce)
            if isinstance(state, Ticket) and self.await_claim(receipts, pending, state) is None:
                claim = replay.claim(principal, nonce, expires_at)
        return claim

    def used(self, notes: object, replay: ReplayStore, principal: str, nonce: str) -> bool:
        """Whether `(principal, nonce)` is used (a read, for a cancel or a missing answer): a
        pending claim counts only once it is known to be completed. It is waited for, or
        recovered when its holder is gone."""
        if not replay.used(principal, nonce):
            return False
        pair = _two_step_pair(notes, replay)
        if pair is None:
            return True
        receipts, pending = pair
        state = pending.claim_state(principal, nonce)
        if isinstance(state, Ticket):
            state = self.await_claim(receipts, pending, state)
        return state is not None

    # -- recovery ------------------------------------------------------------------------------

    def recover(self, notes: object, replay: object, limit: int | None = None) -> int:
        """Fence and settle the pending claims whose holder is gone (at most `limit`); how
        many. Stores that share one transaction, or that do not speak the protocol, have
        none."""
        pair = _two_step_pair(notes, replay)
        if pair is None:
            return 0
        receipts, pending = pair
        resolved = 0
        for ticket in pending.pending_claims():
            if limit is not None and resolved >= limit:
                break
            if self.gone(ticket):
                resolve_pending(receipts, pending, ticket)
                resolved += 1
        return resolved


# The attempts running in this process, as (instance, attempt): an instance is a name, and
# every `ClaimHolder` of this process that bears it shares its attempts.
_RUNNING: set[tuple[str, str]] = set()
_SETTLED = threading.Condition()


def _running_here(ticket: Ticket) -> bool:
    with _SETTLED:
        return (ticket.holder, ticket.attempt) in _RUNNING


# Between two reads of a claim held by another process.
_POLL_SECONDS: Final = 0.05


def pause_for(ticket: Ticket, seconds: float) -> None:
    """Wait at most `seconds` for the holder of `ticket`: until its attempt ends when it runs
    in this process, else for a short poll interval."""
    key = (ticket.holder, ticket.attempt)
    with _SETTLED:
        if key in _RUNNING:
            _SETTLED.wait_for(lambda: key not in _RUNNING, seconds)
            return
    time.sleep(min(_POLL_SECONDS, seconds))


HOLDER: Final = ClaimHolder()
"""This process's instance, for every store that is not given another."""


def commit_deletion(
    notes: NoteStore,
    replay: ReplayStore,
    confirmation: Confirmation,
    holder: ClaimHolder = HOLDER,
) -> tuple[Deletion, Note | None]:
    """Claim the confirmation's nonce and delete the live note, all or nothing.

    `confirmation.recheck` runs on the live record (authorization, containment, identity)
    after the claim and before the delete. A note is never deleted without its nonce
    consumed, and a nonce is never consumed by a deletion that did not happen.
    """
    if _is_atomic(type(notes)):
        atomic: AtomicDeleter = notes  # type: ignore[assignment]
        return atomic.claim_and_delete(replay, confirmation, holder)
    return claim_then_delete(notes, replay, confirmation, holder)


@functools.lru_cache(maxsize=64)
def _is_atomic(kind: type) -> bool:
    # A runtime Protocol check walks the protocol's attributes on every call: decide once per
    # store class.
    return hasattr(kind, "claim_and_delete")


@functools.lru_cache(maxsize=64)
def _speaks_two_step(notes: type, replay: type) -> bool:
    return issubclass(notes, Receipts) and issubclass(replay, PendingReplay)


def speaks_two_step(notes: object, replay: object) -> bool:
    """Whether a deletion over these stores takes two steps (and may leave pending claims)."""
    return _two_step_pair(notes, replay) is not None


def _two_step_pair(notes: Any, replay: Any) -> tuple[Receipts, PendingReplay] | None:
    """`(notes, replay)` when they speak the two-step protocol to each other, else None."""
    if notes is replay or not _speaks_two_step(notes.__class__, replay.__class__):
        return None  # one database: one transaction, never a pending claim
    return notes, replay


def claim_then_delete(
    notes: NoteStore,
    replay: ReplayStore,
    confirmation: Confirmation,
    holder: ClaimHolder = HOLDER,
) -> tuple[Deletion, Note | None]:
    """The unit of work for two independent stores: the two-step protocol of the module
    docstring when both stores speak it, else claim, re-check and delete, releasing the
    claim if the delete cannot happen (in-process stores, where a crash loses both)."""
    pair = _two_step_pair(notes, replay)
    if pair is not None:
        return holder.delete(*pair, confirmation)
    principal, nonce = confirmation.principal, confirmation.nonce
    claim = replay.claim(principal, nonce, confirmation.expires_at)
    if claim is not Claim.CLAIMED:
        return (Deletion.USED if claim is Claim.USED else Deletion.FULL), None
    try:
        live = notes.get(confirmation.note_id)
        if live is not None and confirmation.recheck(live) and notes.delete(live):
            return Deletion.DELETED, live
    except BaseException:
        # A recheck or store failure is not a deletion either: the nonce stays usable.
        replay.release(principal, nonce)
        raise
    replay.release(principal, nonce)
    return Deletion.STALE, live


def resolve_pending(notes: Receipts, replay: PendingReplay, ticket: Ticket) -> bool:
    """Fence a pending attempt (its holder gone) in the note store and settle its claim to
    match; returns whether a deletion had happened for its nonce."""
    deleted = notes.fence(ticket)
    if replay.settle(ticket, deleted=deleted):
        log.warning(
            "pending claim of %r for note %s (holder gone) resolved: %s",
            ticket.principal,
            ticket.note_id,
            "the deletion had happened; nonce consumed" if deleted else "nothing deleted; released",
        )
    return deleted


def recover_pending(notes: object, replay: object, holder: ClaimHolder = HOLDER) -> int:
    """Resolve every pending claim whose holder is gone (start-up, the background sweep);
    how many there were."""
    return holder.recover(notes, replay)
