"""Streamable HTTP at 2026-07-28: one POST endpoint around `Server.respond`.

Owns: the Origin check, bearer authentication, the body size limit
and the per-request timeout (the body is read by `limits.read_body`, as the consent page's
is), the routing-header checks, and the mapping of JSON-RPC outcomes to
HTTP statuses (`labkit.errors.http_status`). Stateless: `Mcp-Session-Id` and `Last-Event-ID`
are never read, minted or echoed (docs/protocol.md, "Streamable HTTP at 2026-07-28"). A response is
`application/json`, unless the handler sent notifications for the request (progress) and the
client accepts `text/event-stream`: then the notifications and the response travel as SSE
events on the POST's own response, in that order. A call run in a worker thread (tools/call
and the other blocking methods) streams each notification as the handler sends it; nothing is
sent before the first one, so a call that notifies nothing is plain JSON with its own HTTP
status. A client that goes away mid-stream ends the wait (the thread finishes on its own).

The endpoint is a plain ASGI callable, and `create_app`'s app is the endpoint itself: a request
for its path is served directly, with one pass over the headers (decoding only those it
reads, and applying the rules of `labkit.transports.guard`: one copy of each singleton header,
a Host and Origin of this server's through `TrustedOrigins`), one loop timer for the body
deadline and one core call; no request object, router or middleware stack is built. A request
goes through three steps, each a plain call with one return type: admit (the principal), read
(the message, from the body awaited between them) and dispatch (the reply, which writes itself
and is the only other await); a refusal on the way raises the reply it is.
Starlette serves everything else (the consent page, 404s), behind `guard.Guarded`.

With `eras` (the `HttpEra` adapters of the eras in `labkit.transports.eras`), other eras'
clients are served on the same endpoint: each adapter in turn may claim a request (`route`; the
2025-11-25 one claims a request whose `MCP-Protocol-Version` is not 2026-07-28 and that is an
`initialize` or carries an `Mcp-Session-Id`), and DELETE with a session id ends the session of
the era that has it (404 when none has); everything else takes the stateless path above,
unchanged.

Must not import the course toolkit or the grader.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import Any, Final, NamedTuple, Protocol

import anyio
import anyio.to_thread
from orjson import Fragment
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from labkit.auth import Authenticator
from labkit.errors import SERVER_BUSY, ProtocolError, http_status
from labkit.server import RequestContext, Server
from labkit.transports.consent_page import ConsentPage
from labkit.transports.envelope import PROTOCOL_VERSION_HEADER, ROUTING_HEADERS, header_mismatch
from labkit.transports.era import SESSION_HEADER, HttpEra, Streamed
from labkit.transports.guard import (
    REFUSALS,
    SINGLETON_HEADERS,
    Guarded,
    HostRule,
    TrustedOrigins,
    duplicate_header,
    port_of,
    send_text,
)
from labkit.transports.limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TIMEOUT_SECONDS,
    BodyRefused,
    read_body,
)
from labkit.transports.sse import SSE_HEADERS, event
from labkit.wire import (
    decode,
    encode,
    error_code,
    error_response,
    is_request_id,
    parse_error_response,
)

log = logging.getLogger("labkit.transports.http")

DEFAULT_PATH: Final = "/mcp"
# Methods whose handlers may wait on a store (a database, a disk): they run in a worker
# thread so one slow call never stalls the event loop. Everything else is answered inline:
# a thread hop costs far more than discovery or a listing does.
DEFAULT_BLOCKING_METHODS: Final = frozenset({"tools/call"})

_JSON_HEADERS: Final = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
RETRY_AFTER_SECONDS: Final = 1
_RETRY_HEADERS: Final = [*_JSON_HEADERS, (b"retry-after", str(RETRY_AFTER_SECONDS).encode())]
_JSON_TYPES: Final = frozenset({"application/json", "application/*", "*/*"})
# The request headers the endpoint reads (raw lower-case name -> name); no other is decoded.
_USED_HEADERS: Final = {
    name.encode("latin-1"): name
    for name in (
        "host",
        "origin",
        "authorization",
        "content-type",
        "content-length",
        "accept",
        SESSION_HEADER,
        *ROUTING_HEADERS,
    )
}
# Contexts kept per principal for requests without a notification sink.
_MAX_KEPT_CONTEXTS: Final = 1024


class Reply(Protocol):
    """What the endpoint answers one request with: it writes itself."""

    async def write(self, send: Send, receive: Receive) -> None: ...


class _Whole(NamedTuple):
    """A response written at once: status line and headers, then the whole body."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    async def write(self, send: Send, receive: Receive) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": self.status,
                "headers": [*self.headers, (b"content-length", b"%d" % len(self.body))],
            }
        )
        await send({"type": "http.response.body", "body": self.body})


