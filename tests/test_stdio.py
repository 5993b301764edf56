"""stdio: newline-delimited JSON-RPC, in process over byte streams and as a real process.

Covers the framing the official SDK client never exercises: lines that are not JSON, id-less
objects, blank and oversize lines, a last line without a newline, a stop arriving during a
read, and `labkit serve` exiting cleanly on EOF, SIGINT and SIGTERM with stdout carrying
protocol messages only.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from typing import Any

import pytest
from helpers import (
    CANCEL,
    MISSING,
    Lab,
    accept,
    build_lab,
    call_message,
    check_wire,
    request,
)

from labkit.transports.stdio import StdioTransport


@pytest.fixture
def lab() -> Lab:
    return build_lab()


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def exchange(lab: Lab, data: bytes, **kwargs: Any) -> list[dict[str, Any]]:
    """Feed `data` to a transport acting for alice; the parsed output lines."""
    out = io.BytesIO()
    StdioTransport(lab.server, "alice", **kwargs).serve(io.BytesIO(data), out)
    text = out.getvalue()
    assert text == b"" or text.endswith(b"\n")
    return [json.loads(chunk) for chunk in text.splitlines()]


# -- framing, in process -------------------------------------------------------------------------


def test_each_request_line_gets_one_response_line_in_order(lab: Lab) -> None:
    messages = [request(1, "server/discover"), request("two", "tools/list")]
    responses = exchange(lab, b"".join(line(m) for m in messages))
    assert [r["id"] for r in responses] == [1, "two"]
    for message, response in zip(messages, responses, strict=True):
        check_wire(message, response)


def test_a_line_that_is_not_json_is_parse_error_with_null_id(lab: Lab) -> None:
    (response,) = exchange(lab, b'{"jsonrpc": "2.0", "id": 1\n')
    assert response["id"] is None
    assert response["error"]["code"] == -32700
    check_wire("not json", response)


def test_invalid_utf8_is_parse_error(lab: Lab) -> None:
    (response,) = exchange(lab, b'{"jsonrpc": "2.0", "id": "\xff"}\n')
    assert response["error"]["code"] == -32700


def test_notifications_produce_no_output(lab: Lab) -> None:
    cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    data = line(cancelled) + line(request(MISSING, "tools/list")) + line(request(3, "tools/list"))
    responses = exchange(lab, data)
    assert [r["id"] for r in responses] == [3]


def test_a_notification_never_deletes(lab: Lab) -> None:
    (ask,) = exchange(lab, line(call_message(1)))
    state = ask["result"]["requestState"]
    sneaky = call_message(MISSING, state=state, responses=accept("note-14"))
    assert exchange(lab, line(sneaky)) == []
    assert "note-14" in lab.ids()


@pytest.mark.parametrize(
    "message",
    [{"foo": "bar"}, {"jsonrpc": "2.0", "method": 7}, [request(1, "tools/list")], "text", 5],
    ids=["no-method", "method-not-string", "batch", "string", "number"],
)
def test_a_message_that_is_no_request_is_invalid_request(lab: Lab, message: Any) -> None:
    (response,) = exchange(lab, line(message))
    assert response["error"]["code"] == -32600
    assert response["id"] is None


def test_blank_lines_are_skipped_and_the_last_line_needs_no_newline(lab: Lab) -> None:
    data = b"\n   \n\r\n" + json.dumps(request(9, "tools/list")).encode()
    responses = exchange(lab, data)
    assert [r["id"] for r in responses] == [9]


def test_an_oversize_line_is_refused_and_the_next_line_is_served(lab: Lab) -> None:
    big = line(request(1, "tools/list", {"padding": "x" * 5000}))
    responses = exchange(lab, big + line(request(2, "tools/list")), max_line_bytes=1024)
    assert responses[0]["error"]["code"] == -32600 and responses[0]["id"] is None
    assert responses[1]["id"] == 2 and "result" in responses[1]
    assert len(responses) == 2


def test_the_stdio_principal_is_the_configured_one(lab: Lab) -> None:
    alice = exchange(lab, line(call_message(1)))
    assert alice[0]["result"]["resultType"] == "input_required"
    out = io.BytesIO()
    StdioTransport(lab.server, "mallory").serve(io.BytesIO(line(call_message(1))), out)
    (refused,) = [json.loads(chunk) for chunk in out.getvalue().splitlines()]
    assert refused["error"]["code"] == -32602


def test_full_delete_flow_in_process(lab: Lab) -> None:
    (ask,) = exchange(lab, line(call_message(1)))
    retry = call_message(2, state=ask["result"]["requestState"], responses=accept("note-14"))
    (done,) = exchange(lab, line(retry))
    assert done["result"]["structuredContent"]["status"] == "deleted"
    assert "note-14" not in lab.ids()


class StopDuringRead(io.BytesIO):
    """A stream whose second read is interrupted the way a signal handler would do it."""

    def __init__(self, transport: StdioTransport, data: bytes) -> None:
        super().__init__(data)
        self.transport = transport
        self.reads = 0

    def readline(self, size: int | None = -1) -> bytes:
        self.reads += 1
        if self.reads == 2:
            self.transport.stop()  # raises out of the read, as from a signal handler
        return super().readline(size)


def test_stop_during_a_read_ends_the_loop_after_the_answer_already_written(lab: Lab) -> None:
    transport = StdioTransport(lab.server, "alice")
    stream = StopDuringRead(transport, line(request(1, "tools/list")) + line(request(2, "x")))
    out = io.BytesIO()
    transport.serve(stream, out)
    assert [json.loads(chunk)["id"] for chunk in out.getvalue().splitlines()] == [1]
    assert stream.reads == 2


def test_a_closed_output_ends_the_loop(lab: Lab) -> None:
    out = io.BytesIO()
    out.close()
    source = io.BytesIO(line(request(1, "tools/list")) + line(request(2, "tools/list")))
    StdioTransport(lab.server, "alice").serve(source, out)
    assert source.tell() < len(source.getvalue()), "it stopped after the first failed write"


# -- `labkit serve` as a process ----------------------------------------------------------------


def spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "labkit.cli", "serve", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def roundtrip(proc: subprocess.Popen[bytes], message: Any) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line(message))
    proc.stdin.flush()
    response: dict[str, Any] = json.loads(proc.stdout.readline())
    return response


def test_serve_stdio_demo_full_session_then_clean_exit_on_eof() -> None:
    proc = spawn()
    out, err = b"", b""
    try:
        discover = roundtrip(proc, request(1, "server/discover"))
        assert discover["result"]["supportedVersions"] == ["2026-07-28"]
        tools = roundtrip(proc, request(2, "tools/list"))
        assert [t["name"] for t in tools["result"]["tools"]] == ["notes_delete"]
        assert proc.stdin is not None
        proc.stdin.write(b"this is not json\n")
        proc.stdin.write(line({"jsonrpc": "2.0", "method": "notifications/cancelled"}))
        parse_error = roundtrip(proc, request(3, "tools/list"))  # the notification is silent
        assert parse_error["error"]["code"] == -32700 and parse_error["id"] is None
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["id"] == 3
        ask = roundtrip(proc, call_message(4))
        state = ask["result"]["requestState"]
        cancel = roundtrip(proc, call_message(5, state=state, responses=CANCEL))
        assert cancel["result"]["structuredContent"]["status"] == "cancelled"
        done = roundtrip(proc, call_message(6, state=state, responses=accept("note-14")))
        assert done["result"]["structuredContent"]["status"] == "deleted"
        again = roundtrip(
            proc, call_message(7, arguments={**ask_args(), "title": "TPS report 2025"})
        )
        assert again["result"]["structuredContent"]["status"] == "no_match"
        out, err = proc.communicate(timeout=30)  # closes stdin: EOF
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert out == b"", "nothing but responses on stdout"
    assert b"demo deployment" in err
    assert b"as principal 'alice'" in err


def ask_args() -> dict[str, str]:
    return dict(call_message(0)["params"]["arguments"])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stdio_exits_cleanly_on_a_signal_while_waiting(signum: signal.Signals) -> None:
    proc = spawn()
    try:
        # An answered request proves the loop is up and now blocked reading the next line.
        assert roundtrip(proc, request(1, "tools/list"))["id"] == 1
        proc.send_signal(signum)
        proc.wait(timeout=30)  # stdin stays open: the signal alone must end it
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == b""
    assert b"Traceback" not in err
