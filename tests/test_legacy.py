"""The 2025-11-25 legacy adapter: the sans-IO session and call state machine (`labkit.legacy`),
stdio serving `ERAS` over byte streams, and HTTP sessions on the real endpoint.

What must hold: the modern handler runs unchanged and sees only 2026-07-28 requests (its own
`_meta`, new ids, the byte-exact `requestState`, never a session); an `input_required` becomes
live `elicitation/create` / `roots/list` requests; a legacy roots list authorizes nothing; a
request with 2026-07-28 `_meta` (or header) is served statelessly as before.
"""

from __future__ import annotations

import io
import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from helpers import TPS, Lab, build_lab, check_wire, request
from test_http import serving
from test_notes_export import ExportLab, build_export_lab

from labkit import legacy
from labkit.auth import demo_authenticator
from labkit.clock import FakeClock
from labkit.conformance import FixedResource
from labkit.legacy import (
    MAX_POLLS,
    MAX_ROUNDS,
    POLL_SECONDS,
    LegacyCall,
    LegacySession,
    Step,
    to_legacy_requests,
    to_legacy_result,
)
from labkit.server import Request, RequestContext, Server
from labkit.transports.eras import ERAS
from labkit.transports.http import create_app
from labkit.transports.legacy_http import LegacyHttp
from labkit.transports.stdio import StdioTransport
from labkit.wire import result_response

LEGACY_CAPS = {"elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": True}}
ALICE = RequestContext(principal="alice", transport="test")


def initialize_message(
    id: Any = 0, version: str = "2025-11-25", caps: Any = LEGACY_CAPS
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": caps,
            "clientInfo": {"name": "old-client", "version": "1"},
        },
    }


