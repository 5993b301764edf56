"""The 2025-11-25 legacy adapter: a session layer over the unchanged 2026-07-28 `Server.handle`.

Owns: the `initialize` handshake and the session's negotiated version and capabilities; the
translation of each legacy request into a modern one (2026-07-28 `_meta` built from the
session's `initialize`); and `LegacyCall`, the state machine of one `tools/call` that maps an
`input_required` result onto live server-to-client requests (`elicitation/create`, with a
fresh `elicitationId` for URL mode, and `roots/list`), collects the answers, and re-invokes the
modern handler with `inputResponses` and the byte-exact `requestState`; and `LegacyLimits`,
the bounds every transport applies to legacy sessions (calls in progress, sessions, the answer
timeout) and that a session applies to its own subscriptions (served URIs only, bounded).

The modern handler never learns that a session exists: it sees only ordinary stateless
requests, each with its own new id. A legacy roots list is passed to a handler that asked for
it and authorizes nothing: the explicit `workspaceUri` and the server-side allowlist decide.

Pure module: no I/O, no clock. Transports feed it messages and carry out each `Step` (write
these messages, answer with this result, or poll again after a pause). Must not import a
transport.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from labkit.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    SERVER_BUSY,
    ProtocolError,
)
from labkit.server import RequestContext, Server
from labkit.wire import (
    LEGACY_PROTOCOL_VERSION,
    LOG_LEVELS,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_VERSION,
    PROTOCOL_VERSION,
    RequestId,
    error_response,
    is_request_id,
    result_response,
)

log = logging.getLogger("labkit.legacy")

# Handshake versions the adapter speaks: form elicitation exists from 2025-06-18, URL mode at
# 2025-11-25. A client asking for anything else is answered with the newest (the client decides
# whether to go on, as the 2025-11-25 lifecycle says).
LEGACY_VERSIONS: Final = ("2025-06-18", LEGACY_PROTOCOL_VERSION)
# One call may not bounce between server and client for ever.
MAX_ROUNDS: Final = 16
# While a URL-mode consent is pending, the modern handler is asked again this often, this
# many times (5 minutes: a consent link lives 4), before the call is answered as cancelled.
POLL_SECONDS: Final = 0.5
MAX_POLLS: Final = 600
# A subscription names one resource URI: longer ones are refused before any lookup.
MAX_SUBSCRIPTION_URI_CHARS: Final = 2048
# At 2025-11-25 an unknown resource is -32002 with `data.uri` (2026-07-28 retired the code).
RESOURCE_NOT_FOUND: Final = -32002
# Keys of a modern result that do not exist at 2025-11-25.
_MODERN_ONLY: Final = ("resultType", "ttlMs", "cacheScope")
_CAPABILITY_KEYS: Final = ("elicitation", "roots", "sampling")


def _elicitation_id() -> str:
    return secrets.token_urlsafe(16)


def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], RequestId],
    new_elicitation_id: Callable[[], str] = _elicitation_id,
) -> list[tuple[str, dict[str, Any]]]:
    """One modern `inputRequests` map as live 2025-11-25 server-to-client requests.

    Returns `(input key, JSON-RPC request)` pairs in the map's order, each with a fresh id from
    `next_id`. A URL-mode elicitation gets the `elicitationId` 2025-11-25 requires (2026-07-28
    has none); everything else travels unchanged.
    """
    requests: list[tuple[str, dict[str, Any]]] = []
    for key, entry in input_requests.items():
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        params = entry.get("params")
        if params is not None:
            params = dict(params)
            if entry["method"] == "elicitation/create" and params.get("mode") == "url":
                params["elicitationId"] = new_elicitation_id()
            message["params"] = params
        requests.append((key, message))
    return requests


def to_legacy_result(result: dict[str, Any]) -> dict[str, Any]:
    """A modern complete result as a 2025-11-25 one: the 2026-only keys go."""
    return {k: v for k, v in result.items() if k not in _MODERN_ONLY}


def modern_capabilities(legacy: Any) -> dict[str, Any]:
    """The client capabilities a modern request carries, from the legacy `initialize`'s.
    `elicitation: {}` keeps meaning form, as at both revisions."""
    if not isinstance(legacy, dict):
        return {}
    return {k: v for k, v in legacy.items() if k in _CAPABILITY_KEYS and isinstance(v, dict)}


@dataclass(frozen=True)
class LegacyLimits:
    """What one principal's legacy sessions may hold at once (docs/security.md: bound each
    principal's share). The transports enforce the call and session bounds; the session
    enforces its subscriptions."""

    # How long a call waits for the client to answer one of its live requests.
    answer_seconds: float = 120.0
    # Calls in progress (running or waiting on the client) per session, and per principal
    # over all of its sessions: past either, a new call is refused with -32001.
    calls_per_session: int = 4
    calls_per_principal: int = 16
    # The HTTP session table: in all, per principal, and how long an idle session lives.
    max_sessions: int = 1000
    sessions_per_principal: int = 16
    idle_seconds: float = 3600.0
    # `resources/subscribe` URIs one session may hold.
    subscriptions: int = 64

    def __post_init__(self) -> None:
        counts = (
            self.calls_per_session,
            self.calls_per_principal,
            self.max_sessions,
            self.sessions_per_principal,
            self.subscriptions,
        )
        if min(counts) < 1 or not (self.answer_seconds > 0 and self.idle_seconds > 0):
            raise ValueError("legacy limits must be positive")


class Step(NamedTuple):
    """What the transport does next for one call: write `send` (in order), then either answer
    with `result` (the call is over), or after `wait` seconds call `poll`, or else read the
    client's answers and pass each to `receive`."""

    send: list[dict[str, Any]]
    result: dict[str, Any] | None = None
    wait: float | None = None


