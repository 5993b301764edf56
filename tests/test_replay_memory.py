"""The in-memory replay store (atomic claim, TTL pruning, bounds, per-principal share) and the
generic claim-then-delete unit of work it backs, with the memory note store it is paired with.
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.clock import FakeClock
from labkit.scope import parse_file_uri
from labkit.stores import (
    AtomicDeleter,
    Claim,
    Confirmation,
    Deletion,
    Note,
    NoteStore,
    ReplayStore,
    Ticket,
    claim_then_delete,
    commit_deletion,
)
from labkit.stores.memory import DEFAULT_CAPACITY, DEFAULT_PER_PRINCIPAL, MemoryNoteStore
from labkit.stores.memory import MemoryReplayStore as Store

NOTES = parse_file_uri("file:///work/notes")


@pytest.fixture
def store(clock: FakeClock) -> Store:
    return Store(capacity=4, per_principal=2, clock=clock)


def test_the_memory_stores_satisfy_the_protocols(clock: FakeClock) -> None:
    assert isinstance(Store(clock=clock), ReplayStore)
    assert isinstance(MemoryNoteStore(), NoteStore)
    assert not isinstance(MemoryNoteStore(), AtomicDeleter)  # so the core uses claim_then_delete
    assert DEFAULT_PER_PRINCIPAL < DEFAULT_CAPACITY


def test_a_nonce_is_claimed_exactly_once_per_principal(store: Store, clock: FakeClock) -> None:
    exp = clock.now + 60
    assert store.claim("alice", "n1", exp) is Claim.CLAIMED
    assert store.claim("alice", "n1", exp) is Claim.USED
    assert store.claim("alice", "n1", exp + 100) is Claim.USED
    # Claims are keyed by (principal, nonce): another principal's nonce never collides.
    assert store.claim("bob", "n1", exp) is Claim.CLAIMED
    assert len(store) == 2


def test_the_store_is_bounded(clock: FakeClock) -> None:
    store = Store(capacity=3, per_principal=3, clock=clock)
    exp = clock.now + 60
    for index, principal in enumerate(["a", "b", "c"]):
        assert store.claim(principal, f"n{index}", exp) is Claim.CLAIMED
    assert store.claim("d", "n9", exp) is Claim.FULL
    # A replay is still recognised as a replay when full (it must not look like "busy").
    assert store.claim("a", "n0", exp) is Claim.USED


def test_each_principal_has_a_bounded_share(store: Store, clock: FakeClock) -> None:
    exp = clock.now + 60
    assert store.claim("mallory", "m1", exp) is Claim.CLAIMED
    assert store.claim("mallory", "m2", exp) is Claim.CLAIMED
    assert store.claim("mallory", "m3", exp) is Claim.FULL
    assert store.claim("alice", "a1", exp) is Claim.CLAIMED
    assert store.claim("alice", "a2", exp) is Claim.CLAIMED
    assert store.claim("alice", "a3", exp) is Claim.FULL
    assert store.claim("bob", "b1", exp) is Claim.FULL  # now the whole store is full


def test_the_share_never_exceeds_the_capacity(clock: FakeClock) -> None:
    store = Store(capacity=2, per_principal=5, clock=clock)
    assert store.per_principal == 2


@pytest.mark.parametrize(("capacity", "share"), [(0, 1), (1, 0), (-1, 5)])
def test_bounds_must_be_positive(clock: FakeClock, capacity: int, share: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        Store(capacity=capacity, per_principal=share, clock=clock)


def test_expired_claims_are_pruned_with_the_injected_clock(store: Store, clock: FakeClock) -> None:
    assert store.claim("alice", "n1", clock.now + 10) is Claim.CLAIMED
    assert store.claim("alice", "n2", clock.now + 20) is Claim.CLAIMED
    assert store.claim("alice", "n3", clock.now + 30) is Claim.FULL
    clock.advance(9.999)
    assert store.claim("alice", "n1", clock.now + 10) is Claim.USED
    assert len(store) == 2
    clock.advance(0.001)  # n1 expires now: a claim lives until, not through, its expiry
    assert len(store) == 1
    assert store.claim("alice", "n3", clock.now + 30) is Claim.CLAIMED
    clock.advance(100)
    assert len(store) == 0
    assert store.claim("alice", "n1", clock.now + 10) is Claim.CLAIMED


def test_release_frees_the_claim_and_the_share(store: Store, clock: FakeClock) -> None:
    exp = clock.now + 60
    store.claim("alice", "n1", exp)
    store.claim("alice", "n2", exp)
    store.release("alice", "n1")
    assert len(store) == 1
    assert store.claim("alice", "n3", exp) is Claim.CLAIMED
    assert store.claim("alice", "n1", exp) is Claim.FULL  # the share is taken again
    store.release("alice", "unknown")  # releasing what was never claimed changes nothing
    store.release("bob", "n2")
    assert len(store) == 2


def test_a_stale_expiry_entry_never_prunes_a_newer_claim(store: Store, clock: FakeClock) -> None:
    store.claim("alice", "n1", clock.now + 10)
    store.release("alice", "n1")
    store.claim("alice", "n1", clock.now + 100)
    clock.advance(50)  # the first, released claim's expiry passes
    assert store.claim("alice", "n1", clock.now + 100) is Claim.USED
    assert len(store) == 1
    clock.advance(50)
    assert len(store) == 0


def test_pruning_restores_each_principals_share(store: Store, clock: FakeClock) -> None:
    store.claim("alice", "n1", clock.now + 10)
    store.claim("alice", "n2", clock.now + 10)
    assert store.claim("alice", "n3", clock.now + 10) is Claim.FULL
    clock.advance(10)
    assert store.claim("alice", "n3", clock.now + 10) is Claim.CLAIMED
    assert store.claim("alice", "n4", clock.now + 10) is Claim.CLAIMED


def _race_claims(store: Store, nonce: str, expires_at: float, parties: int) -> list[Claim]:
    """`parties` threads released together by a barrier, each claiming the same nonce."""
    outcomes: list[Claim] = []
    lock = threading.Lock()
    barrier = threading.Barrier(parties, timeout=30)

    def claim() -> None:
        barrier.wait()
        outcome = store.claim("alice", nonce, expires_at)
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=claim) for _ in range(parties)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


def test_concurrent_claims_of_one_nonce_have_one_winner(clock: FakeClock) -> None:
    store = Store(clock=clock)
    for round_ in range(50):
        outcomes = _race_claims(store, f"n{round_}", clock.now + 60, parties=8)
        assert sorted(o.value for o in outcomes) == ["claimed"] + ["used"] * 7


# -- the memory note store -------------------------------------------------------------------


def test_find_is_strictly_inside_case_insensitive_ordered_and_limited() -> None:
    notes = MemoryNoteStore()
    notes.add("b", "file:///work/notes/b.md", "TPS B")
    notes.add("a", "file:///work/notes/sub/a.md", "tps a")
    notes.add("evil", "file:///work/notes-evil/x.md", "TPS evil")
    notes.add("out", "file:///work/private/x.md", "TPS out")
    assert [n.id for n in notes.find(NOTES, "TPS", 10)] == ["a", "b"]
    assert [n.id for n in notes.find(NOTES, "tps", 1)] == ["a"]
    assert notes.find(NOTES, "zzz", 10) == []
    assert notes.find(parse_file_uri("file:///work/notes/b.md"), "TPS", 10) == []


def test_identity_changes_on_replacement_but_not_on_a_move() -> None:
    notes = MemoryNoteStore()
    first = notes.add("n", "file:///work/notes/n.md", "N")
    moved = notes.move("n", "file:///work/notes/archive/n.md")
    assert moved.identity == first.identity and moved.path != first.path
    replaced = notes.add("n", "file:///work/notes/n.md", "N")
    assert replaced.identity != first.identity


def test_delete_only_removes_the_live_record_it_was_given() -> None:
    notes = MemoryNoteStore()
    old = notes.add("n", "file:///work/notes/n.md", "N")
    notes.add("n", "file:///work/notes/n.md", "N")
    assert notes.delete(old) is False
    live = notes.get("n")
    assert live is not None and notes.delete(live) is True
    assert notes.get("n") is None and notes.delete(live) is False


# -- claim then delete: the unit of work the core commits --------------------------------------


def _deletion(
    notes: MemoryNoteStore, replay: Store, nonce: str, note_id: str, ok: bool = True
) -> tuple[Deletion, Note | None]:
    return commit_deletion(
        notes,
        replay,
        Confirmation(
            principal="alice",
            nonce=nonce,
            expires_at=1_800_000_060.0,
            note_id=note_id,
            recheck=lambda note: ok,
        ),
    )


def test_a_deletion_claims_its_nonce(clock: FakeClock) -> None:
    notes, replay = MemoryNoteStore(), Store(clock=clock)
    notes.add("n1", "file:///work/notes/1.md", "one")
    notes.add("n2", "file:///work/notes/2.md", "two")
    outcome, note = _deletion(notes, replay, "x", "n1")
    assert outcome is Deletion.DELETED and note is not None and note.id == "n1"
    assert _deletion(notes, replay, "x", "n2") == (Deletion.USED, None)
    assert notes.ids() == ["n2"]


def test_a_failed_recheck_deletes_nothing_and_releases_the_nonce(clock: FakeClock) -> None:
    notes, replay = MemoryNoteStore(), Store(clock=clock)
    notes.add("n1", "file:///work/notes/1.md", "one")
    outcome, note = _deletion(notes, replay, "x", "n1", ok=False)
    assert outcome is Deletion.STALE and note is not None
    assert notes.ids() == ["n1"] and len(replay) == 0
    assert _deletion(notes, replay, "x", "missing")[0] is Deletion.STALE
    assert len(replay) == 0
    assert _deletion(notes, replay, "x", "n1")[0] is Deletion.DELETED


def test_a_full_store_refuses_before_the_deletion_runs(clock: FakeClock) -> None:
    notes, replay = MemoryNoteStore(), Store(capacity=1, clock=clock)
    notes.add("n1", "file:///work/notes/1.md", "one")
    replay.claim("bob", "other", clock.now + 60)
    checked: list[Note] = []

    def recheck(note: Note) -> bool:
        checked.append(note)
        return True

    outcome = claim_then_delete(
        notes,
        replay,
        Confirmation(
            principal="alice",
            nonce="x",
            expires_at=clock.now + 60,
            note_id="n1",
            recheck=recheck,
        ),
    )
    assert outcome == (Deletion.FULL, None)
    assert checked == [] and notes.ids() == ["n1"]


# -- the memory note store's title index against a plain scan ------------------------------------

_IDS = st.sampled_from([f"n{i}" for i in range(6)])
_TITLES = st.sampled_from(["TPS report", "tps", "Straße", "STRASSE notes", "b", "a tps", ""])
_DIRS = st.sampled_from(["notes", "notes/deep", "notes2", "other"])
_OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), _IDS, _TITLES, _DIRS),
        st.tuples(st.just("move"), _IDS, _TITLES, _DIRS),
        st.tuples(st.just("delete"), _IDS, _TITLES, _DIRS),
        st.tuples(st.just("delete_for"), _IDS, _TITLES, _DIRS),
    ),
    max_size=30,
)


def _scan(notes: list[Note], workspace: tuple[str, ...], title: str, limit: int) -> list[Note]:
    """What `find` promises, written the slow way."""
    needle = title.casefold()
    found = [
        n
        for n in notes
        if len(n.path) > len(workspace)
        and n.path[: len(workspace)] == workspace
        and needle in n.title.casefold()
    ]
    return sorted(found, key=lambda n: (n.title.casefold(), n.id))[: max(limit, 0)]


@settings(max_examples=300, deadline=None)
@given(
    operations=_OPERATIONS,
    workspace=_DIRS,
    needle=st.sampled_from(["", "tps", "TPS", "strasse", "a", "zzz"]),
    limit=st.integers(min_value=-1, max_value=8),
)
def test_find_after_any_changes_is_the_plain_scan(
    operations: list[tuple[str, str, str, str]], workspace: str, needle: str, limit: int
) -> None:
    notes = MemoryNoteStore()
    for step, (kind, note_id, title, folder) in enumerate(operations):
        uri = f"file:///work/{folder}/{note_id}-{step}.md"
        current = notes.get(note_id)
        if kind == "add":
            notes.add(note_id, uri, title)
        elif current is None:
            continue
        elif kind == "move":
            notes.move(note_id, uri)
        elif kind == "delete":
            assert notes.delete(current)
        else:
            assert notes.delete_for(current, Ticket("alice", f"nonce-{step}", 0.0, note_id, "a"))
        live = [n for n in (notes.get(i) for i in notes.ids()) if n is not None]
        where = parse_file_uri(f"file:///work/{workspace}")
        assert list(notes.find(where, needle, limit)) == _scan(live, where, needle, limit)
