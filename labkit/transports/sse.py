"""Server-Sent Events framing for Streamable HTTP response streams.

Owns: the `text/event-stream` response headers and the encoding of one JSON-RPC message as one
SSE event. Pure module: bytes out, no I/O. Both eras use it: a 2026-07-28 request answered with
progress notifications before its result, and a 2025-11-25 session call that carries
server-to-client requests before its result (docs/protocol.md, "Streamable HTTP").
Must not import the course toolkit or the grader.
"""

from __future__ import annotations

from typing import Any, Final

from labkit.wire import encode

SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-store"),
    # Reverse proxies (nginx) buffer responses unless told not to; a stream must flow.
    (b"x-accel-buffering", b"no"),
]


def event(message: Any, event_id: str | None = None) -> bytes:
    """One SSE `message` event carrying one JSON-RPC object. JSON text has no raw newline
    (the encoder escapes them inside strings), so one `data:` line always suffices."""
    head = b"" if event_id is None else b"id: " + event_id.encode("ascii") + b"\n"
    return head + b"event: message\ndata: " + encode(message) + b"\n\n"


def wants_event_stream(accept: str | None) -> bool:
    """True when the client's `Accept` lists `text/event-stream` (case-insensitive)."""
    if accept is None:
        return False
    return any(
        part.split(";", 1)[0].strip().lower() == "text/event-stream" for part in accept.split(",")
    )
