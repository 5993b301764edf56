"""`labkit.client.Host`, the client side of MRTR, against the real core: in process, a
`labkit serve` subprocess over stdio, and `labkit serve --transport http` over Streamable HTTP.

Every exchange the in-process host makes is also checked against the 2026-07-28 schema
(`check_wire`), so the host is shown to send what a server may receive.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import KEY_A, TPS, Lab, check_wire
from test_http import serve_process, serving

from labkit import messages
from labkit.client import render_message
from labkit.conformance import AnonymousAuthenticator, conformance_server
from labkit.course import Host, McpError, Pending, TooManyRounds, TransportError
from labkit.errors import ProtocolError
from labkit.server import Request, Server
from labkit.state import KeyRing
from labkit.transports.envelope import decode_header_value, encode_header_value
from labkit.transports.http import create_app

TOOL = "notes_delete"
SERVE = [sys.executable, "-m", "labkit.cli", "serve"]
FORM_KEY = "delete_choice"


def choose(note_id: str, confirm: bool = True) -> Any:
    def answer(key: str, params: dict[str, Any]) -> dict[str, Any]:
        assert key == FORM_KEY and params["mode"] == "form"
        return messages.accept({"note_id": note_id, "confirm": confirm})

    return answer


def checked_pairs(host: Host) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(request, response) pairs of the transcript, each checked against the schema."""
    pairs = list(zip(host.transcript[::2], host.transcript[1::2], strict=True))
    for request, response in pairs:
        check_wire(request, response)
    return pairs


# -- in process ---------------------------------------------------------------------------------


def test_accept_deletes_the_chosen_note(lab: Lab) -> None:
    host = Host.in_process(lab.server)
    result = host.call_tool(TOOL, TPS, answer=choose("note-14"))
    assert result["structuredContent"] == {
        "deleted": True,
        "status": "deleted",
        "noteId": "note-14",
    }
    assert "note-14" not in lab.ids()


@pytest.mark.parametrize(
    ("answer", "status"),
    [(messages.decline(), "declined"), (messages.cancel(), "cancelled")],
    ids=["decline", "cancel"],
)
def test_decline_and_cancel_keep_every_note(lab: Lab, answer: dict[str, Any], status: str) -> None:
    host = Host.in_process(lab.server)
    result = host.call_tool(TOOL, TPS, answer=lambda key, params: answer)
    assert result["structuredContent"] == {"deleted": False, "status": status}
    assert "isError" not in result
    assert lab.ids() == ["note-100", "note-14", "note-3", "note-7", "note-99"]


def test_the_transcript_holds_every_message_with_a_new_id_and_the_state_echoed(lab: Lab) -> None:
    host = Host.in_process(lab.server)
    host.call_tool(TOOL, TPS, answer=choose("note-7"))
    (first, asked), (retry, done) = checked_pairs(host)
    assert [m["id"] for m in host.transcript] == [1, 1, 2, 2]
    assert first["params"]["_meta"] == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "labkit-host", "version": "0.1.0"},
    }
    assert "requestState" not in first["params"] and "inputResponses" not in first["params"]
    assert retry["params"]["name"] == first["params"]["name"] == TOOL
    assert retry["params"]["arguments"] == first["params"]["arguments"] == TPS
    assert retry["params"]["requestState"] == asked["result"]["requestState"]
    assert retry["params"]["inputResponses"] == {
        FORM_KEY: {"action": "accept", "content": {"note_id": "note-7", "confirm": True}}
    }
    assert done["result"]["structuredContent"]["status"] == "deleted"


def test_each_call_starts_a_new_transcript(lab: Lab) -> None:
    host = Host.in_process(lab.server)
    host.call_tool(TOOL, TPS, answer=choose("note-7"))
    tools = host.list_tools()
    assert [t["name"] for t in tools] == [TOOL]
    assert [m["id"] for m in host.transcript] == [3, 3]
    assert host.transcript[0]["method"] == "tools/list"


def test_begin_and_resume_are_the_steps_of_a_call(lab: Lab) -> None:
    host = Host.in_process(lab.server, ids=iter(["first", "second"]).__next__)
    pending = host.begin(TOOL, TPS)
    assert isinstance(pending, Pending)
    assert (pending.name, pending.arguments, pending.round) == (TOOL, TPS, 1)
    assert list(pending.input_requests) == [FORM_KEY]
    assert pending.input_requests[FORM_KEY]["method"] == "elicitation/create"
    assert pending.request_state == host.transcript[1]["result"]["requestState"]
    with pytest.raises(AttributeError):
        pending.round = 5  # type: ignore[misc]
    done = host.resume(pending, {FORM_KEY: messages.accept({"note_id": "note-3", "confirm": True})})
    assert isinstance(done, dict) and done["structuredContent"]["noteId"] == "note-3"
    assert [m["id"] for m in host.transcript] == ["first", "first", "second", "second"]


