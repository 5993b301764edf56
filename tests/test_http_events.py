"""Streamable HTTP with notifications: a handler's progress travels as SSE events on the POST's
own response, before the result, when the client accepts `text/event-stream`; and
`labkit serve --profile conformance` as a process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers import KEY_A, check_wire, request
from test_http import post, routing_headers, serving

from labkit.conformance import AnonymousAuthenticator, conformance_server
from labkit.server import Request, Server
from labkit.state import KeyRing
from labkit.transports.http import create_app

BOTH = "application/json, text/event-stream"


@pytest.fixture
def url() -> Iterator[str]:
    server = conformance_server(keys=KeyRing([KEY_A]))
    with serving(create_app(server, AnonymousAuthenticator())) as endpoint:
        yield endpoint


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def progress_call(token: Any = "p-1") -> dict[str, Any]:
    message = request(5, "tools/call", {"name": "test_tool_with_progress", "arguments": {}})
    if token is not None:
        message["params"]["_meta"]["progressToken"] = token
    return message


def events(body: str) -> list[dict[str, Any]]:
    """The JSON payloads of an SSE body, checking each event's framing."""
    payloads = []
    for block in body.split("\n\n"):
        if not block:
            continue
        lines = block.split("\n")
        assert lines[0] == "event: message" and lines[1].startswith("data: "), block
        assert len(lines) == 2, block
        payloads.append(json.loads(lines[1][len("data: ") :]))
    assert body.endswith("\n\n")
    return payloads


def test_progress_travels_as_events_before_the_result(http: httpx.Client, url: str) -> None:
    message = progress_call()
    response = post(http, url, message, auth={}, headers={"accept": BOTH})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    frames = events(response.text)
    assert [frame.get("method") for frame in frames] == [
        "notifications/progress",
        "notifications/progress",
        "notifications/progress",
        None,
    ]
    assert [frame["params"]["progress"] for frame in frames[:3]] == [0, 50, 100]
    assert all(frame["params"]["progressToken"] == "p-1" for frame in frames[:3])
    check_wire(message, frames[3])
    assert frames[3]["id"] == 5 and frames[3]["result"]["resultType"] == "complete"


@pytest.mark.parametrize("accept", [None, "application/json", "*/*"])
def test_a_client_without_event_streams_gets_json_and_no_notifications(
    http: httpx.Client, url: str, accept: str | None
) -> None:
    headers = {} if accept is None else {"accept": accept}
    response = post(http, url, progress_call(), auth={}, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["resultType"] == "complete"


def test_a_call_that_sends_nothing_is_answered_with_json(http: httpx.Client, url: str) -> None:
    for message, status in [
        (progress_call(token=None), 200),
        (request(6, "resources/read", {"uri": "test://nope"}), 400),
    ]:
        response = post(http, url, message, auth={}, headers={"accept": BOTH})
        assert response.status_code == status
        assert response.headers["content-type"] == "application/json"
        check_wire(message, response.json())


def labkit_serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labkit.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("--transport", "http", "--host", "0.0.0.0"), "--host: "),
        (("--transport", "http", "--config", "labkit.toml"), "--profile: "),
    ],
)
def test_serve_conformance_profile_refuses_public_addresses_and_configs(
    args: tuple[str, ...], problem: str
) -> None:
    proc = labkit_serve("--profile", "conformance", *args)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("labkit serve: ") and problem in last, last


def test_serve_conformance_profile_over_stdio_registers_the_fixtures() -> None:
    lines = [
        json.dumps(request(1, "server/discover")),
        json.dumps(request(2, "resources/read", {"uri": "test://static-text"})),
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "serve", "--profile", "conformance"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    discover, read = (json.loads(line) for line in proc.stdout.splitlines())
    assert set(discover["result"]["capabilities"]) >= {"prompts", "resources", "completions"}
    assert read["result"]["contents"][0]["text"].startswith("This is the content")


class HeldProgress:
    """A tool that reports progress, then waits until the client has seen that report (or
    5 s pass) before it answers: it can only say "released" if the report left at once."""

    name = "held_progress"

    def __init__(self) -> None:
        self.seen = threading.Event()

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "description": "progress, then wait", "inputSchema": {}}

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        params = {"progressToken": "live", "progress": 1, "total": 2}
        request.context.emit("notifications/progress", params)
        released = self.seen.wait(5)
        return {"content": [{"type": "text", "text": "released" if released else "held"}]}


def test_progress_leaves_while_the_call_is_still_running(http: httpx.Client) -> None:
    tool = HeldProgress()
    server = Server([tool])
    message = request(8, "tools/call", {"name": tool.name, "arguments": {}})
    with serving(create_app(server, AnonymousAuthenticator())) as endpoint:
        headers = {"accept": BOTH, "content-type": "application/json", **routing_headers(message)}
        with http.stream("POST", endpoint, json=message, headers=headers) as stream:
            assert stream.headers["content-type"] == "text/event-stream"
            payloads = []
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    payloads.append(json.loads(line[len("data: ") :]))
                    tool.seen.set()  # the call is still waiting for this
    assert [p.get("method") for p in payloads] == ["notifications/progress", None]
    assert payloads[-1]["id"] == 8
    assert payloads[-1]["result"]["content"][0]["text"] == "released"


def test_a_call_in_a_thread_that_notifies_nothing_is_plain_json(http: httpx.Client) -> None:
    server = conformance_server(keys=KeyRing([KEY_A]))
    message = request(9, "tools/call", {"name": "test_simple_text", "arguments": {}})
    with serving(create_app(server, AnonymousAuthenticator())) as endpoint:
        answer = post(http, endpoint, message, headers={"accept": BOTH})
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json()["id"] == 9
