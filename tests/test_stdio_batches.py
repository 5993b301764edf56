"""stdio over a real pipe: the loop that reads whatever has arrived and writes its answers
together (`StdioTransport.serve` with a buffered pipe, as `labkit serve` has).

The same framing as line by line (tests/test_stdio.py): one answer per request line, in order;
blank lines and notifications silent; a last line without a newline served; an oversize line
refused (its tail dropped, however many reads it spans) and the next one served. And what
batching must not change: answers owed are written before a call that may change something
runs, so a closed output stops the loop before a deletion; a stop during a read ends the loop.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from helpers import Lab, accept, build_lab, call_message, request

from labkit.transports.stdio import StdioTransport


@pytest.fixture
def lab() -> Lab:
    return build_lab()


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


@contextmanager
def pipe_reader(chunks: list[bytes]) -> Iterator[io.BufferedReader]:
    """A buffered reader over a pipe that a thread fills with `chunks`, one write each, then
    closes."""
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with open(write_fd, "wb", buffering=0) as writer:
            for chunk in chunks:
                writer.write(chunk)

    feeder = threading.Thread(target=feed)
    feeder.start()
    with open(read_fd, "rb") as reader:
        assert type(reader) is io.BufferedReader
        yield reader
    feeder.join(timeout=30)
    assert not feeder.is_alive()


def exchange(lab: Lab, chunks: list[bytes], **kwargs: Any) -> list[dict[str, Any]]:
    out = io.BytesIO()
    with pipe_reader(chunks) as reader:
        StdioTransport(lab.server, "alice", **kwargs).serve(reader, out)
    text = out.getvalue()
    assert text == b"" or text.endswith(b"\n")
    return [json.loads(chunk) for chunk in text.splitlines()]


def test_many_lines_in_one_write_get_their_answers_in_order(lab: Lab) -> None:
    messages = [request(i, "tools/list" if i % 2 else "server/discover") for i in range(40)]
    responses = exchange(lab, [b"".join(line(m) for m in messages)])
    assert [r["id"] for r in responses] == list(range(40))
    assert all("result" in r for r in responses)


def test_lines_split_across_writes_are_joined(lab: Lab) -> None:
    data = line(request(1, "tools/list")) + line(request(2, "server/discover"))
    pieces = [data[i : i + 7] for i in range(0, len(data), 7)]
    assert [r["id"] for r in exchange(lab, pieces)] == [1, 2]


def test_blank_lines_notifications_and_bad_json_as_line_by_line(lab: Lab) -> None:
    data = (
        b"\n  \n\r\n"
        + line({"jsonrpc": "2.0", "method": "notifications/initialized"})
        + b"{not json\n"
        + json.dumps(request(9, "tools/list")).encode()  # the last line: no newline
    )
    responses = exchange(lab, [data])
    assert responses[0] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: the body is not valid JSON"},
    }
    assert responses[1]["id"] == 9 and "result" in responses[1]
    assert len(responses) == 2


@pytest.mark.parametrize("size", [1025, 5000, 300_000])
def test_an_oversize_line_is_refused_and_the_next_line_is_served(lab: Lab, size: int) -> None:
    big = line(request(1, "tools/list", {"padding": "x" * size}))
    data = big + line(request(2, "tools/list"))
    pieces = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    responses = exchange(lab, pieces, max_line_bytes=1024)
    assert responses[0]["error"]["code"] == -32600 and responses[0]["id"] is None
    assert responses[1]["id"] == 2 and "result" in responses[1]
    assert len(responses) == 2


def test_an_oversize_last_line_without_newline_is_refused(lab: Lab) -> None:
    data = line(request(1, "tools/list")) + b'{"padding": "' + b"x" * 5000
    responses = exchange(lab, [data], max_line_bytes=1024)
    assert responses[0]["id"] == 1
    assert responses[1]["error"]["code"] == -32600
    assert len(responses) == 2


def test_a_line_exactly_at_the_limit_is_served(lab: Lab) -> None:
    message = json.dumps(request(1, "tools/list")).encode()
    responses = exchange(lab, [message + b"\n"], max_line_bytes=len(message))
    assert responses[0]["id"] == 1 and "result" in responses[0]
    responses = exchange(lab, [message + b"\n"], max_line_bytes=len(message) - 1)
    assert responses[0]["error"]["code"] == -32600


def test_the_delete_flow_over_a_pipe(lab: Lab) -> None:
    (ask,) = exchange(lab, [line(call_message(1))])
    retry = call_message(2, state=ask["result"]["requestState"], responses=accept("note-14"))
    listing = request(3, "tools/list")
    responses = exchange(lab, [line(retry) + line(listing)])
    assert responses[0]["result"]["structuredContent"]["status"] == "deleted"
    assert responses[1]["id"] == 3
    assert "note-14" not in lab.ids()


class _ClosedAfter(io.RawIOBase):
    """An output that takes `ok` writes, then fails as a closed pipe does."""

    def __init__(self, ok: int) -> None:
        self.ok = ok
        self.data = b""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.ok <= 0:
            raise BrokenPipeError
        self.ok -= 1
        self.data += bytes(data)
        return len(data)


def test_a_closed_output_stops_the_loop_before_a_call_runs(lab: Lab) -> None:
    """Listings answered in one batch, then a deletion: the listings' answers cannot be
    written, so the deletion never runs."""
    (ask,) = exchange(lab, [line(call_message(1))])
    retry = call_message(2, state=ask["result"]["requestState"], responses=accept("note-14"))
    data = line(request(3, "tools/list")) + line(request(4, "tools/list")) + line(retry)
    out = _ClosedAfter(0)
    with pipe_reader([data]) as reader:
        StdioTransport(lab.server, "alice").serve(reader, out)  # type: ignore[arg-type]
    assert out.data == b""
    assert "note-14" in lab.ids()


def test_answers_owed_are_written_before_a_call_runs(lab: Lab) -> None:
    data = line(request(3, "tools/list")) + line(call_message(5))
    out = _ClosedAfter(1)  # the listing's write succeeds; the call's answer cannot go out
    with pipe_reader([data]) as reader:
        StdioTransport(lab.server, "alice").serve(reader, out)  # type: ignore[arg-type]
    (listing,) = [json.loads(chunk) for chunk in out.data.splitlines()]
    assert listing["id"] == 3


def test_a_stop_during_a_read_ends_the_loop_after_the_answers_written(lab: Lab) -> None:
    transport = StdioTransport(lab.server, "alice")
    read_fd, write_fd = os.pipe()
    out = io.BytesIO()
    with open(read_fd, "rb") as reader, open(write_fd, "wb", buffering=0) as writer:
        writer.write(line(request(1, "tools/list")))

        reads = 0
        original = reader.read1

        def read1(size: int = -1) -> bytes:
            nonlocal reads
            reads += 1
            if reads == 2:
                transport.stop()  # raises out of the read, as from a signal handler
            return original(size)

        reader.read1 = read1  # type: ignore[method-assign]
        transport.serve(reader, out)
    assert [json.loads(chunk)["id"] for chunk in out.getvalue().splitlines()] == [1]
    assert reads == 2
