"""One contract for every note and replay store backend (store_backends.BACKENDS).

The same tests run against memory, SQLite and PostgreSQL: find, get, delete and identity of
notes; claim, release, the per-principal share (`Claim.FULL`) and expiry of nonces; the
all-or-nothing `commit_deletion` (a stale or failed deletion never burns its nonce); and the
whole notes_delete flow through `create_server`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack

import pytest
from helpers import (
    DECLINE,
    KEY_A,
    STATE_FAILURE,
    CountingNonces,
    accept,
    call,
    error_of,
    offered,
    state_of,
    structured,
)
from store_backends import BACKENDS, BackendArgs, StoreSet, require_postgres

from labkit.clock import FakeClock
from labkit.deployment import create_server
from labkit.scope import AllowlistAuthorizer
from labkit.server import Server
from labkit.state import KeyRing
from labkit.stores import (
    Claim,
    Completed,
    Confirmation,
    Deletion,
    Note,
    NoteStore,
    PendingReplay,
    ReplayStore,
    Ticket,
    commit_deletion,
)
from labkit.stores.memory import DEFAULT_CAPACITY, DEFAULT_PER_PRINCIPAL, MemoryReplayStore

TTL = 300.0


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    return require_postgres()


OpenBackend = Callable[..., StoreSet]


@pytest.fixture(params=list(BACKENDS))
def open_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, clock: FakeClock
) -> Iterator[OpenBackend]:
    """Opens store sets of the parametrized backend (with chosen replay bounds)."""
    counter = itertools.count()
    with ExitStack() as stack:

        def open_(
            capacity: int = DEFAULT_CAPACITY, per_principal: int = DEFAULT_PER_PRINCIPAL
        ) -> StoreSet:
            args = BackendArgs(
                tmp_path=tmp_path_factory.mktemp(f"{request.param}-{next(counter)}"),
                clock=clock,
                capacity=capacity,
                per_principal=per_principal,
                postgres_dsn=lambda: request.getfixturevalue("postgres_dsn"),
            )
            return stack.enter_context(BACKENDS[request.param](args))

        yield open_


@pytest.fixture
def stores(open_backend: OpenBackend) -> StoreSet:
    return open_backend()


@pytest.fixture
def tps(stores: StoreSet) -> dict[str, Note]:
    """The lesson's layout: three TPS reports inside notes/, decoys beside and outside it."""
    return {
        "2023": stores.add("notes/tps-2023.md", "TPS report 2023"),
        "2024": stores.add("notes/tps-2024.md", "TPS report 2024"),
        "2025": stores.add("notes/deep/tps-2025.md", "tps REPORT 2025"),
        "shopping": stores.add("notes/shopping.md", "shopping list"),
        "strasse": stores.add("notes/strasse.md", "Straße"),
        "sibling": stores.add("notes2/tps.md", "TPS report next door"),
        "private": stores.add("private/tps.md", "TPS report private"),
    }


def ids(notes: Sequence[Note]) -> list[str]:
    return [n.id for n in notes]


# -- NoteStore -------------------------------------------------------------------------------


def test_find_returns_notes_strictly_inside_in_title_order(
    stores: StoreSet, tps: dict[str, Note]
) -> None:
    found = stores.notes.find(stores.workspace("notes"), "tps", 20)
    assert list(found) == [tps["2023"], tps["2024"], tps["2025"]]


def test_find_respects_the_limit(stores: StoreSet, tps: dict[str, Note]) -> None:
    assert list(stores.notes.find(stores.workspace("notes"), "TPS", 2)) == [
        tps["2023"],
        tps["2024"],
    ]


def test_find_matches_titles_by_casefold(stores: StoreSet, tps: dict[str, Note]) -> None:
    assert list(stores.notes.find(stores.workspace("notes"), "STRASSE", 20)) == [tps["strasse"]]
    assert list(stores.notes.find(stores.workspace("notes"), "report 2025", 20)) == [tps["2025"]]


