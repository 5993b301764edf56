"""Hostile clients against a real `labkit serve` process on loopback: the consent page's body
deadline and connection accounting, slow clients reconnecting at the connection cap under
`prlimit --nofile=256` (another principal's requests all answered), the stdio server's consent
listener under the HTTP connection layer, headers sent twice and foreign Hosts on every route,
refusals at a limit counted rather than logged one line each, a refused body whose client is
still sending, the listening address as an allowed Origin, and the table of HTTP limits in
docs/serving.md.

Every client is bounded (sockets, bytes, `WAIT` seconds); descriptors are counted in
/proc/PID/fd and memory read from /proc/PID/status of the server process. "Served in time"
(`SERVED_WITHIN`, 2 s under load) is the liveness bound a locked-out client would fail, not a
speed measurement.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from helpers import build_lab, call_message, request
from test_http import Stalling
from test_http_limits import (
    WAIT,
    closed_by_server,
    connect,
    discover_body,
    head,
    post_discover,
    read_response,
    readable,
    serving,
)

from labkit.auth import demo_authenticator, hash_token
from labkit.config import HttpSettings
from labkit.server import Server
from labkit.transports.connections import ConnectionLimits
from labkit.transports.http import create_app

MALLORY_TOKEN = "mallory-token"
BOB_TOKEN = "bob-token"
# Another principal's request, throughout an attack. Unloaded it is answered in well under
# 1 s; the bound allows for a machine shared by many test runs, and stays below the body
# deadlines below (4 s and 6 s), which is how long a locked-out client would wait.
SERVED_WITHIN = 2.0
ATTACKERS = 300
DECLARED = 4000
SENT = b"form_token="  # 11 bytes of the 4,000 declared
URL_CAPS = {"elicitation": {"url": {}}}
SERVING_DOC = Path(__file__).resolve().parent.parent / "docs" / "serving.md"


# -- a `labkit serve` process -------------------------------------------------------------------


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    log_path: Path
    port: int
    found: re.Match[str]
    lines: list[str] = field(default_factory=list)

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def log(self) -> str:
        return self.log_path.read_text()

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")


def write_config(directory: Path, http: str = "", stdio: bool = False) -> Path:
    key = directory / "signing.key"
    key.write_bytes(bytes(range(100, 140)))
    key.chmod(0o600)
    config = directory / "labkit.toml"
    config.write_text(
        f"""
[server]
signing_key_files = ["signing.key"]
sandbox = "off"

[stores]
consent = "memory"

[http]
{http}

[[principals]]
name = "mallory"
token_sha256 = "{hash_token(MALLORY_TOKEN)}"
workspaces = ["file:///srv/mallory"]

