"""What the labkit tests share: constants, deterministic collaborators, the deployment builder,
request builders over `labkit.messages`, readers of responses, and the wire check.

Owns: `build_lab` (the demo deployment with a fake clock, fixed keys and counted nonces), the
test-only request builders (`request`, `call_message`, `call`, `send`, the answers; `MISSING`
leaves a field out so malformed messages can be built), and `check_wire`, the 2026-07-28
schema check every response sent through `send` or `call` passes (the pydantic models of
`mcp_types._v2026_07_28`, plus the rules docs/protocol.md adds on top of the schema).
Imported as `from helpers import ...` (tests/ is on the path through its conftest.py);
fixtures and the Hypothesis profile stay in conftest.py.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from mcp_types import _v2026_07_28 as v
from pydantic import BaseModel, TypeAdapter

from labkit import messages
from labkit.clock import FakeClock
from labkit.deployment import DEMO_ALLOWLIST, DEMO_NOTES, create_server
from labkit.errors import ProtocolError
from labkit.notes_delete import INPUT_KEY, STATE_ERROR
from labkit.scope import AllowlistAuthorizer, Authorizer
from labkit.server import RequestContext, Server
from labkit.state import KeyRing
from labkit.stores import ReplayStore
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.wire import request_parts

PROTOCOL = "2026-07-28"
FORM: dict[str, Any] = {"elicitation": {"form": {}}}
NOTES_URI = "file:///work/notes"
TPS: dict[str, str] = {"workspaceUri": NOTES_URI, "title": "TPS report"}
DEMO_IDS = ["note-100", "note-14", "note-3", "note-7", "note-99"]
TPS_OFFER = [
    ("note-3", "TPS report 2023"),
    ("note-7", "TPS report 2024"),
    ("note-14", "TPS report 2025"),
]
STATE_FAILURE = {"code": -32602, "message": STATE_ERROR}

# Test keys are derived, never random, so failures reproduce; each is 32 bytes.
KEY_A = hashlib.sha256(b"labkit test key A").digest()
KEY_B = hashlib.sha256(b"labkit test key B").digest()


class _Missing(enum.Enum):
    MISSING = enum.auto()


MISSING = _Missing.MISSING
"""Leave a request field out entirely (distinct from sending `null`)."""


class CountingNonces:
    """A deterministic 128-bit nonce source that counts what it issued.

    Servers that share a replay store must share one instance: two independent counters would
    hand two different states the same nonce.
    """

    def __init__(self) -> None:
        self._next = itertools.count(1)
        self._lock = threading.Lock()
        self.issued = 0

    def __call__(self) -> bytes:
        with self._lock:
            self.issued += 1
            return next(self._next).to_bytes(16, "big")


@dataclass
class Lab:
    """One deployment under test and every collaborator it was built from."""

    server: Server
    notes: MemoryNoteStore
    replay: ReplayStore
    clock: FakeClock
    keys: KeyRing
    nonces: CountingNonces
    authorizer: Authorizer

    def twin(self, *, keys: KeyRing | None = None, audience: str = "labkit") -> Server:
        """Another server object sharing this lab's stores, clock, nonces and authorizer."""
        return create_server(
            keys=keys if keys is not None else self.keys,
            notes=self.notes,
            replay=self.replay,
            authorizer=self.authorizer,
            clock=self.clock,
            nonce_source=self.nonces,
            audience=audience,
        )

    def ids(self) -> list[str]:
        return self.notes.ids()


def demo_notes(extra: Iterable[tuple[str, str, str]] = ()) -> MemoryNoteStore:
    notes = MemoryNoteStore()
    for note_id, uri, title in [*DEMO_NOTES, *extra]:
        notes.add(note_id, uri, title)
    return notes


def build_lab(
    clock: FakeClock | None = None,
    *,
    keys: KeyRing | None = None,
    allowlist: Mapping[str, list[str]] = DEMO_ALLOWLIST,
    authorizer: Authorizer | None = None,
    notes: MemoryNoteStore | None = None,
    extra_notes: Iterable[tuple[str, str, str]] = (),
    replay: ReplayStore | None = None,
    audience: str = "labkit",
    state_ttl_seconds: float = 300.0,
    max_candidates: int = 20,
) -> Lab:
    """The demo deployment of the issue, with a fake clock, fixed keys and counted nonces."""
    clock = clock if clock is not None else FakeClock()
    keys = keys if keys is not None else KeyRing([KEY_A])
    notes = notes if notes is not None else demo_notes(extra_notes)
    replay = replay if replay is not None else MemoryReplayStore(clock=clock)
    authorizer = authorizer if authorizer is not None else AllowlistAuthorizer(allowlist)
    nonces = CountingNonces()
    server = create_server(
        keys=keys,
        notes=notes,
        replay=replay,
        authorizer=authorizer,
        clock=clock,
        nonce_source=nonces,
        audience=audience,
        state_ttl_seconds=state_ttl_seconds,
        max_candidates=max_candidates,
    )
    return Lab(server, notes, replay, clock, keys, nonces, authorizer)