def test_find_never_crosses_a_component_boundary(stores: StoreSet, tps: dict[str, Note]) -> None:
    # notes2/ shares the prefix "notes" but is a different directory (CVE-2025-53110).
    assert ids(stores.notes.find(stores.workspace("notes2"), "tps", 20)) == [tps["sibling"].id]
    assert ids(stores.notes.find(stores.workspace("notes/deep"), "", 20)) == [tps["2025"].id]
    assert list(stores.notes.find(stores.workspace("note"), "", 20)) == []
    # A note is never its own workspace.
    assert list(stores.notes.find(stores.workspace("notes/tps-2023.md"), "", 20)) == []


def test_find_in_the_root_sees_every_directory(stores: StoreSet, tps: dict[str, Note]) -> None:
    found = stores.notes.find(stores.workspace(), "tps report", 20)
    assert sorted(ids(found)) == sorted(
        tps[k].id for k in ("2023", "2024", "2025", "sibling", "private")
    )


def test_find_without_a_match_is_empty(stores: StoreSet, tps: dict[str, Note]) -> None:
    assert list(stores.notes.find(stores.workspace("notes"), "quarterly", 20)) == []


def test_get_returns_the_live_record(stores: StoreSet, tps: dict[str, Note]) -> None:
    assert stores.notes.get(tps["2024"].id) == tps["2024"]
    assert stores.notes.get("no-such-note") is None


def test_delete_removes_only_the_live_record(stores: StoreSet, tps: dict[str, Note]) -> None:
    note = tps["2023"]
    assert stores.notes.delete(note) is True
    assert stores.notes.get(note.id) is None
    assert stores.notes.delete(note) is False
    assert stores.notes.get(tps["2024"].id) == tps["2024"]


def test_delete_refuses_a_replaced_note(stores: StoreSet, tps: dict[str, Note]) -> None:
    replaced = stores.replace(tps["2023"])
    assert stores.notes.delete(tps["2023"]) is False
    assert stores.notes.get(replaced.id) == replaced


def test_delete_refuses_a_moved_note(stores: StoreSet, tps: dict[str, Note]) -> None:
    moved = stores.move(tps["2023"], "private/tps-2023.md")
    assert stores.notes.delete(tps["2023"]) is False
    assert stores.notes.delete(moved) is True


def test_a_replaced_note_gets_a_new_identity(stores: StoreSet, tps: dict[str, Note]) -> None:
    old = tps["2024"]
    new = stores.replace(old)
    assert (new.id, new.path, new.title) == (old.id, old.path, old.title)
    assert new.identity != old.identity
    assert stores.notes.get(old.id) == new


def test_a_moved_note_keeps_its_identity(stores: StoreSet, tps: dict[str, Note]) -> None:
    moved = stores.move(tps["2024"], "private/moved.md")
    assert moved.identity == tps["2024"].identity
    assert moved.path == stores.workspace("private/moved.md")


def test_identities_are_distinct(tps: dict[str, Note]) -> None:
    assert len({n.identity for n in tps.values()}) == len(tps)


# -- ReplayStore -----------------------------------------------------------------------------


def test_claim_succeeds_exactly_once(stores: StoreSet, clock: FakeClock) -> None:
    assert stores.replay.claim("alice", "n1", clock() + TTL) is Claim.CLAIMED
    assert stores.replay.claim("alice", "n1", clock() + TTL) is Claim.USED
    # Keyed by (principal, nonce): another principal's equal nonce is another claim.
    assert stores.replay.claim("bob", "n1", clock() + TTL) is Claim.CLAIMED


def test_release_makes_the_nonce_claimable_again(stores: StoreSet, clock: FakeClock) -> None:
    assert stores.replay.claim("alice", "n1", clock() + TTL) is Claim.CLAIMED
    stores.replay.release("alice", "n1")
    stores.replay.release("alice", "never-claimed")
    assert stores.replay.claim("alice", "n1", clock() + TTL) is Claim.CLAIMED


