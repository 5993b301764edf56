"""JSON-RPC and MCP error codes, and the one exception handlers raise.

Owns: the error code table, the code -> HTTP status table, `ProtocolError` (the one type of a
JSON-RPC error, on either side).
Imports nothing from labkit: everything else sits above this module.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Reserved for the specification (docs/protocol.md): -32020..-32099. labkit invents none there.
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022
# Implementation-defined range -32000..-32019.
SERVER_BUSY = -32001

# Streamable HTTP status per error code (docs/protocol.md, "Streamable HTTP at 2026-07-28").
HTTP_STATUS: dict[int, int] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    METHOD_NOT_FOUND: 404,
    INVALID_PARAMS: 400,
    INTERNAL_ERROR: 500,
    HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
    SERVER_BUSY: 503,
}


def http_status(code: int) -> int:
    return HTTP_STATUS.get(code, 500)


class ProtocolError(Exception):
    """A JSON-RPC error: `code`, `message` and `data` as on the wire. A handler raises it for
    a peer-caused failure, which becomes the error object in exactly one place; the client
    raises its subclass `labkit.client.McpError` for an error a server answered. JSON-RPC
    makes the code an integer and the message a string: anything else is refused here, where
    it is made, rather than sent as an error object no peer can read."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        if not isinstance(code, int) or isinstance(code, bool):
            raise TypeError(f"a JSON-RPC error code is an int, not {type(code).__name__}")
        if not isinstance(message, str):
            raise TypeError(f"a JSON-RPC error message is a str, not {type(message).__name__}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"ProtocolError({self.code}, {self.message!r}, data={self.data!r})"

    def to_wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error
