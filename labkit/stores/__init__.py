"""The two store contracts the core depends on, and the deletion commit built on them.

Owns: `Note`, `NoteStore`, `ReplayStore` and its bounds (`DEFAULT_CAPACITY`,
`DEFAULT_PER_PRINCIPAL`, `replay_bounds`), `AtomicDeleter`, `Confirmation`, `commit_deletion`,
the two-step deletion protocol (`Ticket`, `PendingReplay`, `Receipts`, `claim_then_delete`,
`recover_pending`), `StoreError` with `StoreBusy` and `StoreUnavailable`, the exceptions a
backend raises for "try again later", and `FaultLog`, which logs each such condition once.
Backends live in submodules (`memory`, and the persistent ones); the core imports only this
module, so a backend never leaks into the protocol logic.

The two-step protocol. Where the claim and the deletion cannot share one transaction (two
SQLite files, SQLite or filesystem notes with a PostgreSQL replay store, ...), the deletion is:

1. `replay.claim_pending(ticket)`: the claim commits *pending*, naming the note and a random
   attempt id (the intent: which note, for which state);
2. `notes.delete_for(live, ticket)`: the note store deletes the note and records a receipt for
   `(principal, nonce, attempt)` in ONE transaction of its own; a receipt already there (the
   attempt was fenced by a recovery) makes it delete nothing;
3. `replay.settle(ticket, deleted)`: the claim is completed (the nonce stays consumed) or
   released (a stale note deletes nothing and burns nothing).

A crash anywhere leaves at most a pending claim. It is resolved on the next retry of the same
state and at start-up (`recover_pending`): `notes.fence(ticket)` writes an "abandoned" receipt
unless the deletion's receipt is there, in the note store's own transaction, so the answer is
final (a slow attempt still in flight can no longer delete), and the claim is completed or
released to match. A retry after a crash therefore tells the truth (the deleted note's state
is "already used"; a note that was kept is deleted by the retry), and a losing state's claim
never outlives its refusal.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

from labkit.scope import Path

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
    """One warning line when a store condition starts, none while it lasts, one more line
    when it ends: a full disk under load is one line, not a traceback per request."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self._log = logger
        self._lock = threading.Lock()
        self._active: str | None = None

    def failed(self, exc: StoreError) -> None:
        condition = str(exc)
        with self._lock:
            if condition == self._active:
                return
            self._active = condition
        self._log.warning("store unavailable: %s (answering -32001 while it lasts)", condition)

    def succeeded(self) -> None:
        if self._active is None:  # the common case, without the lock
            return
        with self._lock:
            ended, self._active = self._active, None
        if ended is not None:
            self._log.warning("store available again (was: %s)", ended)


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
    intent done. A store that cannot do better with this `replay` calls `claim_then_delete`.
    """

    def claim_and_delete(
        self, replay: ReplayStore, confirmation: Confirmation
    ) -> tuple[Deletion, Note | None]: ...


class Ticket(NamedTuple):
    """One attempt at one confirmed deletion: the claim `(principal, nonce)` until
    `expires_at`, for `note_id`, by the random `attempt` (two retries of one state are two
    attempts)."""

    principal: str
    nonce: str
    expires_at: float
    note_id: str
    attempt: str


@runtime_checkable
class PendingReplay(Protocol):
    """A replay store that can hold a claim as pending (step 1 and 3 of the protocol)."""

    def claim_pending(self, ticket: Ticket) -> Claim | Ticket:
        """Commit the claim as pending for `ticket`; CLAIMED, USED (a settled claim), FULL,
        or the pending `Ticket` of an earlier attempt of the same state."""
        ...

    def settle(self, ticket: Ticket, deleted: bool) -> None:
        """Complete (`deleted`: the nonce stays consumed) or release the pending claim of
        `ticket`; nothing if another attempt holds the claim now."""
        ...

    def pending_claims(self) -> list[Ticket]:
        """Every claim still pending (start-up recovery)."""
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
        """Whether the deletion of `ticket` happened; if it did not, record that it never
        will (a later `delete_for` of this attempt deletes nothing)."""
        ...


def commit_deletion(
    notes: NoteStore, replay: ReplayStore, confirmation: Confirmation
) -> tuple[Deletion, Note | None]:
    """Claim the confirmation's nonce and delete the live note, all or nothing.

    `confirmation.recheck` runs on the live record (authorization, containment, identity)
    after the claim and before the delete. A note is never deleted without its nonce
    consumed, and a nonce is never consumed by a deletion that did not happen.
    """
    if _is_atomic(type(notes)):
        atomic: AtomicDeleter = notes  # type: ignore[assignment]
        return atomic.claim_and_delete(replay, confirmation)
    return claim_then_delete(notes, replay, confirmation)


@functools.lru_cache(maxsize=64)
def _is_atomic(kind: type) -> bool:
    # A runtime Protocol check walks the protocol's attributes on every call: decide once per
    # store class.
    return hasattr(kind, "claim_and_delete")


def claim_then_delete(
    notes: NoteStore, replay: ReplayStore, confirmation: Confirmation
) -> tuple[Deletion, Note | None]:
    """The unit of work for two independent stores: the two-step protocol of the module
    docstring when both stores speak it, else claim, re-check and delete, releasing the
    claim if the delete cannot happen (in-process stores, where a crash loses both)."""
    if isinstance(replay, PendingReplay) and isinstance(notes, Receipts):
        return _two_step(notes, replay, confirmation)
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


# An earlier attempt of the same state found pending is resolved, then the claim is tried
# again; a third pending attempt in a row means retries of one state are racing: busy.
_PENDING_ROUNDS = 3


def _two_step(
    notes: Receipts, replay: PendingReplay, confirmation: Confirmation
) -> tuple[Deletion, Note | None]:
    ticket = Ticket(
        confirmation.principal,
        confirmation.nonce,
        confirmation.expires_at,
        confirmation.note_id,
        secrets.token_hex(8),
    )
    for _ in range(_PENDING_ROUNDS):
        claim = replay.claim_pending(ticket)
        if not isinstance(claim, Ticket):
            break
        # A crash (or a retry still in flight) left this state's claim pending: decide it
        # now, so this retry answers what really happened.
        resolve_pending(notes, replay, claim)
    else:
        raise StoreBusy("retries of one confirmation are racing; nothing was changed")
    if claim is not Claim.CLAIMED:
        return (Deletion.USED if claim is Claim.USED else Deletion.FULL), None
    # From here an exception leaves the claim pending: the next retry of this state, or the
    # next start-up, fences and settles it (releasing it now could race a commit we cannot
    # see, e.g. a lost COMMIT acknowledgement).
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
        # Fenced by a concurrent retry of this state (then the claim is no longer ours and
        # settling does nothing), or this nonce already deleted a note: consumed either way.
        replay.settle(ticket, deleted=True)
        return Deletion.USED, None
    replay.settle(ticket, deleted=deleted)
    return (Deletion.DELETED if deleted else Deletion.STALE), live


def resolve_pending(notes: Receipts, replay: PendingReplay, ticket: Ticket) -> bool:
    """Fence a pending attempt in the note store and settle its claim to match; returns
    whether its deletion had happened."""
    deleted = notes.fence(ticket)
    replay.settle(ticket, deleted=deleted)
    log.warning(
        "pending claim of %r for note %s resolved: %s",
        ticket.principal,
        ticket.note_id,
        "the deletion had happened; nonce consumed" if deleted else "nothing deleted; released",
    )
    return deleted


def recover_pending(notes: object, replay: object) -> int:
    """Resolve every pending claim (start-up); how many there were. Stores that share one
    transaction, or that do not speak the protocol, have none."""
    if not isinstance(replay, PendingReplay) or not isinstance(notes, Receipts):
        return 0
    pending = replay.pending_claims()
    for ticket in pending:
        resolve_pending(notes, replay, ticket)
    return len(pending)