@dataclass
class LegacySession:
    """One legacy connection (stdio) or `Mcp-Session-Id` (HTTP), after `initialize`."""

    server: Server
    context: RequestContext
    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None = None
    session_id: str | None = None
    initialized: bool = False
    # Set by `logging/setLevel`; every later modern request carries it in `_meta`.
    log_level: str | None = None
    # URIs from `resources/subscribe`, each one the server serves, at most
    # `limits.subscriptions`. Resources here never change, so no update is ever due; the set
    # exists so unsubscribe means something.
    subscriptions: set[str] = field(default_factory=set)
    limits: LegacyLimits = field(default_factory=LegacyLimits)
    new_elicitation_id: Callable[[], str] = _elicitation_id
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def next_id(self) -> str:
        # Strings that no client-chosen id of ours collides with in this session.
        return f"labkit-{next(self._ids)}"

    def modern(self, message: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
        """The 2026-07-28 request the modern handler sees for a legacy request."""
        params = message.get("params")
        params = dict(params) if isinstance(params, dict) else {}
        # A legacy client has no MRTR fields: whatever it sends under those names is not ours.
        params.pop("inputResponses", None)
        params.pop("requestState", None)
        meta = params.get("_meta")
        meta = dict(meta) if isinstance(meta, dict) else {}
        meta[META_VERSION] = PROTOCOL_VERSION
        meta[META_CAPABILITIES] = dict(self.capabilities)
        if self.client_info is not None:
            meta[META_CLIENT_INFO] = self.client_info
        if self.log_level is not None:
            meta.setdefault(META_LOG_LEVEL, self.log_level)
        params["_meta"] = meta
        method = message.get("method")
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    def answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The response to one legacy message other than a `tools/call`; None for a
        notification. `initialize` again on an initialized session is refused."""
        method = message.get("method")
        if "id" not in message:
            if method == "notifications/initialized":
                self.initialized = True
            elif method == "notifications/roots/list_changed":
                # Roots authorize nothing here; a handler that needs them asks for them.
                log.debug("roots changed for session of %r", self.context.principal)
            return None
        request_id = message["id"]
        if method == "initialize":
            return error_response(
                request_id, ProtocolError(INVALID_REQUEST, "Invalid Request: already initialized")
            )
        local = _SESSION_METHODS.get(method) if isinstance(method, str) else None
        if local is not None:
            try:
                return result_response(request_id, local(self, message.get("params")))
            except ProtocolError as exc:
                return error_response(request_id, exc)
        response = self.server.handle(self.modern(message, request_id), self.context)
        return None if response is None else to_legacy_response(response)

    def call(self, message: dict[str, Any]) -> LegacyCall:
        return LegacyCall(self, message)


def _ping(session: LegacySession, params: Any) -> dict[str, Any]:
    return {}


def _set_level(session: LegacySession, params: Any) -> dict[str, Any]:
    level = params.get("level") if isinstance(params, dict) else None
    if level not in LOG_LEVELS:
        raise ProtocolError(INVALID_PARAMS, f"params.level must be one of {list(LOG_LEVELS)}")
    session.log_level = level
    return {}


def _subscription_uri(params: Any) -> str:
    uri = params.get("uri") if isinstance(params, dict) else None
    if not isinstance(uri, str) or not uri:
        raise ProtocolError(INVALID_PARAMS, "params.uri must be a non-empty string")
    if len(uri) > MAX_SUBSCRIPTION_URI_CHARS:
        raise ProtocolError(
            INVALID_PARAMS, f"params.uri is limited to {MAX_SUBSCRIPTION_URI_CHARS} characters"
        )
    return uri


def serves_resource(server: Server, uri: str) -> bool:
    """Whether `resources/read` of `uri` would find a registered resource or template."""
    return uri in server.resources or any(
        pattern.fullmatch(uri) for pattern, _ in server.resource_templates
    )


def _subscribe(session: LegacySession, params: Any) -> dict[str, Any]:
    server = session.server
    if "resources" not in server.capabilities:
        # Nothing to subscribe to: the method does not exist for this deployment.
        raise ProtocolError(METHOD_NOT_FOUND, "Method not found: this server has no resources")
    uri = _subscription_uri(params)
    if not serves_resource(server, uri):
        raise ProtocolError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
    if uri not in session.subscriptions and len(session.subscriptions) >= (
        session.limits.subscriptions
    ):
        raise ProtocolError(
            INVALID_PARAMS,
            f"A session holds at most {session.limits.subscriptions} subscriptions: "
            "unsubscribe from one first",
        )
    session.subscriptions.add(uri)
    return {}


def _unsubscribe(session: LegacySession, params: Any) -> dict[str, Any]:
    session.subscriptions.discard(_subscription_uri(params))
    return {}


# Methods that exist only at 2025-11-25 and live in the session: the modern handler keeps
# answering -32601 for them to 2026-07-28 clients.
_SESSION_METHODS: Final[Mapping[str, Callable[[LegacySession, Any], dict[str, Any]]]] = {
    "ping": _ping,
    "logging/setLevel": _set_level,
    "resources/subscribe": _subscribe,
    "resources/unsubscribe": _unsubscribe,
}

# The era's message set: what a session answers itself (its lifecycle and the methods above);
# every other request is the core's, translated (`labkit.transports.eras` declares it).
SESSION_MESSAGES: Final = frozenset(
    {"initialize", "notifications/initialized", "notifications/roots/list_changed"}
    | set(_SESSION_METHODS)
)


def is_response(message: Any) -> bool:
    """A JSON-RPC response (the client answering a request we sent), not a request."""
    return (
        isinstance(message, dict)
        and "method" not in message
        and "id" in message
        and ("result" in message or "error" in message)
    )


def to_legacy_response(response: dict[str, Any]) -> dict[str, Any]:
    result = response.get("result")
    if isinstance(result, dict):
        return {**response, "result": to_legacy_result(result)}
    return response


def initialize(
    server: Server,
    context: RequestContext,
    message: dict[str, Any],
    *,
    session_id: str | None = None,
    new_elicitation_id: Callable[[], str] = _elicitation_id,
    limits: LegacyLimits | None = None,
) -> tuple[LegacySession | None, dict[str, Any]]:
    """Answer a legacy `initialize`: the new session (None when refused) and the response."""
    request_id = message.get("id")
    params = message.get("params")
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        bad = ProtocolError(INVALID_REQUEST, "Invalid Request: initialize needs an id")
        return None, error_response(None, bad)
    if not isinstance(params, dict):
        bad = ProtocolError(INVALID_REQUEST, "Invalid Request: initialize needs params")
        return None, error_response(request_id, bad)
    requested = params.get("protocolVersion")
    version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[-1]
    client_info = params.get("clientInfo")
    session = LegacySession(
        server=server,
        context=context,
        version=version,
        capabilities=modern_capabilities(params.get("capabilities")),
        client_info=client_info if isinstance(client_info, dict) else None,
        session_id=session_id,
        new_elicitation_id=new_elicitation_id,
        limits=limits if limits is not None else LegacyLimits(),
    )
    # Advertise what the modern server advertises (never `roots`: that is a client feature).
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": dict(server.capabilities),
        "serverInfo": dict(server.server_info),
    }
    if server.instructions:
        result["instructions"] = server.instructions
    return session, result_response(request_id, result)


class LegacyCall:
    """One legacy `tools/call`, driven to its final response.

    `start()`, then for each `Step`: write its messages; if it has a result, send it and stop;
    if it has `wait`, pause and call `poll()`; otherwise feed each client answer (a JSON-RPC
    response whose id `owns`) to `receive()`.
    """

    def __init__(self, session: LegacySession, message: dict[str, Any]) -> None:
        self.session = session
        self.request_id: RequestId = message["id"]
        self.message = message
        self.rounds = 0
        self.polls = 0
        self.state: Any = None
        self.answers: dict[str, Any] = {}
        self.outstanding: dict[RequestId, tuple[str, dict[str, Any]]] = {}
        # URL-mode consents the user agreed to open, not yet seen to complete:
        # url -> (input key, elicitationId).
        self.awaiting: dict[str, tuple[str, str]] = {}

    def owns(self, response_id: Any) -> bool:
        return is_request_id(response_id) and response_id in self.outstanding

    def start(self) -> Step:
        return self._invoke()

    def receive(self, response: dict[str, Any]) -> Step:
        """One client answer to a request this call sent."""
        key, sent = self.outstanding.pop(response["id"])
        result = response.get("result")
        if isinstance(result, dict):
            self.answers[key] = result
            params = sent.get("params", {})
            if params.get("mode") == "url" and result.get("action") == "accept":
                self.awaiting[params["url"]] = (key, params["elicitationId"])
        elif sent["method"] == "elicitation/create":
            # A client that failed to show the request did not consent: a cancel, which
            # mutates nothing and leaves the flow open (docs/LESSON.md section 8).
            self.answers[key] = {"action": "cancel"}
        if self.outstanding:
            return Step([])
        return self._invoke()

    def poll(self) -> Step:
        self.polls += 1
        if self.polls > MAX_POLLS:
            log.info("consent did not arrive in time; the call is answered as cancelled")
            for key in self.answers:
                self.answers[key] = {"action": "cancel"}
            self.awaiting.clear()
        return self._invoke(polling=True)

    def _invoke(self, *, polling: bool = False) -> Step:
        if not polling:
            self.rounds += 1
        if self.rounds > MAX_ROUNDS:
            busy = ProtocolError(SERVER_BUSY, "The call needed too many rounds of input")
            return Step([], error_response(self.request_id, busy))
        # Every invocation is a new modern request with a new id (MRTR: a retry never reuses).
        modern = self.session.modern(
            self.message, f"legacy-{self.request_id}-{self.rounds}-{self.polls}"
        )
        if self.rounds > 1:
            modern["params"]["inputResponses"] = dict(self.answers)
            if self.state is not None:
                modern["params"]["requestState"] = self.state
        # Notifications the handler sends while answering (progress) go to the client first.
        notes: list[dict[str, Any]] = []
        context = dataclasses.replace(self.session.context, notify=notes.append)
        response = self.session.server.handle(modern, context)
        assert response is not None  # a request with an id is always answered
        result = response.get("result")
        if not isinstance(result, dict) or result.get("resultType") != "input_required":
            final = {**to_legacy_response(response), "id": self.request_id}
            # An error ends the call without the consent having been used: nothing completed.
            landed = self._completions({}) if "result" in response else self._forget()
            return Step(notes + landed, final)
        self.state = result.get("requestState")
        entries: dict[str, Any] = result.get("inputRequests") or {}
        still = {
            e["params"]["url"]
            for e in entries.values()
            if e.get("method") == "elicitation/create" and e["params"].get("mode") == "url"
        } & set(self.awaiting)
        done = notes + self._completions(entries, still)
        fresh = {
            key: entry
            for key, entry in entries.items()
            if not (
                entry.get("method") == "elicitation/create" and entry["params"].get("url") in still
            )
        }
        if not fresh:
            if self.polls > MAX_POLLS:
                # Even the cancel did not settle it: answer, rather than poll for ever.
                busy = ProtocolError(SERVER_BUSY, "The call did not settle in time")
                return Step(done, error_response(self.request_id, busy))
            # Only consents still pending (or state alone, "retry later"): keep the answers
            # we have and ask the modern handler again shortly.
            return Step(done, wait=POLL_SECONDS)
        requests = to_legacy_requests(fresh, self.session.next_id, self.session.new_elicitation_id)
        # The retry answers this round's requests: kept answers only for consents still
        # pending (asked again, not re-sent); everything else is asked now.
        self.answers = {k: v for k, v in self.answers.items() if k in entries and k not in fresh}
        for key, request in requests:
            self.outstanding[request["id"]] = (key, request)
        return Step(done + [request for _, request in requests])

    def _completions(
        self, entries: Mapping[str, Any], still: set[str] | None = None
    ) -> list[dict[str, Any]]:
        """`notifications/elicitation/complete` for every accepted URL consent whose input the
        handler no longer asks for at all: it landed (2025-11-25 URL mode). A consent whose key
        is asked again with another link (the old one expired or was replaced) did not land:
        it is forgotten without a word, and the new link goes to the client as a new request."""
        kept = still if still is not None else set()
        notes: list[dict[str, Any]] = []
        for url, (key, elicitation_id) in list(self.awaiting.items()):
            if url in kept:
                continue
            del self.awaiting[url]
            if key in entries:
                log.debug("a URL consent was replaced before it landed")
                continue
            notes.append(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/elicitation/complete",
                    "params": {"elicitationId": elicitation_id},
                }
            )
        return notes

    def _forget(self) -> list[dict[str, Any]]:
        self.awaiting.clear()
        return []