def test_a_missing_answer_is_asked_again_in_a_later_round(lab: Lab) -> None:
    host = Host.in_process(lab.server)
    first = host.begin(TOOL, TPS)
    assert isinstance(first, Pending)
    again = host.resume(first, {})
    assert isinstance(again, Pending) and again.round == 2
    assert again.request_state != first.request_state


def test_the_answerer_sees_each_key_and_its_params(lab: Lab) -> None:
    seen: list[tuple[str, str]] = []

    def answer(key: str, params: dict[str, Any]) -> dict[str, Any]:
        seen.append((key, params["mode"]))
        return messages.cancel()

    Host.in_process(lab.server).call_tool(TOOL, TPS, answer=answer)
    assert seen == [(FORM_KEY, "form")]


def test_a_json_rpc_error_is_raised_with_code_message_and_data(lab: Lab) -> None:
    host = Host.in_process(lab.server, capabilities={})
    with pytest.raises(McpError) as raised:
        host.call_tool(TOOL, TPS, answer=choose("note-14"))
    assert raised.value.code == -32021
    assert raised.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert "form elicitation" in raised.value.message
    checked_pairs(host)
    assert "note-14" in lab.ids()


def test_the_client_raises_the_protocol_s_one_error_type(lab: Lab) -> None:
    """`McpError` is the `ProtocolError` a server answered: one value (code, message, data)
    on both sides, shown as "code message" by the client, and back on the wire unchanged."""
    host = Host.in_process(lab.server, capabilities={})
    with pytest.raises(ProtocolError) as raised:
        host.call_tool(TOOL, TPS, answer=choose("note-14"))
    error = raised.value
    assert type(error) is McpError
    assert str(error) == f"-32021 {error.message}"
    assert repr(error).startswith("McpError(-32021, ")
    wire = host.transcript[-1]["error"]
    assert error.to_wire() == wire and error.to_wire()["code"] == -32021


def test_an_unsupported_version_is_raised_with_its_data(lab: Lab) -> None:
    host = Host.in_process(lab.server, protocol_version="2025-11-25")
    with pytest.raises(McpError) as raised:
        host.discover()
    assert raised.value.code == -32022
    assert raised.value.data == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


def test_a_replayed_state_is_refused_and_deletes_nothing_more(lab: Lab) -> None:
    host = Host.in_process(lab.server)
    pending = host.begin(TOOL, TPS)
    assert isinstance(pending, Pending)
    host.resume(pending, {FORM_KEY: messages.accept({"note_id": "note-3", "confirm": True})})
    with pytest.raises(McpError) as raised:
        host.resume(pending, {FORM_KEY: messages.accept({"note_id": "note-7", "confirm": True})})
    assert raised.value.code == -32602
    assert "note-7" in lab.ids()


def test_input_without_an_answerer_is_a_clear_error(lab: Lab) -> None:
    with pytest.raises(ValueError, match="pass answer="):
        Host.in_process(lab.server).call_tool(TOOL, TPS)


def test_a_notification_sent_through_the_host_gets_nothing_back(lab: Lab) -> None:
    host = Host.in_process(lab.server)
    pending = host.begin(TOOL, TPS)
    assert isinstance(pending, Pending)
    sneaky = messages.tools_call(
        9,
        TOOL,
        TPS,
        input_responses={FORM_KEY: messages.accept({"note_id": "note-14", "confirm": True})},
        request_state=pending.request_state,
    )
    assert host.send(messages.as_notification(sneaky)) is None
    assert len(host.transcript) == 1 and "note-14" in lab.ids()


# A tool that never stops asking, with a state full of bytes a careless client would re-encode.
ODD_STATE = 'state "quoted" \\ é \u2028 \U0001f600 ' + "x" * 40


class AsksForever:
    name = "ask_forever"

    def __init__(self) -> None:
        self.states: list[Any] = []

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "inputSchema": {"type": "object"}}

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        self.states.append(request.params.get("requestState"))
        form = {"mode": "form", "message": "Again?", "requestedSchema": {"type": "object"}}
        return {
            "resultType": "input_required",
            "inputRequests": {"again": {"method": "elicitation/create", "params": form}},
            "requestState": ODD_STATE,
        }


