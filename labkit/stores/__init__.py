"""The two store contracts the core depends on, and the deletion commit built on them.

Owns: `Note`, `NoteStore`, `ReplayStore` and its bounds (`DEFAULT_CAPACITY`,
`DEFAULT_PER_PRINCIPAL`, `replay_bounds`), `AtomicDeleter`, `Confirmation`, `commit_deletion`,
and `StoreBusy`, the one exception a backend raises for "try again later".
Backends live in submodules (`memory`, and the persistent ones); the core imports only this
module, so a backend never leaks into the protocol logic.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

from labkit.scope import Path

# The replay store's bounds (every backend, and the `[stores]` settings): how many live claims
# in all, and how many one principal may hold, so no caller can fill the store for the others
# (SECURITY.md, "Exactly-once replay store"; LESSON.md section 13).
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


class StoreBusy(RuntimeError):
    """The store could not do the work in time (a database that stayed locked). Nothing was
    claimed or deleted, and the caller may try the same request again: the core answers it
    with the busy error (-32001, HTTP 503), never as an internal error or a replay."""


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
    """The generic unit of work for two independent stores: claim first (so two servers can
    never both pass), then re-check and delete, releasing the claim if the delete cannot
    happen."""
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