class _Text(NamedTuple):
    """An HTTP-level refusal, before any JSON-RPC processing: text/plain."""

    status: int
    text: str
    headers: list[tuple[bytes, bytes]]

    async def write(self, send: Send, receive: Receive) -> None:
        await send_text(send, self.status, self.text, self.headers)


class _Streamed(NamedTuple):
    """A response that writes itself (an era's session's, or a call's live notifications and
    then its response), ended when its client goes away."""

    respond: Streamed

    async def write(self, send: Send, receive: Receive) -> None:
        await _until_disconnect(self.respond, send, receive)


class _Deferred(NamedTuple):
    """A reply known only after a wait (a call in a worker thread): awaited, then written, so
    the steps before it stay synchronous and an answer on the loop awaits nothing extra."""

    reply: Callable[[], Awaitable[Reply]]

    async def write(self, send: Send, receive: Receive) -> None:
        reply = await self.reply()
        await reply.write(send, receive)


class _Answered(Exception):
    """A request answered before dispatch (an HTTP-level refusal, or a body that is no JSON):
    raised with its reply."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply)
        self.reply = reply


def _reject(status: int, text: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> _Answered:
    return _Answered(_Text(status, text, list(headers)))


class _Post(NamedTuple):
    """An admitted POST whose call runs in a worker thread, its body read and decoded."""

    message: Any
    principal: str
    streams: bool  # the client takes text/event-stream
    deadline: float  # the loop time by which a call must have answered


# `_Whole(...)` without the named tuple's Python-level `__new__` (hot path).
_new_whole: Final = functools.partial(tuple.__new__, _Whole)


def _json(status: int, body: bytes) -> _Whole:
    # 503 is -32001: a busy or failing store, nothing done; say when to come back.
    return _new_whole((status, _RETRY_HEADERS if status == 503 else _JSON_HEADERS, body))


def _read(body: bytes) -> Any:
    """The message a request body holds; a body that is no JSON is answered -32700."""
    try:
        return decode(body)
    except ProtocolError:
        raise _Answered(_json(400, encode(parse_error_response()))) from None


def _response(response: bytes | None) -> _Whole:
    """The reply carrying the core's response: 202 and no body for a notification, else JSON
    with the status its error code maps to (200 for a result)."""
    if response is None:  # a notification, accepted and dropped by the core
        return _ACCEPTED
    code = error_code(response)
    if code is None:
        return _new_whole((200, _JSON_HEADERS, response))
    return _json(http_status(code), response)


class McpEndpoint:
    """The ASGI application behind `/mcp`. Each request goes through three steps: `_admit`
    (headers, Host and Origin, method, authentication), `_read` (the body, read within the size
    limit and its deadline by `__call__` once the media types are checked, decoded) and
    `_dispatch` (era routing, routing headers, a worker thread or the loop, a stream or
    JSON); a refusal on the way is the request's reply."""

    def __init__(
        self,
        server: Server,
        authenticator: Authenticator,
        *,
        allowed_origins: Collection[str] = (),
        allowed_hosts: Collection[str] = (),
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        blocking_methods: Collection[str] = DEFAULT_BLOCKING_METHODS,
        eras: Sequence[HttpEra] = (),
    ) -> None:
        if max_body_bytes < 1 or not (timeout_seconds > 0 and math.isfinite(timeout_seconds)):
            raise ValueError("max_body_bytes and timeout_seconds must be positive")
        self.server = server
        self._core_versions = frozenset(server.supported_versions)
        self.authenticator = authenticator
        self.hosts = HostRule(allowed_hosts)
        self.trusted = TrustedOrigins(self.hosts, allowed_origins)
        self.max_body_bytes = max_body_bytes
        self.timeout_seconds = timeout_seconds
        self.blocking_methods = frozenset(blocking_methods)
        self.eras = tuple(eras)
        # Contexts kept per principal for inline requests, without and with a notification
        # sink (`_context`), and the sink: what the inline call running has notified.
        self._contexts: tuple[dict[str, RequestContext], dict[str, RequestContext]] = ({}, {})
        self._noted: list[dict[str, Any]] = []
        # Set by `create_app`: requests for other paths (and a mounted root path, and the
        # lifespan) go to this router; None for the endpoint the router itself calls.
        self._fallback: ASGIApp | None = None
        self._path = DEFAULT_PATH

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._fallback is not None and (
            scope["type"] != "http" or scope["path"] != self._path or scope.get("root_path")
        ):
            await self._fallback(scope, receive, send)
            return
        # One pass over the raw headers: only those the endpoint reads are decoded.
        fields: dict[str, str] = {}
        twice: bytes | None = None
        repeated: str | None = None  # a routing header sent more than once (-32020)
        for raw_name, raw_value in scope["headers"]:
            name = _USED_HEADERS.get(raw_name)
            if name is not None:
                value = raw_value.decode("latin-1")
                if name in fields:
                    if raw_name in SINGLETON_HEADERS:
                        twice = raw_name
                    elif name == "accept":  # a list: the copies are one value (RFC 9110 5.3)
                        value = f"{fields[name]}, {value}"
                    elif name in ROUTING_HEADERS and repeated is None:
                        repeated = name
                fields[name] = value
        try:
            if twice is not None:
                raise _reject(400, duplicate_header(twice))
            principal = self._admit(scope, fields)
            if scope["method"] == "DELETE":  # admitted only to end an era's session
                reply: Reply = self._end_session(fields, principal)
            else:
                # The body is the one read awaited before the reply; the steps around it do no
                # I/O and are plain calls.
                streams = _check_media_types(fields)
                deadline = asyncio.get_running_loop().time() + self.timeout_seconds
                try:
                    raw = await read_body(
                        receive,
                        fields.get("content-length"),
                        max_bytes=self.max_body_bytes,
                        deadline=deadline,
                    )
                except BodyRefused as refused:
                    raise _reject(refused.status, refused.text, refused.headers) from None
                message = _read(raw)
                reply = self._dispatch(message, principal, streams, deadline, fields, repeated)
        except _Answered as refused:
            reply = refused.reply
        await reply.write(send, receive)

    # -- the steps --------------------------------------------------------------------------

    def _admit(self, scope: Scope, fields: dict[str, str]) -> str:
        """The principal of a request from a Host and Origin of this server's, with a method
        this endpoint takes (POST, or DELETE ending an era's session) and a valid token."""
        refused = self.trusted.refusal(port_of(scope), fields.get("host"), fields.get("origin"))
        if refused is not None:
            raise _reject(*refused)
        if scope["method"] != "POST" and not (
            scope["method"] == "DELETE" and self.eras and SESSION_HEADER in fields
        ):
            raise _reject(405, "Method Not Allowed: this endpoint takes POST only", [_ALLOW])
        principal = self.authenticator.authenticate(fields.get("authorization"))
        if principal is None:
            # One answer for a missing, malformed or wrong token: nothing tells them apart.
            raise _reject(401, "Unauthorized", [_CHALLENGE])
        return principal

    def _dispatch(
        self,
        message: Any,
        principal: str,
        streams: bool,
        deadline: float,
        fields: dict[str, str],
        repeated: str | None,
    ) -> Reply:
        """The reply to a message: an era's, a routing-header refusal, or the core's
        response, from a worker thread for a blocking method (a reply that waits for it when
        written), else answered on the loop. `deadline` is the loop time by which a call in a
        worker thread must have answered; the message arrives as `_read` decoded it."""
        if fields.get(PROTOCOL_VERSION_HEADER) not in self._core_versions:
            for era in self.eras:  # a request in a version of the core's is never an era's
                routed = era.route(fields, message, principal)
                if routed is not None:
                    return _Streamed(routed)
        mismatch = header_mismatch(message, fields, repeated)
        if type(message) is dict or isinstance(message, dict):
            raw_id, method = message.get("id"), message.get("method")
        else:
            raw_id = method = None
        if mismatch is not None:
            request_id = raw_id if is_request_id(raw_id) else None
            return _json(http_status(mismatch.code), encode(error_response(request_id, mismatch)))
        if raw_id is not None and method in self.blocking_methods:
            post = _Post(message, principal, streams, deadline)
            if streams:
                return _Deferred(functools.partial(self._live, post, raw_id))
            return _Deferred(functools.partial(self._threaded, post, raw_id))
        return self._inline(message, principal, streams)

    def _end_session(self, fields: dict[str, str], principal: str) -> Reply:
        """DELETE: the era whose session the request names ends it; 404 when none has it."""
        for era in self.eras:
            ended = era.end_session(fields, principal)
            if ended is not None:
                return _Streamed(ended)
        return _Whole(404, [], b"")

    def _inline(self, message: Any, principal: str, streams: bool) -> _Whole:
        """A message answered on the loop (a notification dispatches nothing): what the handler
        notified goes out ahead of the response when the client can take a stream.

        The loop runs one inline call at a time and `Server.respond` does not await, so one
        list collects the notifications of the call running: emptied before it, taken after
        it (a note sent after its call has returned is dropped, as it always was)."""
        noted = self._noted
        noted.clear()
        context = self._contexts[streams].get(principal)
        if context is None:
            context = self._context(principal, streams)
        response = self.server.respond(message, context)
        if response is not None and noted:
            notes = [*noted, Fragment(response)]
            noted.clear()
            # The status line goes out before the stream: 200, whatever the response.
            return _new_whole((200, SSE_HEADERS, b"".join(map(event, notes))))
        return _response(response)

    def _context(self, principal: str, streams: bool) -> RequestContext:
        """A new context for requests answered on the loop: its notifications go to the loop's
        list when the client takes a stream, else they are dropped. Immutable, so one per
        principal and kind is kept in `_contexts` (at most `_MAX_KEPT_CONTEXTS` each, then they
        are built per request)."""
        notify = self._noted.append if streams else None
        context = RequestContext(principal=principal, transport="http", notify=notify)
        kept = self._contexts[streams]
        if len(kept) < _MAX_KEPT_CONTEXTS:
            kept[principal] = context
        return context

    async def _threaded(self, post: _Post, raw_id: Any) -> Reply:
        """A call in a worker thread whose client takes no stream: its notifications are
        dropped, its response is plain JSON."""
        context = RequestContext(principal=post.principal, transport="http")
        return _response(await self._in_thread(post.message, context, post.deadline, raw_id))

    async def _live(self, post: _Post, raw_id: Any) -> Reply:
        """A call in a worker thread whose client takes a stream: each notification the
        handler sends (progress) goes out as it happens, then the response. Until the first
        one nothing is sent, so a call that notifies nothing is plain JSON with its status."""
        loop = asyncio.get_running_loop()
        notes: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        def notify(note: dict[str, Any]) -> None:  # called from the worker thread
            loop.call_soon_threadsafe(notes.put_nowait, note)

        context = RequestContext(principal=post.principal, transport="http", notify=notify)
        worker = asyncio.ensure_future(
            self._in_thread(post.message, context, post.deadline, raw_id)
        )
        first = await _next_note(notes, worker)
        if first is None:
            return _response(worker.result())

        async def respond(send: Send) -> None:
            try:
                await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
                note: dict[str, Any] | None = first
                while note is not None:
                    await send(
                        {"type": "http.response.body", "body": event(note), "more_body": True}
                    )
                    note = await _next_note(notes, worker)
                response = worker.result()
                final = event(Fragment(response)) if response is not None else b""
                await send({"type": "http.response.body", "body": final})
            finally:
                worker.cancel()  # the client went away: stop waiting (the thread finishes alone)

        return _Streamed(respond)

    async def _in_thread(
        self, message: Any, context: RequestContext, deadline: float, raw_id: Any
    ) -> bytes | None:
        with anyio.move_on_after(deadline - asyncio.get_running_loop().time()):
            # abandon_on_cancel: the event loop answers at the deadline; the thread cannot be
            # interrupted and finishes on its own (a deletion it already committed stays).
            return await anyio.to_thread.run_sync(
                self.server.respond, message, context, abandon_on_cancel=True
            )
        REFUSALS.refused(
            "timeout_seconds", f"a call did not finish within {self.timeout_seconds:g}s"
        )
        timeout = ProtocolError(
            SERVER_BUSY, "Request timed out; it may still complete. Retry with care."
        )
        return encode(error_response(raw_id if is_request_id(raw_id) else None, timeout))