def test_the_round_cap_stops_a_server_that_never_completes() -> None:
    tool = AsksForever()
    host = Host.in_process(Server([tool]), max_rounds=3)
    with pytest.raises(TooManyRounds, match="after 3 rounds") as raised:
        host.call_tool(tool.name, {}, answer=lambda key, params: messages.cancel())
    assert raised.value.pending.round == 3
    assert len([m for m in host.transcript if "method" in m]) == 3
    # The state went back exactly as it came, every round.
    assert tool.states == [None, ODD_STATE, ODD_STATE]


def test_the_default_round_cap_is_eight() -> None:
    tool = AsksForever()
    with pytest.raises(TooManyRounds):
        Host.in_process(Server([tool])).call_tool(tool.name, {}, answer=lambda k, p: {})
    assert len(tool.states) == 8


def test_render_shows_each_message_compactly_with_the_state_abbreviated(lab: Lab) -> None:
    host = Host.in_process(lab.server)
    host.call_tool(TOOL, TPS, answer=choose("note-3"))
    state = host.transcript[1]["result"]["requestState"]
    text = host.render(width=10_000)
    lines = text.splitlines()
    assert [line[:2] for line in lines] == ["->", "<-", "->", "<-"]
    assert state not in text and state[:18] + "..." in text
    assert '"_meta":"{...}"' in text and "jsonrpc" not in text
    assert render_message(host.transcript[0], width=20) == '-> {"id":1,"method":...'


def test_an_observer_sees_every_message_as_it_happens(lab: Lab) -> None:
    seen: list[dict[str, Any]] = []
    host = Host.in_process(lab.server, observer=seen.append)
    host.call_tool(TOOL, TPS, answer=choose("note-3"))
    assert seen == host.transcript


@pytest.mark.parametrize("value", ["notes_delete", "nötes", " edge ", "tab\there", "x\u2028y"])
def test_a_name_header_round_trips_through_the_transport_codec(value: str) -> None:
    encoded = encode_header_value(value)
    assert encoded.isascii() and encoded.isprintable()
    assert decode_header_value(encoded) == value


# -- a real `labkit serve` over stdio -------------------------------------------------------------


def test_stdio_host_accepts_declines_and_stops_the_process() -> None:
    with Host.stdio(SERVE, stderr=subprocess.DEVNULL) as host:
        assert host.discover()["supportedVersions"] == ["2026-07-28"]
        # The demo `labkit serve` also offers notes_export (URL mode).
        assert [t["name"] for t in host.list_tools()] == [TOOL, "notes_export"]
        declined = host.call_tool(TOOL, TPS, answer=lambda key, params: messages.decline())
        assert declined["structuredContent"]["status"] == "declined"
        done = host.call_tool(TOOL, TPS, answer=choose("note-14"))
        (first, asked), (retry, _) = checked_pairs(host)
        assert retry["id"] != first["id"]
        assert retry["params"]["requestState"] == asked["result"]["requestState"]
        assert done["structuredContent"] == {
            "deleted": True,
            "status": "deleted",
            "noteId": "note-14",
        }
        again = host.begin(TOOL, TPS)
        assert isinstance(again, Pending)
        offered = again.input_requests[FORM_KEY]["params"]["requestedSchema"]
        assert [o["const"] for o in offered["properties"]["note_id"]["oneOf"]] == [
            "note-3",
            "note-7",
        ]
        assert host.send(messages.as_notification(messages.request(0, "tools/list"))) is None
        process = host.channel.process  # type: ignore[attr-defined]
    assert process.returncode == 0


def test_stdio_host_raises_the_servers_error_and_notices_a_dead_process() -> None:
    with Host.stdio(SERVE, stderr=subprocess.DEVNULL, capabilities={}) as host:
        with pytest.raises(McpError) as raised:
            host.call_tool(TOOL, TPS, answer=choose("note-14"))
        assert raised.value.code == -32021
        assert raised.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
        host.channel.process.kill()  # type: ignore[attr-defined]
        host.channel.process.wait()  # type: ignore[attr-defined]
        with pytest.raises(TransportError, match="exited"):
            host.discover()


# -- a real `labkit serve --transport http` -------------------------------------------------------


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with serve_process() as (_, url, _lines):
        yield url


