"""Connection limits for Streamable HTTP, enforced under the HTTP parser.

Owns: the request-head deadline (a connection that sends nothing, stops in the middle of its
head, or idles between keep-alive requests is closed when it passes), the head size cap (431
and close, before the parser buffers more), the discarding of a body left unread by an early
answer (413, 404, ...: the rest is read and dropped, bounded in bytes and time, then the
connection serves its next request or is closed, so a client still sending receives the answer
instead of a reset), admission at the cap on concurrent connections, and the uvicorn
configuration that installs them. Must not import the core or the endpoint: it sees bytes and
sockets, never JSON-RPC.

Admission. A connection under the cap is admitted at once. At the cap a new connection is
held, unadmitted, until it speaks: its first bytes (a client sends its request right after
connecting) make room for it by closing an admitted connection that holds no request in
progress and has nothing unread in the kernel: one already answered and discarding an unread
body or one that never sent a whole head, oldest first, then an idle keep-alive one, then a
request whose body has stalled longest (it was admitted, so it is answered 503 first). A held
connection that stays silent for `HOLD_SECONDS`, or is the oldest when more than
`max_held` are held, is refused before it was ever admitted (a 503, then close); so is one
that speaks when nothing can make room. A request that was admitted is thus never closed
without an answer, and idle sockets, however fast they reconnect, never push out a client
that sends its request. Refusals at the cap are counted and logged at a bounded rate.

Why here and not in uvicorn's settings (uvicorn 0.55, httptools 0.9): its keep-alive timer is
armed only after a response and cancelled by any byte, so a connection that sends nothing or
half a head stays open for ever; `limit_concurrency` answers 503 only once a head is complete;
httptools has no head size limit and keeps every byte of an unfinished header. ~20,000 idle
sockets exhausted the server's descriptors, and one 256 MB header added 280-460 MB of memory.
So the protocol below is uvicorn's own httptools protocol with these checks around it.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import math
import os
import resource
import socket
import sys
import termios
from typing import Any, ClassVar, Final

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from labkit.refusals import RefusalLog
from labkit.transports.limits import TIMER_SLACK_SECONDS, ConnectionLimits

__all__ = ["ConnectionLimits", "GuardedProtocol", "descriptor_budget", "server_config"]

log = logging.getLogger("labkit.transports.connections")

# Descriptors kept back from connections: worker threads' database connections (SQLite opens
# three files per connection in WAL mode), the journal, logs, the interpreter's own files.
RESERVED_DESCRIPTORS: Final = 128
# How long a connection that arrived at the cap may stay silent before it is refused.
HOLD_SECONDS: Final = 0.5

_SERVICE_UNAVAILABLE: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 46\r\n"
    b"retry-after: 1\r\n"
    b"connection: close\r\n"
    b"\r\n"
    b"Service Unavailable: too many connections now\n"
)
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
    """The connections of one server: the admitted ones; among them those holding no request
    in progress (waiting for a head, or discarding an unread body), oldest first, and those
    whose request body is arriving, least recently active first (a dict keeps insertion
    order; a connection that receives moves to the end); and those held at the cap, oldest
    first. `max_held` bounds the held ones (their descriptors come out of the reserve)."""

    def __init__(self, max_connections: int, max_held: int) -> None:
        self.max_connections = max_connections
        self.max_held = max_held
        self.open: set[GuardedProtocol] = set()
        self.waiting: dict[GuardedProtocol, None] = {}
        self.receiving: dict[GuardedProtocol, None] = {}
        self.held: dict[GuardedProtocol, None] = {}
        self._timer: asyncio.TimerHandle | None = None
        # Refusals at the head size cap and the connection cap: a line per limit per minute
        # at most, with the count (an attack must not turn into a flood of log lines).
        self.refusals = RefusalLog(log)

    def arrive(self, new: GuardedProtocol) -> bool:
        """Whether `new` is admitted now; if not, it is held until it speaks (`speak`)."""
        if len(self.open) < self.max_connections:
            self.open.add(new)
            return True
        self.held[new] = None
        # Too many held: the oldest go, but one whose request has arrived (unread yet) is
        # admitted instead of refused.
        for protocol in list(self.held):
            if len(self.held) <= self.max_held:
                break
            if not protocol.unread():
                self._refuse(protocol, "more connections held than max_held")
            elif self.speak(protocol):
                protocol.admitted()
        if self._timer is None:
            self._timer = new.loop.call_later(HOLD_SECONDS, self._expire_held)
        return False

    def speak(self, held: GuardedProtocol) -> bool:
        """`held` sent its first bytes: admit it if a connection can make room."""
        del self.held[held]
        victim = self._victim()
        if victim is None:
            self._refuse(held, "every connection has a request in progress")
            return False
        self.forget(victim)
        victim.make_room()
        self.refusals.refused(
            "max_connections",
            f"connection cap reached ({self.max_connections} open): closed connections that "
            "held no admitted request (or a stalled body, answered 503) for clients that sent "
            "theirs",
        )
        self.open.add(held)
        return True

    def _victim(self) -> GuardedProtocol | None:
        idle: GuardedProtocol | None = None  # the oldest idle keep-alive connection
        for protocol in self.waiting:
            if protocol.busy():
                continue
            owes_nothing = protocol.discarding() or not protocol.requests
            if (owes_nothing or idle is None) and not protocol.unread():
                if owes_nothing:
                    return protocol
                idle = protocol
        if idle is not None:
            return idle
        for protocol in self.receiving:
            if not protocol.flow.read_paused and not protocol.unread():
                return protocol
        return None

    def _expire_held(self) -> None:
        """Refuse the connections held silent for `HOLD_SECONDS`; check again later for the
        others."""
        self._timer = None
        if not self.held:
            return
        oldest = next(iter(self.held))
        expired = oldest.loop.time() - HOLD_SECONDS + TIMER_SLACK_SECONDS
        for protocol in list(self.held):
            if protocol.opened_at > expired:
                break
            self._refuse(protocol, f"silent for {HOLD_SECONDS:g}s")
        if self.held:
            first = next(iter(self.held))
            self._timer = first.loop.call_at(first.opened_at + HOLD_SECONDS, self._expire_held)

    def _refuse(self, protocol: GuardedProtocol, why: str) -> None:
        self.held.pop(protocol, None)
        protocol.refuse()
        self.refusals.refused(
            "max_connections",
            f"connection cap reached ({self.max_connections} open): refused a new connection "
            f"before it was admitted ({why})",
        )

    def forget(self, protocol: GuardedProtocol) -> None:
        self.open.discard(protocol)
        self.held.pop(protocol, None)
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
        self.opened_at = 0.0
        self.requests = 0  # request heads completed on this connection
        self._held = False  # arrived at the cap, not admitted until it speaks

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.opened_at = self.loop.time()
        self._held = not self.admission.arrive(self)
        if not self._held:
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        self._discard_done()
        self.admission.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._held:
            if not self.admission.speak(self):
                return
            self.admitted()
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
        self.requests += 1
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

    def discarding(self) -> bool:
        """Whether it was answered and drops what is left of an unread body."""
        return self._discard_timer is not None

    def unread(self) -> int:
        """How many bytes the kernel holds for this connection that the loop has not read
        (a head that arrived while the loop was busy)."""
        sock = self.transport.get_extra_info("socket")
        try:
            waiting = fcntl.ioctl(sock.fileno(), termios.FIONREAD, bytes(4))
            return int.from_bytes(waiting, sys.byteorder)
        except (AttributeError, OSError, ValueError):
            return 0

    def admitted(self) -> None:
        """A connection held at the cap was admitted (`_Admission.speak`)."""
        self._held = False
        self._await_head()

    def make_room(self) -> None:
        """Close this connection for a new one (`_Admission`): a request whose body was
        still arriving is answered 503 first (it was admitted)."""
        if self._body_pending:
            if self.cycle is not None:
                self.cycle.keep_alive = False
            self.refuse()
        else:
            self._refused = True
            self.transport.close()

    def refuse(self) -> None:
        """Answer 503 (too many connections, retry) and close."""
        self._refused = True
        if not self.transport.is_closing():
            self.transport.write(_SERVICE_UNAVAILABLE)
            self.transport.close()

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
        self.admission.refusals.refused(
            "max_head_bytes", f"a request head over {self.limits.max_head_bytes} bytes (431)"
        )
        self.transport.write(_HEAD_TOO_LARGE)
        self.transport.close()


def defer_accept(sock: socket.socket, limits: ConnectionLimits) -> None:
    """Ask the kernel to hand a connection to the server only once its first bytes have
    arrived (Linux `TCP_DEFER_ACCEPT`), waiting at most the head deadline: a socket that
    says nothing then costs the server no descriptor and no slot, however many there are and
    however fast they reconnect, and a client that sends its request is accepted with it in
    hand. Elsewhere nothing changes (the admission rules above still hold)."""
    option = getattr(socket, "TCP_DEFER_ACCEPT", None)
    if option is not None:
        sock.setsockopt(socket.IPPROTO_TCP, option, max(1, math.ceil(limits.head_timeout_seconds)))


def guarded_protocol(
    limits: ConnectionLimits, *, max_connections: int, max_held: int | None = None
) -> type[GuardedProtocol]:
    """A protocol class for one server: its own limits and its own set of connections.
    `max_held` bounds the connections held at the cap (default: half the descriptor reserve,
    at most `max_connections`)."""

    class LabkitHttpProtocol(GuardedProtocol):
        pass

    held = max_held if max_held is not None else min(max_connections, RESERVED_DESCRIPTORS // 2)
    LabkitHttpProtocol.limits = limits
    LabkitHttpProtocol.admission = _Admission(max_connections, max(1, held))
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