def legacy_call(id: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def reply(request: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def open_session(server: Server, caps: Any = LEGACY_CAPS) -> LegacySession:
    ids = itertools.count(1)
    session, response = legacy.initialize(
        server, ALICE, initialize_message(caps=caps), new_elicitation_id=lambda: f"e{next(ids)}"
    )
    assert session is not None and "result" in response
    return session


# -- the small pure pieces ---------------------------------------------------------------------


def test_to_legacy_requests_maps_each_entry_with_fresh_ids() -> None:
    form = {"mode": "form", "message": "pick", "requestedSchema": {"type": "object"}}
    url = {"mode": "url", "message": "open", "url": "http://127.0.0.1:1/connect/x"}
    input_requests = {
        "choice": {"method": "elicitation/create", "params": form},
        "consent": {"method": "elicitation/create", "params": url},
        "where": {"method": "roots/list"},
    }
    before = json.dumps(input_requests)
    ids = iter(["s-1", "s-2", "s-3"])
    mapped = to_legacy_requests(input_requests, lambda: next(ids), lambda: "elic-1")
    assert mapped == [
        ("choice", {"jsonrpc": "2.0", "id": "s-1", "method": "elicitation/create", "params": form}),
        (
            "consent",
            {
                "jsonrpc": "2.0",
                "id": "s-2",
                "method": "elicitation/create",
                "params": {**url, "elicitationId": "elic-1"},
            },
        ),
        ("where", {"jsonrpc": "2.0", "id": "s-3", "method": "roots/list"}),
    ]
    assert json.dumps(input_requests) == before, "the modern result is not mutated"


def test_to_legacy_result_drops_what_2025_does_not_have() -> None:
    modern = {
        "resultType": "complete",
        "tools": [],
        "ttlMs": 1,
        "cacheScope": "public",
        "_meta": {},
    }
    assert to_legacy_result(modern) == {"tools": [], "_meta": {}}


@pytest.mark.parametrize(
    ("asked", "answered"),
    [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2024-11-05", "2025-11-25")],
)
def test_initialize_negotiates_a_handshake_version(asked: str, answered: str) -> None:
    lab = build_lab()
    session, response = legacy.initialize(lab.server, ALICE, initialize_message(7, asked))
    assert session is not None and session.version == answered
    assert response == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {
            "protocolVersion": answered,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "labkit", "version": lab.server.server_info["version"]},
        },
    }
    assert session.capabilities == LEGACY_CAPS


def test_initialize_without_params_is_invalid_request() -> None:
    session, response = legacy.initialize(
        build_lab().server, ALICE, {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    )
    assert session is None and response["error"]["code"] == -32600


# -- the modern handler never learns a session exists ------------------------------------------


@dataclass
class Recorder:
    """A modern tool that records every request it gets and asks for what it is told."""

    asks: list[dict[str, Any]]
    name: str = "probe"
    seen: list[Request] = field(default_factory=list)

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "inputSchema": {"type": "object"}}

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(request)
        round_ = len(self.seen) - 1
        if round_ < len(self.asks):
            return {
                "resultType": "input_required",
                "inputRequests": self.asks[round_],
                "requestState": f'opaque state {round_} \u00e9 \\ "',
            }
        return {
            "resultType": "complete",
            "content": [{"type": "text", "text": "done"}],
            "structuredContent": {"responses": request.params.get("inputResponses")},
        }


def test_the_modern_handler_sees_only_stateless_2026_requests() -> None:
    tool = Recorder(
        [
            {"a": {"method": "roots/list"}},
            {
                "b": {
                    "method": "elicitation/create",
                    "params": {
                        "message": "m",
                        "requestedSchema": {"type": "object", "properties": {}},
                    },
                }
            },
        ]
    )
    session = open_session(Server([tool]))
    call = session.call(legacy_call("c1", "probe", {"x": 1}))
    step = call.start()
    (roots_request,) = step.send
    assert roots_request == {"jsonrpc": "2.0", "id": "labkit-1", "method": "roots/list"}
    step = call.receive(reply(roots_request, {"roots": [{"uri": "file:///etc"}]}))
    (form_request,) = step.send
    assert form_request["id"] == "labkit-2" and "elicitationId" not in form_request["params"]
    step = call.receive(reply(form_request, {"action": "accept", "content": {}}))
    assert step.send == [] and step.result is not None
    assert step.result["id"] == "c1"
    assert step.result["result"]["structuredContent"] == {
        "responses": {"b": {"action": "accept", "content": {}}}
    }
    assert "resultType" not in step.result["result"]
    ids = [r.id for r in tool.seen]
    assert len(set(ids)) == 3 and "c1" not in ids, "every invocation is a new request"
    for index, seen in enumerate(tool.seen):
        assert seen.version == "2026-07-28"
        assert seen.capabilities == LEGACY_CAPS
        assert seen.meta["io.modelcontextprotocol/clientInfo"] == {
            "name": "old-client",
            "version": "1",
        }
        assert seen.params["arguments"] == {"x": 1}
        assert (seen.context.principal, seen.context.transport) == ("alice", "test")
        assert "session" not in json.dumps(seen.params).lower()
        if index:
            # Echoed byte for byte, whatever the characters.
            assert seen.params["requestState"] == f'opaque state {index - 1} \u00e9 \\ "'
    assert tool.seen[1].params["inputResponses"] == {"a": {"roots": [{"uri": "file:///etc"}]}}


def test_a_client_that_fails_an_elicitation_has_cancelled() -> None:
    tool = Recorder(
        [
            {
                "q": {
                    "method": "elicitation/create",
                    "params": {
                        "message": "m",
                        "requestedSchema": {"type": "object", "properties": {}},
                    },
                }
            }
        ]
    )
    call = open_session(Server([tool])).call(legacy_call(1, "probe", {}))
    (sent,) = call.start().send
    error = {"jsonrpc": "2.0", "id": sent["id"], "error": {"code": -1, "message": "no UI"}}
    step = call.receive(error)
    assert step.result is not None
    assert step.result["result"]["structuredContent"] == {"responses": {"q": {"action": "cancel"}}}


def test_a_call_that_never_settles_is_bounded() -> None:
    ask = {
        "q": {
            "method": "elicitation/create",
            "params": {"message": "m", "requestedSchema": {"type": "object", "properties": {}}},
        }
    }
    tool = Recorder([ask] * 100)
    call = open_session(Server([tool])).call(legacy_call(1, "probe", {}))
    step = call.start()
    for _ in range(MAX_ROUNDS):
        if step.result is not None:
            break
        (sent,) = step.send
        step = call.receive(reply(sent, {"action": "accept", "content": {}}))
    assert step.result is not None and step.result["error"]["code"] == -32001
    assert len(tool.seen) == MAX_ROUNDS


# -- notes_delete and notes_export through the adapter -----------------------------------------


def delete_flow(session: LegacySession, answer: dict[str, Any]) -> tuple[Step, dict[str, Any]]:
    call = session.call(legacy_call(9, "notes_delete", dict(TPS)))
    (form,) = call.start().send
    assert form["method"] == "elicitation/create"
    return call.receive(reply(form, answer)), form


@pytest.mark.parametrize(
    ("answer", "status", "kept"),
    [
        (
            {"action": "accept", "content": {"note_id": "note-14", "confirm": True}},
            "deleted",
            False,
        ),
        ({"action": "decline"}, "declined", True),
        ({"action": "cancel"}, "cancelled", True),
    ],
)
def test_notes_delete_through_live_elicitation(
    answer: dict[str, Any], status: str, kept: bool
) -> None:
    lab = build_lab()
    step, form = delete_flow(open_session(lab.server), answer)
    offered = [
        o["const"] for o in form["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    ]
    assert offered == ["note-3", "note-7", "note-14"]
    assert step.result is not None
    assert step.result["result"]["structuredContent"]["status"] == status
    assert ("note-14" in lab.ids()) is kept


def test_a_session_without_form_elicitation_gets_the_modern_32021() -> None:
    lab = build_lab()
    session = open_session(lab.server, caps={"roots": {}})
    step = session.call(legacy_call(1, "notes_delete", dict(TPS))).start()
    assert step.send == [] and step.result is not None
    assert step.result["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}


def test_a_legacy_roots_list_never_authorizes_a_workspace() -> None:
    lab = build_lab(extra_notes=[("note-200", "file:///etc/tps.md", "TPS report etc")])
    session = open_session(lab.server)
    session.answer({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    step = session.call(
        legacy_call(1, "notes_delete", {"workspaceUri": "file:///etc", "title": "TPS"})
    ).start()
    assert step.send == [], "no form for a workspace outside the allowlist"
    assert step.result is not None and step.result["error"]["code"] == -32602
    assert "note-200" in lab.ids()


def test_url_consent_waits_then_completes_with_the_completion_notification() -> None:
    xlab: ExportLab = build_export_lab()
    session = open_session(xlab.server)
    call = session.call(legacy_call(5, "notes_export", {"workspaceUri": "file:///work/notes"}))
    (consent,) = call.start().send
    params = consent["params"]
    assert params["mode"] == "url" and params["elicitationId"] == "e1"
    # The user agreed to open the page but has not approved yet: the adapter waits.
    step = call.receive(reply(consent, {"action": "accept"}))
    assert step == Step([], None, POLL_SECONDS)
    assert call.poll() == Step([], None, POLL_SECONDS)
    xlab.consent.grant(params["url"].rsplit("/", 1)[1], "alice")
    step = call.poll()
    assert step.send == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": "e1"},
        }
    ]
    assert step.result is not None and step.result["result"]["structuredContent"]["exported"]


def test_url_consent_that_never_lands_ends_as_cancelled() -> None:
    xlab = build_export_lab()
    call = open_session(xlab.server).call(
        legacy_call(5, "notes_export", {"workspaceUri": "file:///work/notes"})
    )
    (consent,) = call.start().send
    step = call.receive(reply(consent, {"action": "accept"}))
    polls = 0
    while step.result is None:
        polls += 1
        step = call.poll()
    assert polls == MAX_POLLS + 1
    assert step.result["result"]["structuredContent"] == {"exported": False, "status": "cancelled"}
    assert xlab.reports.published == []


# -- stdio, in process ---------------------------------------------------------------------------


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def run_stdio(server: Server, messages: list[Any]) -> list[dict[str, Any]]:
    out = io.BytesIO()
    transport = StdioTransport(server, "alice", eras=ERAS, sleep=lambda s: None)
    transport.serve(io.BytesIO(b"".join(line(m) for m in messages)), out)
    return [json.loads(chunk) for chunk in out.getvalue().splitlines()]


def test_stdio_connection_becomes_the_session_and_modern_requests_stay_stateless() -> None:
    lab = build_lab()
    modern_list = request("m1", "tools/list")
    out = run_stdio(
        lab.server,
        [
            initialize_message(0),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            modern_list,
            legacy_call(3, "notes_delete", dict(TPS)),
            {
                "jsonrpc": "2.0",
                "id": "labkit-1",
                "result": {"action": "accept", "content": {"note_id": "note-14", "confirm": True}},
            },
            initialize_message(4),
        ],
    )
    assert [m.get("id") for m in out] == [0, 1, 2, "m1", "labkit-1", 3, 4]
    assert out[0]["result"]["protocolVersion"] == "2025-11-25"
    assert out[1]["result"] == {}
    assert "resultType" not in out[2]["result"] and "ttlMs" not in out[2]["result"]
    check_wire(modern_list, out[3])
    assert out[3]["result"]["resultType"] == "complete", "2026-07-28 _meta: the modern path"
    assert out[4]["method"] == "elicitation/create"
    assert out[5]["result"]["structuredContent"]["status"] == "deleted"
    assert out[6]["error"]["code"] == -32600, "initialize twice on one connection"
    assert "note-14" not in lab.ids()


def test_stdio_without_initialize_is_the_modern_server_as_before() -> None:
    out = run_stdio(build_lab().server, [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}])
    assert out[0]["error"]["code"] == -32602


# -- HTTP sessions --------------------------------------------------------------------------------


@dataclass
class Endpoint:
    url: str
    http: httpx.Client
    clock: FakeClock
    lab: Lab


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    lab = build_lab()
    ids = itertools.count(1)
    clock = FakeClock()
    sessions = LegacyHttp(
        lab.server,
        clock=clock,
        id_source=lambda: f"sess-{next(ids)}",
        max_sessions=2,
        idle_seconds=60,
    )
    app = create_app(lab.server, demo_authenticator(), eras=[sessions])
    with serving(app) as url, httpx.Client(timeout=30) as http:
        yield Endpoint(url, http, clock, lab)


def post(e: Endpoint, message: Any, token: str = "demo-alice", **headers: str) -> httpx.Response:
    return e.http.post(
        e.url,
        json=message,
        headers={
            "authorization": f"Bearer {token}",
            "accept": "application/json, text/event-stream",
            **headers,
        },
    )


def call_stream(e: Endpoint, session: dict[str, str]) -> Any:
    """The SSE stream of a legacy notes_delete call (id 7) on `session`."""
    return e.http.stream(
        "POST",
        e.url,
        json=legacy_call(7, "notes_delete", dict(TPS)),
        headers={
            "authorization": "Bearer demo-alice",
            "accept": "application/json, text/event-stream",
            **session,
        },
    )


def test_http_initialize_mints_a_session_and_delete_ends_it(endpoint: Endpoint) -> None:
    first = post(endpoint, initialize_message())
    assert first.status_code == 200 and first.headers["mcp-session-id"] == "sess-1"
    assert first.json()["result"]["protocolVersion"] == "2025-11-25"
    session = {"mcp-session-id": "sess-1", "mcp-protocol-version": "2025-11-25"}
    assert (
        post(
            endpoint, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **session
        ).status_code
        == 202
    )
    listing = post(endpoint, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, **session)
    assert (
        listing.status_code == 200
        and listing.json()["result"]["tools"][0]["name"] == "notes_delete"
    )
    assert "resultType" not in listing.json()["result"]
    wrong_version = post(
        endpoint,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        **{**session, "mcp-protocol-version": "2025-06-18"},
    )
    assert wrong_version.status_code == 400
    # mallory cannot use or end alice's session: it does not exist for her.
    assert (
        post(
            endpoint, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, "demo-mallory", **session
        ).status_code
        == 404
    )
    delete = {"authorization": "Bearer demo-mallory", **session}
    assert endpoint.http.delete(endpoint.url, headers=delete).status_code == 404
    delete = {"authorization": "Bearer demo-alice", **session}
    assert endpoint.http.delete(endpoint.url, headers=delete).status_code == 204
    assert endpoint.http.delete(endpoint.url, headers=delete).status_code == 404
    ended = post(endpoint, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, **session)
    assert ended.status_code == 404
    unknown = post(
        endpoint,
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
        **{**session, "mcp-session-id": "nope"},
    )
    assert unknown.status_code == 404
    # GET stays 405 in both eras; DELETE without a session id too.
    assert endpoint.http.get(endpoint.url, headers=delete).status_code == 405
    assert (
        endpoint.http.delete(
            endpoint.url, headers={"authorization": "Bearer demo-alice"}
        ).status_code
        == 405
    )


def test_http_sessions_are_bounded_and_idle_ones_dropped(endpoint: Endpoint) -> None:
    assert post(endpoint, initialize_message()).status_code == 200
    assert post(endpoint, initialize_message(), "demo-mallory").status_code == 200
    assert post(endpoint, initialize_message()).status_code == 503
    endpoint.clock.advance(61)
    assert post(endpoint, initialize_message()).headers["mcp-session-id"] == "sess-3"
    gone = post(
        endpoint,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        **{"mcp-session-id": "sess-1"},
    )
    assert gone.status_code == 404


def test_http_modern_requests_are_untouched_by_the_legacy_layer(endpoint: Endpoint) -> None:
    post(endpoint, initialize_message())
    modern = request(1, "tools/list")
    headers = {
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/list",
        "mcp-session-id": "sess-1",
    }
    answer = post(endpoint, modern, **headers)
    assert answer.status_code == 200 and "mcp-session-id" not in answer.headers
    check_wire(modern, answer.json())
    removed = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "initialize",
        "params": initialize_message()["params"],
    }
    refused = post(endpoint, removed, **{"mcp-protocol-version": "2026-07-28"})
    assert refused.status_code == 404 and refused.json()["error"]["code"] == -32601


def test_http_call_needing_input_streams_requests_then_the_result(endpoint: Endpoint) -> None:
    session = {"mcp-session-id": post(endpoint, initialize_message()).headers["mcp-session-id"]}
    events: list[dict[str, Any]] = []
    with call_stream(endpoint, session) as stream:
        assert stream.headers["content-type"] == "text/event-stream"
        for text in stream.iter_lines():
            if not text.startswith("data: "):
                continue
            events.append(json.loads(text[len("data: ") :]))
            if events[-1].get("method") == "elicitation/create":
                answered = post(endpoint, reply(events[-1], {"action": "decline"}), **session)
                assert answered.status_code == 202
    assert [e.get("method") for e in events] == ["elicitation/create", None]
    assert events[-1]["id"] == 7
    assert events[-1]["result"]["structuredContent"]["status"] == "declined"
    assert "note-14" in endpoint.lab.ids()


def test_http_call_needing_input_without_sse_is_refused(endpoint: Endpoint) -> None:
    session = {"mcp-session-id": post(endpoint, initialize_message()).headers["mcp-session-id"]}
    answer = endpoint.http.post(
        endpoint.url,
        json=legacy_call(7, "notes_delete", dict(TPS)),
        headers={"authorization": "Bearer demo-alice", "accept": "application/json", **session},
    )
    assert answer.json()["error"]["code"] == -32600


def test_legacy_call_state_is_per_call() -> None:
    # Two calls of one session keep their own outstanding requests.
    session = open_session(build_lab().server)
    a = session.call(legacy_call("a", "notes_delete", dict(TPS)))
    b = session.call(legacy_call("b", "notes_delete", dict(TPS)))
    (form_a,) = a.start().send
    (form_b,) = b.start().send
    assert form_a["id"] != form_b["id"]
    assert a.owns(form_a["id"]) and not a.owns(form_b["id"])
    assert isinstance(a, LegacyCall)


def test_http_ending_a_session_ends_its_waiting_call(endpoint: Endpoint) -> None:
    session = {"mcp-session-id": post(endpoint, initialize_message()).headers["mcp-session-id"]}
    events: list[dict[str, Any]] = []
    with call_stream(endpoint, session) as stream:
        for text in stream.iter_lines():
            if not text.startswith("data: "):
                continue
            events.append(json.loads(text[len("data: ") :]))
            if len(events) == 1:
                stray = {"jsonrpc": "2.0", "id": "labkit-99", "result": {"action": "accept"}}
                assert post(endpoint, stray, **session).status_code == 202, "dropped, not fatal"
                ended = endpoint.http.delete(
                    endpoint.url, headers={"authorization": "Bearer demo-alice", **session}
                )
                assert ended.status_code == 204
    assert events[0]["method"] == "elicitation/create"
    assert events[-1]["id"] == 7 and events[-1]["error"]["code"] == -32001
    # The form was never answered, so nothing was deleted, and it is too late now.
    late = post(endpoint, reply(events[0], {"action": "accept"}), **session)
    assert late.status_code == 404
    assert "note-14" in endpoint.lab.ids()


def test_http_a_client_that_goes_away_ends_its_waiting_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A client that disconnects while a form waits will never answer: the call ends at once
    # (no slot held until the answer timeout), nothing is deleted, and the session lives on.
    lab = build_lab()
    sessions = LegacyHttp(lab.server, answer_seconds=600)
    app = create_app(lab.server, demo_authenticator(), eras=[sessions])
    with serving(app) as url, httpx.Client(timeout=30) as http:
        e = Endpoint(url, http, FakeClock(), lab)
        session_id = post(e, initialize_message()).headers["mcp-session-id"]
        session = {"mcp-session-id": session_id}
        with caplog.at_level("INFO", logger="labkit.transports.http"):
            with call_stream(e, session) as stream:
                for text in stream.iter_lines():
                    if text.startswith("data: "):
                        form = json.loads(text[len("data: ") :])
                        # The call waits for this answer: then the client hangs up.
                        assert sessions.sessions[session_id].waiting
                        break
            assert form["method"] == "elicitation/create"
            deadline = time.monotonic() + 10
            while sessions.sessions[session_id].waiting and time.monotonic() < deadline:
                time.sleep(0.05)
        assert not sessions.sessions[session_id].waiting, "the call still waits for a gone client"
        assert any("went away" in r.getMessage() for r in caplog.records)
        late = post(
            e, reply(form, {"action": "accept", "content": {"note_id": "note-14"}}), **session
        )
        assert late.status_code == 202  # a stray answer: dropped, not fatal
        assert "note-14" in lab.ids()
        assert post(e, {"jsonrpc": "2.0", "id": 9, "method": "ping"}, **session).status_code == 200


def test_a_handler_that_only_ever_says_retry_later_is_bounded() -> None:
    @dataclass
    class Later:
        name: str = "later"
        calls: int = 0

        def descriptor(self) -> dict[str, Any]:
            return {"name": self.name, "inputSchema": {"type": "object"}}

        def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
            self.calls += 1
            return {"resultType": "input_required", "requestState": "later"}

    tool = Later()
    call = open_session(Server([tool])).call(legacy_call(1, "later", {}))
    step = call.start()
    while step.result is None:
        assert step.wait == POLL_SECONDS and step.send == []
        step = call.poll()
    assert step.result["error"]["code"] == -32001
    assert tool.calls == MAX_POLLS + 2


def test_progress_a_handler_emits_reaches_the_legacy_client_before_the_result() -> None:
    @dataclass
    class Progress:
        name: str = "slow"

        def descriptor(self) -> dict[str, Any]:
            return {"name": self.name, "inputSchema": {"type": "object"}}

        def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
            token = request.meta.get("progressToken")
            for step in (1, 2):
                request.context.emit(
                    "notifications/progress", {"progressToken": token, "progress": step}
                )
            return {"resultType": "complete", "content": []}

    message = legacy_call(1, "slow", {})
    message["params"]["_meta"] = {"progressToken": "p-1"}
    out = run_stdio(Server([Progress()]), [initialize_message(0), message])
    assert [m.get("method") for m in out[1:]] == [
        "notifications/progress",
        "notifications/progress",
        None,
    ]
    assert [m["params"] for m in out[1:3]] == [
        {"progressToken": "p-1", "progress": 1},
        {"progressToken": "p-1", "progress": 2},
    ]
    assert out[3]["id"] == 1 and out[3]["result"]["content"] == []
    assert "resultType" not in out[3]["result"]


def test_http_one_principal_cannot_fill_the_session_table() -> None:
    lab = build_lab()
    ids = itertools.count(1)
    clock = FakeClock()
    sessions = LegacyHttp(
        lab.server, clock=clock, id_source=lambda: f"s{next(ids)}", max_sessions=4, per_principal=2
    )
    app = create_app(lab.server, demo_authenticator(), eras=[sessions])
    with serving(app) as url, httpx.Client(timeout=30) as http:
        e = Endpoint(url, http, clock, lab)
        for _ in range(5):
            clock.advance(1)
            assert post(e, initialize_message()).status_code == 200
        assert post(e, initialize_message(), "demo-mallory").status_code == 200
        assert sorted(sessions.sessions) == ["s4", "s5", "s6"], "alice's oldest went, not mallory's"


# -- legacy-only session methods ----------------------------------------------------------------


def _request(id: Any, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def test_set_level_is_remembered_and_travels_in_every_later_modern_request() -> None:
    tool = Recorder([])
    session = open_session(Server([tool]))
    assert session.answer(_request(1, "logging/setLevel", {"level": "debug"})) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {},
    }
    step = session.call(legacy_call(2, "probe", {})).start()
    assert step.result is not None and "result" in step.result
    assert tool.seen[0].meta["io.modelcontextprotocol/logLevel"] == "debug"


@pytest.mark.parametrize("params", [{"level": "loud"}, {}, None, ["debug"]])
def test_set_level_refuses_an_unknown_level(params: Any) -> None:
    session = open_session(Server([Recorder([])]))
    response = session.answer(_request(1, "logging/setLevel", params))
    assert response is not None and response["error"]["code"] == -32602
    assert session.log_level is None


def test_no_level_set_means_no_level_in_meta() -> None:
    tool = Recorder([])
    session = open_session(Server([tool]))
    session.call(legacy_call(1, "probe", {})).start()
    assert "io.modelcontextprotocol/logLevel" not in tool.seen[0].meta


def watched_server() -> Server:
    watched = FixedResource("test://watched-resource", "w", "W", "watched", "text/plain", "x")
    return Server([Recorder([])], resources=[watched])


def test_subscribe_and_unsubscribe_are_session_methods_the_modern_side_lacks() -> None:
    server = watched_server()
    session = open_session(server)
    uri = {"uri": "test://watched-resource"}
    assert session.answer(_request(1, "resources/subscribe", uri)) == result_response(1, {})
    assert session.subscriptions == {"test://watched-resource"}
    assert session.answer(_request(2, "resources/unsubscribe", uri)) == result_response(2, {})
    assert session.subscriptions == set()
    bad = session.answer(_request(3, "resources/subscribe", {"uri": 5}))
    assert bad is not None and bad["error"]["code"] == -32602
    modern = server.handle(request(4, "resources/subscribe", uri), ALICE)
    assert modern is not None and modern["error"]["code"] == -32601


def test_a_sampling_ask_becomes_a_live_sampling_request() -> None:
    sampling = {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "q"}}],
            "maxTokens": 5,
        },
    }
    tool = Recorder([{"s": sampling}])
    session = open_session(Server([tool]), caps={**LEGACY_CAPS, "sampling": {}})
    call = session.call(legacy_call(1, "probe", {}))
    (sent,) = call.start().send
    assert sent == {"jsonrpc": "2.0", "id": "labkit-1", **sampling}
    answer = {"role": "assistant", "content": {"type": "text", "text": "a"}, "model": "m"}
    step = call.receive(reply(sent, answer))
    assert step.result is not None
    assert step.result["result"]["structuredContent"] == {"responses": {"s": answer}}
