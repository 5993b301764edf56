"""Connection limits for Streamable HTTP, enforced under the HTTP parser.

Owns: the request-head deadline (a connection that sends nothing, stops in the middle of its
head, or idles between keep-alive requests is closed when it passes), the head size cap (431
and close, before the parser buffers more), the discarding of a body left unread by an early
answer (413, 404, ...: the rest is read and dropped, bounded in bytes and time, then the
connection serves its next request or is closed, so a client still sending receives the answer
instead of a reset), the cap on concurrent connections (to make room, the connection that has
waited longest for a head, or is discarding, is closed first, then the one whose request body
has stalled longest; a log line says so), and the uvicorn configuration that installs them.
Must not import the core or the endpoint: it sees bytes and sockets, never JSON-RPC.

Why here and not in uvicorn's settings (uvicorn 0.55, httptools 0.9): its keep-alive timer is
armed only after a response and cancelled by any byte, so a connection that sends nothing or
half a head stays open for ever; `limit_concurrency` answers 503 only once a head is complete;
httptools has no head size limit and keeps every byte of an unfinished header. ~20,000 idle
sockets exhausted the server's descriptors, and one 256 MB header added 280-460 MB of memory.
So the protocol below is uvicorn's own httptools protocol with these checks around it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import resource
from typing import Any, ClassVar, Final

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from labkit.transports.limits import TIMER_SLACK_SECONDS, ConnectionLimits

__all__ = ["ConnectionLimits", "GuardedProtocol", "descriptor_budget", "server_config"]

log = logging.getLogger("labkit.transports.connections")

# Descriptors kept back from connections: worker threads' database connections (SQLite opens
# three files per connection in WAL mode), the journal, logs, the interpreter's own files.
RESERVED_DESCRIPTORS: Final = 128
# At most one "connection cap reached" line per this many seconds: the line must show, but an
# attack must not turn into a flood of log lines.
CAP_LOG_INTERVAL_SECONDS: Final = 60.0

_HEAD_TOO_LARGE: Final = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 41\r\n"
    b"connection: close\r\n"
    b"\r\n"
    b"Request Header Fields Too Large: refused\n"
)


def descriptor_budget(requested: int) -> int:
    """`requested`, lowered so that open connections can never take the descriptors the
    server itself needs (RLIMIT_NOFILE minus those open now minus `RESERVED_DESCRIPTORS`)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return requested
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        in_use = 64
    return max(1, min(requested, soft - in_use - RESERVED_DESCRIPTORS))