def test_used_reports_live_claims_without_claiming(stores: StoreSet, clock: FakeClock) -> None:
    assert stores.replay.used("alice", "n1") is False
    assert stores.replay.claim("alice", "n1", clock() + TTL) is Claim.CLAIMED
    assert stores.replay.used("alice", "n1") is True
    assert stores.replay.used("bob", "n1") is False
    stores.replay.release("alice", "n1")
    assert stores.replay.used("alice", "n1") is False
    assert stores.replay.claim("alice", "n2", clock() + TTL) is Claim.CLAIMED
    clock.advance(TTL + 1)
    assert stores.replay.used("alice", "n2") is False


def test_each_principal_gets_a_bounded_share(open_backend: OpenBackend, clock: FakeClock) -> None:
    replay = open_backend(capacity=3, per_principal=2).replay
    expires = clock() + TTL
    assert replay.claim("alice", "a1", expires) is Claim.CLAIMED
    assert replay.claim("alice", "a2", expires) is Claim.CLAIMED
    assert replay.claim("alice", "a3", expires) is Claim.FULL  # alice's share is used up
    assert replay.claim("bob", "b1", expires) is Claim.CLAIMED  # others are not blocked
    assert replay.claim("carol", "c1", expires) is Claim.FULL  # the whole store is full
    assert replay.claim("alice", "a1", expires) is Claim.USED  # a replay is still a replay
    replay.release("alice", "a1")
    assert replay.claim("carol", "c1", expires) is Claim.CLAIMED
    assert replay.claim("alice", "a3", expires) is Claim.FULL  # FULL claimed nothing


def test_expired_claims_free_their_nonce_and_their_space(
    open_backend: OpenBackend, clock: FakeClock
) -> None:
    replay = open_backend(capacity=2, per_principal=2).replay
    assert replay.claim("alice", "a", clock() + 10) is Claim.CLAIMED
    assert replay.claim("alice", "b", clock() + 20) is Claim.CLAIMED
    assert replay.claim("alice", "c", clock() + 30) is Claim.FULL
    clock.advance(10)  # "a" expires at exactly this instant
    assert replay.claim("alice", "a", clock() + 30) is Claim.CLAIMED
    assert replay.claim("alice", "c", clock() + 30) is Claim.FULL
    clock.advance(10)
    assert replay.claim("alice", "c", clock() + 30) is Claim.CLAIMED
    assert replay.claim("alice", "a", clock() + 30) is Claim.USED


# -- pending claims (the two-step protocol's side of the replay store) ----------------------


def pending_replay(stores: StoreSet) -> PendingReplay:
    assert isinstance(stores.replay, PendingReplay)
    return stores.replay


def ticket(clock: FakeClock, nonce: str = "n1", attempt: str = "a1", ttl: float = TTL) -> Ticket:
    return Ticket("alice", nonce, clock() + ttl, "note-1", attempt, "elsewhere", clock() + 60)


def test_a_pending_claim_reads_back_and_is_settled_once(stores: StoreSet, clock: FakeClock) -> None:
    replay = pending_replay(stores)
    first = ticket(clock)
    assert replay.claim_pending(first) is Claim.CLAIMED
    assert replay.claim_state("alice", "n1") == first
    assert replay.pending_claims() == [first]
    second = ticket(clock, attempt="a2")
    assert replay.claim_pending(second) == first  # another attempt meets the first one's claim
    assert replay.settle(second, deleted=True) is False  # not its claim: nothing changes
    assert replay.settle(first, deleted=True) is True
    assert replay.claim_state("alice", "n1") == Completed("note-1")  # consumed, by that note
    assert replay.settle(first, deleted=False) is False  # settled once
    assert replay.pending_claims() == []
    assert replay.claim_pending(ticket(clock, attempt="a3")) is Claim.USED
    clock.advance(TTL + 1)
    assert replay.claim_state("alice", "n1") is None


