"""Exactly-once under contention: 16 server processes x 50 rounds, per database backend.

Each round, every process sends the same signed confirmation at the same instant (a start
barrier) through its own server and its own store object over the shared database. Exactly
one process deletes the note; every other one is told the state was already used (the frozen
-32602 answer, with the replay logged as the reason); nobody sees "database is locked" or any
other error (docs/security.md, "Exactly-once replay store"; docs/LESSON.md section 11, exercise 1).
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from contention_worker import ALREADY_USED, DELETED, PRINCIPAL, WORKSPACE, Race, open_store, race
from helpers import KEY_A, accept, call, call_message, state_of
from store_backends import require_postgres, unique_schema

from labkit.clock import FakeClock
from labkit.deployment import create_server
from labkit.scope import AllowlistAuthorizer
from labkit.state import KeyRing
from labkit.stores.postgres import PostgresStore
from labkit.stores.sqlite import SqliteStore

pytestmark = pytest.mark.slow

PROCESSES = 16
ROUNDS = 50


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    return require_postgres()


@pytest.fixture
def sqlite_race(tmp_path: Path, clock: FakeClock) -> Iterator[tuple[Race, SqliteStore]]:
    path = str(tmp_path / "stores.db")
    with SqliteStore(path, clock=clock) as store:
        yield prepare("sqlite", path, "", store, clock), store


@pytest.fixture
def postgres_race(postgres_dsn: str, clock: FakeClock) -> Iterator[tuple[Race, PostgresStore]]:
    with PostgresStore(postgres_dsn, schema=unique_schema(), clock=clock) as store:
        try:
            yield prepare("postgres", postgres_dsn, store.schema, store, clock), store
        finally:
            store.drop_schema()


def prepare(
    backend: str, target: str, schema: str, store: SqliteStore | PostgresStore, clock: FakeClock
) -> Race:
    """One note per round plus a bystander, and each round's signed confirmation."""
    store.add_many(
        [
            (f"round-{r:02d}", f"{WORKSPACE}/round-{r:02d}.md", f"round {r:02d} report")
            for r in range(ROUNDS)
        ]
        + [("bystander", f"{WORKSPACE}/bystander.md", "bystander report")]
    )
    server = create_server(
        keys=KeyRing([KEY_A]),
        notes=store,
        replay=store,
        authorizer=AllowlistAuthorizer({PRINCIPAL: [WORKSPACE]}),
        clock=clock,
    )
    confirmations = []
    for r in range(ROUNDS):
        arguments = {"workspaceUri": WORKSPACE, "title": f"round {r:02d}"}
        state = state_of(call(server, r, arguments=arguments))
        confirmations.append(
            call_message(
                f"confirm-{r}", arguments=arguments, state=state, responses=accept(f"round-{r:02d}")
            )
        )
    return Race(backend, target, schema, KEY_A, clock(), confirmations)


def run_race(setup: Race) -> list[list[str]]:
    """Start the racers, collect each one's outcome per round; returns outcomes by round."""
    context = multiprocessing.get_context("spawn")  # children open their own connections
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    racers = [
        context.Process(target=race, args=(setup, i, barrier, results)) for i in range(PROCESSES)
    ]
    try:
        for racer in racers:
            racer.start()
        by_racer = dict(results.get(timeout=150) for _ in racers)
    finally:
        for racer in racers:
            racer.join(timeout=30)
            if racer.is_alive():
                racer.kill()
                racer.join()
        results.close()
        results.join_thread()
    assert [racer.exitcode for racer in racers] == [0] * PROCESSES
    for racer in racers:
        racer.close()
    assert sorted(by_racer) == list(range(PROCESSES))
    unfinished = {i: outcomes[-2:] for i, outcomes in by_racer.items() if len(outcomes) != ROUNDS}
    assert unfinished == {}, unfinished
    return [[by_racer[i][r] for i in range(PROCESSES)] for r in range(ROUNDS)]


def assert_exactly_once(rounds: list[list[str]]) -> None:
    problems = [
        (r, outcome)
        for r, outcomes in enumerate(rounds)
        for outcome in outcomes
        if outcome not in (DELETED, ALREADY_USED)
    ]
    assert problems == [], problems[:5]
    tally = [Counter(outcomes) for outcomes in rounds]
    assert tally == [Counter({DELETED: 1, ALREADY_USED: PROCESSES - 1})] * ROUNDS


def assert_store_after(store: SqliteStore | PostgresStore) -> None:
    assert store.ids() == ["bystander"]
    assert store.live_claims() == ROUNDS


def test_sqlite_deletes_exactly_once_per_round(
    sqlite_race: tuple[Race, SqliteStore],
) -> None:
    setup, store = sqlite_race
    assert_exactly_once(run_race(setup))
    assert_store_after(store)


@pytest.mark.postgres
def test_postgres_deletes_exactly_once_per_round(
    postgres_race: tuple[Race, PostgresStore],
) -> None:
    setup, store = postgres_race
    assert_exactly_once(run_race(setup))
    assert_store_after(store)


def test_the_worker_tells_a_replay_from_an_error() -> None:
    """The classifier the race relies on: "already used" needs the replay logged as well."""
    from contention_worker import classify

    from labkit.notes_delete import STATE_ERROR

    refused = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": STATE_ERROR}}
    internal = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Internal error"}}
    assert classify(refused, ["requestState replayed by 'alice'"]) == ALREADY_USED
    assert classify(refused, ["requestState refused for 'alice': bad signature"]) != ALREADY_USED
    assert classify(internal, ["database is locked"]).startswith("unexpected")
    deleted = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": {"status": DELETED}}}
    assert classify(deleted, []) == DELETED


def test_open_store_follows_the_race_backend(tmp_path: Path) -> None:
    setup = Race("sqlite", str(tmp_path / "x.db"), "", KEY_A, 0.0, [])
    with open_store(setup) as store:
        assert isinstance(store, SqliteStore)