[[principals]]
name = "bob"
token_sha256 = "{hash_token(BOB_TOKEN)}"
workspaces = ["file:///srv/bob"]
stdio = {"true" if stdio else "false"}
"""
    )
    return config


@contextmanager
def labkit_serve(
    tmp_path: Path, args: list[str], ready: str, *, nofile: int | None = None
) -> Iterator[Served]:
    """`labkit serve ARGS` (under `prlimit --nofile` if given), until stderr matches `ready`
    (whose first group is the port); stopped with SIGTERM (stdio: EOF) and checked for a clean
    exit without a traceback."""
    log_path = tmp_path / "server.log"
    command = [sys.executable, "-m", "labkit.cli", "serve", *args]
    if nofile is not None:
        command = ["prlimit", f"--nofile={nofile}:{nofile}", *command]
    with log_path.open("wb") as errors:
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors
        )
    try:
        deadline = time.monotonic() + WAIT * 2
        found = None
        while found is None and time.monotonic() < deadline and proc.poll() is None:
            found = re.search(ready, log_path.read_text())
            if found is None:
                select.select([], [], [], 0.1)
        assert found is not None, log_path.read_text()
        served = Served(proc, log_path, int(found.group(1)), found)
        yield served
    finally:
        if "--transport" in args:
            proc.terminate()
        assert proc.stdin is not None
        proc.stdin.close()  # stdio: EOF stops it
        try:
            proc.wait(timeout=30)
        finally:
            assert proc.stdout is not None
            proc.stdout.close()
    text = log_path.read_text()
    assert proc.returncode == 0, text
    assert "Traceback" not in text and "Too many open files" not in text, text


def serve_http(
    tmp_path: Path, http: str = "", *, nofile: int | None = None, extra: list[str] | None = None
) -> Any:
    config = write_config(tmp_path, http)
    args = ["--transport", "http", "--port", "0", "--config", str(config), *(extra or [])]
    return labkit_serve(tmp_path, args, r"at http://[^:]+:(\d+)/mcp", nofile=nofile)


def serve_stdio(tmp_path: Path, http: str = "", *, nofile: int | None = None) -> Any:
    config = write_config(tmp_path, http, stdio=True)
    ready = r"serving the consent page at http://127\.0\.0\.1:(\d+)/connect/"
    return labkit_serve(tmp_path, ["--config", str(config)], ready, nofile=nofile)


def basic(principal: str, token: str) -> str:
    return "Basic " + base64.b64encode(f"{principal}:{token}".encode()).decode()


def consent_path(address: tuple[str, int], principal: str, token: str) -> str:
    """The path of a consent link of `principal`'s own, asked for over /mcp."""
    message = call_message(
        1, "notes_export", {"workspaceUri": f"file:///srv/{principal}"}, caps=URL_CAPS
    )
    with httpx.Client(timeout=WAIT) as http:
        response = http.post(
            f"http://{address[0]}:{address[1]}/mcp",
            json=message,
            headers={
                "authorization": f"Bearer {token}",
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/call",
                "mcp-name": "notes_export",
            },
        )
    result = response.json()["result"]
    assert result["resultType"] == "input_required", result
    (entry,) = result["inputRequests"].values()
    url: str = entry["params"]["url"]
    return "/" + url.split("/", 3)[3]


def slow_consent_post(address: tuple[str, int], path: str) -> socket.socket:
    """A consent POST that declares 4,000 bytes of form and sends 11."""
    sock = connect(address)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{address[1]}\r\n"
        f"Authorization: {basic('mallory', MALLORY_TOKEN)}\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {DECLARED}\r\n\r\n".encode()
        + SENT
    )
    return sock


WATCHER = """
import base64, itertools, json, sys, time
import httpx
host, port, token, principal = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
kinds = sys.argv[5].split(",")
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
basic = "Basic " + base64.b64encode(f"{principal}:{token}".encode()).decode()
def mcp(method):
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": meta}}
    headers = {"authorization": "Bearer " + token, "mcp-protocol-version": "2026-07-28",
               "mcp-method": method}
    return lambda http: http.post(f"http://{host}:{port}/mcp", json=body, headers=headers)
requests = {
    "discover": mcp("server/discover"),
    "list": mcp("tools/list"),
    "page": lambda http: http.get(f"http://{host}:{port}/connect/report-service/",
                                  headers={"authorization": basic}),
}
slowest, served, failures = 0.0, 0, []
for kind in itertools.cycle(kinds):
    if sys.stdin.readline().startswith("stop"):
        break
    started = time.monotonic()
    try:
        with httpx.Client(timeout=30) as http:  # a new connection for every request
            status = requests[kind](http).status_code
        if status != 200:
            failures.append(f"{kind}: status {status}")
    except httpx.HTTPError as exc:
        failures.append(f"{kind}: {exc!r}")
    slowest = max(slowest, time.monotonic() - started)
    served += 1
print(json.dumps({"slowest": slowest, "served": served, "failures": failures}), flush=True)
"""


class Watch:
    """Another principal's requests, each on a new connection, one after the other, while an
    attack goes on: the slowest answer and every failure. The client runs in a process of
    its own, so that the attacking threads of this one cannot delay it. `kinds` cycle:
    discover (`server/discover`), list (`tools/list`), page (the consent page's grants)."""

    def __init__(
        self, address: tuple[str, int], token: str, principal: str = "bob", kinds: str = "discover"
    ) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", WATCHER, *map(str, address), token, principal, kinds],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._pacer = threading.Thread(target=self._pace)
        self._stop = threading.Event()
        self.slowest = 0.0
        self.served = 0
        self.failures: list[str] = []

    def _pace(self) -> None:
        assert self._proc.stdin is not None
        while not self._stop.wait(0.1):  # one request per line, ten a second at most
            self._proc.stdin.write("go\n")
            self._proc.stdin.flush()

    def __enter__(self) -> Watch:
        self._pacer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._pacer.join(timeout=WAIT)
        report, _ = self._proc.communicate("stop\n", timeout=WAIT * 2)
        found = json.loads(report)
        self.slowest, self.served, self.failures = (
            found["slowest"],
            found["served"],
            found["failures"],
        )


