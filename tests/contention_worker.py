"""One racing server process of test_contention.py (imported by spawned children).

Kept apart from the test module so a child imports only labkit and its driver, not the test
suite's fixtures: sixteen children start in a few seconds on two cores.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from labkit.clock import FakeClock
from labkit.deployment import create_server
from labkit.notes_delete import STATE_ERROR
from labkit.scope import AllowlistAuthorizer
from labkit.server import RequestContext
from labkit.state import KeyRing
from labkit.stores.postgres import PostgresStore
from labkit.stores.sqlite import SqliteStore

DELETED = "deleted"
ALREADY_USED = "already used"
WORKSPACE = "file:///work/notes"
PRINCIPAL = "alice"


@dataclass(frozen=True)
class Race:
    """What every racer needs: where the stores are, the shared key, the frozen time, and one
    signed confirmation per round (all racers send the same one)."""

    backend: str  # "sqlite" or "postgres"
    target: str  # the SQLite file, or the PostgreSQL DSN
    schema: str
    key: bytes
    now: float
    confirmations: list[dict[str, Any]]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def open_store(race: Race) -> SqliteStore | PostgresStore:
    if race.backend == "sqlite":
        return SqliteStore(race.target, clock=FakeClock(race.now))
    return PostgresStore(race.target, schema=race.schema, clock=FakeClock(race.now))


def classify(response: dict[str, Any] | None, logged: list[str]) -> str:
    """DELETED, ALREADY_USED (the frozen state error *and* the replay logged as the reason),
    or a description of anything else, such as a "database is locked" internal error."""
    if response is not None and "result" in response:
        status = response["result"].get("structuredContent", {}).get("status")
        if status == DELETED:
            return DELETED
    if (
        response is not None
        and response.get("error") == {"code": -32602, "message": STATE_ERROR}
        and any(m.startswith("requestState replayed") for m in logged)
    ):
        return ALREADY_USED
    return f"unexpected: {response!r} logged {logged!r}"


def race(race: Race, index: int, barrier: Any, results: Any) -> None:
    """Open this process's own store and server, then answer each round's confirmation at
    the same instant as every other racer (the barrier releases all of them together)."""
    records = _Records()
    logging.getLogger("labkit").addHandler(records)
    outcomes: list[str] = []
    try:
        with open_store(race) as store:
            server = create_server(
                keys=KeyRing([race.key]),
                notes=store,
                replay=store,
                authorizer=AllowlistAuthorizer({PRINCIPAL: [WORKSPACE]}),
                clock=FakeClock(race.now),
            )
            for message in race.confirmations:
                barrier.wait(timeout=120)
                records.messages.clear()
                try:
                    response = server.handle(message, RequestContext(principal=PRINCIPAL))
                    outcomes.append(classify(response, records.messages))
                except Exception as exc:  # reported to the parent, which fails the test
                    outcomes.append(f"raised {exc!r}")
    except BaseException as exc:
        barrier.abort()  # the other racers stop waiting for this one
        outcomes.append(f"racer failed: {exc!r}")
    finally:
        results.put((index, outcomes))
