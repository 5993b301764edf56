"""Eras as declarations: the table's 2025-11-25 entry says what it serves, and a third era,
declared here and nowhere in labkit, is served by the unchanged stdio transport and HTTP
endpoint beside 2025-11-25 and the core's 2026-07-28."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Mapping
from typing import Any

import httpx
import pytest
from helpers import Lab, build_lab, request
from starlette.types import Send
from test_http import serving
from test_legacy import initialize_message, watched_server
from test_stdio_batches import pipe_reader

from labkit import legacy
from labkit.auth import demo_authenticator
from labkit.errors import METHOD_NOT_FOUND, ProtocolError
from labkit.legacy import LegacyLimits
from labkit.server import RequestContext, Server
from labkit.transports.era import SESSION_HEADER, Era, HttpEra, StdioEra, Streamed, Write
from labkit.transports.eras import ERAS, LEGACY
from labkit.transports.http import create_app
from labkit.transports.legacy_http import LegacyHttp
from labkit.transports.legacy_stdio import LegacyStdio
from labkit.transports.stdio import StdioTransport
from labkit.wire import encode, error_response, result_response

TOY_VERSION = "2099-01-01"
ALICE = RequestContext(principal="alice", transport="test")

# -- a toy third era: its whole declaration ---------------------------------------------------


def _toy_answer(message: dict[str, Any]) -> dict[str, Any]:
    """What the toy era says to a request: its handshake, its ping, and nothing else."""
    method = message.get("method")
    if method == "initialize":
        return result_response(message["id"], {"protocolVersion": TOY_VERSION})
    if method == "ping":
        return result_response(message["id"], {"era": TOY_VERSION})
    missing = ProtocolError(METHOD_NOT_FOUND, f"Method not found at {TOY_VERSION}")
    return error_response(message["id"], missing)


class ToyStdio:
    """A connection becomes a toy session on an `initialize` asking for 2099-01-01; its
    `ping` then answers in the toy's words."""

    def __init__(self, server: Server, context: RequestContext, limits: LegacyLimits) -> None:
        self.session = False

    @property
    def holds(self) -> bool:
        return self.session

    @property
    def wait(self) -> float | None:
        return None

    def claims(self, message: Any) -> bool:
        if not isinstance(message, dict) or "id" not in message:
            return False
        if self.session:
            return message.get("method") == "ping"
        params = message.get("params")
        return (
            message.get("method") == "initialize"
            and isinstance(params, dict)
            and params.get("protocolVersion") == TOY_VERSION
        )

    def take(self, message: Any, write: Write) -> bool:
        self.session = True
        return write(_toy_answer(message))

    def poll_again(self, write: Write) -> bool:
        return True


class ToyHttp:
    """Requests with `MCP-Protocol-Version: 2099-01-01` are the toy's; its `initialize` mints
    a session id that DELETE ends."""

    def __init__(self, server: Server, limits: LegacyLimits, blocking: bool) -> None:
        self.ids = itertools.count(1)
        self.sessions: set[str] = set()

    def route(self, fields: dict[str, str], message: Any, principal: str) -> Streamed | None:
        if fields.get("mcp-protocol-version") != TOY_VERSION:
            return None
        headers: list[tuple[bytes, bytes]] = []
        if message.get("method") == "initialize":
            session_id = f"toy-{next(self.ids)}"
            self.sessions.add(session_id)
            headers.append((SESSION_HEADER.encode(), session_id.encode()))
        return _json(200, _toy_answer(message), headers)

    def end_session(self, fields: Mapping[str, str], principal: str) -> Streamed | None:
        session_id = fields.get(SESSION_HEADER)
        if session_id not in self.sessions:
            return None
        self.sessions.discard(session_id)
        return _json(204, None, [])


def _json(status: int, body: Any, headers: list[tuple[bytes, bytes]]) -> Streamed:
    async def respond(send: Send) -> None:
        payload = b"" if body is None else encode(body)
        kind = [(b"content-type", b"application/json")] if body is not None else []
        await send({"type": "http.response.start", "status": status, "headers": headers + kind})
        await send({"type": "http.response.body", "body": payload})

    return respond


