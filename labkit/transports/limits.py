"""What the transports bound, and the defaults: one place for the transports themselves, the
configuration file's `[http]` section and `labkit serve`.

Owns: `ConnectionLimits` and every transport default (address, body size, per-request time,
the request head, connections, the unread body after an early answer, the stdio line), and
`read_body`, the one bounded reader of a request body that every HTTP route uses (`/mcp` and
the consent page): a declared or received size over the cap is 413, a body that has not
arrived by the deadline is 408 (with `connection: close`: a slow client is not waited for).
Imports from labkit only `labkit.refusals` (itself standard library only): the configuration
reads these without loading a server stack. A refused body is counted and logged at a bounded
rate (`REFUSALS`).
Must not import the course toolkit or the grader.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from labkit.refusals import RefusalLog

DEFAULT_HOST: Final = "127.0.0.1"  # loopback unless told otherwise (DNS rebinding)
DEFAULT_PORT: Final = 8000
DEFAULT_MAX_BODY_BYTES: Final = 1024 * 1024
DEFAULT_TIMEOUT_SECONDS: Final = 30.0
DEFAULT_HEAD_TIMEOUT_SECONDS: Final = 10.0
DEFAULT_MAX_HEAD_BYTES: Final = 64 * 1024
DEFAULT_MAX_CONNECTIONS: Final = 1000
DEFAULT_DISCARD_BODY_BYTES: Final = 16 * 1024 * 1024
DEFAULT_DISCARD_BODY_SECONDS: Final = 10.0
DEFAULT_MAX_LINE_BYTES: Final = 4 * 1024 * 1024

# The ASGI `receive` callable, spelled out so that this module needs no ASGI library.
Receive = Callable[[], Awaitable[Mapping[str, Any]]]


@dataclass(frozen=True)
class ConnectionLimits:
    """`head_timeout_seconds`: from the moment a connection opens (or its previous response is
    sent) until the end of the request head. `max_head_bytes`: request line plus headers.
    `max_connections`: open connections at once (further bounded by the descriptor limit).
    `discard_body_bytes` and `discard_body_seconds`: after a response sent before the request
    body was read (413, 404, ...), how much of the rest of that body is read and dropped, and
    for how long, so that a client still sending it receives the response instead of a reset;
    past either bound the connection is closed (0 bytes: at the first byte)."""

    head_timeout_seconds: float = DEFAULT_HEAD_TIMEOUT_SECONDS
    max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    discard_body_bytes: int = DEFAULT_DISCARD_BODY_BYTES
    discard_body_seconds: float = DEFAULT_DISCARD_BODY_SECONDS

    def __post_init__(self) -> None:
        for timeout in (self.head_timeout_seconds, self.discard_body_seconds):
            if not (timeout > 0 and math.isfinite(timeout)):
                raise ValueError("head_timeout_seconds and discard_body_seconds must be positive")
        if self.max_head_bytes < 1 or self.max_connections < 1:
            raise ValueError("max_head_bytes and max_connections must be positive")
        if self.discard_body_bytes < 0:
            raise ValueError("discard_body_bytes must not be negative")


class BodyRefused(Exception):
    """A request body refused by `read_body`: the HTTP status, a one-line reason, and the
    response headers the refusal needs (`connection: close` for a body that came too slowly)."""

    def __init__(self, status: int, text: str, headers: tuple[tuple[bytes, bytes], ...] = ()):
        super().__init__(text)
        self.status = status
        self.text = text
        self.headers = list(headers)


_CLOSE: Final = ((b"connection", b"close"),)
# Bodies refused at a limit: counted, a line per limit per minute at most.
REFUSALS: Final = RefusalLog(logging.getLogger("labkit.transports.limits"))


def _too_large(max_bytes: int) -> BodyRefused:
    REFUSALS.refused("max_body_bytes", f"a request body over {max_bytes} bytes (413)")
    return BodyRefused(413, f"Content Too Large: the limit is {max_bytes} bytes")


# A timer may fire this much before its time (the loop's clock resolution): within it, a
# deadline counts as reached rather than arming the timer again for a few microseconds.
TIMER_SLACK_SECONDS: Final = 0.002


class _Deadlines:
    """The body reads of one event loop still in progress, each with its deadline, and one
    timer for all of them: armed for the earliest deadline, re-armed for the next when it
    fires. A read that ends only leaves the dict. Arming and cancelling a timer on every
    request cost about a fifth of a `tools/list` answer over HTTP (bench/README.md)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.reads: dict[asyncio.Task[Any], float] = {}
        self.expired: set[asyncio.Task[Any]] = set()
        self.timer: asyncio.TimerHandle | None = None
        self.due = math.inf

    def add(self, task: asyncio.Task[Any], deadline: float) -> None:
        self.reads[task] = deadline
        if deadline < self.due:
            if self.timer is not None:
                self.timer.cancel()
            self.timer, self.due = self.loop.call_at(deadline, self._fire), deadline

    def _fire(self) -> None:
        """Cancel every read whose deadline has come; arm the timer for the earliest left."""
        self.timer, self.due = None, math.inf
        now = self.loop.time() + TIMER_SLACK_SECONDS
        for task, deadline in list(self.reads.items()):
            if deadline <= now:
                del self.reads[task]
                self.expired.add(task)
                task.cancel()
            elif deadline < self.due:
                self.due = deadline
        if self.reads:
            self.timer = self.loop.call_at(self.due, self._fire)


# The deadlines of the loop that read a body last (a server runs one loop; another loop, as in
# tests, gets its own, and reads already registered keep theirs).
_deadlines: _Deadlines | None = None


async def read_body(
    receive: Receive, declared: str | None, *, max_bytes: int, deadline: float
) -> bytes:
    """The whole request body, at most `max_bytes`, complete by `deadline` (the event loop's
    clock). `declared` is the request's Content-Length header, if any: a declared size over
    the cap is refused before a byte is read. Raises `BodyRefused` (413, 408, or 400 when the
    client went away); what is left unread is the connection layer's to discard."""
    global _deadlines
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    chunks: list[bytes] = []
    size = 0
    # At the deadline this task is cancelled (by the loop's one timer for all reads): cheaper
    # than an `asyncio.timeout` scope, or a timer of its own, on every request.
    task = asyncio.current_task()
    assert task is not None  # an ASGI app runs in a task
    deadlines = _deadlines
    if deadlines is None or deadlines.loop is not task.get_loop():
        deadlines = _deadlines = _Deadlines(task.get_loop())
    cancelling = task.cancelling()
    deadlines.add(task, deadline)
    try:
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise BodyRefused(400, "Bad Request: the client went away")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_bytes:
                raise _too_large(max_bytes)
            chunks.append(chunk)
            more = message.get("more_body", False)
    except asyncio.CancelledError:
        # Only the deadline's own cancellation becomes a 408; any other (a shutdown) goes on.
        if task not in deadlines.expired or task.uncancel() > cancelling:
            raise
        # A client that trickles its body cannot hold a connection open for ever; it is
        # closed after the answer, not lingered over (it is slow, not misinformed).
        REFUSALS.refused("timeout_seconds", "a request body did not arrive in time (408)")
        raise BodyRefused(408, "Request Timeout: the body did not arrive in time", _CLOSE) from None
    finally:
        if deadlines.reads.pop(task, None) is None:
            deadlines.expired.discard(task)
    return b"".join(chunks)
