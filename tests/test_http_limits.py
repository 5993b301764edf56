"""Hostile HTTP clients: the head deadline, the head size cap and the connection cap
(labkit/transports/connections.py), on loopback, each test bounded in time and sockets.

Covers: a connection that sends nothing, stops in the middle of its head, trickles its head or
idles after a response is closed once the head deadline passes; a slow *body* is not cut by
it; a head over `max_head_bytes` gets 431 (or a closed connection) while the server's memory
stays flat; at the connection cap the oldest idle connection makes room and a log line says
so; and `labkit serve` under `prlimit --nofile` serves normal requests again after an
attacker opened more sockets, each sending half a head, than it has descriptors.

Waits are bounded (`WAIT` seconds at most) and never asserted on as speeds.
"""

from __future__ import annotations

import json
import logging
import re
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from helpers import build_lab, call_message, request
from test_http import Stalling

from labkit.auth import demo_authenticator, hash_token
from labkit.server import Server
from labkit.transports.connections import ConnectionLimits, server_config
from labkit.transports.http import create_app

WAIT = 20.0  # the longest any test waits for the server to act
HEAD_TIMEOUT = 0.5
QUICK = ConnectionLimits(head_timeout_seconds=HEAD_TIMEOUT)
DISCOVER = request(1, "server/discover")


