"""The two store contracts the core depends on, and the deletion commit built on them.

Owns: `Note`, `NoteStore`, `ReplayStore`, `AtomicDeleter`, `commit_deletion`.
Backends live in submodules (`memory`, and the persistent ones); the core imports only this
module, so a backend never leaks into the protocol logic.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from labkit.scope import Path


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


class Claim(enum.Enum):
    CLAIMED = "claimed"
    USED = "used"
    FULL = "full"


class Deletion(enum.Enum):
    DELETED = "deleted"
    USED = "used"
    FULL = "full"
    STALE = "stale"


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


@runtime_checkable
class AtomicDeleter(Protocol):
    """A store holding notes and nonces together: claim and delete in one transaction."""

    def claim_and_delete(
        self,
        principal: str,
        nonce: str,
        expires_at: float,
        note_id: str,
        recheck: Callable[[Note], bool],
    ) -> tuple[Deletion, Note | None]: ...


def commit_deletion(
    notes: NoteStore,
    replay: ReplayStore,
    *,
    principal: str,
    nonce: str,
    expires_at: float,
    note_id: str,
    recheck: Callable[[Note], bool],
) -> tuple[Deletion, Note | None]:
    """Claim the nonce and delete the live note, all or nothing.

    `recheck` runs on the live record (authorization, containment, identity) after the claim
    and before the delete. When one store holds both (a database), it does the whole thing in
    one transaction. Otherwise the claim comes first and is released if the delete cannot
    happen, so a note is never deleted without its nonce consumed and a nonce is never consumed
    by a deletion that failed.
    """
    if notes is replay and isinstance(notes, AtomicDeleter):
        return notes.claim_and_delete(principal, nonce, expires_at, note_id, recheck)
    claim = replay.claim(principal, nonce, expires_at)
    if claim is not Claim.CLAIMED:
        return (Deletion.USED if claim is Claim.USED else Deletion.FULL), None
    live = notes.get(note_id)
    if live is not None and recheck(live) and notes.delete(live):
        return Deletion.DELETED, live
    replay.release(principal, nonce)
    return Deletion.STALE, live
