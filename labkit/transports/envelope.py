"""What a transport checks before the core sees a message: notification envelopes, and the
Streamable HTTP routing headers against the body.

Pure module: no I/O. Every check returns a `ProtocolError` value (or None); the transport
decides how to frame it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from labkit.errors import HEADER_MISMATCH, INVALID_REQUEST, ProtocolError
from labkit.wire import META_CAPABILITIES, META_VERSION, is_request_id

PROTOCOL_VERSION_HEADER: Final = "mcp-protocol-version"
METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"
ROUTING_HEADERS: Final = frozenset({PROTOCOL_VERSION_HEADER, METHOD_HEADER, NAME_HEADER})

# The methods whose target travels in `Mcp-Name`, and the params key it must equal.
NAME_BEARING: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "resources/read": "uri",
    "prompts/get": "name",
}

# A value that would not survive an HTTP field is sent as `=?base64?<payload>?=` (the official
# SDK's codec): non-ASCII, control characters, edge whitespace.
_BASE64_SENTINEL: Final = re.compile(r"=\?base64\?(?P<payload>.*)\?=")


def notification_error(message: dict[str, Any]) -> ProtocolError | None:
    """Why an id-less object is not a JSON-RPC notification, or None if it is one.

    A well-formed notification is accepted and never answered; anything else without an id
    is an invalid request, answered with `id: null` (JSON-RPC 2.0 section 5).
    """
    if message.get("jsonrpc") != "2.0":
        return ProtocolError(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 object")
    if not isinstance(message.get("method"), str):
        return ProtocolError(INVALID_REQUEST, "Invalid Request: method must be a string")
    if not isinstance(message.get("params", {}), dict):
        return ProtocolError(INVALID_REQUEST, "Invalid Request: params must be an object")
    return None


def decode_header_value(value: str) -> str | None:
    """A header value as sent, unwrapping the base64 sentinel; None if the sentinel is corrupt."""
    match = _BASE64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        raw = base64.b64decode(payload, validate=True)
        if base64.b64encode(raw).decode("ascii") != payload:
            return None  # non-canonical base64 could smuggle two spellings of one value
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def header_mismatch(message: Any, headers: Iterable[tuple[str, str]]) -> ProtocolError | None:
    """-32020 when the routing headers of a request disagree with its body, else None.

    `headers` are (lower-case name, value) pairs as received. The check runs only on a request
    whose envelope and `_meta` the core would accept far enough to read a string version, so
    the core keeps answering what it owns: -32600 for a broken envelope, -32601 for an unknown
    method without `_meta` (a legacy `initialize`), -32602 for a missing or non-string
    `_meta` version or missing capabilities. It runs before the version is judged, so a
    header that disagrees with the body is reported as such, while a header and body that
    agree on an unsupported version get the core's -32022 with its data (PROTOCOL.md).
    """
    if not _checkable(message):
        return None
    seen: dict[str, str] = {}
    for name, value in headers:
        if name in ROUTING_HEADERS:
            if name in seen:
                # First-copy and last-copy readers would disagree about what was asked.
                return _mismatch(f"{name} header appears more than once")
            seen[name] = value
    method: str = message["method"]
    params: dict[str, Any] = message.get("params", {})
    if seen.get(PROTOCOL_VERSION_HEADER) != params["_meta"][META_VERSION]:
        return _mismatch(
            "MCP-Protocol-Version header is missing or does not match "
            f"params._meta[{META_VERSION!r}]"
        )
    if seen.get(METHOD_HEADER) != method:
        return _mismatch("Mcp-Method header is missing or does not match the method")
    key = NAME_BEARING.get(method)
    if key is not None and isinstance(params.get(key), str):
        sent = seen.get(NAME_HEADER)
        if sent is None or decode_header_value(sent) != params[key]:
            return _mismatch(f"Mcp-Name header is missing or does not match params.{key}")
    return None


def _checkable(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if not is_request_id(message.get("id")) or not isinstance(message.get("method"), str):
        return False
    params = message.get("params", {})
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    return (
        isinstance(meta, dict)
        and isinstance(meta.get(META_VERSION), str)
        and META_CAPABILITIES in meta
    )


def _mismatch(reason: str) -> ProtocolError:
    return ProtocolError(HEADER_MISMATCH, f"Header mismatch: {reason}")
