"""The sans-IO server core: envelope, `_meta`, dispatch, discovery, tools/list, the error boundary.

Dicts in, dicts out through `Server.handle`; every response also passes `check_wire`.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import jsonschema
import pytest
from helpers import (
    MISSING,
    PROTOCOL,
    Lab,
    accept,
    build_lab,
    call,
    call_message,
    check_wire,
    error_of,
    request,
    result_of,
    send,
    state_of,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit import wire
from labkit.clock import FakeClock
from labkit.errors import HTTP_STATUS, ProtocolError, http_status
from labkit.server import EncodedOnce, Request, RequestContext, Server

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


def discover(lab: Lab, id: Any = 1) -> dict[str, Any]:
    response = send(lab.server, request(id, "server/discover"))
    assert response is not None
    return result_of(response)


def list_tools(server: Server, id: Any = 1) -> dict[str, Any]:
    response = send(server, request(id, "tools/list"))
    assert response is not None
    return result_of(response)


# -- the JSON-RPC envelope ---------------------------------------------------------------------

INVALID_ENVELOPES = [
    pytest.param([], id="batch-array"),
    pytest.param([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], id="batch-of-one"),
    pytest.param("tools/list", id="string"),
    pytest.param(1, id="number"),
    pytest.param(None, id="null"),
    pytest.param({"id": 1, "method": "tools/list", "params": {}}, id="no-jsonrpc"),
    pytest.param({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, id="jsonrpc-1.0"),
    pytest.param({"jsonrpc": 2.0, "id": 1, "method": "tools/list"}, id="jsonrpc-number"),
    pytest.param({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, id="id-null"),
    pytest.param({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, id="id-bool"),
    pytest.param({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, id="id-float"),
    pytest.param({"jsonrpc": "2.0", "id": [1], "method": "tools/list"}, id="id-array"),
    pytest.param({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}, id="id-object"),
    pytest.param({"jsonrpc": "2.0", "id": 1}, id="no-method"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": 7}, id="method-number"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": None}, id="method-null"),
    pytest.param(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []}, id="params-array"
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": "x"}, id="params-str"
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": None}, id="params-null"
    ),
]


@pytest.mark.parametrize("message", INVALID_ENVELOPES)
def test_invalid_envelope_is_32600(lab: Lab, message: Any) -> None:
    response = send(lab.server, message)
    assert response is not None
    assert error_of(response)["code"] == -32600


@pytest.mark.parametrize("bad_id", [None, True, 1.5, [1]])
def test_an_id_that_is_not_a_string_or_integer_is_answered_with_id_null(
    lab: Lab, bad_id: Any
) -> None:
    response = send(lab.server, {"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"})
    assert response is not None
    assert response["id"] is None
    assert error_of(response)["code"] == -32600


def test_an_invalid_envelope_with_a_valid_id_echoes_that_id(lab: Lab) -> None:
    response = send(lab.server, {"jsonrpc": "1.0", "id": "req-9", "method": "tools/list"})
    assert response is not None
    assert response["id"] == "req-9"
    assert error_of(response)["code"] == -32600


@pytest.mark.parametrize("request_id", [0, -1, 2**63, "0", "", "abc-é"])
def test_ids_are_echoed_with_their_exact_value_and_type(lab: Lab, request_id: Any) -> None:
    response = send(lab.server, request(request_id, "tools/list"))
    assert response is not None
    assert response["id"] == request_id and type(response["id"]) is type(request_id)
    assert result_of(response)["resultType"] == "complete"


@pytest.mark.parametrize(
    "method",
    [
        "initialize",
        "ping",
        "logging/setLevel",
        "roots/list",
        "notifications/roots/list_changed",
        "elicitation/create",
        "prompts/list",
        "resources/read",
        "tools/List",
        "",
    ],
)
def test_unknown_or_removed_method_is_32601(lab: Lab, method: str) -> None:
    response = send(lab.server, request(1, method))
    assert response is not None
    assert error_of(response)["code"] == -32601
    assert http_status(-32601) == 404


def test_unknown_method_wins_over_missing_meta(lab: Lab) -> None:
    response = send(lab.server, {"jsonrpc": "2.0", "id": 1, "method": "initialize"})
    assert response is not None
    assert error_of(response)["code"] == -32601


# -- notifications -------------------------------------------------------------------------------

NOTIFICATIONS = [
    pytest.param(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        id="cancelled",
    ),
    pytest.param(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "x", "reason": "user closed the dialog"},
        },
        id="cancelled-with-reason",
    ),
    pytest.param(request(MISSING, "tools/list"), id="tools-list-without-id"),
    pytest.param(request(MISSING, "server/discover"), id="discover-without-id"),
    pytest.param(call_message(MISSING), id="tools-call-without-id"),
    pytest.param({"jsonrpc": "2.0", "method": "no/such/method"}, id="unknown-method"),
    pytest.param({"jsonrpc": "2.0", "method": "initialize", "params": {}}, id="initialize"),
]

# Without an id but not well formed: not a notification, an invalid request (JSON-RPC 2.0
# section 5), answered -32600 with `id: null` by the core itself, as every transport does.
MALFORMED_ID_LESS = [
    pytest.param({"jsonrpc": "1.0", "method": "tools/list"}, id="bad-jsonrpc"),
    pytest.param({"jsonrpc": "2.0", "method": 42}, id="bad-method"),
    pytest.param({"jsonrpc": "2.0", "method": "tools/list", "params": []}, id="bad-params"),
    pytest.param({}, id="empty-object"),
    pytest.param({"foo": "bar"}, id="no-method"),
    pytest.param(
        {**call_message(MISSING), "params": [call_message(MISSING)["params"]]},
        id="tools-call-with-array-params",
    ),
]


@pytest.mark.parametrize("message", NOTIFICATIONS)
def test_a_notification_is_never_answered_success_or_error(lab: Lab, message: Any) -> None:
    before = lab.nonces.issued
    assert send(lab.server, message) is None
    assert lab.nonces.issued == before, "a notification was dispatched to a tool"
    assert lab.ids() == ["note-100", "note-14", "note-3", "note-7", "note-99"]


@pytest.mark.parametrize("message", MALFORMED_ID_LESS)
def test_a_malformed_id_less_object_is_invalid_request_and_never_dispatched(
    lab: Lab, message: Any
) -> None:
    before = lab.nonces.issued
    response = send(lab.server, message)
    assert response is not None
    assert response["id"] is None
    assert error_of(response)["code"] == -32600
    assert lab.nonces.issued == before, "an id-less object was dispatched to a tool"
    assert lab.ids() == ["note-100", "note-14", "note-3", "note-7", "note-99"]


def test_a_notification_carrying_an_accepted_state_deletes_nothing(lab: Lab) -> None:
    state = state_of(call(lab.server, 1))
    sneaky = call_message(MISSING, state=state, responses=accept("note-14"))
    assert send(lab.server, sneaky) is None
    assert "note-14" in lab.ids()


# -- per-request _meta -------------------------------------------------------------------------


def _with_meta(meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {} if meta is MISSING else {"_meta": meta}
    return {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": params}


BAD_META = [
    pytest.param(MISSING, id="no-meta"),
    pytest.param(None, id="meta-null"),
    pytest.param([], id="meta-array"),
    pytest.param("2026-07-28", id="meta-string"),
    pytest.param({CAPS_KEY: {}}, id="no-version"),
    pytest.param({VERSION_KEY: None, CAPS_KEY: {}}, id="version-null"),
    pytest.param({VERSION_KEY: 20260728, CAPS_KEY: {}}, id="version-number"),
    pytest.param({VERSION_KEY: ["2026-07-28"], CAPS_KEY: {}}, id="version-array"),
    pytest.param({VERSION_KEY: PROTOCOL}, id="no-capabilities"),
    pytest.param({VERSION_KEY: PROTOCOL, CAPS_KEY: None}, id="capabilities-null"),
    pytest.param({VERSION_KEY: PROTOCOL, CAPS_KEY: []}, id="capabilities-array"),
    pytest.param({VERSION_KEY: PROTOCOL, CAPS_KEY: "form"}, id="capabilities-string"),
    pytest.param({"protocolVersion": PROTOCOL, "capabilities": {}}, id="unprefixed-keys"),
]


@pytest.mark.parametrize("meta", BAD_META)
def test_missing_or_malformed_meta_is_32602(lab: Lab, meta: Any) -> None:
    response = send(lab.server, _with_meta(meta))
    assert response is not None
    assert error_of(response)["code"] == -32602


def test_no_params_at_all_is_32602(lab: Lab) -> None:
    response = send(lab.server, {"jsonrpc": "2.0", "id": 1, "method": "server/discover"})
    assert response is not None
    assert error_of(response)["code"] == -32602


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2026-07-29", "", "latest"])
def test_unsupported_version_is_32022_with_exact_data(lab: Lab, version: str) -> None:
    response = send(lab.server, request(1, "tools/list", version=version))
    assert response is not None
    error = error_of(response)
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2026-07-28"], "requested": version}
    assert http_status(-32022) == 400


def test_every_supported_version_in_32022_is_also_discovered(lab: Lab) -> None:
    response = send(lab.server, request(1, "server/discover", version="2025-11-25"))
    assert response is not None
    supported = error_of(response)["data"]["supported"]
    assert set(supported) <= set(discover(lab, 2)["supportedVersions"])


def test_an_unsupported_version_is_reported_before_missing_capabilities(lab: Lab) -> None:
    response = send(lab.server, _with_meta({VERSION_KEY: "2025-11-25"}))
    assert response is not None
    assert error_of(response)["code"] == -32022


def test_client_info_is_optional_and_accepted_when_present(lab: Lab) -> None:
    message = request(1, "tools/list")
    message["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] = {
        "name": "some client",
        "version": "9",
    }
    response = send(lab.server, message)
    assert response is not None
    assert result_of(response)["tools"][0]["name"] == "notes_delete"


def test_empty_capabilities_are_enough_for_listing(lab: Lab) -> None:
    response = send(lab.server, request(1, "tools/list", caps={}))
    assert response is not None
    assert result_of(response)["resultType"] == "complete"


def test_unknown_meta_keys_are_ignored(lab: Lab) -> None:
    message = request(1, "server/discover")
    message["params"]["_meta"]["com.example/trace"] = {"span": 1}
    response = send(lab.server, message)
    assert response is not None
    assert result_of(response)["resultType"] == "complete"


# -- server/discover ---------------------------------------------------------------------------


def test_discover_is_complete_with_versions_capabilities_and_cache_hints(lab: Lab) -> None:
    result = discover(lab)
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == ["2026-07-28"]
    assert "tools" in result["capabilities"]
    assert "roots" not in result["capabilities"]
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")
    assert result["_meta"][SERVER_INFO_KEY] == {"name": "labkit", "version": "0.1.0"}
    assert "serverInfo" not in result


def test_discover_is_deterministic_and_a_fresh_copy(lab: Lab) -> None:
    first = discover(lab, 1)
    first["capabilities"]["roots"] = {"listChanged": True}
    first["supportedVersions"].append("2025-11-25")
    first["_meta"][SERVER_INFO_KEY]["name"] = "changed"
    second = discover(lab, 2)
    assert "roots" not in second["capabilities"]
    assert second["supportedVersions"] == ["2026-07-28"]
    assert second["_meta"][SERVER_INFO_KEY]["name"] == "labkit"


def test_discover_needs_no_capabilities(lab: Lab) -> None:
    response = send(lab.server, request(1, "server/discover", caps={}))
    assert response is not None
    assert result_of(response)["resultType"] == "complete"


# -- tools/list --------------------------------------------------------------------------------


def test_tools_list_is_complete_public_and_identified(lab: Lab) -> None:
    result = list_tools(lab.server)
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] > 0
    assert result["cacheScope"] == "public"
    assert result["_meta"][SERVER_INFO_KEY] == {"name": "labkit", "version": "0.1.0"}
    assert [tool["name"] for tool in result["tools"]] == ["notes_delete"]


def test_notes_delete_descriptor(lab: Lab) -> None:
    (tool,) = list_tools(lab.server)["tools"]
    assert tool["title"] and tool["description"]
    schema = tool["inputSchema"]
    assert schema["type"] == "object"
    assert set(schema["required"]) == {"workspaceUri", "title"}
    assert schema["properties"]["workspaceUri"]["type"] == "string"
    assert schema["properties"]["title"]["type"] == "string"
    assert tool["annotations"]["destructiveHint"] is True
    assert tool["annotations"]["readOnlyHint"] is False
    output = tool["outputSchema"]
    assert output["type"] == "object"
    assert "deleted" in output["required"]
    assert output["properties"]["deleted"] == {"type": "boolean"}
    assert output["properties"]["noteId"] == {"type": "string"}


def test_tools_list_hands_out_fresh_copies(lab: Lab) -> None:
    first = list_tools(lab.server, 1)
    pristine = copy.deepcopy(first["tools"])
    tool = first["tools"][0]
    tool["name"] = "hijacked"
    tool["annotations"]["destructiveHint"] = False
    tool["inputSchema"]["required"].clear()
    tool["inputSchema"]["properties"]["workspaceUri"]["type"] = "number"
    tool["outputSchema"]["properties"].clear()
    first["tools"].append({"name": "extra", "inputSchema": {"type": "object"}})
    second = list_tools(lab.server, 2)
    assert second["tools"] == pristine


def test_tools_list_is_deterministic(lab: Lab) -> None:
    assert list_tools(lab.server, 1)["tools"] == list_tools(lab.server, 2)["tools"]
    other = build_lab()
    assert list_tools(other.server, 1)["tools"] == list_tools(lab.server, 3)["tools"]


class _FakeTool:
    """A minimal extra tool, to see ordering and the error boundary with more than one tool."""

    def __init__(self, name: str, error: Exception | None = None) -> None:
        self.name = name
        self.error = error

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "inputSchema": {"type": "object"}}

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        return {"resultType": "complete", "content": [{"type": "text", "text": self.name}]}


def test_tools_are_listed_sorted_by_name(lab: Lab) -> None:
    notes_delete = lab.server.tools["notes_delete"]
    server = Server([_FakeTool("zeta"), notes_delete, _FakeTool("alpha")])
    names = [tool["name"] for tool in list_tools(server)["tools"]]
    assert names == ["alpha", "notes_delete", "zeta"]


# -- tools/call routing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="no-name"),
        pytest.param({"name": 5}, id="name-number"),
        pytest.param({"name": "no_such_tool", "arguments": {}}, id="unknown-tool"),
        pytest.param({"name": "notes_delete", "arguments": []}, id="arguments-array"),
        pytest.param({"name": "notes_delete", "arguments": "x"}, id="arguments-string"),
    ],
)
def test_tools_call_routing_errors_are_32602(lab: Lab, params: dict[str, Any]) -> None:
    response = send(lab.server, request(1, "tools/call", params))
    assert response is not None
    assert error_of(response)["code"] == -32602


# -- the error boundary: -32603 ----------------------------------------------------------------


def test_an_unexpected_exception_is_a_generic_32603(caplog: pytest.LogCaptureFixture) -> None:
    secret = "db password hunter2 at /etc/labkit/secret"
    server = Server([_FakeTool("boom", RuntimeError(secret))])
    with caplog.at_level(logging.ERROR, logger="labkit.server"):
        response = send(server, request(7, "tools/call", {"name": "boom", "arguments": {}}))
    assert response is not None
    assert response["id"] == 7
    assert error_of(response) == {"code": -32603, "message": "Internal error"}
    assert secret not in str(response)
    # The detail is not lost: it goes to the log, with the traceback.
    assert secret in caplog.text and "Traceback" in caplog.text


class _BrokenNotes:
    """A note store whose backend fails (a lost connection, say)."""

    def find(self, workspace: Any, title: str, limit: int) -> Any:
        raise ConnectionError("backend unreachable at 10.0.0.7")

    def get(self, note_id: str) -> Any:
        raise ConnectionError("backend unreachable at 10.0.0.7")

    def delete(self, note: Any) -> bool:
        raise ConnectionError("backend unreachable at 10.0.0.7")


def test_a_failing_store_becomes_32603_without_detail(caplog: pytest.LogCaptureFixture) -> None:
    lab = build_lab(notes=_BrokenNotes())  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="labkit.server"):
        response = call(lab.server, 1)
    assert error_of(response) == {"code": -32603, "message": "Internal error"}
    assert "10.0.0.7" not in str(response)


def test_a_tool_protocol_error_keeps_its_code_and_data() -> None:
    error = ProtocolError(-32021, "needs form", {"requiredCapabilities": {"elicitation": {}}})
    server = Server([_FakeTool("gate", error)])
    response = send(server, request(1, "tools/call", {"name": "gate", "arguments": {}}))
    assert response is not None
    assert error_of(response) == {
        "code": -32021,
        "message": "needs form",
        "data": {"requiredCapabilities": {"elicitation": {}}},
    }


def test_protocol_error_repr_and_wire_form() -> None:
    error = ProtocolError(-32602, "bad", None)
    assert error.to_wire() == {"code": -32602, "message": "bad"}
    assert repr(error) == "ProtocolError(-32602, 'bad', data=None)"


# -- -32700 belongs to transports: the helper -------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"{'a': 1}", b"NaN", b"[1, Infinity]", b"-Infinity", b"\xff\xfe", "[" * 100_000],
)
def test_decode_rejects_what_is_not_json_with_32700(raw: bytes | str) -> None:
    with pytest.raises(ProtocolError) as caught:
        wire.decode(raw)
    assert caught.value.code == -32700


def test_parse_error_response_is_schema_valid_with_id_null() -> None:
    response = wire.parse_error_response()
    assert response["id"] is None
    assert response["error"]["code"] == -32700
    check_wire("{not json", response)
    assert http_status(-32700) == 400


def test_decode_and_encode_round_trip() -> None:
    message = call_message(1)
    assert wire.decode(wire.encode(message)) == message
    assert wire.decode(wire.encode(message).decode("utf-8")) == message
    assert b" " not in wire.encode({"a": [1, 2]})


def test_a_decoded_request_flows_through_the_core(lab: Lab) -> None:
    raw = b'{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{"_meta":' + (
        b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        b'"io.modelcontextprotocol/clientCapabilities":{}}}}'
    )
    response = send(lab.server, wire.decode(raw))
    assert response is not None
    assert result_of(response)["supportedVersions"] == ["2026-07-28"]


def test_http_status_table() -> None:
    assert HTTP_STATUS[-32600] == 400
    assert http_status(-32602) == 400
    assert http_status(-32020) == 400
    assert http_status(-32021) == 400
    assert http_status(-32603) == 500
    assert http_status(-31999) == 500


def test_request_context_principal_defaults_to_nobody(lab: Lab) -> None:
    assert RequestContext().principal is None
    response = lab.server.handle(call_message(1), RequestContext())
    check_wire(call_message(1), response)
    assert response is not None and error_of(response)["code"] == -32602


# -- the wire check itself catches what it must ------------------------------------------------


def _mutated(response: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    """A deep copy of `response` with one field replaced (`MISSING` deletes it)."""
    changed = copy.deepcopy(response)
    target = changed
    for key in path[:-1]:
        target = target[key]
    if value is MISSING:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return changed


def _sample(lab: Lab) -> dict[str, dict[str, Any]]:
    listing = send(lab.server, request(1, "tools/list"))
    found = send(lab.server, request(2, "server/discover"))
    form = call(lab.server, 3)
    done = call(lab.server, 4, arguments=TPS_NONE)
    refused = call(lab.server, 5, caps={})
    assert listing is not None and found is not None
    return {"list": listing, "discover": found, "form": form, "done": done, "refused": refused}


TPS_NONE = {"workspaceUri": "file:///work/notes", "title": "no such note"}
MESSAGES = {
    "list": request(1, "tools/list"),
    "discover": request(2, "server/discover"),
    "form": call_message(3),
    "done": call_message(4, arguments=TPS_NONE),
    "refused": call_message(5, caps={}),
}
WIRE_VIOLATIONS = [
    pytest.param("list", ["id"], "1", id="id-type-changed"),
    pytest.param("list", ["result", "ttlMs"], MISSING, id="list-without-ttl"),
    pytest.param("list", ["result", "cacheScope"], "everyone", id="bad-cache-scope"),
    pytest.param("list", ["result", "tools", 0, "inputSchema", "type"], "array", id="bad-input"),
    pytest.param("list", ["result", "_meta"], MISSING, id="no-server-info"),
    pytest.param("list", ["result", "resultType"], "partial", id="unknown-result-type"),
    pytest.param("discover", ["result", "capabilities", "roots"], {}, id="discover-roots"),
    pytest.param("discover", ["result", "supportedVersions"], MISSING, id="no-versions"),
    pytest.param("discover", ["result", "resultType"], "input_required", id="mrtr-on-discover"),
    pytest.param("form", ["result", "ttlMs"], 1000, id="input-required-cached"),
    pytest.param("form", ["result", "inputRequests"], MISSING, id="neither-requests-nor-state"),
    pytest.param(
        "form",
        [
            "result",
            "inputRequests",
            "delete_choice",
            "params",
            "requestedSchema",
            "properties",
            "confirm",
        ],
        {"type": "object", "properties": {}},
        id="nested-form-field",
    ),
    pytest.param(
        "form",
        [
            "result",
            "inputRequests",
            "delete_choice",
            "params",
            "requestedSchema",
            "properties",
            "note_id",
            "oneOf",
        ],
        [{"title": "no const"}],
        id="choice-without-const",
    ),
    pytest.param("done", ["result", "content"], MISSING, id="call-without-content"),
    pytest.param("done", ["result", "cacheScope"], "public", id="call-cached"),
    pytest.param("done", ["result", "structuredContent", "deleted"], "no", id="off-schema"),
    pytest.param("done", ["result", "structuredContent", "extra"], 1, id="off-schema-extra"),
    pytest.param("refused", ["error", "data"], {"requiredCapabilities": 1}, id="32021-data"),
    pytest.param("refused", ["error", "code"], -32050, id="reserved-code"),
    pytest.param("refused", ["error", "code"], -32042, id="retired-code"),
    pytest.param("refused", ["error", "message"], "Traceback (most recent call last)", id="tb"),
    pytest.param("refused", ["error", "message"], MISSING, id="no-message"),
]


@pytest.mark.parametrize(("kind", "path", "value"), WIRE_VIOLATIONS)
def test_the_wire_check_rejects_a_violation(
    lab: Lab, kind: str, path: list[Any], value: Any
) -> None:
    sample = _sample(lab)[kind]
    check_wire(MESSAGES[kind], sample, server=lab.server)  # the genuine response passes
    broken = _mutated(sample, path, value)
    if kind == "form" and path == ["result", "inputRequests"]:
        # A state alone is valid ("retry later"); without both it is not.
        check_wire(MESSAGES[kind], broken, server=lab.server)
        broken = _mutated(broken, ["result", "requestState"], MISSING)
    with pytest.raises((AssertionError, ValueError, jsonschema.ValidationError)):
        check_wire(MESSAGES[kind], broken, server=lab.server)


@pytest.mark.parametrize("caps", [{}, {"elicitation": {"url": {}}}, {"sampling": {}}])
def test_the_wire_check_rejects_a_form_the_request_did_not_declare(
    lab: Lab, caps: dict[str, Any]
) -> None:
    form = call(lab.server, 1)
    with pytest.raises(AssertionError, match="declared|capability"):
        check_wire(call_message(1, caps=caps), form)


def test_the_wire_check_rejects_answered_notifications_and_silent_requests(lab: Lab) -> None:
    answered = {"jsonrpc": "2.0", "id": None, "result": {"resultType": "complete"}}
    with pytest.raises(AssertionError):
        check_wire(request(MISSING, "tools/list"), answered)
    with pytest.raises(AssertionError):
        check_wire(request(1, "tools/list"), None)
    unsupported = send(lab.server, request(1, "tools/list", version="1999-01-01"))
    assert unsupported is not None
    with pytest.raises(ValueError):
        check_wire(request(1, "tools/list"), _mutated(unsupported, ["error", "data"], MISSING))


def test_lone_surrogates_from_the_peer_survive_the_round_trip(lab: Lab) -> None:
    """JSON may carry `\\ud800` escapes that are not Unicode; answers echoing them (the id, an
    unknown method name) must still encode to valid JSON for the transports."""
    raw = b'{"jsonrpc":"2.0","id":"\\ud800","method":"x\\udfff","params":{}}'
    message = wire.decode(raw)
    response = send(lab.server, message)
    assert response is not None
    assert error_of(response)["code"] == -32601
    encoded = wire.encode(response)
    encoded.decode("utf-8")  # valid UTF-8 on the wire
    assert wire.decode(encoded) == response
    assert wire.encode({"text": "é"}) == '{"text":"é"}'.encode()  # plain text stays UTF-8


# -- listings built and encoded once -------------------------------------------------------------


class _CountingTool(_FakeTool):
    """Counts how often the server asks for its descriptor."""

    def __init__(self, name: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(name)
        self.asked = 0
        self.extra = extra or {}

    def descriptor(self) -> dict[str, Any]:
        self.asked += 1
        return {**super().descriptor(), **self.extra}


def _encoded(server: Server, message: Any) -> Any:
    return server.respond(message, RequestContext(principal="alice"))


def test_tools_list_and_discover_are_built_once_per_deployment() -> None:
    tool = _CountingTool("counted")
    server = Server([tool])
    for request_id in range(1, 6):
        assert [t["name"] for t in list_tools(server, request_id)["tools"]] == ["counted"]
        encoded = _encoded(server, request(request_id, "tools/list"))
        assert wire.decode(encoded)["result"]["tools"][0]["name"] == "counted"
    assert tool.asked == 1
    other = Server([tool])  # another deployment builds its own
    list_tools(other)
    assert tool.asked == 2


@pytest.mark.parametrize("method", ["tools/list", "server/discover"])
def test_a_caller_changing_a_listing_changes_neither_bytes_nor_later_copies(
    lab: Lab, method: str
) -> None:
    before = _encoded(lab.server, request(1, method))
    first = send(lab.server, request(1, method))
    assert first is not None
    pristine = copy.deepcopy(first)
    result = first["result"]
    result["ttlMs"] = -1
    result["_meta"][SERVER_INFO_KEY]["name"] = "changed"
    for value in result.values():
        if isinstance(value, list):
            value.clear()
        elif isinstance(value, dict):
            value["injected"] = True
    for tool in result.get("tools", ()):
        tool["inputSchema"]["required"].clear()
    assert send(lab.server, request(1, method)) == pristine
    assert _encoded(lab.server, request(1, method)) == before


@pytest.mark.parametrize("key", ["list", "discover", "form", "done", "refused"])
@pytest.mark.parametrize("request_id", [7, "seven", 0, -(2**63), 2**64 - 1])
def test_encoded_answers_are_the_bytes_of_the_object_answers(
    lab: Lab, key: str, request_id: Any
) -> None:
    """`respond` and `encode(handle(...))` agree byte for byte, errors included, and the error
    code reads back for the HTTP status."""
    message = {**MESSAGES[key], "id": request_id}
    expected = send(lab.server, message)
    assert expected is not None
    encoded = _encoded(lab.server, message)
    if key in ("form", "done"):  # a fresh state and nonce each call: compare the shape
        got = wire.decode(encoded)
        assert got["id"] == request_id and got["result"].keys() == expected["result"].keys()
    else:
        assert encoded == wire.encode(expected)
    error = expected.get("error")
    assert wire.error_code(encoded) == (error["code"] if error else None)


@pytest.mark.parametrize("request_id", [2**70, "\ud800"])
def test_an_id_orjson_cannot_write_still_gets_its_listing(lab: Lab, request_id: Any) -> None:
    encoded = _encoded(lab.server, request(request_id, "tools/list"))
    answer = wire.decode(encoded)
    assert answer["id"] == request_id
    assert answer["result"] == list_tools(lab.server)


def test_notifications_and_invalid_requests_in_encoded_form(lab: Lab) -> None:
    assert _encoded(lab.server, {"jsonrpc": "2.0", "method": "tools/list"}) is None
    invalid = _encoded(lab.server, {"jsonrpc": "2.0", "id": 1, "method": 5})
    assert wire.error_code(invalid) == -32600
    assert wire.decode(invalid)["error"]["code"] == -32600
    unversioned = _encoded(lab.server, request(1, "tools/list", version="1999-01-01"))
    assert wire.error_code(unversioned) == -32022


def test_a_listing_replaced_by_an_extra_method_is_answered_every_time() -> None:
    calls: list[int] = []

    def listing(req: Request) -> dict[str, Any]:
        calls.append(1)
        return {"resultType": "complete", "tools": [_FakeTool(f"t{len(calls)}").descriptor()]}

    server = Server([], extra_methods={"tools/list": listing})
    assert list_tools(server, 1)["tools"][0]["name"] == "t1"
    answer = wire.decode(_encoded(server, request(2, "tools/list")))
    assert answer["result"]["tools"][0]["name"] == "t2"


def test_a_descriptor_orjson_cannot_encode_is_answered_afresh() -> None:
    tool = _CountingTool("huge", {"x-limit": 2**70})
    server = Server([tool])
    for request_id in (1, 2):
        answer = wire.decode(_encoded(server, request(request_id, "tools/list")))
        assert answer["result"]["tools"][0]["x-limit"] == 2**70
    assert list_tools(server, 3)["tools"][0]["x-limit"] == 2**70
    assert tool.asked == 3


class _Dict(dict):  # type: ignore[type-arg]
    """A mapping of a type the quick envelope check leaves to the general one."""


class _Str(str):
    pass


# -- a listing answered from its bytes encoded once, anything else by the general path ---------

_ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 7, -(2**63), 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 2**70, 1.5]),
    st.sampled_from(["2.0", "1.0", "", "tools/list", "server/discover", "tools/call", "\ud800"]),
    st.sampled_from([PROTOCOL, "2025-11-25", "1999-01-01"]),
    st.builds(_Str, st.sampled_from(["2.0", "tools/list", PROTOCOL])),
    st.just({}),
    st.just([]),
    st.just({"form": {}}),
    st.builds(_Dict),
)
# Where a change goes: a top-level member, a member of params, or of params._meta.
_PLACES = st.sampled_from([(), ("params",), ("params", "_meta")]).flatmap(
    lambda place: st.tuples(
        st.just(place),
        st.sampled_from(
            {
                (): ["jsonrpc", "id", "method", "params", "extra"],
                ("params",): ["_meta", "cursor"],
                ("params", "_meta"): [VERSION_KEY, CAPS_KEY, "other"],
            }[place]
        ),
    )
)


def _changed(message: dict[str, Any], changes: list[tuple[Any, Any]]) -> Any:
    message = copy.deepcopy(message)
    for (place, key), value in changes:
        target: Any = message
        for step in place:
            target = target.get(step) if type(target) is dict else None
        if type(target) is not dict:
            continue
        if value is MISSING:
            target.pop(key, None)
        else:
            target[key] = copy.deepcopy(value)
    return message


_LISTING_SERVER = build_lab(FakeClock()).server
for _method in ("tools/list", "server/discover"):  # encoded once, as after a first listing
    _LISTING_SERVER.handle(request(1, _method), RequestContext(principal="alice"))
# The same deployment keeping nothing encoded: every answer takes the general path.
_GENERAL_SERVER = build_lab(FakeClock()).server
_GENERAL_SERVER.listings = EncodedOnce(())


@settings(max_examples=500)
@given(
    method=st.sampled_from(["tools/list", "server/discover", "tools/call", "prompts/list"]),
    changes=st.lists(st.tuples(_PLACES, st.one_of(st.just(MISSING), _ANY_VALUE)), max_size=3),
)
def test_a_listing_from_its_bytes_is_the_general_answer(
    method: str, changes: list[tuple[Any, Any]]
) -> None:
    """Whatever a request looks like, a deployment answering listings from their bytes encoded
    once gives the bytes of one that builds and encodes every answer; `handle` is those bytes
    parsed."""
    context = RequestContext(principal="alice")
    message = _changed(request(5, method), changes)
    encoded = _LISTING_SERVER.respond(message, context)
    general = _GENERAL_SERVER.respond(copy.deepcopy(message), context)
    assert encoded == general
    parsed = _LISTING_SERVER.handle(message, context)
    assert parsed == (None if encoded is None else wire.decode(encoded))
    if encoded is not None:
        assert wire.encode(parsed) == encoded


@pytest.mark.parametrize("method", ["tools/list", "server/discover"])
@pytest.mark.parametrize("request_id", [0, 7, -(2**63), 2**64 - 1, 2**70, "seven", ""])
def test_the_usual_listing_is_its_bytes_in_the_envelope_template(
    method: str, request_id: Any
) -> None:
    listing = _LISTING_SERVER.listings.get(method)
    assert listing is not None
    encoded = _LISTING_SERVER.respond(request(request_id, method), RequestContext("alice"))
    assert encoded == wire.encoded_result_response(request_id, listing)
    assert wire.decode(encoded)["id"] == request_id


def test_no_listing_is_kept_before_the_first_is_built(lab: Lab) -> None:
    assert "tools/list" not in lab.server.listings
    list_tools(lab.server)
    assert "tools/list" in lab.server.listings
    assert "server/discover" not in lab.server.listings


# -- the usual request's envelope checked in one go, anything else by the general rules ------------


def _retyped(message: dict[str, Any], how: str) -> Any:
    if how == "dict-subclass":
        return _Dict(message)
    if how == "params-subclass":
        return {**message, "params": _Dict(message["params"])}
    if how == "method-subclass":
        return {**message, "method": _Str(message["method"])}
    if how == "meta-subclass":
        params = {**message["params"], "_meta": _Dict(message["params"]["_meta"])}
        return {**message, "params": params}
    raise AssertionError(how)


@pytest.mark.parametrize("key", ["list", "discover", "done"])
@pytest.mark.parametrize(
    "how", ["dict-subclass", "params-subclass", "method-subclass", "meta-subclass"]
)
def test_subclassed_containers_get_the_answer_plain_ones_get(lab: Lab, key: str, how: str) -> None:
    expected = send(lab.server, MESSAGES[key])
    got = send(lab.server, _retyped(MESSAGES[key], how))
    assert expected is not None and got is not None
    assert got.keys() == expected.keys()
    if key == "done":
        assert got["result"]["content"] == expected["result"]["content"]
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"jsonrpc": "1.0"}, -32600),
        ({"id": True}, -32600),
        ({"id": 1.5}, -32600),
        ({"method": 7}, -32600),
        ({"params": []}, -32600),
        ({"params": None}, -32600),
        ({"method": "nope"}, -32601),
        ({"params": {}}, -32602),
        ({"params": {"_meta": []}}, -32602),
        ({"params": {"_meta": {"io.modelcontextprotocol/protocolVersion": 2026}}}, -32602),
        (
            {"params": {"_meta": {"io.modelcontextprotocol/protocolVersion": ["2026-07-28"]}}},
            -32602,
        ),
        ({"params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}}}, -32022),
    ],
)
def test_each_envelope_and_meta_fault_keeps_its_code(
    lab: Lab, change: dict[str, Any], code: int
) -> None:
    message = {**MESSAGES["list"], **change}
    for form in (message, _Dict(message)):
        answer = send(lab.server, form)
        assert answer is not None
        assert answer["error"]["code"] == code
        encoded = _encoded(lab.server, form)
        assert encoded is not None and wire.error_code(encoded) == code
