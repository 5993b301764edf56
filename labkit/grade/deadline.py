"""One submission's total time: the kernel, every check, every worker start and every racer.

Owns: `Deadline`, the one clock bound a submission's grading shares. Every wait the grader
makes for a submission (a cell, a kernel or worker start, a call, a race) is bounded by what is
left of it as well as by its own limit, so no sequence of waits, each under its own limit,
adds up past the total (a submission whose every call sleeps just under the per-call limit,
and whose racers each take their whole start bound, is stopped at the total like any other).

The clock is injected. Imports nothing from labkit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Deadline:
    """`total` seconds from when it was made, on `clock`."""

    total: float
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    at: float = math.nan

    def __post_init__(self) -> None:
        if math.isnan(self.at):
            object.__setattr__(self, "at", self.clock() + self.total)

    def left(self) -> float:
        """Seconds left (never below 0)."""
        return max(0.0, self.at - self.clock())

    def passed(self) -> bool:
        return self.left() <= 0.0

    def bound(self, seconds: float) -> float:
        """`seconds`, or what is left when that is less."""
        return min(seconds, self.left())

    @property
    def notice(self) -> str:
        return f"the submission's total time limit ({self.total:g} s) was reached"


def unlimited() -> Deadline:
    """A deadline that never passes (a caller that bounds nothing in all)."""
    return Deadline(math.inf)
