"""What the HTTP transport checks before the core sees a message: the Streamable HTTP routing
headers against the body, and the header value codec.

Pure module: no I/O. Every check returns a `ProtocolError` value (or None); the transport
decides how to frame it. The JSON-RPC envelope rules (what a notification is, the -32600
answers) belong to the core (`labkit.wire.request_parts`, applied by `Server.respond`): this
module reuses them and repeats none. Imports only `labkit.errors` and `labkit.wire`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any, Final

from labkit.errors import HEADER_MISMATCH, ProtocolError
from labkit.wire import META_CAPABILITIES, META_VERSION, request_parts

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


def encode_header_value(value: str) -> str:
    """`value` as a client sends it in `Mcp-Name`: as is when it survives an HTTP field
    (printable ASCII, no edge whitespace), else wrapped in the base64 sentinel."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def header_mismatch(
    message: Any, headers: Mapping[str, str], repeated: str | None = None
) -> ProtocolError | None:
    """-32020 when the routing headers of a request disagree with its body, else None.

    `headers` maps lower-case header names to the value received (the last copy);
    `repeated` names a routing header that came more than once. The check runs only on a request
    whose envelope and `_meta` the core would accept far enough to read a string version, so
    the core keeps answering what it owns: -32600 for a broken envelope, -32601 for an unknown
    method without `_meta` (a legacy `initialize`), -32602 for a missing or non-string
    `_meta` version or missing capabilities. It runs before the version is judged, so a
    header that disagrees with the body is reported as such, while a header and body that
    agree on an unsupported version get the core's -32022 with its data (docs/protocol.md).
    """
    try:  # what a checkable request holds (a request without them is not checkable)
        method, params = message["method"], message["params"]
        version = params["_meta"][META_VERSION]
    except (TypeError, KeyError):
        return None
    # Headers that agree with the body are no mismatch, whatever else the body holds: the
    # body's full check runs only when they disagree (the usual request is read, not checked).
    seen = headers
    reason: str | None = None
    if repeated is not None:
        # First-copy and last-copy readers would disagree about what was asked.
        reason = f"{repeated} header appears more than once"
    elif seen.get(PROTOCOL_VERSION_HEADER) != version:
        reason = (
            "MCP-Protocol-Version header is missing or does not match "
            f"params._meta[{META_VERSION!r}]"
        )
    if reason is None and seen.get(METHOD_HEADER) != method:
        reason = "Mcp-Method header is missing or does not match the method"
    key = NAME_BEARING.get(method) if reason is None else None  # here a string: a header's
    if key is not None and isinstance(params.get(key), str):
        sent = seen.get(NAME_HEADER)
        if sent is None or decode_header_value(sent) != params[key]:
            reason = f"Mcp-Name header is missing or does not match params.{key}"
    if reason is None or not _checkable(message):
        return None
    return ProtocolError(HEADER_MISMATCH, f"Header mismatch: {reason}")


def _checkable(message: Any) -> bool:
    # Exact types first: the usual request costs no call past the envelope's.
    try:
        request_id, _, params = request_parts(message)
    except ProtocolError:
        return False
    if request_id is None:  # a notification
        return False
    meta = params.get("_meta")
    if type(meta) is not dict and not isinstance(meta, dict):
        return False
    version = meta.get(META_VERSION)
    return (type(version) is str or isinstance(version, str)) and META_CAPABILITIES in meta
