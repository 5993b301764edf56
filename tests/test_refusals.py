"""`RefusalLog`: requests refused at a limit are counted and logged at a bounded rate, each
line saying how many there were since the last one; `FaultLog`: one line when a store's
condition starts and one when a write of that same store ends it."""

from __future__ import annotations

import logging

import pytest

from labkit.clock import FakeClock
from labkit.refusals import RefusalLog
from labkit.stores import FaultLog, StoreUnavailable

LOGGER = logging.getLogger("labkit.test.refusals")


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER.name]


def test_refusals_are_counted_and_logged_once_per_interval_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER.name)
    clock = FakeClock()
    refusals = RefusalLog(LOGGER, interval=60, clock=clock)
    for _ in range(500):
        refusals.refused("max_body_bytes", "a request body over 1024 bytes (413)")
        clock.advance(0.1)  # 500 refusals in 50 s: one line, the first
    refusals.refused("max_head_bytes", "a head over 4096 bytes (431)")  # another limit: its own
    assert lines(caplog) == [
        "refused at max_body_bytes: a request body over 1024 bytes (413) (1 refused)",
        "refused at max_head_bytes: a head over 4096 bytes (431) (1 refused)",
    ]
    clock.advance(11)
    refusals.refused("max_body_bytes", "a request body over 1024 bytes (413)")
    assert lines(caplog)[-1] == (
        "refused at max_body_bytes: a request body over 1024 bytes (413) "
        "(500 refused in the last 61s)"
    )
    assert refusals.total == {"max_body_bytes": 501, "max_head_bytes": 1}


def test_a_store_condition_is_one_line_and_ends_only_with_a_write_of_that_store(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER.name)
    faults = FaultLog(LOGGER)
    full = StoreUnavailable("/disk/notes.db: no space left on device")
    for _ in range(6):
        faults.record("/disk/notes.db", full)
        faults.wrote("/other/replay.db")  # another store's write ends nothing
    assert len(lines(caplog)) == 1 and "no space left" in lines(caplog)[0]
    assert faults.active() == {"/disk/notes.db": str(full)}
    faults.record("/disk/notes.db", StoreUnavailable("/disk/notes.db: I/O error"))  # it changed
    faults.wrote("/disk/notes.db")
    faults.wrote("/disk/notes.db")
    assert len(lines(caplog)) == 3
    assert lines(caplog)[2].startswith("store available again")
    assert faults.active() == {}