CHURNER = """
import json, select, socket, sys, time
host, port, clients, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
slow = b"POST /mcp HTTP/1.1\\r\\nHost: " + host.encode() + b"\\r\\n"  # half a head, no token
open_, opened = {}, 0
while not select.select([sys.stdin], [], [], 0)[0]:
    tick = time.monotonic() + 0.1
    # Every tenth of a second, the closed ones open again back to back (rate/10 at most).
    for _ in range(min(clients - len(open_), int(rate / 10))):
        try:
            sock = socket.create_connection((host, port), timeout=5)
            sock.sendall(slow)
        except OSError:
            continue
        opened += 1
        open_[sock.fileno()] = sock
    while (left := tick - time.monotonic()) > 0:
        for sock in select.select(list(open_.values()), [], [], left)[0]:
            try:
                closed = sock.recv(65536) == b""
            except OSError:
                closed = True
            if closed:
                del open_[sock.fileno()]
                sock.close()
print(json.dumps({"opened": opened}), flush=True)
"""


class Churn:
    """`clients` slow connections (half a request head, no token) from a process of their
    own; those the server closed are opened again every tenth of a second, back to back, at
    most `rate` a second."""

    def __init__(self, address: tuple[str, int], clients: int, rate: float) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", CHURNER, *map(str, address), str(clients), str(rate)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.opened = 0

    def __enter__(self) -> Churn:
        return self

    def __exit__(self, *exc: object) -> None:
        report, _ = self._proc.communicate("stop\n", timeout=WAIT * 2)
        self.opened = json.loads(report)["opened"]


class Peak:
    """The most descriptors the server held while the block ran (sampled every 50 ms)."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=WAIT)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, self.served.descriptors())
            self._stop.wait(0.05)


def settled_descriptors(served: Served, at_most: int) -> int:
    """The server's descriptor count once it is at most `at_most`, or after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    count = served.descriptors()
    while count > at_most and time.monotonic() < deadline:
        select.select([], [], [], 0.2)
        count = served.descriptors()
    return count


def outcome(sock: socket.socket) -> int:
    """The status the server answered on `sock` before closing it (0: closed unanswered)."""
    try:
        status, _ = read_response(sock)
    except ConnectionResetError:
        return 0
    assert closed_by_server(sock), "the connection stayed open after its answer"
    return status


# -- 1. the consent page's body deadline and connection accounting ------------------------------


def test_slow_consent_posts_are_closed_by_the_body_deadline_and_descriptors_return(
    tmp_path: Path,
) -> None:
    # Descriptors for every attacker: each one is closed by the deadline, not the cap.
    with serve_http(tmp_path, "timeout_seconds = 4", nofile=4096) as served:
        path = consent_path(served.address, "mallory", MALLORY_TOKEN)
        before = served.descriptors()
        with ExitStack() as stack, Watch(served.address, BOB_TOKEN) as watch, Peak(served) as peak:
            attackers = [
                stack.enter_context(slow_consent_post(served.address, path))
                for _ in range(ATTACKERS)
            ]
            statuses = [outcome(sock) for sock in attackers]
        after = settled_descriptors(served, before + 4)
    during = peak.most
    print(
        f"descriptors: before {before}, peak {during}, after {after}; "
        f"bob served {watch.served}, slowest {watch.slowest:.2f}s"
    )
    assert during >= before + ATTACKERS // 2, "the attack never held the server's sockets"
    assert statuses == [408] * ATTACKERS, sorted(set(statuses))
    assert after <= before + 4, (before, after)
    assert watch.served > 0 and not watch.failures, watch.failures
    assert watch.slowest < SERVED_WITHIN, watch.slowest


