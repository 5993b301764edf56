"""Time as an injected collaborator: the core never reads the wall clock itself.

Imports nothing from labkit.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def __call__(self) -> float:
        """Seconds since the epoch."""
        ...


def system_clock() -> float:
    return time.time()


class FakeClock:
    """A clock that moves only when told to (tests, notebooks, the demo)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