@contextmanager
def serving(limits: ConnectionLimits, app: Any = None) -> Iterator[tuple[str, int]]:
    """`app` (default: the demo lab) under uvicorn with labkit's guarded protocol, in a
    thread; yields the loopback address."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    if app is None:
        app = create_app(build_lab().server, demo_authenticator())
    server = uvicorn.Server(server_config(app, limits, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:
        yield "127.0.0.1", sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"


def head(
    port: int, body: bytes, extra: str = "", method: str = "server/discover", name: str = ""
) -> bytes:
    routing = f"Mcp-Method: {method}\r\n" + (f"Mcp-Name: {name}\r\n" if name else "")
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer demo-alice\r\n"
        f"Content-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n"
        f"{routing}Content-Length: {len(body)}\r\n{extra}\r\n"
    ).encode()


def discover_body(padding: int = 0) -> bytes:
    message = request(1, "server/discover", {"padding": "x" * padding} if padding else None)
    return json.dumps(message).encode()


def connect(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=WAIT)
    return sock


def readable(source: Any, timeout: float) -> bool:
    """Whether `source` (a socket or a pipe) is readable within `timeout` seconds; epoll, not
    select(), so a descriptor numbered past 1023 (a test process holding many) still works."""
    with selectors.DefaultSelector() as waiting:
        waiting.register(source, selectors.EVENT_READ)
        return bool(waiting.select(timeout))


def closed_by_server(sock: socket.socket, *, trickle: bytes | None = None) -> bool:
    """Whether the server closes `sock` within WAIT seconds (optionally while we keep sending
    one byte of `trickle` every 0.1 s, as a slowloris client does)."""
    deadline = time.monotonic() + WAIT
    sent = 0
    while time.monotonic() < deadline:
        if readable(sock, 0.1):
            try:
                return sock.recv(65536) == b""
            except ConnectionResetError:
                return True
        if trickle is not None and sent < len(trickle):
            try:
                sock.sendall(trickle[sent : sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                return True
            sent += 1
    return False


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """Status and raw bytes of one response (Content-Length framed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    top, _, rest = data.partition(b"\r\n\r\n")
    found = re.search(rb"content-length: (\d+)", top, re.IGNORECASE)
    length = int(found.group(1)) if found else 0
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    status = int(top.split(b" ", 2)[1]) if top.startswith(b"HTTP/1.1 ") else 0
    return status, rest


def post_discover(
    http: httpx.Client, address: tuple[str, int], token: str = "demo-alice"
) -> httpx.Response:
    host, port = address
    return http.post(
        f"http://{host}:{port}/mcp",
        content=discover_body(),
        headers={
            "authorization": f"Bearer {token}",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "server/discover",
        },
    )


# -- the head deadline ---------------------------------------------------------------------------


def test_a_connection_that_sends_nothing_is_closed() -> None:
    with serving(QUICK) as address, connect(address) as sock:
        assert closed_by_server(sock)


def test_a_connection_that_stops_in_the_middle_of_its_head_is_closed() -> None:
    with serving(QUICK) as address, connect(address) as sock:
        sock.sendall(head(address[1], b"")[:40])
        assert closed_by_server(sock)


def test_a_trickled_head_does_not_extend_the_deadline() -> None:
    with serving(QUICK) as address, connect(address) as sock:
        # 200 bytes at one byte per 0.1 s would take 20 s: the deadline ends it first.
        trickle = head(address[1], b"", "X-Pad: " + "a" * 200 + "\r\n")
        assert closed_by_server(sock, trickle=trickle)


def test_an_idle_keep_alive_connection_is_closed_after_its_response() -> None:
    with serving(QUICK) as address, connect(address) as sock:
        body = discover_body()
        sock.sendall(head(address[1], body) + body)
        status, answer = read_response(sock)
        assert status == 200 and json.loads(answer)["id"] == 1
        assert closed_by_server(sock)


def test_a_slow_body_is_not_cut_by_the_head_deadline() -> None:
    # The deadline covers the head only; the body has the endpoint's timeout_seconds (30 s).
    with serving(QUICK) as address, connect(address) as sock:
        body = discover_body()
        sock.sendall(head(address[1], body))
        assert not readable(sock, HEAD_TIMEOUT * 4), "the server answered or closed too soon"
        sock.sendall(body)
        status, answer = read_response(sock)
        assert status == 200 and json.loads(answer)["id"] == 1


def test_a_stalled_pipelined_head_lets_the_request_in_progress_finish_then_closes() -> None:
    stalling = Stalling()
    app = create_app(Server([stalling]), demo_authenticator())
    try:
        with serving(QUICK, app) as address, connect(address) as sock:
            body = json.dumps(call_message(1, "stall", {})).encode()
            call = head(address[1], body, method="tools/call", name="stall") + body
            sock.sendall(call + b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1")  # half a second head
            assert stalling.entered.wait(WAIT)
            assert not readable(sock, HEAD_TIMEOUT * 4), (
                "the request in progress was cut by the stalled head's deadline"
            )
            stalling.release.set()
            status, answer = read_response(sock)
            assert status == 200 and json.loads(answer)["id"] == 1
            assert closed_by_server(sock)
    finally:
        stalling.release.set()


def test_keep_alive_requests_each_get_the_deadline_afresh() -> None:
    with serving(QUICK) as address, connect(address) as sock:
        body = discover_body()
        for _ in range(3):
            sock.sendall(head(address[1], body) + body)
            assert read_response(sock)[0] == 200


# -- the head size cap ---------------------------------------------------------------------------


def test_a_head_just_under_the_cap_is_served_and_one_over_it_is_431() -> None:
    limits = ConnectionLimits(max_head_bytes=8192)
    with serving(limits) as address:
        body = discover_body()
        base = len(head(address[1], body))
        for pad, expected in ((8192 - base - 20, 200), (8192, 431)):
            with connect(address) as sock:
                sock.sendall(head(address[1], body, f"X-Pad: {'a' * pad}\r\n") + body)
                status, _ = read_response(sock)
                assert status == expected, pad


def test_a_large_body_sent_with_its_head_is_not_counted_as_head() -> None:
    with serving(ConnectionLimits(max_head_bytes=8192)) as address, connect(address) as sock:
        body = discover_body(padding=200_000)
        sock.sendall(head(address[1], body) + body)
        status, answer = read_response(sock)
        assert status == 200 and json.loads(answer)["id"] == 1


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_a_huge_header_is_refused_and_memory_stays_flat() -> None:
    # Unbounded, 64 MB of one header used to be held by the parser until the connection closed.
    chunk = b"a" * (1024 * 1024)
    with serving(ConnectionLimits()) as address, connect(address) as sock:
        before = _rss_bytes()
        refused = False
        try:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Huge: ")
            for _ in range(64):
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            refused = True
        grown = _rss_bytes() - before
        try:
            status, _ = read_response(sock)
        except ConnectionResetError:
            status = 0
        assert refused or status == 431
        assert status in (0, 431)
        assert grown < 16 * 1024 * 1024, f"the server kept {grown} bytes of one header"


# -- the connection cap ---------------------------------------------------------------------------


def test_at_the_cap_the_oldest_idle_connection_makes_room_and_a_line_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="labkit.transports.connections")
    limits = ConnectionLimits(head_timeout_seconds=WAIT * 2, max_connections=4)
    with serving(limits) as address, ExitStack() as stack:
        idle = [stack.enter_context(connect(address)) for _ in range(4)]
        with httpx.Client(timeout=WAIT) as http:
            response = post_discover(http, address)
        assert response.status_code == 200
        assert closed_by_server(idle[0]), "the oldest idle connection was closed"
        assert any("connection cap reached" in r.getMessage() for r in caplog.records)


# -- `labkit serve` with few descriptors ---------------------------------------------------------

DESCRIPTORS = 256
ALICE_TOKEN = "alice-token"


def write_config(directory: Path) -> Path:
    key = directory / "signing.key"
    key.write_bytes(bytes(range(100, 140)))  # raw bytes, not base64 text
    key.chmod(0o600)
    config = directory / "labkit.toml"
    config.write_text(
        f"""
[server]
signing_key_files = ["signing.key"]
sandbox = "off"

[http]
head_timeout_seconds = 1

[[principals]]
name = "alice"
token_sha256 = "{hash_token(ALICE_TOKEN)}"
workspaces = ["file:///srv/notes"]
"""
    )
    return config


def test_a_server_with_few_descriptors_recovers_from_more_idle_sockets_than_it_has(
    tmp_path: Path,
) -> None:
    command = [
        "prlimit",
        f"--nofile={DESCRIPTORS}:{DESCRIPTORS}",
        sys.executable,
        "-m",
        "labkit.cli",
        "serve",
        "--transport",
        "http",
        "--port",
        "0",
        "--config",
        str(write_config(tmp_path)),
    ]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        for line in proc.stderr:
            lines.append(line)
            found = re.search(r"at http://127\.0\.0\.1:(\d+)/mcp", line)
            if found:
                break
        assert found is not None, "".join(lines)
        address = ("127.0.0.1", int(found.group(1)))
        with ExitStack() as stack:
            # The attacker: more sockets than the server has descriptors, each sending half a
            # head (a silent one is never even accepted: TCP_DEFER_ACCEPT).
            for _ in range(DESCRIPTORS + 64):
                stack.enter_context(connect(address)).sendall(b"GET / HTTP/1.1\r\n")
            ok = _served_within(address, WAIT)
        assert ok, "no normal request was served after the attack"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        finally:
            lines.extend(proc.stderr.read().splitlines(keepends=True))
            proc.stderr.close()
    log = "".join(lines)
    assert proc.returncode == 0, log
    assert "connection cap reached" in log
    assert "Traceback" not in log and "Too many open files" not in log


def _served_within(address: tuple[str, int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with httpx.Client(timeout=5) as http:
                if post_discover(http, address, ALICE_TOKEN).status_code == 200:
                    return True
        except httpx.TransportError:
            pass
        time.sleep(0.2)  # a bounded pause between attempts
    return False