# -- request builders ------------------------------------------------------------------------


def meta(caps: Any = FORM, version: Any = PROTOCOL) -> dict[str, Any]:
    """`_meta` without clientInfo (it is optional); `caps` and `version` may be any value, so
    the malformed cases are built the same way."""
    return messages.meta(caps, version=version)


def request(
    id: Any,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    caps: Any = FORM,
    version: Any = PROTOCOL,
) -> dict[str, Any]:
    """A JSON-RPC request with the per-request `_meta`; `id=MISSING` makes a notification."""
    message = messages.request(id, method, params, capabilities=caps, version=version)
    return messages.as_notification(message) if id is MISSING else message


def call_message(
    id: Any,
    name: str = "notes_delete",
    arguments: Any = MISSING,
    *,
    caps: Any = FORM,
    state: Any = MISSING,
    responses: Any = MISSING,
    version: Any = PROTOCOL,
) -> dict[str, Any]:
    """A `tools/call`; `state` and `responses` may be any value (`None` is sent as null)."""
    message = messages.tools_call(id, name, {}, capabilities=caps, version=version)
    params = message["params"]
    # Set after building: the tests send arguments, states and answers of every type.
    params["arguments"] = dict(TPS) if arguments is MISSING else arguments
    if state is not MISSING:
        params[messages.REQUEST_STATE] = state
    if responses is not MISSING:
        params[messages.INPUT_RESPONSES] = responses
    return messages.as_notification(message) if id is MISSING else message


def send(server: Server, message: Any, principal: str | None = "alice") -> dict[str, Any] | None:
    """Hand one message to the core and check the answer against the 2026-07-28 schema."""
    response = server.handle(message, RequestContext(principal=principal))
    check_wire(message, response, server=server)
    return response


def call(
    server: Server,
    id: Any,
    name: str = "notes_delete",
    arguments: Any = MISSING,
    *,
    caps: Any = FORM,
    state: Any = MISSING,
    responses: Any = MISSING,
    principal: str | None = "alice",
    version: Any = PROTOCOL,
) -> dict[str, Any]:
    """A checked `tools/call` (arguments default to the lesson's TPS report request)."""
    message = call_message(
        id, name, arguments, caps=caps, state=state, responses=responses, version=version
    )
    response = send(server, message, principal)
    assert response is not None
    return response


def answer(action: str, content: Any = MISSING) -> dict[str, Any]:
    """`inputResponses` answering `delete_choice` with any action and content (or none)."""
    choice: dict[str, Any] = {"action": action}
    if content is not MISSING:
        choice["content"] = content
    return {INPUT_KEY: choice}


def accept(note_id: Any, confirm: Any = True) -> dict[str, Any]:
    return {INPUT_KEY: messages.accept({"note_id": note_id, "confirm": confirm})}


DECLINE = {INPUT_KEY: messages.decline()}
CANCEL = {INPUT_KEY: messages.cancel()}


def result_of(response: Mapping[str, Any]) -> dict[str, Any]:
    assert "error" not in response, response
    result: dict[str, Any] = response["result"]
    return result


def error_of(response: Mapping[str, Any]) -> dict[str, Any]:
    assert "result" not in response, response
    error: dict[str, Any] = response["error"]
    return error


def state_of(response: Mapping[str, Any]) -> str:
    result = result_of(response)
    assert result["resultType"] == "input_required", result
    state: str = result["requestState"]
    return state


def form_of(response: Mapping[str, Any]) -> dict[str, Any]:
    """The `params` of the `delete_choice` elicitation."""
    result = result_of(response)
    assert result["resultType"] == "input_required", result
    params: dict[str, Any] = result["inputRequests"]["delete_choice"]["params"]
    return params