def test_slow_consent_posts_past_the_descriptor_budget_lock_nobody_out(tmp_path: Path) -> None:
    # 256 descriptors: fewer connection slots than attackers. A stalled body makes room.
    with serve_http(tmp_path, "timeout_seconds = 6", nofile=256) as served:
        path = consent_path(served.address, "mallory", MALLORY_TOKEN)
        before = served.descriptors()
        with ExitStack() as stack, Watch(served.address, BOB_TOKEN) as watch, Peak(served) as peak:
            attackers = [
                stack.enter_context(slow_consent_post(served.address, path))
                for _ in range(ATTACKERS)
            ]
            statuses = [outcome(sock) for sock in attackers]
        after = settled_descriptors(served, before + 4)
        log = served.log()
    print(f"descriptors: peak {peak.most} (limit 256)")
    print(
        f"descriptors: before {before}, after {after}; closed unanswered "
        f"{statuses.count(0)}, 408 {statuses.count(408)}; bob served {watch.served}, "
        f"slowest {watch.slowest:.2f}s"
    )
    # Every attacker's request was admitted (its head was complete), so every one is answered:
    # 408 at its body deadline, or 503 when it made room for another client.
    assert set(statuses) <= {408, 503}, sorted(set(statuses))
    assert statuses.count(408) > 0, "no attacker lasted until the body deadline"
    assert after <= before + 4, (before, after)
    assert watch.served > 0 and not watch.failures, watch.failures
    assert watch.slowest < SERVED_WITHIN, watch.slowest
    assert "connection cap reached" in log


def test_a_consent_form_over_its_cap_is_413_before_it_is_read(tmp_path: Path) -> None:
    with serve_http(tmp_path) as served:
        path = consent_path(served.address, "mallory", MALLORY_TOKEN)
        with connect(served.address) as sock:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
                f"Authorization: {basic('mallory', MALLORY_TOKEN)}\r\n"
                f"Content-Length: 5000\r\n\r\n".encode()
            )
            status, page = read_response(sock)
    assert status == 413 and b"Content Too Large" in page


def test_reconnecting_slow_clients_at_the_cap_never_cost_another_principal_an_answer(
    tmp_path: Path,
) -> None:
    # 240 slow clients against 64 connections under 256 descriptors, opening again at once
    # whenever they are closed, about 1,000 a second: bob's listings and consent pages (each
    # on a new connection) are all answered, and nothing is closed without an answer.
    with serve_http(tmp_path, "max_connections = 64", nofile=256) as served:
        with httpx.Client(timeout=WAIT) as http:  # warmed up: its worker threads exist
            assert post_discover(http, served.address, BOB_TOKEN).status_code == 200
        before = served.descriptors()
        with Churn(served.address, 240, 1000.0) as churn, Peak(served) as peak:
            select.select([], [], [], 1.0)  # the attack is under way
            with Watch(served.address, BOB_TOKEN, kinds="list,page") as watch:
                select.select([], [], [], 8.0)
        after = settled_descriptors(served, before + 4)
        log = served.log()
    print(
        f"churn: {churn.opened} connections opened; descriptors before {before}, peak "
        f"{peak.most}, after {after}; bob served {watch.served}, slowest {watch.slowest:.2f}s"
    )
    assert churn.opened > 240 * 4, "the slow clients were not closed and reopened"
    assert watch.served >= 40 and not watch.failures, watch.failures
    assert peak.most < 256
    assert after <= before + 4, (before, after)
    assert "connection cap reached" in log


# -- 4. the stdio server's consent listener -----------------------------------------------------


def test_the_stdio_consent_listener_closes_idle_and_half_sent_heads(tmp_path: Path) -> None:
    with (
        serve_stdio(tmp_path, "head_timeout_seconds = 1") as served,
        connect(served.address) as idle,
        connect(served.address) as half,
    ):
        half.sendall(b"GET /connect/report-service/x HTTP/1.1\r\nHost: 127.0")
        assert closed_by_server(idle), "an idle connection stayed open"
        assert closed_by_server(half), "a half-sent head stayed open"


def test_the_stdio_consent_listener_refuses_a_huge_header_with_flat_memory(
    tmp_path: Path,
) -> None:
    chunk = b"a" * (1024 * 1024)
    with serve_stdio(tmp_path) as served, connect(served.address) as sock:
        before = served.rss_bytes()
        refused = False
        try:
            sock.sendall(b"GET /connect/report-service/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX: ")
            for _ in range(64):
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            refused = True
        after = served.rss_bytes()
        try:
            status, _ = read_response(sock)
        except ConnectionResetError:
            status = 0
    print(f"server RSS: before {before >> 20} MiB, after {after >> 20} MiB")
    assert refused or status == 431
    assert status in (0, 431)
    assert after - before < 16 * 1024 * 1024, f"the server kept {after - before} bytes"