TOY = Era(
    versions=(TOY_VERSION,),
    methods=frozenset({"initialize", "ping"}),
    stdio=ToyStdio,
    http=ToyHttp,
)
# One entry more than labkit serves: the toy first (2025-11-25 claims any other initialize).
TABLE = (TOY, *ERAS)


def toy_initialize(id: Any = 0) -> dict[str, Any]:
    return initialize_message(id, version=TOY_VERSION)


def ping(id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "ping"}


# -- the toy era on stdio ------------------------------------------------------------------------


def lines(*messages: Any) -> bytes:
    return b"".join(encode(m) + b"\n" for m in messages)


def stdio_line_by_line(lab: Lab, data: bytes) -> list[dict[str, Any]]:
    out = io.BytesIO()
    StdioTransport(lab.server, "alice", eras=TABLE).serve(io.BytesIO(data), out)
    return [json.loads(chunk) for chunk in out.getvalue().splitlines()]


def stdio_batched(lab: Lab, data: bytes) -> list[dict[str, Any]]:
    out = io.BytesIO()
    with pipe_reader([data]) as reader:
        StdioTransport(lab.server, "alice", eras=TABLE).serve(reader, out)
    return [json.loads(chunk) for chunk in out.getvalue().splitlines()]


@pytest.mark.parametrize("serve", [stdio_line_by_line, stdio_batched])
def test_a_third_era_is_served_on_stdio_beside_the_others(serve: Any) -> None:
    lab = build_lab()
    modern = request("m", "tools/list")
    toy = serve(lab, lines(toy_initialize(0), ping(1), modern, ping(2)))
    assert toy[0] == {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": TOY_VERSION}}
    assert toy[1]["result"] == {"era": TOY_VERSION}
    assert toy[2]["id"] == "m" and toy[2]["result"]["resultType"] == "complete", "the core's"
    assert toy[3]["result"] == {"era": TOY_VERSION}
    # Another connection of the same transport: an initialize of 2025-11-25 is still legacy's.
    old = serve(lab, lines(initialize_message(0), ping(1)))
    assert old[0]["result"]["protocolVersion"] == "2025-11-25"
    assert old[1]["result"] == {}, "2025-11-25 ping"


def test_without_the_entry_the_toy_handshake_is_2025_11_25s() -> None:
    out = io.BytesIO()
    StdioTransport(build_lab().server, "alice", eras=ERAS).serve(
        io.BytesIO(lines(toy_initialize(0))), out
    )
    answered = json.loads(out.getvalue())
    assert answered["result"]["protocolVersion"] == "2025-11-25", "it answers with its newest"


# -- the toy era on the HTTP endpoint ------------------------------------------------------------


def test_a_third_era_is_served_on_the_http_endpoint_beside_the_others() -> None:
    lab = build_lab()
    limits = LegacyLimits()
    app = create_app(
        lab.server,
        demo_authenticator(),
        eras=[era.http(lab.server, limits, False) for era in TABLE],
    )
    auth = {"authorization": "Bearer demo-alice", "accept": "application/json"}
    toy = {**auth, "mcp-protocol-version": TOY_VERSION}
    with serving(app) as url, httpx.Client(timeout=30) as http:
        opened = http.post(url, json=toy_initialize(0), headers=toy)
        assert opened.status_code == 200
        assert opened.json()["result"] == {"protocolVersion": TOY_VERSION}
        toy_session = opened.headers[SESSION_HEADER]
        assert toy_session.startswith("toy-")
        assert http.post(url, json=ping(1), headers=toy).json()["result"] == {"era": TOY_VERSION}
        # 2025-11-25 on the same endpoint, as before.
        legacy_opened = http.post(url, json=initialize_message(0), headers=auth)
        assert legacy_opened.json()["result"]["protocolVersion"] == "2025-11-25"
        legacy_session = legacy_opened.headers[SESSION_HEADER]
        pinged = http.post(url, json=ping(1), headers={**auth, SESSION_HEADER: legacy_session})
        assert pinged.json()["result"] == {}
        # 2026-07-28: the core's stateless path.
        modern = http.post(url, json=request("m", "server/discover"), headers=_modern(auth))
        assert modern.status_code == 200 and modern.json()["result"]["resultType"] == "complete"
        # DELETE reaches the era whose session it names; a session nobody has is 404.
        for session_id, status in [(toy_session, 204), (legacy_session, 204), ("nobody", 404)]:
            ended = http.delete(url, headers={**auth, SESSION_HEADER: session_id})
            assert ended.status_code == status, session_id
        gone = http.post(url, json=ping(2), headers={**auth, SESSION_HEADER: legacy_session})
        assert gone.status_code == 404


def _modern(auth: dict[str, str]) -> dict[str, str]:
    return {**auth, "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"}


def test_an_endpoint_without_eras_takes_no_delete() -> None:
    lab = build_lab()
    app = create_app(lab.server, demo_authenticator())
    with serving(app) as url, httpx.Client(timeout=30) as http:
        refused = http.delete(
            url, headers={"authorization": "Bearer demo-alice", SESSION_HEADER: "toy-1"}
        )
        assert refused.status_code == 405


# -- the table's 2025-11-25 entry ----------------------------------------------------------------


def test_the_table_serves_2025_11_25_with_the_versions_its_handshake_negotiates() -> None:
    assert ERAS == (LEGACY,)
    assert LEGACY.version == "2025-11-25"
    assert LEGACY.versions == ("2025-06-18", "2025-11-25")
    server = build_lab().server
    for version in (*LEGACY.versions, "2024-11-05", TOY_VERSION):
        _, response = legacy.initialize(server, ALICE, initialize_message(0, version=version))
        negotiated = response["result"]["protocolVersion"]
        assert negotiated == (version if version in LEGACY.versions else LEGACY.version)


def test_the_2025_11_25_message_set_is_what_its_sessions_answer_and_the_core_does_not() -> None:
    server = watched_server()  # it serves a resource: subscribing means something
    assert {"initialize", "ping", "logging/setLevel", "resources/subscribe"} <= LEGACY.methods
    for method in sorted(LEGACY.methods):
        session, _ = legacy.initialize(server, ALICE, initialize_message(0))
        assert session is not None
        if method.startswith("notifications/"):
            assert session.answer({"jsonrpc": "2.0", "method": method}) is None
            continue
        answered = session.answer({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}})
        assert answered is not None
        assert answered.get("error", {}).get("code") != METHOD_NOT_FOUND, method
        if method != "initialize":  # the core's own handshake-free answer: not its method
            core = server.handle(request(1, method, {}), ALICE)
            assert core is not None and core["error"]["code"] == METHOD_NOT_FOUND, method
    # The lifecycle is declared too.
    lifecycle = {"initialize", "notifications/initialized", "notifications/roots/list_changed"}
    assert lifecycle <= LEGACY.methods
    # A method outside the set is the core's, translated: the session forwards it.
    listed = session.answer({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert listed is not None and "tools" in listed["result"]


def test_the_2025_11_25_entry_makes_its_adapters_with_the_bounds_given() -> None:
    server = build_lab().server
    limits = LegacyLimits(calls_per_session=3, max_sessions=5)
    stdio: StdioEra = LEGACY.stdio(server, ALICE, limits)
    assert isinstance(stdio, LegacyStdio) and stdio.limits is limits and not stdio.holds
    http: HttpEra = LEGACY.http(server, limits, False)
    assert isinstance(http, LegacyHttp)
    assert http.max_sessions == 5 and http.limits.calls_per_session == 3 and not http.blocking


def test_an_era_speaks_at_least_one_version() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Era(versions=(), methods=frozenset(), stdio=ToyStdio, http=ToyHttp)