class _Admission:
    """The connections of one server: all of them; those waiting for a head or discarding an
    unread body, oldest first; and those whose request body is arriving, least recently
    active first (a dict keeps insertion order; a connection that receives moves to the end)."""

    def __init__(self, max_connections: int) -> None:
        self.max_connections = max_connections
        self.open: set[GuardedProtocol] = set()
        self.waiting: dict[GuardedProtocol, None] = {}
        self.receiving: dict[GuardedProtocol, None] = {}
        self.evicted = 0
        self.logged_at: float | None = None

    def admit(self, new: GuardedProtocol) -> None:
        self.open.add(new)
        if len(self.open) <= self.max_connections:
            return
        # Make room by closing the connection that has waited longest without a complete
        # head (an attacker's idle sockets go first), then the one whose body has stalled
        # longest (a client that declared a body and stopped sending it): a request whose
        # body has arrived is never cut, nor one that we stopped reading (a pipelined request
        # behind another, or a body the endpoint has not yet taken).
        victim = next((p for p in self.waiting if p is not new and not p.busy()), None)
        if victim is None:
            victim = next((p for p in self.receiving if not p.flow.read_paused), new)
        self.forget(victim)
        victim.transport.close()
        self.evicted += 1
        now = new.loop.time()
        if self.logged_at is None or now - self.logged_at >= CAP_LOG_INTERVAL_SECONDS:
            log.warning(
                "connection cap reached: %d connections open (max_connections %d); closed %d "
                "connection(s) still waiting for a request head or body",
                len(self.open) + 1,
                self.max_connections,
                self.evicted,
            )
            self.logged_at, self.evicted = now, 0

    def forget(self, protocol: GuardedProtocol) -> None:
        self.open.discard(protocol)
        self.waiting.pop(protocol, None)
        self.receiving.pop(protocol, None)


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head deadline, a head size cap and admission.

    "Waiting" means the connection owes us a request head: from `connection_made`, and again
    after a response when nothing is queued, until `on_headers_complete`. Only bytes that
    arrive while waiting count against `max_head_bytes`; a body is the endpoint's business
    (`max_body_bytes`, `timeout_seconds`) until it answers. "Discarding" means it answered
    before the parser saw the end of the request body: the rest is fed to the parser, which
    drops it, within `discard_body_bytes` and `discard_body_seconds`.
    """

    limits: ClassVar[ConnectionLimits]
    admission: ClassVar[_Admission]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # While a head is owed: when it must have arrived. One timer per connection checks
        # it; a new deadline after each response moves no timer (keep-alive requests come far
        # faster than the deadline): the timer, when it fires early, is armed again for it.
        self._head_deadline: float | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._refused = False
        self._body_pending = False  # a head was parsed, the end of its body not yet
        self._discard_timer: asyncio.TimerHandle | None = None
        self._discarded = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()
        self.admission.admit(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        self._discard_done()
        self.admission.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._discard_timer is not None:
            self._discarded += len(data)
            if self._discarded > self.limits.discard_body_bytes:
                log.debug("closing %s: more unread body than discard_body_bytes", self.client)
                self._discard_done()
                self.transport.close()
                return
        elif self._body_pending and self in self.admission.receiving:
            # The body is arriving: this connection is no longer the stalest.
            del self.admission.receiving[self]
            self.admission.receiving[self] = None
        if self._head_deadline is not None:
            room = self.limits.max_head_bytes - self._head_bytes
            if len(data) > room:
                # Give the parser only what fits; if the head has not ended by then, refuse
                # without buffering the rest (memory stays flat whatever the client sends).
                super().data_received(data[:room])
                if self._head_deadline is not None and not self.transport.is_closing():
                    self._refuse_head()
                    return
                if not self.transport.is_closing():
                    self.data_received(data[room:])
                return
            self._head_bytes += len(data)
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_deadline is None:  # a pipelined request began while one was in progress
            self._await_head()

    def on_headers_complete(self) -> None:
        self._head_done()
        self._body_pending = True
        self.admission.receiving[self] = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._body_pending = False
        self.admission.receiving.pop(self, None)
        super().on_message_complete()
        if self._discard_timer is not None:
            # The unread body has been dropped in full: the connection serves on.
            self._discard_done()
            if self._head_deadline is None and not self.transport.is_closing():
                self._await_head()

    def on_response_complete(self) -> None:
        queued = bool(self.pipeline)
        super().on_response_complete()
        if queued or self.transport.is_closing():
            return
        if self._body_pending:
            self._discard_body()  # answered early: the client may still be sending
        elif self._head_deadline is None:
            self._await_head()  # idle keep-alive: the next head has the same deadline

    def _await_head(self) -> None:
        self._head_bytes = 0
        deadline = self.loop.time() + self.limits.head_timeout_seconds
        self._head_deadline = deadline
        if self._head_timer is None:
            self._head_timer = self.loop.call_at(deadline, self._head_check)
        self.admission.waiting[self] = None

    def _head_done(self) -> None:
        self._head_deadline = None
        self.admission.waiting.pop(self, None)

    def _head_check(self) -> None:
        """The connection's head timer: expire a head still owed past its deadline, arm
        again for a later deadline, or rest until a head is owed again."""
        self._head_timer = None
        deadline = self._head_deadline
        if deadline is None:
            return
        if self.loop.time() < deadline - TIMER_SLACK_SECONDS:
            self._head_timer = self.loop.call_at(deadline, self._head_check)
            return
        self._head_expired()

    def _stop_head_timer(self) -> None:
        self._head_done()
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _discard_body(self) -> None:
        self.admission.receiving.pop(self, None)
        self._discarded = 0
        self._discard_timer = self.loop.call_later(
            self.limits.discard_body_seconds, self._discard_expired
        )
        self.admission.waiting[self] = None  # finished with: the first to make room

    def _discard_done(self) -> None:
        if self._discard_timer is not None:
            self._discard_timer.cancel()
            self._discard_timer = None
            self.admission.waiting.pop(self, None)

    def _discard_expired(self) -> None:
        self._discard_timer = None
        self.admission.waiting.pop(self, None)
        if not self.transport.is_closing():
            log.debug("closing %s: the unread body did not end in time", self.client)
            self.transport.close()

    def busy(self) -> bool:
        """Whether a request on this connection is being answered."""
        return self.cycle is not None and not self.cycle.response_complete

    def _head_expired(self) -> None:
        self._head_deadline = None
        self.admission.waiting.pop(self, None)
        if self.transport.is_closing():
            return
        log.debug("closing %s: no complete request head in time", self.client)
        if self.busy():
            # A pipelined head stalled behind a request in progress: answer that request,
            # then close (uvicorn closes after a response that must not keep the connection).
            self.cycle.keep_alive = False
        else:
            self.transport.close()

    def _refuse_head(self) -> None:
        self._refused = True
        self._head_done()
        log.info(
            "refused a request head from %s: over max_head_bytes (%d)",
            self.client,
            self.limits.max_head_bytes,
        )
        self.transport.write(_HEAD_TOO_LARGE)
        self.transport.close()


def guarded_protocol(limits: ConnectionLimits, *, max_connections: int) -> type[GuardedProtocol]:
    """A protocol class for one server: its own limits and its own set of connections."""

    class LabkitHttpProtocol(GuardedProtocol):
        pass

    LabkitHttpProtocol.limits = limits
    LabkitHttpProtocol.admission = _Admission(max_connections)
    return LabkitHttpProtocol


def server_config(app: Any, limits: ConnectionLimits, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration labkit serves with: httptools under the guarded protocol,
    no access log, no `Server` header, no proxy headers, no websockets."""
    budget = descriptor_budget(limits.max_connections)
    if budget < limits.max_connections:
        log.warning(
            "accepting at most %d connections, not max_connections %d: the descriptor limit "
            "(ulimit -n) leaves no more",
            budget,
            limits.max_connections,
        )
    settings: dict[str, Any] = {
        "http": guarded_protocol(limits, max_connections=budget),
        "log_config": None,
        "access_log": False,
        "server_header": False,
        "proxy_headers": False,
        "ws": "none",
        # uvicorn's own keep-alive timer: the same deadline the guarded protocol keeps.
        "timeout_keep_alive": max(1, math.ceil(limits.head_timeout_seconds)),
        "timeout_graceful_shutdown": 5,
        **overrides,
    }
    return uvicorn.Config(app, **settings)