def stdio_discover(served: Served) -> dict[str, Any]:
    assert served.proc.stdin is not None and served.proc.stdout is not None
    served.proc.stdin.write(json.dumps(request(7, "server/discover")).encode() + b"\n")
    served.proc.stdin.flush()
    return json.loads(read_line(served.proc.stdout))


def read_line(stream: IO[bytes]) -> bytes:
    assert readable(stream, WAIT), "no answer on stdout"
    return stream.readline()


def test_a_stdio_server_with_few_descriptors_survives_more_idle_sockets_than_it_has(
    tmp_path: Path,
) -> None:
    with serve_stdio(tmp_path, "head_timeout_seconds = 30", nofile=256) as served:
        before = served.descriptors()
        with ExitStack() as stack:
            for _ in range(320):  # half a head each (a silent socket is never even accepted)
                stack.enter_context(connect(served.address)).sendall(b"GET / HTTP/1.1\r\n")
            answer = stdio_discover(served)
            with httpx.Client(timeout=WAIT) as http:
                page = http.get(
                    f"http://127.0.0.1:{served.port}/connect/report-service/unknown",
                    headers={"authorization": basic("bob", BOB_TOKEN)},
                )
            during = served.descriptors()
        log = served.log()
    print(f"descriptors: before {before}, during 320 half-sent heads {during}")
    assert answer["id"] == 7 and "result" in answer, answer
    assert page.status_code == 404, page.text
    assert "connection cap reached" in log


# -- one copy of each header a route reads, and the Host checked before any route ------------

ROUTES = [
    "POST /mcp",
    "GET /connect/report-service/",  # the consent page's grants
    "GET /connect/report-service",  # Starlette's trailing-slash redirect
    "GET /nowhere",  # a 404
]


def raw_request(address: tuple[str, int], head: str) -> tuple[int, bytes]:
    """Send one request head (and an empty body) on a new connection: (status, the whole
    response, head and body)."""
    with connect(address) as sock:
        sock.sendall(head.encode() + b"Content-Length: 0\r\n\r\n")
        data = b""
        while True:
            top, _, body = data.partition(b"\r\n\r\n")
            length = re.search(rb"content-length: (\d+)", top, re.IGNORECASE)
            if length is not None and len(body) >= int(length.group(1)):
                break
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1]), data


def head_of(route: str, port: int, host: str | None = None, extra: str = "") -> str:
    host = host if host is not None else f"127.0.0.1:{port}"
    return f"{route} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {BOB_TOKEN}\r\n{extra}"


def check_every_route(address: tuple[str, int], routes: list[str]) -> None:
    port = address[1]
    twice = {
        "host": f"Host: 127.0.0.1:{port}\r\n",
        "authorization": f"Authorization: Bearer {BOB_TOKEN}\r\n",
        "content-type": "Content-Type: application/json\r\nContent-Type: text/plain\r\n",
        "origin": f"Origin: http://127.0.0.1:{port}\r\nOrigin: http://evil.example\r\n",
    }
    for route in routes:
        for name, extra in twice.items():
            status, text = raw_request(address, head_of(route, port, extra=extra))
            assert status == 400, (route, name, text)
            assert f"more than one {name} header".encode() in text, text
        # A Host that is not this server's: 421 before any route, the redirect included.
        status, text = raw_request(address, head_of(route, port, host="evil.example"))
        assert status == 421 and b"location" not in text.lower(), (route, text)
    status, text = raw_request(address, head_of("GET /connect/report-service", port))
    assert status == 307 and f"location: http://127.0.0.1:{port}/".encode() in text.lower()


def test_singleton_headers_and_the_host_are_checked_on_every_route_of_labkit_serve(
    tmp_path: Path,
) -> None:
    with serve_http(tmp_path) as served:
        check_every_route(served.address, ROUTES)


def test_singleton_headers_and_the_host_are_checked_on_the_stdio_consent_listener(
    tmp_path: Path,
) -> None:
    with serve_stdio(tmp_path) as served:
        check_every_route(served.address, ROUTES[1:])