def test_a_released_pending_claim_leaves_the_nonce_free(stores: StoreSet, clock: FakeClock) -> None:
    replay = pending_replay(stores)
    first = ticket(clock)
    assert replay.claim_pending(first) is Claim.CLAIMED
    assert replay.settle(first, deleted=False) is True
    assert replay.claim_state("alice", "n1") is None
    assert replay.claim("alice", "n1", clock() + TTL) is Claim.CLAIMED
    assert replay.claim_state("alice", "n1") == Completed(None)  # a decline names no note


def test_an_expired_claim_never_counts_pending_or_settled(
    open_backend: OpenBackend, clock: FakeClock
) -> None:
    replay = pending_replay(open_backend(capacity=2, per_principal=2))
    assert replay.claim_pending(ticket(clock, "a1", ttl=10)) is Claim.CLAIMED
    assert replay.claim("alice", "a2", clock() + 10) is Claim.CLAIMED
    assert replay.claim("alice", "a3", clock() + TTL) is Claim.FULL
    assert replay.claim("bob", "b1", clock() + TTL) is Claim.FULL
    clock.advance(10)
    # The pending claim is still pending (settling it is its holder's or a recovery's), but
    # neither it nor the settled one counts for its principal or for anybody else.
    assert [t.nonce for t in replay.pending_claims()] == ["a1"]
    assert isinstance(replay.claim_state("alice", "a1"), Ticket)
    assert replay.claim("alice", "a3", clock() + TTL) is Claim.CLAIMED
    assert replay.claim("bob", "b1", clock() + TTL) is Claim.CLAIMED
    assert replay.used("alice", "a1") is False


# -- commit_deletion: claim and delete, all or nothing ---------------------------------------


def delete(
    stores: StoreSet,
    note_id: str,
    nonce: str = "nonce-1",
    *,
    recheck: Callable[[Note], bool] = lambda note: True,
    expires_at: float = 1e12,
    principal: str = "alice",
) -> tuple[Deletion, Note | None]:
    return commit_deletion(
        stores.notes,
        stores.replay,
        Confirmation(
            principal=principal,
            nonce=nonce,
            expires_at=expires_at,
            note_id=note_id,
            recheck=recheck,
        ),
    )


def test_a_deletion_consumes_its_nonce(stores: StoreSet, tps: dict[str, Note]) -> None:
    seen: list[Note] = []

    def recheck(live: Note) -> bool:
        seen.append(live)
        return True

    assert delete(stores, tps["2023"].id, recheck=recheck) == (Deletion.DELETED, tps["2023"])
    assert seen == [tps["2023"]]  # the recheck saw the live record
    assert stores.notes.get(tps["2023"].id) is None
    assert stores.replay.claim("alice", "nonce-1", 1e12) is Claim.USED


def test_a_used_nonce_deletes_nothing_more(stores: StoreSet, tps: dict[str, Note]) -> None:
    assert delete(stores, tps["2023"].id)[0] is Deletion.DELETED
    assert delete(stores, tps["2024"].id) == (Deletion.USED, None)
    assert stores.notes.get(tps["2024"].id) == tps["2024"]


def test_a_stale_note_rolls_back_and_keeps_the_nonce(
    stores: StoreSet, tps: dict[str, Note]
) -> None:
    note = tps["2024"]
    assert delete(stores, note.id, recheck=lambda live: False) == (Deletion.STALE, note)
    assert stores.notes.get(note.id) == note
    # The rolled-back attempt burnt nothing: the same nonce still deletes.
    assert delete(stores, note.id) == (Deletion.DELETED, note)


