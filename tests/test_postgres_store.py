"""What only the PostgreSQL store does: schemas as namespaces, the per-principal share held
exactly across connections, collecting expired claims, and failing clearly when the server
is unreachable. Needs the server at 127.0.0.1:5432; fails (never skips) without it.

The contract every backend keeps is in test_store_contract.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql
from store_backends import require_postgres, unique_schema

from labkit.clock import FakeClock
from labkit.stores import (
    Claim,
    Confirmation,
    Deletion,
    StoreBusy,
    StoreUnavailable,
    commit_deletion,
)
from labkit.stores.postgres import MAX_ATTEMPTS, PostgresStore

pytestmark = pytest.mark.postgres

TTL = 300.0


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    return require_postgres()


OpenStore = Callable[..., PostgresStore]


@pytest.fixture
def open_store(postgres_dsn: str, clock: FakeClock) -> Iterator[OpenStore]:
    """Opens stores in fresh schemas (or a given one); drops every schema afterwards."""
    opened: list[PostgresStore] = []

    def open_(schema: str | None = None, **kwargs: object) -> PostgresStore:
        store = PostgresStore(
            postgres_dsn,
            schema=schema or unique_schema(),
            clock=clock,
            **kwargs,
        )
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for schema in dict.fromkeys(store.schema for store in opened):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_schemas_keep_stores_apart(open_store: OpenStore, clock: FakeClock) -> None:
    one, two = open_store(), open_store()
    assert one.claim("alice", "n", clock() + TTL) is Claim.CLAIMED
    assert two.claim("alice", "n", clock() + TTL) is Claim.CLAIMED
    one.add("a", "file:///work/a.md", "a")
    assert two.ids() == []
    assert not one.shares_database(two)
    assert one.shares_database(open_store(one.schema))


def test_the_per_principal_share_is_exact_across_connections(
    open_store: OpenStore, clock: FakeClock
) -> None:
    store = open_store(per_principal=5)
    results: list[Claim] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker(index: int) -> None:
        # Each thread has its own connection: the advisory lock, not Python, serialises them.
        start.wait(timeout=30)
        for i in range(3):
            claim = store.claim("alice", f"t{index}-{i}", clock() + TTL)
            with lock:
                results.append(claim)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results.count(Claim.CLAIMED) == 5
    assert results.count(Claim.FULL) == 19
    assert store.live_claims() == 5


def test_expired_claims_are_collected(open_store: OpenStore, clock: FakeClock) -> None:
    store = open_store()
    for i in range(5):
        assert store.claim("alice", f"old-{i}", clock() + 10) is Claim.CLAIMED
    clock.advance(11)
    assert store.stored_claims() == 5 and store.live_claims() == 0
    assert store.claim("bob", "new", clock() + 10) is Claim.CLAIMED
    assert store.stored_claims() == 1


def test_notes_and_claims_survive_reopening(open_store: OpenStore, clock: FakeClock) -> None:
    first = open_store()
    note = first.add("n", "file:///work/notes/a.md", "a")
    assert first.claim("alice", "n1", clock() + TTL) is Claim.CLAIMED
    first.close()
    second = open_store(first.schema)
    assert second.get("n") == note
    assert second.claim("alice", "n1", clock() + TTL) is Claim.USED
    assert second.add("n", "file:///work/notes/a.md", "a").identity != note.identity


def wait_until_a_claim_waits(dsn: str) -> None:
    """Returns once some transaction waits for a lock (the second claimer is queued)."""
    query = "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'advisory'"
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(3000):
            row = conn.execute(query).fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.01)
    raise AssertionError("the second claimer never waited for the first")


def test_a_concurrent_stale_winner_does_not_burn_the_nonce(
    open_store: OpenStore, clock: FakeClock, postgres_dsn: str
) -> None:
    """A second claimer of the same nonce waits for the first transaction; when that one rolls
    back (its note was stale), the second claims the nonce and deletes."""
    store = open_store()
    note = store.add("n", "file:///work/notes/a.md", "a")
    in_recheck, let_go = threading.Event(), threading.Event()
    outcomes: dict[str, tuple[Deletion, object]] = {}

    def attempt(name: str, fresh: bool) -> None:
        def recheck(live: object) -> bool:
            if not fresh:
                in_recheck.set()
                let_go.wait(timeout=30)
            return fresh

        outcomes[name] = commit_deletion(
            store,
            store,
            Confirmation(
                principal="alice",
                nonce="n1",
                expires_at=clock() + TTL,
                note_id=note.id,
                recheck=recheck,
            ),
        )

    stale = threading.Thread(target=attempt, args=("stale", False))
    stale.start()
    assert in_recheck.wait(timeout=30)
    fresh = threading.Thread(target=attempt, args=("fresh", True))
    fresh.start()
    wait_until_a_claim_waits(postgres_dsn)
    let_go.set()
    stale.join(timeout=30)
    fresh.join(timeout=30)
    assert outcomes == {"stale": (Deletion.STALE, note), "fresh": (Deletion.DELETED, note)}


def test_an_unreachable_server_fails_clearly() -> None:
    # A server that is down is the store being unavailable (-32001 at run time), with the
    # driver's error as the cause.
    with pytest.raises(StoreUnavailable, match="127.0.0.1") as caught:
        PostgresStore("postgresql://postgres@127.0.0.1:1/test", connect_timeout=2)
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)


@pytest.mark.parametrize("schema", ["", "Labkit", "1st", "a-b", 'x"; DROP', "x" * 64])
def test_a_schema_name_must_be_a_plain_identifier(postgres_dsn: str, schema: str) -> None:
    with pytest.raises(ValueError, match="schema name"):
        PostgresStore(postgres_dsn, schema=schema)


def test_a_closed_store_refuses_work(open_store: OpenStore) -> None:
    store = open_store()
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.get("x")


def test_retries_that_never_succeed_are_store_busy_after_injected_pauses(
    open_store: OpenStore,
) -> None:
    pauses: list[float] = []
    store = open_store(sleep=pauses.append)
    attempts: list[int] = []

    def conflicting(conn: object) -> tuple[bool, None]:
        attempts.append(1)
        raise psycopg.errors.SerializationFailure("could not serialize access")

    with pytest.raises(StoreBusy, match="nothing was changed"):
        store._run(conflicting)
    assert len(attempts) == MAX_ATTEMPTS
    assert len(pauses) == MAX_ATTEMPTS - 1  # every wait went through the injected sleep
    assert store.claim("alice", "n1", 10_000.0) is Claim.CLAIMED  # the store still works
