"""Requests refused at a limit: counted, and logged at a bounded rate with the count.

Owns: `RefusalLog`. The first refusal of a limit is logged at once; later ones are counted
and logged at most once per `interval` seconds for that limit, saying how many there were
since the last line. A client that hits a limit in a loop (an attacker's huge heads, a full
replay store) must not turn into a line per request, and an operator still sees that the limit
is hit and how often. Standard library only, so the transports and the tools can both use it;
the clock is injected.
Imports nothing from labkit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Final

# At most one line per limit per this many seconds.
REFUSAL_LOG_INTERVAL_SECONDS: Final = 60.0


class RefusalLog:
    """Refusals per limit: `refused(limit, detail)` counts one; a line goes out when the
    limit's interval has passed since its last line (or it never had one).

    `limit` names the limit and is the key of the count ("max_head_bytes"); `detail` is the
    text of the line (the first refusal's detail since the last line). `total` keeps every
    count since start, for tests and diagnostics."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = REFUSAL_LOG_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        level: int = logging.WARNING,
    ) -> None:
        self._log = logger
        self._interval = interval
        self._clock = clock
        self._level = level
        self._lock = threading.Lock()
        self._unlogged: Counter[str] = Counter()
        self._logged_at: dict[str, float] = {}
        self.total: Counter[str] = Counter()

    def refused(self, limit: str, detail: str) -> None:
        now = self._clock()
        with self._lock:
            self.total[limit] += 1
            self._unlogged[limit] += 1
            last = self._logged_at.get(limit)
            if last is not None and now - last < self._interval:
                return
            count = self._unlogged.pop(limit)
            self._logged_at[limit] = now
        since = "" if last is None else f" in the last {now - last:.0f}s"
        self._log.log(self._level, "refused at %s: %s (%d refused%s)", limit, detail, count, since)