def test_http_host_accepts_declines_and_cancels(endpoint: str) -> None:
    host = Host.http(endpoint, token="demo-alice")
    assert host.discover()["resultType"] == "complete"
    cancelled = host.call_tool(TOOL, TPS, answer=lambda key, params: messages.cancel())
    assert cancelled["structuredContent"]["status"] == "cancelled"
    declined = host.call_tool(TOOL, TPS, answer=lambda key, params: messages.decline())
    assert declined["structuredContent"]["status"] == "declined"
    done = host.call_tool(TOOL, TPS, answer=choose("note-3"))
    assert done["structuredContent"] == {"deleted": True, "status": "deleted", "noteId": "note-3"}
    (first, asked), (retry, _) = checked_pairs(host)
    assert retry["id"] != first["id"]
    assert retry["params"]["requestState"] == asked["result"]["requestState"]
    with pytest.raises(McpError) as raised:
        host.call_tool(TOOL, TPS, answer=choose("note-3"))  # already gone: not offered
    assert raised.value.code == -32602


def test_http_host_raises_errors_with_code_and_data(endpoint: str) -> None:
    with pytest.raises(McpError) as raised:
        Host.http(endpoint, token="demo-alice", capabilities={}).begin(TOOL, TPS)
    assert raised.value.code == -32021
    assert raised.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    # A non-ASCII tool name travels base64-wrapped in Mcp-Name: the server matches it to
    # the body (no -32020) and answers what the core says about an unknown tool.
    with pytest.raises(McpError) as unknown:
        Host.http(endpoint, token="demo-alice").begin("nötes", {})
    assert unknown.value.code == -32602 and "Unknown tool" in unknown.value.message


def test_http_host_gets_202_for_a_notification_and_401_without_a_token(endpoint: str) -> None:
    host = Host.http(endpoint, token="demo-alice")
    assert host.send(messages.as_notification(messages.request(0, "tools/list"))) is None
    with pytest.raises(TransportError) as raised:
        Host.http(endpoint, token="wrong").discover()
    assert raised.value.status == 401


# -- the official conformance suite's MRTR fixtures: more rounds, more keys, event streams -------


def test_a_multi_round_flow_is_answered_round_by_round() -> None:
    server = conformance_server(keys=KeyRing([KEY_A]))
    asked: list[str] = []

    def answer(key: str, params: dict[str, Any]) -> dict[str, Any]:
        asked.append(key)
        return messages.accept({"name": "Ada"} if key == "step1" else {"color": "teal"})

    host = Host.in_process(server)
    result = host.call_tool("test_input_required_result_multi_round", {}, answer=answer)
    assert asked == ["step1", "step2"]
    assert result["content"] == [
        {"type": "text", "text": "Multi-round complete for Ada who likes teal"}
    ]
    requests = [m for m in host.transcript if "method" in m]
    assert len(requests) == 3 and len({m["id"] for m in requests}) == 3
    for (_, asked_with), (retry, _) in itertools.pairwise(checked_pairs(host)):
        assert retry["params"]["requestState"] == asked_with["result"]["requestState"]


def test_an_event_stream_answer_is_read_to_its_response() -> None:
    server = conformance_server(keys=KeyRing([KEY_A]))
    with serving(create_app(server, AnonymousAuthenticator())) as url:
        host = Host.http(url)
        message = messages.request(
            5, "tools/call", {"name": "test_tool_with_progress", "arguments": {}}
        )
        message["params"]["_meta"]["progressToken"] = "p-1"
        response = host.send(message)
    assert response is not None and response["id"] == 5
    check_wire(message, response)
    assert response["result"]["resultType"] == "complete"


class _Answering:
    """A channel whose peer answers every request with one error object."""

    def __init__(self, error: Any) -> None:
        self.error = error

    def exchange(self, message: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": message["id"], "error": self.error}

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    "error",
    [
        {"code": "-32021", "message": "a code as text"},
        {"code": True, "message": "a code as a bool"},
        {"code": -32021, "message": None},
        {"code": -32021},
        ["not", "an", "object"],
    ],
    ids=["code text", "code bool", "message null", "no message", "a list"],
)
def test_a_malformed_error_object_is_the_peers_fault_named(error: Any) -> None:
    host = Host(_Answering(error))
    with pytest.raises(TransportError, match="a malformed JSON-RPC error object"):
        host.discover()


def test_a_well_formed_error_object_is_raised_as_it_came() -> None:
    host = Host(_Answering({"code": -32602, "message": "no", "data": {"why": 1}}))
    with pytest.raises(McpError) as raised:
        host.discover()
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        -32602,
        "no",
        {"why": 1},
    )
