"""Wire-level facts of MCP 2026-07-28 and JSON-RPC 2.0 framing helpers.

Owns: protocol constants, `_meta` key names, JSON decoding for transports (-32700), the
JSON-RPC envelope rules (-32600, and what a notification is), and the response envelopes.
Pure module: bytes or objects in, objects out. Imports only `labkit.errors`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import orjson

from labkit.errors import INVALID_REQUEST, PARSE_ERROR, ProtocolError

PROTOCOL_VERSION: Final = "2026-07-28"
LEGACY_PROTOCOL_VERSION: Final = "2025-11-25"

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
# The least severe `notifications/message` level a request wants (2026-07-28; a 2025-11-25
# session sets it once with `logging/setLevel`).
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
# RFC 5424 severities, least severe first (the order of MCP's LoggingLevel).
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

RequestId = str | int


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# The stdlib coders, built once (`json.loads`/`json.dumps` with options build a new coder on
# every call). orjson does the common case; these take what it refuses but JSON allows.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"))


# orjson reads an integer outside [-2**63, 2**64) as a float, so an id of 2**70 would come back
# rounded and no longer an integer. Every such integer has at least 19 digits: a text holding a
# run of 19 digits goes to the stdlib decoder, which keeps integers exact at any size.
# For bytes, every digit is mapped to b"0" and every other byte to a space, then the run is a
# substring search: two C passes, several times cheaper than the regular expression.
_DIGITS_ONLY: Final = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN: Final = b"0" * 19
_LONG_DIGITS_TEXT: Final = re.compile(r"[0-9]{19}")


def decode(raw: bytes | str) -> Any:
    """Parse one JSON text, or raise ProtocolError(-32700). NaN and Infinity are not JSON.
    Integers come back exact whatever their size."""
    if type(raw) is bytes:
        exact_only = _LONG_RUN in raw.translate(_DIGITS_ONLY)
    elif isinstance(raw, str):
        exact_only = _LONG_DIGITS_TEXT.search(raw) is not None
    else:
        exact_only = _LONG_RUN in raw.translate(_DIGITS_ONLY)
    if not exact_only:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # lone surrogate escapes, UTF-16 or UTF-32 text
    try:
        if not isinstance(raw, str):
            # What json.loads does with bytes: UTF-8, -16 or -32, by the first bytes.
            raw = raw.decode(json.detect_encoding(raw), "surrogatepass")
        return _DECODER.decode(raw)
    except (ValueError, RecursionError):
        raise ProtocolError(PARSE_ERROR, "Parse error: the body is not valid JSON") from None


def encode(message: Any) -> bytes:
    try:
        return orjson.dumps(message)
    except TypeError:
        # A peer may send `\ud800` escapes (legal JSON, not Unicode) or integers past 64 bits
        # that an answer echoes, in an id or a method name: escape them back as ASCII JSON
        # rather than fail in the transport.
        return _ASCII_ENCODER.encode(message).encode("ascii")


def is_request_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


# The -32600 messages, one per envelope rule: the core and the transports answer with these.
NOT_JSON_RPC: Final = "Invalid Request: not a JSON-RPC 2.0 object"
BAD_ID: Final = "Invalid Request: id must be a string or integer"
BAD_METHOD: Final = "Invalid Request: method must be a string"
BAD_PARAMS: Final = "Invalid Request: params must be an object"


def envelope_error(message: Any) -> ProtocolError | None:
    """Why `message` is not a JSON-RPC 2.0 request or notification (-32600), or None.

    An object without an `id` member that passes is a notification: never answered and never
    dispatched. One that fails is no notification but an invalid request, answered with
    `id: null` (JSON-RPC 2.0 section 5).
    """
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return ProtocolError(INVALID_REQUEST, NOT_JSON_RPC)
    if "id" in message and not is_request_id(message["id"]):
        return ProtocolError(INVALID_REQUEST, BAD_ID)
    if not isinstance(message.get("method"), str):
        return ProtocolError(INVALID_REQUEST, BAD_METHOD)
    if not isinstance(message.get("params", {}), dict):
        return ProtocolError(INVALID_REQUEST, BAD_PARAMS)
    return None


def result_response(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: RequestId | None, error: ProtocolError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()}


def parse_error_response() -> dict[str, Any]:
    """What a transport answers to text that is not JSON: -32700 with `id: null`."""
    return error_response(
        None, ProtocolError(PARSE_ERROR, "Parse error: the body is not valid JSON")
    )