def test_requests_refused_at_a_limit_are_counted_not_logged_one_line_each(tmp_path: Path) -> None:
    with serve_http(tmp_path, "max_body_bytes = 1024\nmax_head_bytes = 4096") as served:
        port = served.port
        big = head_of("POST /mcp", port, extra="Content-Type: application/json\r\n")
        long_head = head_of("GET /nowhere", port, extra=f"X-Pad: {'a' * 5000}\r\n")
        for _ in range(30):
            with connect(served.address) as sock:
                sock.sendall(f"{big}Content-Length: 5000\r\n\r\n".encode())
                assert read_response(sock)[0] == 413
            with connect(served.address) as sock:
                sock.sendall(long_head.encode())
                assert read_response(sock)[0] == 431
            assert (
                raw_request(served.address, head_of("GET /", port, host="evil.example"))[0] == 421
            )
        log = served.log()
    for limit in ("max_body_bytes", "max_head_bytes", "the Host check"):
        found = [line for line in log.splitlines() if f"refused at {limit}:" in line]
        assert len(found) == 1 and "(1 refused)" in found[0], (limit, log)


# -- 12. a refused body whose client is still sending -------------------------------------------

EIGHT_MB = 8 * 1024 * 1024


def test_a_client_still_sending_8_mb_reads_the_413_and_the_connection_serves_on(
    tmp_path: Path,
) -> None:
    with serve_http(tmp_path) as served, connect(served.address) as sock:
        body = b"x" * EIGHT_MB
        # Sent in full before reading, as most clients do: the 413 goes out at the head.
        sock.sendall(head(served.port, body).replace(b"demo-alice", BOB_TOKEN.encode()) + body)
        status, text = read_response(sock)
        assert status == 413 and b"Content Too Large" in text
        # The rest of the body was dropped, not taken for a request head: the next request
        # on the same connection is served.
        small = discover_body()
        sock.sendall(head(served.port, small).replace(b"demo-alice", BOB_TOKEN.encode()) + small)
        status, answer = read_response(sock)
        assert status == 200 and json.loads(answer)["id"] == 1


