"""The requests and elicitation answers an MCP 2026-07-28 client sends, as plain dicts.

Owns: per-request `_meta`, the JSON-RPC request envelope, `tools/call` and its MRTR retry, the
three elicitation answers, and small readers of a result. The one copy the host
(`labkit.client`), the demo, the tests and the bench build their messages with.
Pure module: arguments in, fresh dicts out; no I/O, no clock, no id source (the caller picks
every id). Must not import the server, a transport, the course toolkit or anything that
does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from labkit.wire import (
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_VERSION,
    PROTOCOL_VERSION,
    RequestId,
)

# The MRTR fields of a retry (docs/protocol.md, "Multi Round-Trip Requests").
INPUT_RESPONSES: Final = "inputResponses"
REQUEST_STATE: Final = "requestState"
ACTIONS: Final = ("accept", "decline", "cancel")


def form_capabilities() -> dict[str, Any]:
    """`{"elicitation": {"form": {}}}`, fresh: what a client that renders forms declares."""
    return {"elicitation": {"form": {}}}


def client_info(name: str, version: str) -> dict[str, str]:
    return {"name": name, "version": version}


def meta(
    capabilities: Mapping[str, Any] | None = None,
    *,
    version: str = PROTOCOL_VERSION,
    client_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The per-request `params._meta`: every 2026-07-28 request carries the version and the
    client's capabilities (no handshake); `clientInfo` is optional and only diagnostic.
    `capabilities=None` declares form elicitation."""
    result: dict[str, Any] = {
        META_VERSION: version,
        META_CAPABILITIES: form_capabilities() if capabilities is None else capabilities,
    }
    if client_info is not None:
        result[META_CLIENT_INFO] = client_info
    return result


def request(
    request_id: RequestId,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    capabilities: Mapping[str, Any] | None = None,
    version: str = PROTOCOL_VERSION,
    client_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A JSON-RPC 2.0 request with its `_meta` (which replaces any `_meta` in `params`)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {
            **(params or {}),
            "_meta": meta(capabilities, version=version, client_info=client_info),
        },
    }


def tools_call(
    request_id: RequestId,
    name: str,
    arguments: Mapping[str, Any],
    *,
    capabilities: Mapping[str, Any] | None = None,
    version: str = PROTOCOL_VERSION,
    client_info: Mapping[str, Any] | None = None,
    input_responses: Mapping[str, Any] | None = None,
    request_state: str | None = None,
) -> dict[str, Any]:
    """A `tools/call`; with `input_responses` and `request_state` it is an MRTR retry."""
    params: dict[str, Any] = {"name": name, "arguments": dict(arguments)}
    if input_responses is not None:
        params[INPUT_RESPONSES] = dict(input_responses)
    if request_state is not None:
        params[REQUEST_STATE] = request_state
    return request(
        request_id,
        "tools/call",
        params,
        capabilities=capabilities,
        version=version,
        client_info=client_info,
    )


def retry(
    previous: Mapping[str, Any],
    request_id: RequestId,
    input_responses: Mapping[str, Any],
    request_state: str | None,
) -> dict[str, Any]:
    """The retry of `previous` after an `input_required` result: a **new** id, the same method
    and params (name, arguments, `_meta`), the answers, and `request_state` exactly as the
    server sent it (None: the server sent none, so none is echoed)."""
    params = {
        key: value
        for key, value in previous["params"].items()
        if key not in (INPUT_RESPONSES, REQUEST_STATE)
    }
    params[INPUT_RESPONSES] = dict(input_responses)
    if request_state is not None:
        params[REQUEST_STATE] = request_state
    return {"jsonrpc": "2.0", "id": request_id, "method": previous["method"], "params": params}


def as_notification(message: Mapping[str, Any]) -> dict[str, Any]:
    """`message` without its id: a notification, which a server never answers or acts on."""
    return {key: value for key, value in message.items() if key != "id"}


# -- elicitation answers (docs/LESSON.md section 8) ------------------------------------------------


def accept(content: Mapping[str, Any]) -> dict[str, Any]:
    """The user submitted the form: `content` holds the values."""
    return {"action": "accept", "content": dict(content)}


def decline() -> dict[str, Any]:
    """The user explicitly refused: terminal, never re-asked."""
    return {"action": "decline"}


def cancel() -> dict[str, Any]:
    """The user dismissed the dialog: nothing happens, a later answer is still possible."""
    return {"action": "cancel"}


# -- readers -------------------------------------------------------------------------------------


def is_input_required(result: Mapping[str, Any]) -> bool:
    return result.get("resultType") == "input_required"


def input_requests(result: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The map of server-chosen keys to `{method, params}` (empty when the server only asks
    for a retry later, with state alone)."""
    requests: dict[str, dict[str, Any]] = result.get("inputRequests") or {}
    return requests


def request_state(result: Mapping[str, Any]) -> str | None:
    """The `requestState` exactly as received, or None."""
    state = result.get(REQUEST_STATE)
    return state if isinstance(state, str) else None