def offered(response: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(note id, title) pairs the form offers, in order."""
    field = form_of(response)["requestedSchema"]["properties"]["note_id"]
    return [(o["const"], o["title"]) for o in field["oneOf"]]


def structured(response: Mapping[str, Any]) -> dict[str, Any]:
    result = result_of(response)
    assert result["resultType"] == "complete", result
    content: dict[str, Any] = result["structuredContent"]
    return content


def ask(lab: Lab, id: Any = 1, arguments: Any = MISSING, **kwargs: Any) -> str:
    """Round one; returns the signed state of the form."""
    return state_of(call(lab.server, id, arguments=arguments, **kwargs))


# -- the wire check --------------------------------------------------------------------------

_ERROR_OBJECT_MODELS: dict[int, type[BaseModel]] = {
    -32700: v.ParseError,
    -32600: v.InvalidRequestError,
    -32601: v.MethodNotFoundError,
    -32602: v.InvalidParamsError,
    -32603: v.InternalError,
}
_ERROR_RESPONSE_MODELS: dict[int, type[BaseModel]] = {
    -32020: v.HeaderMismatchError,
    -32021: v.MissingRequiredClientCapabilityError,
    -32022: v.UnsupportedProtocolVersionError,
}
_RESULT_RESPONSE_MODELS: dict[str, type[BaseModel]] = {
    "server/discover": v.DiscoverResultResponse,
    "tools/list": v.ListToolsResultResponse,
    "tools/call": v.CallToolResultResponse,
}
_MRTR_METHODS = ("tools/call", "prompts/get", "resources/read")
_CACHEABLE = ("server/discover", "tools/list")
# The form-mode field schemas of 2026-07-28, keyed by the keyword that tells them apart:
# `extra="ignore"` models would otherwise let an enum field pass as a plain string field.
_PRIMITIVE = TypeAdapter(v.PrimitiveSchemaDefinition)
_SINGLE_TITLED = TypeAdapter(v.TitledSingleSelectEnumSchema)
_SINGLE_UNTITLED = TypeAdapter(v.UntitledSingleSelectEnumSchema | v.LegacyTitledEnumSchema)
_MULTI = TypeAdapter(v.TitledMultiSelectEnumSchema | v.UntitledMultiSelectEnumSchema)


def _is_request_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _well_formed(message: Any) -> bool:
    try:
        request_parts(message)
    except ProtocolError:
        return False
    return True


def check_wire(message: Any, response: Any, *, server: Server | None = None) -> None:
    """Assert that `response` is what a 2026-07-28 server may send in answer to `message`.

    Validated with the generated pydantic models in strict mode (no coercion: a boolean id or a
    string ttl fails), then the protocol rules the schema cannot express: notifications are
    never answered, ids are echoed, `input_required` only on MRTR methods and never cached,
    no reserved error code is invented, no traceback reaches the wire, and `structuredContent`
    conforms to the tool's `outputSchema` (read back through `tools/list` when `server` is
    given).
    """
    if isinstance(message, dict) and "id" not in message:
        if _well_formed(message):
            assert response is None, f"a notification was answered: {response!r}"
            return
        # Not a notification but an invalid request (JSON-RPC 2.0 section 5): -32600, id null.
        assert isinstance(response, dict) and response.get("id", "absent") is None, response
        assert response["error"]["code"] == -32600, response
    assert isinstance(response, dict), f"a request got no response: {message!r}"
    assert response.get("jsonrpc") == "2.0"
    assert set(response) in ({"jsonrpc", "id", "result"}, {"jsonrpc", "id", "error"}), response
    raw_id = message.get("id") if isinstance(message, dict) else None
    expected_id = raw_id if _is_request_id(raw_id) else None
    assert response["id"] == expected_id and type(response["id"]) is type(expected_id), response
    if "error" in response:
        _check_error(response)
    else:
        _check_result(message, response, server)


def _check_error(response: dict[str, Any]) -> None:
    v.JSONRPCErrorResponse.model_validate(response, strict=True)
    error = response["error"]
    code = error["code"]
    assert code not in (-32002, -32042), "retired at 2026-07-28"
    assert not -32099 <= code <= -32020 or code in _ERROR_RESPONSE_MODELS, "reserved code"
    assert -32768 <= code <= -32000, "labkit answers only JSON-RPC and MCP error codes"
    if code in _ERROR_OBJECT_MODELS:
        _ERROR_OBJECT_MODELS[code].model_validate(error, strict=True)
    if code in _ERROR_RESPONSE_MODELS:
        _ERROR_RESPONSE_MODELS[code].model_validate(response, strict=True)
    message = error["message"]
    assert message and "Traceback" not in message and 'File "' not in message, message


def _check_result(message: dict[str, Any], response: dict[str, Any], server: Server | None) -> None:
    method = message["method"]
    result = response["result"]
    meta_ = result.get("_meta")
    assert isinstance(meta_, dict), "every result carries _meta with serverInfo"
    v.Implementation.model_validate(meta_["io.modelcontextprotocol/serverInfo"], strict=True)
    assert "serverInfo" not in result, "serverInfo goes in _meta, not at the top level"
    if result["resultType"] == "input_required":
        assert method in _MRTR_METHODS, f"input_required answered {method}"
        _check_input_required(result, _declared(message))
        return
    assert result["resultType"] == "complete", result
    assert method in _RESULT_RESPONSE_MODELS, f"no result model for {method}"
    _RESULT_RESPONSE_MODELS[method].model_validate(response, strict=True)
    if method in _CACHEABLE:
        assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
        assert result["cacheScope"] in ("public", "private")
    else:
        assert "ttlMs" not in result and "cacheScope" not in result, "tools/call is not cached"
    if method == "server/discover":
        assert "roots" not in result["capabilities"], "2026-07-28 servers never offer Roots"
    if method == "tools/list":
        for tool in result["tools"]:
            jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
            if "outputSchema" in tool:
                jsonschema.Draft202012Validator.check_schema(tool["outputSchema"])
    if method == "tools/call":
        # `CallToolResultResponse.result` is a union whose InputRequiredResult arm accepts
        # almost anything; the complete arm is checked on its own so it cannot hide there.
        v.CallToolResult.model_validate(result, strict=True)
        if server is not None and "structuredContent" in result:
            schema = _output_schema(server, message["params"]["name"])
            if schema is not None:
                jsonschema.validate(result["structuredContent"], schema)


def _declared(message: dict[str, Any]) -> dict[str, Any]:
    caps: dict[str, Any] = message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    return caps


def _check_input_required(result: dict[str, Any], caps: dict[str, Any]) -> None:
    parsed = v.InputRequiredResult.model_validate(result, strict=True)
    assert parsed.input_requests or parsed.request_state, "inputRequests or requestState"
    assert "ttlMs" not in result and "cacheScope" not in result, "input_required is not cached"
    for key, input_request in (result.get("inputRequests") or {}).items():
        assert isinstance(key, str) and key
        method = input_request["method"]
        assert method in ("elicitation/create", "sampling/createMessage", "roots/list")
        # Never embed a request whose capability this very request did not declare.
        if method == "sampling/createMessage":
            assert "sampling" in caps, "sampling requested without the capability"
        if method == "roots/list":
            assert "roots" in caps, "roots requested without the capability"
        if method != "elicitation/create":
            continue
        v.ElicitRequest.model_validate(input_request, strict=True)
        params = input_request["params"]
        elicitation = caps.get("elicitation")
        assert isinstance(elicitation, dict), "elicitation requested without the capability"
        if params.get("mode", "form") == "form":
            assert not elicitation or "form" in elicitation, "form mode was not declared"
            _check_form_schema(params["requestedSchema"])
        else:
            assert "url" in elicitation, "URL mode was not declared"


def _check_form_schema(schema: dict[str, Any]) -> None:
    v.RequestedSchema.model_validate(schema, strict=True)
    jsonschema.Draft202012Validator.check_schema(schema)
    properties = schema["properties"]
    assert set(schema.get("required", [])) <= set(properties)
    for name, field in properties.items():
        _PRIMITIVE.validate_python(field, strict=True)
        if "oneOf" in field:
            _SINGLE_TITLED.validate_python(field, strict=True)
        elif "enum" in field:
            _SINGLE_UNTITLED.validate_python(field, strict=True)
        elif field["type"] == "array":
            _MULTI.validate_python(field, strict=True)
        assert field["type"] != "object", f"form field {name!r} is nested"


def _output_schema(server: Server, name: str) -> dict[str, Any] | None:
    listing = server.handle(request("schema-check", "tools/list"), RequestContext("alice"))
    assert listing is not None
    for tool in listing["result"]["tools"]:
        if tool["name"] == name:
            schema: dict[str, Any] | None = tool.get("outputSchema")
            return schema
    return None