async def _next_note(
    notes: asyncio.Queue[dict[str, Any]], worker: asyncio.Future[Any]
) -> dict[str, Any] | None:
    """The next notification of a call, or None once the call has finished and every
    notification it sent has been taken. (The worker thread schedules each notification on
    the loop before its own completion, so none is left behind when it is done.)"""
    if not notes.empty():
        return notes.get_nowait()
    if worker.done():
        return None
    getter = asyncio.ensure_future(notes.get())
    try:
        await asyncio.wait({getter, worker}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not getter.done():
            getter.cancel()
    if getter.done() and not getter.cancelled():
        return getter.result()
    return notes.get_nowait() if not notes.empty() else None


async def _until_disconnect(respond: Streamed, send: Send, receive: Receive) -> None:
    """Run a response that writes itself, but stop when its client goes away: a legacy call's
    stream waits on the client between events, and a client that disconnected will never
    answer, so the call ends now instead of holding its slot until the answer timeout. The
    request body has been read in full, so the next message `receive` gives is the
    disconnect (or nothing, until the response is complete)."""
    complete = False

    async def tracked(message: Any) -> None:
        nonlocal complete
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            complete = True
        await send(message)

    async with anyio.create_task_group() as group:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if not complete:
                log.info("the client went away during a streamed response; ending it")
                group.cancel_scope.cancel()

        group.start_soon(watch)
        await respond(tracked)
        group.cancel_scope.cancel()


_ACCEPTED: Final = _Whole(202, [], b"")
_ALLOW: Final = (b"allow", b"POST")
_CHALLENGE: Final = (b"www-authenticate", b'Bearer realm="labkit"')


@functools.lru_cache(maxsize=256)
def _media_types(value: str) -> frozenset[str]:
    """The media types of a Content-Type or Accept value, parameters dropped. Parsed once per
    distinct value (clients send the same few): a head is bounded, so the cache is too."""
    return frozenset(part.split(";", 1)[0].strip().lower() for part in value.split(","))


_JSON_ONLY: Final = frozenset({"application/json"})
_EVENT_STREAM: Final = "text/event-stream"


def _check_media_types(fields: dict[str, str]) -> bool:
    """415 or 406 for what the endpoint cannot read or write; else whether the client takes
    `text/event-stream` (a request's notifications can then travel before its response)."""
    content_type = fields.get("content-type")
    if content_type is None or (
        content_type != "application/json" and _media_types(content_type) != _JSON_ONLY
    ):
        raise _reject(415, "Unsupported Media Type: send application/json")
    accept = fields.get("accept")
    if accept is None:
        return False
    streams = _streams(accept)
    if streams is None:
        raise _reject(406, "Not Acceptable: responses are application/json")
    return streams


@functools.lru_cache(maxsize=256)
def _streams(accept: str) -> bool | None:
    """Whether an Accept value takes `text/event-stream`; None when it takes no JSON. Judged
    once per distinct value, as `_media_types` parses it."""
    kinds = _media_types(accept)
    return _EVENT_STREAM in kinds if kinds & _JSON_TYPES else None


def create_app(
    server: Server,
    authenticator: Authenticator,
    *,
    allowed_origins: Collection[str] = (),
    allowed_hosts: Collection[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    blocking_methods: Collection[str] = DEFAULT_BLOCKING_METHODS,
    path: str = DEFAULT_PATH,
    consent_page: ConsentPage | None = None,
    eras: Sequence[HttpEra] = (),
) -> McpEndpoint:
    """An ASGI app serving MCP at `path` (POST only): the endpoint itself, which hands
    anything else (the consent page, a 404, a redirect for a trailing slash, a mounted root
    path, the lifespan) to a Starlette router that answers as it always did.

    Loopback Hosts and Origins (127.0.0.1, localhost and [::1] at the port the request
    arrived on) are always allowed; `allowed_hosts` (exact `host:port`, or a bare host for any
    port) and `allowed_origins` (exact `scheme://host:port`) add more for deployments behind
    a name. `blocking_methods` run in a worker thread bounded by `timeout_seconds`; pass an
    empty set when every store is in memory. `consent_page` serves URL-mode consent on the
    same server and port. `eras` serve other eras' clients (2025-11-25 sessions) on the same
    endpoint, each through its HTTP adapter.
    """
    endpoint = McpEndpoint(
        server,
        authenticator,
        allowed_origins=allowed_origins,
        allowed_hosts=allowed_hosts,
        max_body_bytes=max_body_bytes,
        timeout_seconds=timeout_seconds,
        blocking_methods=blocking_methods,
        eras=eras,
    )
    routes: list[BaseRoute] = [*consent_page.routes()] if consent_page is not None else []
    # The router's own copy of the endpoint serves whatever reaches it, with no dispatch;
    # the router is reached only past the same header and Host checks as /mcp (a trailing
    # slash redirect must not send a browser to a Host nobody checked).
    router = Starlette(routes=[Route(path, copy.copy(endpoint)), *routes])
    endpoint._fallback = Guarded(router, endpoint.hosts)
    endpoint._path = path
    return endpoint
