"""2025-11-25 sessions on the Streamable HTTP endpoint, beside the stateless 2026-07-28 path.

Owns: the per-request era decision (an `MCP-Protocol-Version: 2026-07-28` header is modern and
never reaches this module; an `initialize` without it starts a session; an `Mcp-Session-Id`
continues one), the session table (minted on `initialize`, bound to the authenticated
principal, ended by DELETE, idle sessions dropped; an unknown, ended or foreign session is 404;
when the table is full, the oldest idle session of the principal holding the most goes, so
every principal finds room), the bounds on calls in progress (per session and per principal:
past either, -32001 with HTTP 503), and the SSE response stream of a `tools/call` that needs
input: live `elicitation/create` and `roots/list` requests, then the result, while the client
POSTs its answers (202) on the same session; DELETE ends every call of the session at once.
The session logic itself is `labkit.legacy`, which is sans-IO. `LegacyHttp` is the 2025-11-25
era's HTTP adapter (`labkit.transports.era.HttpEra`), declared in `labkit.transports.eras`.

Sessions live in this process: a deployment with several instances must route a session's
requests to the instance that minted it (sticky sessions). Must not import the course toolkit
or the grader.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import secrets
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.types import Send

from labkit import legacy
from labkit.clock import Clock, system_clock
from labkit.errors import INVALID_REQUEST, SERVER_BUSY, ProtocolError
from labkit.legacy import LegacyCall, LegacyLimits, LegacySession, Step, is_response
from labkit.refusals import RefusalLog
from labkit.server import RequestContext, Server
from labkit.transports.era import SESSION_HEADER, Streamed
from labkit.transports.sse import SSE_HEADERS, event, wants_event_stream
from labkit.wire import PROTOCOL_VERSION, RequestId, encode, error_response, is_request_id

log = logging.getLogger("labkit.transports.legacy_http")
# Refusals at the [legacy] bounds: counted, a line per bound per minute at most.
REFUSALS: Final = RefusalLog(log)

_DEFAULTS: Final = LegacyLimits()
DEFAULT_MAX_SESSIONS: Final = _DEFAULTS.max_sessions
# No principal may fill the table for everyone else (docs/security.md, "bound each principal's
# share"): past this many, its own least recently used session is dropped.
DEFAULT_SESSIONS_PER_PRINCIPAL: Final = _DEFAULTS.sessions_per_principal
DEFAULT_IDLE_SECONDS: Final = _DEFAULTS.idle_seconds
# How long a call's stream waits for the client to answer one of its requests (a user may be
# reading a form).
DEFAULT_ANSWER_SECONDS: Final = _DEFAULTS.answer_seconds


def _new_session_id() -> str:
    return secrets.token_urlsafe(24)


@dataclass
class _Held:
    session: LegacySession
    principal: str
    last_seen: float
    # Requests this session's calls sent, by id: where the client's answer goes.
    waiting: dict[RequestId, MemoryObjectSendStream[dict[str, Any]]] = field(default_factory=dict)
    # Calls in progress (admitted, not yet answered), and the scopes of those streaming: ending
    # the session cancels them, whatever they wait on (an answer, or a URL consent's poll).
    calls: int = 0
    streams: set[anyio.CancelScope] = field(default_factory=set)
    ended: bool = False


def _respond(
    status: int, body: Any = None, headers: list[tuple[bytes, bytes]] | None = None
) -> Streamed:
    async def respond(send: Send) -> None:
        payload = b"" if body is None else encode(body)
        response_headers = [*(headers or []), (b"content-length", str(len(payload)).encode())]
        if body is not None:
            response_headers += [
                (b"content-type", b"application/json"),
                (b"cache-control", b"no-store"),
            ]
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": payload})

    return respond


def _refuse(status: int, request_id: Any, message: str, code: int = INVALID_REQUEST) -> Streamed:
    error = ProtocolError(code, message)
    return _respond(
        status, error_response(request_id if is_request_id(request_id) else None, error)
    )


class LegacyHttp:
    """The 2025-11-25 era on one endpoint (`labkit.transports.era.HttpEra`): `route` returns
    None for anything it does not claim."""

    def __init__(
        self,
        server: Server,
        *,
        clock: Clock = system_clock,
        id_source: Callable[[], str] = _new_session_id,
        limits: LegacyLimits | None = None,
        max_sessions: int | None = None,
        per_principal: int | None = None,
        idle_seconds: float | None = None,
        answer_seconds: float | None = None,
        blocking: bool = True,
    ) -> None:
        # The keyword overrides win over `limits` (tests set one bound at a time).
        overrides: dict[str, Any] = {
            "max_sessions": max_sessions,
            "sessions_per_principal": per_principal,
            "idle_seconds": idle_seconds,
            "answer_seconds": answer_seconds,
        }
        limits = dataclasses.replace(
            limits if limits is not None else _DEFAULTS,
            **{k: v for k, v in overrides.items() if v is not None},
        )
        self.server = server
        self.clock = clock
        self.id_source = id_source
        self.limits = limits
        self.max_sessions = limits.max_sessions
        self.per_principal = limits.sessions_per_principal
        self.idle_seconds = limits.idle_seconds
        self.answer_seconds = limits.answer_seconds
        self.blocking = blocking
        self.sessions: dict[str, _Held] = {}
        # Calls in progress per principal, over all of its sessions.
        self.calls: Counter[str] = Counter()

    # -- routing ------------------------------------------------------------------------------

    def route(self, fields: dict[str, str], message: Any, principal: str) -> Streamed | None:
        version = fields.get("mcp-protocol-version")
        if version == PROTOCOL_VERSION:
            return None  # 2026-07-28: stateless, exactly as without this module
        session_id = fields.get(SESSION_HEADER)
        request_id = message.get("id") if isinstance(message, dict) else None
        if session_id is not None:
            held = self._held(session_id, principal)
            if held is None:
                return _refuse(404, request_id, "Session not found")
            if version is not None and version != held.session.version:
                return _refuse(400, request_id, "MCP-Protocol-Version is not the session's")
            held.last_seen = self.clock()
            return self._in_session(held, message, fields)
        if isinstance(message, dict) and message.get("method") == "initialize" and "id" in message:
            return self._initialize(message, principal)
        return None

    def end_session(self, fields: Mapping[str, str], principal: str) -> Streamed | None:
        """DELETE: the session is over; its id is 404 from now on. None for an id that is no
        session of this principal's here."""
        session_id = fields.get(SESSION_HEADER)
        if session_id is None or self._held(session_id, principal) is None:
            return None
        self._drop(session_id)
        log.info("legacy session of %r ended", principal)
        return _respond(204)

    def _drop(self, session_id: str) -> None:
        held = self.sessions.pop(session_id)
        held.ended = True
        # A call still streaming ends now, not after its answer timeout or its consent poll.
        for scope in held.streams:
            scope.cancel()
        for inbox in held.waiting.values():
            inbox.close()

    def _held(self, session_id: str, principal: str) -> _Held | None:
        held = self.sessions.get(session_id)
        # Another principal's session id is answered like an unknown one: nothing is revealed.
        return held if held is not None and held.principal == principal else None

    def _initialize(self, message: dict[str, Any], principal: str) -> Streamed:
        now = self.clock()
        for stale in [k for k, h in self.sessions.items() if now - h.last_seen > self.idle_seconds]:
            self._drop(stale)
        mine = sorted(
            (h.last_seen, k) for k, h in self.sessions.items() if h.principal == principal
        )
        for _, oldest in mine[: max(len(mine) - self.per_principal + 1, 0)]:
            log.info("legacy session of %r dropped: too many open", principal)
            self._drop(oldest)
        if len(self.sessions) >= self.max_sessions:
            self._make_room(principal)
        if len(self.sessions) >= self.max_sessions:
            REFUSALS.refused("max_sessions", f"legacy session table full ({self.max_sessions})")
            return _refuse(503, message.get("id"), "Too many sessions", SERVER_BUSY)
        session_id = self.id_source()
        context = RequestContext(principal=principal, transport="http")
        session, response = legacy.initialize(
            self.server, context, message, session_id=session_id, limits=self.limits
        )
        if session is None:
            return _respond(400, response)
        self.sessions[session_id] = _Held(session, principal, now)
        log.info("legacy %s session started for %r", session.version, principal)
        return _respond(200, response, [(SESSION_HEADER.encode(), session_id.encode())])

    def _make_room(self, principal: str) -> None:
        """The table is full: the principal holding the most sessions (more than `principal`
        does) gives up its least recently used idle one, so many principals together cannot
        lock another out."""
        held_by = Counter(h.principal for h in self.sessions.values())
        fullest, most = max(held_by.items(), key=lambda item: (item[1], item[0]))
        if most <= held_by[principal]:
            return  # `principal` holds as many as anyone: its own share is what it has
        idle = sorted(
            (h.last_seen, k)
            for k, h in self.sessions.items()
            if h.principal == fullest and h.calls == 0
        )
        if idle:
            log.info("legacy session table full: a session of %r made room", fullest)
            self._drop(idle[0][1])

    # -- inside a session ---------------------------------------------------------------------

    def _in_session(self, held: _Held, message: Any, fields: dict[str, str]) -> Streamed:
        if not isinstance(message, dict):
            return _refuse(400, None, "Invalid Request: not a JSON-RPC 2.0 object")
        if is_response(message):
            waiting = (
                held.waiting.pop(message["id"], None) if is_request_id(message["id"]) else None
            )
            try:
                if waiting is None:
                    raise anyio.ClosedResourceError
                waiting.send_nowait(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.WouldBlock):
                log.debug("an answer for no pending request was dropped")
            return _respond(202)
        if "id" not in message:
            held.session.answer(message)
            return _respond(202)
        if message.get("method") == "tools/call":
            busy = self._admit(held)
            if busy is not None:
                return _refuse(503, message["id"], busy, SERVER_BUSY)
            return self._call(held, held.session.call(message), fields)
        response = held.session.answer(message)
        # An invalid request (a second `initialize`) is a 400, as on the modern path; other
        # errors stay 200 here, because at 2025-11-25 a 404 means "session not found".
        invalid = response is not None and response.get("error", {}).get("code") == INVALID_REQUEST
        return _respond(400 if invalid else 200, response)

    def _admit(self, held: _Held) -> str | None:
        """Count a new call in, or say why it is refused (a bound on calls in progress)."""
        limits = self.limits
        if held.calls >= limits.calls_per_session:
            REFUSALS.refused(
                "max_calls_per_session", f"legacy call of {held.principal!r}: session at its bound"
            )
            return (
                f"Too many calls in progress in this session (at most "
                f"{limits.calls_per_session}): answer or end them first"
            )
        if self.calls[held.principal] >= limits.calls_per_principal:
            REFUSALS.refused(
                "max_calls_per_principal",
                f"legacy call of {held.principal!r}: principal at its bound",
            )
            return (
                f"Too many calls in progress for this principal (at most "
                f"{limits.calls_per_principal}): answer or end them first"
            )
        held.calls += 1
        self.calls[held.principal] += 1
        return None

    def _release(self, held: _Held) -> None:
        held.calls -= 1
        self.calls[held.principal] -= 1
        if self.calls[held.principal] <= 0:
            del self.calls[held.principal]

    async def _run(self, work: Callable[[], Step]) -> Step:
        # The modern handler may wait on a store: off the event loop, as for modern calls.
        if self.blocking:
            return await anyio.to_thread.run_sync(work)
        return work()

    def _call(self, held: _Held, call: LegacyCall, fields: dict[str, str]) -> Streamed:
        sse = wants_event_stream(fields.get("accept"))

        async def respond(send: Send) -> None:
            try:
                step = await self._run(call.start)
                if step.result is not None and (not step.send or not sse):
                    # Progress notifications need a stream; without one they are dropped.
                    await _respond(200, step.result)(send)
                    return
                if not sse:
                    # JSON alone cannot carry live requests (docs/protocol.md, the legacy side).
                    refused = ProtocolError(
                        INVALID_REQUEST, "This call needs input: accept text/event-stream"
                    )
                    await _respond(200, error_response(call.request_id, refused))(send)
                    return
                if held.ended:
                    await _refuse(404, call.request_id, "Session not found")(send)
                    return
                await self._stream(held, call, step, send)
            finally:
                self._release(held)

        return respond

    async def _stream(self, held: _Held, call: LegacyCall, step: Step, send: Send) -> None:
        answers: tuple[
            MemoryObjectSendStream[dict[str, Any]], MemoryObjectReceiveStream[dict[str, Any]]
        ] = anyio.create_memory_object_stream[dict[str, Any]](16)
        inbox, outbox = answers
        # DELETE cancels this scope: the call ends whatever it waits on.
        scope = anyio.CancelScope()
        held.streams.add(scope)
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        try:
            with scope:
                while True:
                    for message in step.send:
                        if "id" in message:
                            held.waiting[message["id"]] = inbox
                        await send(
                            {
                                "type": "http.response.body",
                                "body": event(message),
                                "more_body": True,
                            }
                        )
                    if step.result is not None:
                        await send({"type": "http.response.body", "body": event(step.result)})
                        return
                    if step.wait is not None:
                        await anyio.sleep(step.wait)
                        step = await self._run(call.poll)
                        continue
                    answer: dict[str, Any] | None = None
                    # EndOfStream: the session was ended (DELETE) while this call waited.
                    with anyio.move_on_after(self.answer_seconds), suppress(anyio.EndOfStream):
                        answer = await outbox.receive()
                    if answer is None:
                        break
                    step = await self._run(functools.partial(call.receive, answer))
            reason = "The session ended" if held.ended else "No answer from the client"
            late = ProtocolError(SERVER_BUSY, f"{reason}; the call ended")
            final = error_response(call.request_id, late)
            await send({"type": "http.response.body", "body": event(final)})
        finally:
            held.streams.discard(scope)
            for request_id in list(call.outstanding):
                held.waiting.pop(request_id, None)
            inbox.close()
            outbox.close()