def test_a_replaced_note_is_stale(stores: StoreSet, tps: dict[str, Note]) -> None:
    shown = tps["2024"]
    replaced = stores.replace(shown)
    outcome = delete(stores, shown.id, recheck=lambda live: live.identity == shown.identity)
    assert outcome == (Deletion.STALE, replaced)
    assert stores.notes.get(shown.id) == replaced
    assert stores.replay.claim("alice", "nonce-1", 1e12) is Claim.CLAIMED


def test_a_missing_note_is_stale_and_keeps_the_nonce(
    stores: StoreSet, tps: dict[str, Note]
) -> None:
    assert delete(stores, "no-such-note") == (Deletion.STALE, None)
    assert stores.replay.claim("alice", "nonce-1", 1e12) is Claim.CLAIMED


def test_a_failing_recheck_changes_nothing(stores: StoreSet, tps: dict[str, Note]) -> None:
    def recheck(live: Note) -> bool:
        raise RuntimeError("authorizer unavailable")

    with pytest.raises(RuntimeError, match="authorizer unavailable"):
        delete(stores, tps["2023"].id, recheck=recheck)
    assert stores.notes.get(tps["2023"].id) == tps["2023"]
    assert stores.replay.claim("alice", "nonce-1", 1e12) is Claim.CLAIMED


def test_a_full_store_deletes_nothing(open_backend: OpenBackend) -> None:
    stores = open_backend(capacity=1, per_principal=1)
    note = stores.add("notes/a.md", "a")
    assert stores.replay.claim("alice", "earlier", 1e12) is Claim.CLAIMED
    assert delete(stores, note.id) == (Deletion.FULL, None)
    assert stores.notes.get(note.id) == note
    stores.replay.release("alice", "earlier")
    assert delete(stores, note.id) == (Deletion.DELETED, note)


def test_a_separate_replay_store_still_deletes_exactly_once(
    stores: StoreSet, tps: dict[str, Note], clock: FakeClock
) -> None:
    replay = MemoryReplayStore(clock=clock)

    def once(note_id: str) -> tuple[Deletion, Note | None]:
        return commit_deletion(
            stores.notes,
            replay,
            Confirmation(
                principal="alice",
                nonce="n",
                expires_at=clock() + TTL,
                note_id=note_id,
                recheck=lambda live: True,
            ),
        )

    assert once(tps["2023"].id) == (Deletion.DELETED, tps["2023"])
    assert once(tps["2024"].id) == (Deletion.USED, None)
    assert replay.claim("alice", "n", clock() + TTL) is Claim.USED
    assert stores.notes.get(tps["2024"].id) == tps["2024"]


# -- the notes_delete flow through create_server ---------------------------------------------


def servers(stores: StoreSet, clock: FakeClock) -> tuple[Server, Server]:
    """Two server objects over one shared state, as two processes behind a balancer."""
    nonces = CountingNonces()
    authorizer = AllowlistAuthorizer({"alice": [stores.uri("notes")]})

    def server(notes: NoteStore, replay: ReplayStore) -> Server:
        return create_server(
            keys=KeyRing([KEY_A]),
            notes=notes,
            replay=replay,
            authorizer=authorizer,
            clock=clock,
            nonce_source=nonces,
        )

    return server(stores.notes, stores.replay), server(*stores.reopen())


def test_the_flow_deletes_the_confirmed_note_once(
    stores: StoreSet, tps: dict[str, Note], clock: FakeClock
) -> None:
    first, second = servers(stores, clock)
    arguments = {"workspaceUri": stores.uri("notes"), "title": "TPS"}
    form = call(first, 1, arguments=arguments)
    assert offered(form) == [
        (tps["2023"].id, "TPS report 2023"),
        (tps["2024"].id, "TPS report 2024"),
        (tps["2025"].id, "tps REPORT 2025"),
    ]
    confirmation = {"arguments": arguments, "state": state_of(form)}
    done = call(first, 2, **confirmation, responses=accept(tps["2024"].id))
    assert structured(done) == {"deleted": True, "status": "deleted", "noteId": tps["2024"].id}
    assert stores.notes.get(tps["2024"].id) is None
    # The same confirmation, again on this server and then on the other one: refused.
    assert error_of(call(first, 3, **confirmation, responses=accept(tps["2023"].id))) == (
        STATE_FAILURE
    )
    assert error_of(call(second, 4, **confirmation, responses=accept(tps["2023"].id))) == (
        STATE_FAILURE
    )
    assert stores.notes.get(tps["2023"].id) == tps["2023"]


