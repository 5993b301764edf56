"""Wire-level facts of MCP 2026-07-28 and JSON-RPC 2.0 framing helpers.

Owns: protocol constants, `_meta` key names, JSON decoding for transports (-32700), the
JSON-RPC envelope rules (-32600, and what a notification is), and the response envelopes, as
objects (`result_response`, `error_response`) and as the byte templates around a result
encoded once (`encoded_result_response`), with `error_code` reading an encoded response's code
back for a transport's status. Pure module: bytes or objects in, bytes or objects out.
Imports only `labkit.errors`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

import msgspec
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


# One rule for every JSON text a transport receives, whichever parser reads it:
# - UTF-8 only (RFC 8259 section 8.1): UTF-16 or UTF-32 text, invalid UTF-8 (an encoded
#   surrogate, a stray byte) and a byte order mark are -32700;
# - nesting at most MAX_JSON_DEPTH arrays and objects deep;
# - numbers finite (a float past the double range such as 1e400 is refused, NaN and Infinity
#   are not JSON) and integers exact at any size up to Python's 4,300-digit limit;
# - `\ud800` escapes (legal JSON, not Unicode) are kept.
# msgspec reads the common case, integers past 64 bits included; the standard library, held to
# the same rule, reads what msgspec refuses: lone surrogate escapes and integers past msgspec's
# range, and it refuses the rest. msgspec answers only what the rule accepts, with the value
# the standard library gives (tests/test_wire.py holds the two together). Both parsers count
# nesting against Python's recursion limit, so their recursion stops near 1,000 levels minus
# the caller's stack: the depth limit sits below it (with room for a deep caller). A text
# shorter than twice the limit cannot reach it: the usual request (a retry with its state is
# about 1 KB) is never walked or even counted again.
MAX_JSON_DEPTH: Final = 768

PARSE_ERROR_MESSAGE: Final = "Parse error: the body is not valid JSON"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError("number out of range")
    return value


# The coders, built once (`json.loads`/`json.dumps` with options build a new coder on every
# call).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"))
_read = msgspec.json.Decoder().decode

# Each level of nesting takes two characters: a shorter text cannot nest past the limit.
_SHALLOW_BELOW: Final = 2 * MAX_JSON_DEPTH + 1


def decode(raw: bytes | str) -> Any:
    """Parse one JSON text under the rule above, or raise ProtocolError(-32700)."""
    if type(raw) is not bytes:
        try:
            raw = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
        except UnicodeEncodeError:  # a lone surrogate character: not text
            raise ProtocolError(PARSE_ERROR, PARSE_ERROR_MESSAGE) from None
    try:
        try:
            value = _read(raw)
        except (ValueError, RecursionError):  # the standard library says, under the rule
            value = _decode_exact(raw)
        # Fewer openers than the limit cannot nest past it: only the rare rest is walked.
        if len(raw) >= _SHALLOW_BELOW and raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH:
            _check_depth(value)
        return value
    except (ValueError, RecursionError):
        raise ProtocolError(PARSE_ERROR, PARSE_ERROR_MESSAGE) from None


def _decode_exact(raw: bytes) -> Any:
    return _DECODER.decode(raw.decode("utf-8"))  # strict: no UTF-16/32, no encoded surrogate


def _check_depth(value: Any) -> None:
    """Raise ValueError if arrays and objects nest more than MAX_JSON_DEPTH deep in
    `value` (walked iteratively)."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError("nested too deep")
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


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
# What an absent `params` is checked as (only its type is read).
_NO_PARAMS: Final[dict[str, Any]] = {}


def request_parts(message: Any) -> tuple[RequestId | None, str, dict[str, Any]]:
    """The id, method and params of a JSON-RPC 2.0 request or notification, read once; raises
    the -32600 refusal naming the rule `message` breaks.

    The id is None when absent: a notification, never answered and never dispatched (a null
    id is refused). The params are an empty object when absent. An object without an `id`
    member that fails is no notification but an invalid request, answered with `id: null`
    (JSON-RPC 2.0 section 5).
    """
    # Exact types are tested first: the usual request costs no call but its lookups.
    if type(message) is not dict and not isinstance(message, dict):
        raise ProtocolError(INVALID_REQUEST, NOT_JSON_RPC)
    if message.get("jsonrpc") != "2.0":
        raise ProtocolError(INVALID_REQUEST, NOT_JSON_RPC)
    request_id = message.get("id")
    kind = type(request_id)
    # An absent id makes a notification; a null one is no valid id.
    bad_id = kind is not int and kind is not str and not is_request_id(request_id)
    if bad_id and (request_id is not None or "id" in message):
        raise ProtocolError(INVALID_REQUEST, BAD_ID)
    method = message.get("method")
    if type(method) is not str and not isinstance(method, str):
        raise ProtocolError(INVALID_REQUEST, BAD_METHOD)
    params = message.get("params", _NO_PARAMS)
    if type(params) is not dict and not isinstance(params, dict):
        raise ProtocolError(INVALID_REQUEST, BAD_PARAMS)
    return request_id, method, params


def result_response(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: RequestId | None, error: ProtocolError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()}


# A response's bytes around its id and member, as `encode` writes `result_response` and
# `error_response` (orjson keeps the members in insertion order, without spaces).
_RESPONSE_HEAD: Final = b'{"jsonrpc":"2.0","id":'
_RESULT_MEMBER: Final = b',"result":'
# Where an encoded error response says its code.
_ERROR_MEMBER: Final = b',"error":{"code":'
_AFTER_HEAD: Final = len(_RESPONSE_HEAD)


def encoded_result_response(request_id: RequestId, result: bytes) -> bytes:
    """The bytes of `result_response(request_id, result)` for a result already encoded (as
    `encode` writes it): joined around the id, never parsed. An integer id of any size is its
    digits, what both of `encode`'s encoders write; any other id is encoded as `encode` does."""
    encoded_id = b"%d" % request_id if type(request_id) is int else encode(request_id)
    return b"".join((_RESPONSE_HEAD, encoded_id, _RESULT_MEMBER, result, b"}"))


def error_code(response: bytes) -> int | None:
    """The JSON-RPC error code of an encoded response (what an HTTP status is chosen by), or
    None for a result. The member after the id says which it is, found without reading the
    result: the first `,"` past the head. A string id holds that pair only as its last
    character and closing quote (its other quotes are escaped), followed by `,"`, never by
    `result":`; so `,"result":` there is a result's member, and anything else (an error, or
    such an id) is parsed."""
    member = response.find(b',"', _AFTER_HEAD)
    if response.startswith(_RESULT_MEMBER, member):
        return None
    try:
        parsed = decode(response)
    except ProtocolError:  # deeper than a request may be: no error response of ours is
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return error["code"] if isinstance(error, dict) else None


def parse_error_response() -> dict[str, Any]:
    """What a transport answers to text that is not JSON: -32700 with `id: null`."""
    return error_response(None, ProtocolError(PARSE_ERROR, PARSE_ERROR_MESSAGE))
