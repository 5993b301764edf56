"""In-memory note and replay stores: the teaching default, thread-safe within one process.

Both speak the two-step deletion protocol (`labkit.stores`), so a memory store paired with a
persistent one follows the same steps as two databases do; in memory alone a crash loses
everything, notes included, so there is nothing to recover.
Must not import a transport, the course toolkit or the grader.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence

from labkit.clock import Clock, system_clock
from labkit.scope import Path, parse_file_uri
from labkit.stores import (
    DEFAULT_CAPACITY,
    DEFAULT_PER_PRINCIPAL,
    Claim,
    ClaimState,
    Completed,
    Note,
    Ticket,
    replay_bounds,
)

# Receipts kept by a memory note store (oldest dropped first): they only have to outlive the
# confirmations in flight.
MAX_RECEIPTS = 100_000

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_PER_PRINCIPAL",
    "MemoryNoteStore",
    "MemoryReplayStore",
]


class MemoryNoteStore:
    def __init__(self) -> None:
        self._notes: dict[str, Note] = {}
        # Every note as (case-folded title, id, note), kept in `find`'s order.
        self._by_title: list[tuple[str, str, Note]] = []
        self._generation = itertools.count(1)
        self._lock = threading.Lock()
        # (principal, nonce) -> {attempt: deleted?}
        self._receipts: OrderedDict[tuple[str, str], dict[str, bool]] = OrderedDict()

    def add(self, note_id: str, uri: str, title: str) -> Note:
        """Create or replace a note (a replaced note gets a new identity)."""
        note = Note(note_id, parse_file_uri(uri), title, f"gen-{next(self._generation)}")
        with self._lock:
            self._put(note)
        return note

    def move(self, note_id: str, uri: str) -> Note:
        """Move a note to another path, keeping its identity (a rename on disk)."""
        with self._lock:
            old = self._notes[note_id]
            moved = Note(note_id, parse_file_uri(uri), old.title, old.identity)
            self._put(moved)
        return moved

    # Every change of `_notes` goes through `_put` and `_remove`, with the lock held.

    def _put(self, note: Note) -> None:
        if note.id in self._notes:
            self._remove(note.id)
        self._notes[note.id] = note
        bisect.insort(self._by_title, (note.title.casefold(), note.id, note))

    def _remove(self, note_id: str) -> None:
        note = self._notes.pop(note_id)
        del self._by_title[bisect.bisect_left(self._by_title, (note.title.casefold(), note_id))]

    def find(self, workspace: Path, title: str, limit: int) -> Sequence[Note]:
        needle = title.casefold()
        depth = len(workspace)
        matches: list[Note] = []
        if limit < 1:
            return matches
        with self._lock:
            # In (folded title, id) order, so the scan stops at `limit` matches;
            # strictly_contains inlined.
            for folded, _, note in self._by_title:
                path = note.path
                if needle in folded and len(path) > depth and path[:depth] == workspace:
                    matches.append(note)
                    if len(matches) == limit:
                        break
        return matches

    def get(self, note_id: str) -> Note | None:
        with self._lock:
            return self._notes.get(note_id)

    def delete(self, note: Note) -> bool:
        with self._lock:
            if self._notes.get(note.id) != note:
                return False
            self._remove(note.id)
            return True

    def ids(self) -> list[str]:
        with self._lock:
            return sorted(self._notes)

    def delete_for(self, note: Note, ticket: Ticket) -> bool | None:
        key = (ticket.principal, ticket.nonce)
        with self._lock:
            attempts = self._receipts.get(key, {})
            if ticket.attempt in attempts or any(attempts.values()):
                return None
            if self._notes.get(note.id) != note:
                return False
            self._remove(note.id)
            self._receipt(key)[ticket.attempt] = True
            return True

    def fence(self, ticket: Ticket) -> bool:
        with self._lock:
            attempts = self._receipt((ticket.principal, ticket.nonce))
            attempts.setdefault(ticket.attempt, False)
            return any(attempts.values())

    def _receipt(self, key: tuple[str, str]) -> dict[str, bool]:
        if key not in self._receipts:
            while len(self._receipts) >= MAX_RECEIPTS:
                self._receipts.popitem(last=False)
            self._receipts[key] = {}
        return self._receipts[key]


class MemoryReplayStore:
    """Bounded, TTL-pruned nonce store with a per-principal share.

    The per-principal share stops one caller from filling the store with declines and so
    blocking every other principal's deletions (docs/LESSON.md section 13).
    """

    def __init__(
        self,
        *,
        capacity: int = DEFAULT_CAPACITY,
        per_principal: int = DEFAULT_PER_PRINCIPAL,
        clock: Clock = system_clock,
    ) -> None:
        self.capacity, self.per_principal = replay_bounds(capacity, per_principal)
        self._clock = clock
        self._expiry: dict[tuple[str, str], float] = {}
        self._heap: list[tuple[float, str, str]] = []
        self._owned: Counter[str] = Counter()
        self._pending: dict[tuple[str, str], Ticket] = {}
        # The note each completed deletion's claim consumed its nonce for.
        self._deleted: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def claim(self, principal: str, nonce: str, expires_at: float) -> Claim:
        with self._lock:
            return self._claim(principal, nonce, expires_at)

    def claim_pending(self, ticket: Ticket) -> Claim | Ticket:
        key = (ticket.principal, ticket.nonce)
        with self._lock:  # one step: another attempt sees the claim pending, never half-made
            pending = self._pending.get(key)
            if pending is not None:
                return pending
            claim = self._claim(ticket.principal, ticket.nonce, ticket.expires_at)
            if claim is Claim.CLAIMED:
                self._pending[key] = ticket
            return claim

    def _claim(self, principal: str, nonce: str, expires_at: float) -> Claim:
        key = (principal, nonce)
        self._prune(self._clock())
        if key in self._expiry or key in self._pending:
            return Claim.USED
        if len(self._expiry) >= self.capacity or self._owned[principal] >= self.per_principal:
            return Claim.FULL
        self._expiry[key] = expires_at
        self._owned[principal] += 1
        heapq.heappush(self._heap, (expires_at, principal, nonce))
        return Claim.CLAIMED

    def settle(self, ticket: Ticket, deleted: bool) -> bool:
        key = (ticket.principal, ticket.nonce)
        with self._lock:
            pending = self._pending.get(key)
            if pending is None or pending.attempt != ticket.attempt:
                return False
            del self._pending[key]
            if not deleted:
                self._drop(key)
            elif key in self._expiry:
                self._deleted[key] = ticket.note_id
            return True

    def pending_claims(self) -> list[Ticket]:
        with self._lock:
            return list(self._pending.values())

    def claim_state(self, principal: str, nonce: str) -> ClaimState:
        key = (principal, nonce)
        with self._lock:
            self._prune(self._clock())
            pending = self._pending.get(key)
            if pending is not None:
                return pending
            return Completed(self._deleted.get(key)) if key in self._expiry else None

    def release(self, principal: str, nonce: str) -> None:
        with self._lock:
            self._pending.pop((principal, nonce), None)
            self._drop((principal, nonce))

    def _drop(self, key: tuple[str, str]) -> None:
        self._deleted.pop(key, None)
        if self._expiry.pop(key, None) is not None:
            self._owned[key[0]] -= 1
        # the heap entry is dropped lazily by _prune

    def used(self, principal: str, nonce: str) -> bool:
        with self._lock:
            self._prune(self._clock())
            return (principal, nonce) in self._expiry

    def __len__(self) -> int:
        with self._lock:
            self._prune(self._clock())
            return len(self._expiry)

    def _prune(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            expires_at, principal, nonce = heapq.heappop(self._heap)
            if self._expiry.get((principal, nonce)) == expires_at:
                # An expired claim no longer counts; a pending one stays pending until its
                # holder or a recovery settles it.
                del self._expiry[(principal, nonce)]
                self._deleted.pop((principal, nonce), None)
                self._owned[principal] -= 1