def test_the_flow_reports_a_replaced_note_and_keeps_the_confirmation(
    stores: StoreSet, tps: dict[str, Note], clock: FakeClock
) -> None:
    first, second = servers(stores, clock)
    arguments = {"workspaceUri": stores.uri("notes"), "title": "TPS"}
    state = state_of(call(first, 1, arguments=arguments))
    replaced = stores.replace(tps["2023"])
    stale = call(second, 2, arguments=arguments, state=state, responses=accept(tps["2023"].id))
    assert structured(stale)["status"] == "stale"
    assert stores.notes.get(tps["2023"].id) == replaced
    # The stale attempt rolled back, so the same state can still be answered, once.
    declined = call(first, 3, arguments=arguments, state=state, responses=DECLINE)
    assert structured(declined) == {"deleted": False, "status": "declined"}
    again = call(second, 4, arguments=arguments, state=state, responses=DECLINE)
    assert error_of(again) == STATE_FAILURE


def test_the_flow_refuses_a_note_moved_out_of_the_workspace(
    stores: StoreSet, tps: dict[str, Note], clock: FakeClock
) -> None:
    first, _ = servers(stores, clock)
    arguments = {"workspaceUri": stores.uri("notes"), "title": "TPS"}
    state = state_of(call(first, 1, arguments=arguments))
    moved = stores.move(tps["2025"], "private/tps-2025.md")
    stale = call(first, 2, arguments=arguments, state=state, responses=accept(tps["2025"].id))
    assert structured(stale) == {"deleted": False, "status": "stale", "noteId": tps["2025"].id}
    assert stores.notes.get(tps["2025"].id) == moved


# -- where notes and nonces share a database: one transaction --------------------------------

DATABASES = [name for name in BACKENDS if name in ("sqlite", "postgres")]


@pytest.mark.parametrize("open_backend", DATABASES, indirect=True)
def test_the_claim_is_invisible_until_the_deletion_commits(
    stores: StoreSet, tps: dict[str, Note], clock: FakeClock
) -> None:
    assert stores.one_transaction
    observer_notes, observer_replay = stores.reopen()
    seen: list[tuple[int, Note | None]] = []

    def recheck(live: Note) -> bool:
        # Another connection, mid-transaction: neither the claim nor the delete has happened.
        seen.append((observer_replay.live_claims(), observer_notes.get(live.id)))
        return True

    assert delete(stores, tps["2023"].id, recheck=recheck)[0] is Deletion.DELETED
    assert seen == [(0, tps["2023"])]
    assert observer_replay.live_claims() == 1
    assert observer_notes.get(tps["2023"].id) is None


@pytest.mark.parametrize("open_backend", DATABASES, indirect=True)
def test_two_databases_claim_first_then_delete(open_backend: OpenBackend, clock: FakeClock) -> None:
    notes_db, claims_db = open_backend(), open_backend()
    note = notes_db.add("notes/a.md", "a")
    seen: list[int] = []

    def recheck(live: Note) -> bool:
        seen.append(claims_db.replay.live_claims())
        return True

    outcome = commit_deletion(
        notes_db.notes,
        claims_db.replay,
        Confirmation(
            principal="alice",
            nonce="n",
            expires_at=clock() + TTL,
            note_id=note.id,
            recheck=recheck,
        ),
    )
    assert outcome == (Deletion.DELETED, note)
    assert seen == [1]  # the claim committed before the note was touched
    assert notes_db.replay.live_claims() == 0
