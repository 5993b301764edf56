"""SSE framing: one JSON-RPC object per event, parseable back."""

from __future__ import annotations

import json

from labkit.transports.sse import event, wants_event_stream


def test_event_carries_one_json_object_on_one_data_line() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"text": "two\nlines"}}
    raw = event(message, event_id="7")
    assert raw.endswith(b"\n\n")
    lines = raw.decode().split("\n")
    assert lines[0] == "id: 7"
    assert lines[1] == "event: message"
    assert json.loads(lines[2].removeprefix("data: ")) == message
    assert b"id:" not in event(message)


def test_wants_event_stream_reads_accept_lists() -> None:
    assert wants_event_stream("application/json, text/event-stream")
    assert wants_event_stream("TEXT/EVENT-STREAM;q=0.5")
    assert not wants_event_stream("application/json")
    assert not wants_event_stream(None)
