"""Fixtures and the Hypothesis profile for the labkit tests.

Everything else the tests share (builders, readers, the wire check, constants) lives in
`helpers.py`: `from helpers import ...`. This directory is on the import path because of this
file, so tests in subdirectories import `helpers` too.
"""

from __future__ import annotations

import pytest
from helpers import Lab, build_lab
from hypothesis import settings

from labkit.clock import FakeClock

# Deterministic and database-free, so CI runs the same examples every time and leaves no
# `.hypothesis/` directory behind. Tests that need a bigger budget say so with @settings.
settings.register_profile(
    "labkit", derandomize=True, database=None, deadline=None, max_examples=100, print_blob=False
)
settings.load_profile("labkit")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def lab(clock: FakeClock) -> Lab:
    return build_lab(clock)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Stop the throwaway PostgreSQL a session may have started (tests/store_backends.py).
    from store_backends import stop_session_postgres

    stop_session_postgres()