def test_a_chunked_8_mb_body_refused_midway_still_gets_its_413(tmp_path: Path) -> None:
    with serve_http(tmp_path) as served, connect(served.address) as sock:
        top = head(served.port, b"").replace(b"demo-alice", BOB_TOKEN.encode())
        top = top.replace(b"Content-Length: 0\r\n", b"Transfer-Encoding: chunked\r\n")
        piece = b"x" * 65536
        chunk = b"%x\r\n" % len(piece) + piece + b"\r\n"
        sock.sendall(top + chunk * (EIGHT_MB // len(piece)) + b"0\r\n\r\n")
        status, text = read_response(sock)
    assert status == 413 and b"Content Too Large" in text


def test_httpx_posting_8_mb_receives_413(tmp_path: Path) -> None:
    with serve_http(tmp_path) as served, httpx.Client(timeout=WAIT) as http:
        response = http.post(
            f"http://127.0.0.1:{served.port}/mcp",
            content=b"x" * EIGHT_MB,
            headers={"authorization": f"Bearer {BOB_TOKEN}", "content-type": "application/json"},
        )
    assert response.status_code == 413


def test_an_unread_body_past_the_discard_bound_is_closed() -> None:
    limits = ConnectionLimits(discard_body_bytes=256 * 1024)
    with serving(limits) as address, connect(address) as sock:
        body = b"x" * EIGHT_MB
        # Closed while we are still sending is what the bound means.
        with suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(head(address[1], body) + body)
        assert outcome(sock) in (0, 413)  # outcome() also asserts the connection was closed


def test_an_unread_body_that_stops_arriving_is_closed_after_discard_body_seconds() -> None:
    limits = ConnectionLimits(discard_body_seconds=0.5, head_timeout_seconds=WAIT * 2)
    with serving(limits) as address, connect(address) as sock:
        sock.sendall(head(address[1], b"x" * EIGHT_MB) + b"x" * 1000)
        status, _ = read_response(sock)
        assert status == 413
        assert closed_by_server(sock), "a stalled unread body kept its connection"


def test_a_slow_body_gets_408_and_is_closed_at_once_not_lingered_over() -> None:
    app = create_app(build_lab().server, demo_authenticator(), timeout_seconds=0.5)
    limits = ConnectionLimits(discard_body_seconds=WAIT * 2, head_timeout_seconds=WAIT * 2)
    with serving(limits, app) as address, connect(address) as sock:
        sock.sendall(head(address[1], b"x" * 100) + b"x" * 10)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        assert data.startswith(b"HTTP/1.1 408 ")
        assert b"connection: close" in data.lower()
        assert closed_by_server(sock)


# -- 13. the listening address is an allowed Origin ----------------------------------------------


def test_the_listening_address_at_its_port_is_an_allowed_origin(tmp_path: Path) -> None:
    with serve_http(tmp_path, 'host = "127.0.0.2"') as served, httpx.Client(timeout=WAIT) as http:
        url = f"http://127.0.0.2:{served.port}/mcp"
        body = discover_body()
        headers = {
            "authorization": f"Bearer {BOB_TOKEN}",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "server/discover",
        }
        statuses = {
            origin: http.post(url, content=body, headers={**headers, "origin": origin}).status_code
            for origin in (
                f"http://127.0.0.2:{served.port}",
                f"https://127.0.0.2:{served.port}",
                "http://evil.example",
                f"http://evil.example:{served.port}",
                f"http://127.0.0.2:{served.port + 1}",
            )
        }
    assert statuses == {
        f"http://127.0.0.2:{served.port}": 200,
        f"https://127.0.0.2:{served.port}": 200,
        "http://evil.example": 403,
        f"http://evil.example:{served.port}": 403,
        f"http://127.0.0.2:{served.port + 1}": 403,
    }


# -- the table of HTTP limits (docs/serving.md) ----------------------------------------------------

# `[http]` keys that are not limits: where to listen and whom to trust.
NOT_LIMITS = frozenset({"host", "port", "allowed_hosts", "allowed_origins", "public_url"})


def readme_limits() -> dict[str, str]:
    """`key -> default` from the table under the "HTTP limits" heading of docs/serving.md."""
    text = SERVING_DOC.read_text()
    section = text.split("## HTTP limits", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `http\.(\w+)` \| `([^`]+)` \|", section, re.MULTILINE)
    return dict(rows)


def test_the_serving_page_lists_every_http_limit_with_its_key_and_default() -> None:
    fields = HttpSettings.model_fields
    limits = {name: field.default for name, field in fields.items() if name not in NOT_LIMITS}
    documented = readme_limits()
    assert set(documented) == set(limits), "the HTTP limits table and [http] differ"
    for key, default in limits.items():
        assert float(documented[key].replace("_", "")) == default, key


def test_the_limits_table_check_sees_a_wrong_default() -> None:
    # Control: the parser reads the table, so a changed default would be caught.
    documented = readme_limits()
    assert documented, "no table found"
    assert float(documented["max_body_bytes"]) != 2 * HttpSettings().max_body_bytes


@pytest.mark.parametrize("key", sorted(NOT_LIMITS))
def test_the_keys_that_are_not_limits_exist(key: str) -> None:
    assert key in HttpSettings.model_fields


# -- the connection cap: a stalled body makes room, a request whose body arrived never does -----


def test_at_the_cap_the_stalest_body_makes_room_and_a_request_in_progress_is_kept() -> None:
    stalling = Stalling()
    app = create_app(Server([stalling]), demo_authenticator())
    limits = ConnectionLimits(head_timeout_seconds=WAIT * 2, max_connections=3)
    try:
        with serving(limits, app) as address, ExitStack() as stack:
            working = stack.enter_context(connect(address))
            body = json.dumps(call_message(1, "stall", {})).encode()
            working.sendall(head(address[1], body, method="tools/call", name="stall") + body)
            assert stalling.entered.wait(WAIT)
            stalled = []
            for _ in range(2):
                sock = stack.enter_context(connect(address))
                sock.sendall(head(address[1], b"x" * 100) + b"x" * 10)
                stalled.append(sock)
                select.select([], [], [], 0.2)  # the first is the stalest
            with httpx.Client(timeout=WAIT) as http:
                assert post_discover(http, address).status_code == 200
            # Admitted, so answered before it is closed: 503, try again.
            assert read_response(stalled[0])[0] == 503
            assert closed_by_server(stalled[0]), "the stalest body was not closed"
            stalling.release.set()
            status, answer = read_response(working)
            assert status == 200 and json.loads(answer)["id"] == 1
    finally:
        stalling.release.set()
