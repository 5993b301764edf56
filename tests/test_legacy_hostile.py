"""Hostile 2025-11-25 clients against a real `labkit serve` process on loopback (and the sans-IO
adapter where the point is the adapter's own bookkeeping), one test per figure that used to hold:

- one session opening many `tools/call` streams that never answer: calls in progress are bounded
  per session and per principal (-32001, HTTP 503), each waits at most the configured answer
  timeout, the server's descriptors and memory stay bounded, and another principal is served
  within 1 s throughout;
- `resources/subscribe` of URIs the deployment does not serve, or too long, or too many;
- the consent database locked by another process: the page is a 503, `notes_export` is -32001,
  and an unrelated principal's `tools/list` is never stalled;
- ~490 concurrent legacy calls on one stdio connection: each completes, no recursion;
- a grant covers only the workspace its page showed, the page states its lifetime, and it can
  be revoked;
- a replaced URL consent is never reported complete;
- DELETE ends a call that is polling for a URL consent;
- many principals filling the session table still leave room for one more;
- a second `initialize` in a session is HTTP 400.

Every wait is bounded; no speed is asserted except "served within 1 s" for the other principal,
the figure the hostile client used to break.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from helpers import request
from test_legacy import initialize_message, legacy_call, open_session, reply
from test_notes_export import (
    ALICE_BASIC,
    MALLORY_BASIC,
    NOTES,
    Served,
    approve,
    build_export_lab,
    export,
    form_token,
    link_id_of,
    served,  # noqa: F401  (the fixture)
    url_entry,
)

from labkit.auth import hash_token
from labkit.legacy import LegacyLimits
from labkit.transports.legacy_http import LegacyHttp
from labkit.url_mode import CONNECT_PATH, DEFAULT_LINK_TTL_SECONDS

URL_CAPS = {"elicitation": {"form": {}, "url": {}}}
TOKENS = {"alice": "alice-token", "mallory": "mallory-token", "carol": "carol-token"}
WAIT = 15.0  # the longest any step waits for the server


# -- a real `labkit serve` ----------------------------------------------------------------------


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    endpoint: str
    address: tuple[str, int]
    log: list[str] = field(default_factory=list)

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def text(self) -> str:
        return "".join(self.log)


def write_config(directory: Path, extra: str = "", consent: str = "memory") -> Path:
    key = directory / "k.key"
    key.write_bytes(base64.b64encode(hashlib.sha512(b"legacy hostile key").digest()))
    key.chmod(0o600)
    principals = "".join(
        f"""
[[principals]]
name = "{name}"
token_sha256 = "{hash_token(token)}"
workspaces = ["file:///work/{name}"]
stdio = {"true" if name == "alice" else "false"}
"""
        for name, token in TOKENS.items()
    )
    config = directory / "labkit.toml"
    config.write_text(
        f"""
[server]
signing_key_files = ["k.key"]
sandbox = "off"

[stores]
consent = "{consent}"

[http]
head_timeout_seconds = 2
{extra}
{principals}"""
    )
    return config


@contextmanager
def labkit_serve(config: Path) -> Iterator[Running]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "labkit.cli", "serve", "--transport", "http", "--port", "0"]
        + ["--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    running: Running | None = None
    log: list[str] = []
    found = threading.Event()
    address: list[str] = []

    def drain() -> None:  # stderr is read for the whole run: a full pipe would block the server
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            log.append(line)
            match = re.search(r"at (http://127\.0\.0\.1:(\d+)/mcp)", line)
            if match and not found.is_set():
                address[:] = [match.group(1), match.group(2)]
                found.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        assert found.wait(30), "".join(log)
        running = Running(proc, address[0], ("127.0.0.1", int(address[1])), log)
        yield running
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        finally:
            reader.join(timeout=10)
            proc.stderr.close()


def modern_headers(token: str, method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "authorization": f"Bearer {token}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


def served_within(http: httpx.Client, endpoint: str, token: str = TOKENS["mallory"]) -> float:
    """How long another principal's tools/list took; it must have been answered."""
    started = time.monotonic()
    answer = http.post(
        endpoint, json=request(1, "tools/list"), headers=modern_headers(token, "tools/list")
    )
    took = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    return took


def legacy_session(http: httpx.Client, endpoint: str, token: str) -> str:
    answer = http.post(
        endpoint,
        json=initialize_message(caps=URL_CAPS),
        headers={"authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"]


def export_call(id: Any, workspace: str) -> dict[str, Any]:
    return legacy_call(id, "notes_export", {"workspaceUri": workspace})


def open_stream(
    address: tuple[str, int], token: str, session: str, message: dict[str, Any]
) -> socket.socket:
    """Send one legacy call as a raw POST and leave the connection open, never answering."""
    body = json.dumps(message).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{address[1]}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock = socket.create_connection(address, timeout=WAIT)
    sock.sendall(head + body)
    return sock


def read_until(sock: socket.socket, marker: bytes, limit: int = 1 << 20) -> bytes:
    data = b""
    while marker not in data and len(data) < limit:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def status_of(sock: socket.socket) -> tuple[int, bytes]:
    data = read_until(sock, b"\r\n\r\n")
    status = int(data.split(b" ", 2)[1])
    if status != 200:
        data += read_until(sock, b"}}")
    return status, data


# -- 2. legacy calls in progress are bounded ------------------------------------------------------


def test_many_unanswered_call_streams_are_bounded_and_another_principal_is_served(
    tmp_path: Path,
) -> None:
    extra = """
[legacy]
answer_timeout_seconds = 6
max_calls_per_session = 4
max_calls_per_principal = 8
"""
    alice = TOKENS["alice"]
    workspace = "file:///work/alice"
    with (
        labkit_serve(write_config(tmp_path, extra)) as server,
        httpx.Client(timeout=WAIT) as http,
        ExitStack() as stack,
    ):
        sessions = [legacy_session(http, server.endpoint, alice) for _ in range(3)]
        served_within(http, server.endpoint)
        fds_before, rss_before = server.fds(), server.rss()
        worst = 0.0
        accepted: dict[str, list[socket.socket]] = {session: [] for session in sessions}
        refused: list[bytes] = []
        ids = itertools.count(1)
        # 60 calls at once on the first session, then 10 at once on each of the others: none
        # is ever answered.
        for burst in ([sessions[0]] * 60, [sessions[1]] * 10 + [sessions[2]] * 10):
            opened = [
                (session, stack.enter_context(open_stream(server.address, alice, session, call)))
                for session in burst
                for call in [export_call(next(ids), workspace)]
            ]
            for session, sock in opened:
                status, data = status_of(sock)
                if status == 200:
                    if b"elicitation/create" not in data:
                        data += read_until(sock, b"elicitation/create")
                    assert b"elicitation/create" in data
                    accepted[session].append(sock)
                else:
                    refused.append(data)
                    sock.close()
            worst = max(worst, served_within(http, server.endpoint))
        counts = [len(accepted[session]) for session in sessions]
        assert counts[0] == 4 and counts[1] + counts[2] == 4, counts
        assert len(refused) == 72
        assert all(b"HTTP/1.1 503" in r and b"-32001" in r for r in refused)
        assert any(b"in this session (at most 4)" in r for r in refused)
        assert any(b"for this principal (at most 8)" in r for r in refused)
        grown_fds = server.fds() - fds_before
        grown_rss = server.rss() - rss_before
        assert grown_fds <= 8 + 8, f"{grown_fds} descriptors more for 8 admitted streams"
        assert grown_rss < 20 * 1024 * 1024, f"RSS grew by {grown_rss} bytes"
        # Never answered: each admitted stream ends by itself at the answer timeout.
        for sock in (sock for socks in accepted.values() for sock in socks):
            tail = read_until(sock, b'"id":')
            tail += read_until(sock, b"\n\n")
            assert b"No answer from the client; the call ended" in tail
            worst = max(worst, served_within(http, server.endpoint))
        # The slots came back: the first session takes a call again.
        again = stack.enter_context(
            open_stream(server.address, alice, sessions[0], export_call(999, workspace))
        )
        assert status_of(again)[0] == 200
        assert worst < 1.0, f"another principal waited {worst:.2f}s"
    assert "Traceback" not in server.text()


# -- 3. subscriptions ----------------------------------------------------------------------------


def test_subscribe_refuses_what_is_not_served_too_long_or_too_many(tmp_path: Path) -> None:
    # A deployment that declares no resources: there is nothing to subscribe to.
    with labkit_serve(write_config(tmp_path)) as server, httpx.Client(timeout=WAIT) as http:
        session = legacy_session(http, server.endpoint, TOKENS["alice"])
        headers = {"authorization": f"Bearer {TOKENS['alice']}", "mcp-session-id": session}
        rss_before = server.rss()
        for i in range(100):
            big = {"uri": "test://" + "x" * (256 * 1024) + str(i)}
            answer = http.post(
                server.endpoint,
                json={"jsonrpc": "2.0", "id": i, "method": "resources/subscribe", "params": big},
                headers=headers,
            )
            assert answer.status_code == 200
            assert answer.json()["error"]["code"] == -32601
        grown = server.rss() - rss_before
        assert grown < 20 * 1024 * 1024, f"RSS grew by {grown} bytes for refused subscriptions"
    # The conformance profile serves resources: only those, bounded in length and number.
    proc = subprocess.Popen(
        [sys.executable, "-m", "labkit.cli", "serve", "--profile", "conformance"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        messages: list[dict[str, Any]] = [initialize_message(0)]
        uris = ["test://watched-resource", "test://nope", "test://" + "y" * 3000]
        uris += [f"test://template/{i}/data" for i in range(70)]
        messages += [
            {"jsonrpc": "2.0", "id": n, "method": "resources/subscribe", "params": {"uri": uri}}
            for n, uri in enumerate(uris, 1)
        ]
        out, _ = proc.communicate(b"".join(json.dumps(m).encode() + b"\n" for m in messages), 30)
    finally:
        if proc.poll() is None:
            proc.kill()
    answers = {m["id"]: m for m in map(json.loads, out.splitlines())}
    assert answers[1]["result"] == {}
    assert answers[2]["error"] == {
        "code": -32002,
        "message": "Resource not found",
        "data": {"uri": "test://nope"},
    }
    assert answers[3]["error"]["code"] == -32602 and "2048" in answers[3]["error"]["message"]
    kept = [n for n in range(4, 4 + 70) if "result" in answers[n]]
    assert len(kept) == 63, "64 in all with the watched resource"
    assert "at most 64 subscriptions" in answers[4 + 63]["error"]["message"]


# -- 6. a locked consent database ----------------------------------------------------------------


def test_a_locked_consent_database_stalls_nobody_and_is_a_clear_503(tmp_path: Path) -> None:
    database = tmp_path / "consent.db"
    config = write_config(tmp_path, consent=f"sqlite://{database}")
    alice = TOKENS["alice"]
    ask = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "notes_export",
            "arguments": {"workspaceUri": "file:///work/alice"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": URL_CAPS,
            },
        },
    }
    export_headers = modern_headers(alice, "tools/call", "notes_export")
    with labkit_serve(config) as server, httpx.Client(timeout=WAIT) as http:
        first = http.post(server.endpoint, json=ask, headers=export_headers).json()
        url = first["result"]["inputRequests"]["connect_report_service"]["params"]["url"]
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sqlite3, sys, time\n"
                f"c = sqlite3.connect({str(database)!r}, isolation_level=None)\n"
                "c.execute('BEGIN IMMEDIATE')\n"
                "print('locked', flush=True)\n"
                "sys.stdin.read()\n",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdin is not None
        try:
            assert holder.stdout.readline().strip() == "locked"
            results: dict[str, httpx.Response] = {}

            def page() -> None:
                auth = base64.b64encode(f"alice:{alice}".encode()).decode()
                results["page"] = http.get(url, headers={"authorization": f"Basic {auth}"})

            def call() -> None:
                results["export"] = http.post(server.endpoint, json=ask, headers=export_headers)

            workers = [threading.Thread(target=page), threading.Thread(target=call)]
            for worker in workers:
                worker.start()
            worst = 0.0
            while any(worker.is_alive() for worker in workers):
                worst = max(worst, served_within(http, server.endpoint))
                time.sleep(0.1)
            for worker in workers:
                worker.join()
        finally:
            holder.stdin.close()
            holder.wait(timeout=30)
            holder.stdout.close()
        assert worst < 1.0, f"an unrelated tools/list waited {worst:.2f}s"
        assert results["page"].status_code == 503
        assert "busy" in results["page"].text and "Traceback" not in results["page"].text
        assert results["export"].status_code == 503
        assert results["export"].json()["error"]["code"] == -32001
        # The lock gone, the same page works again.
        auth = base64.b64encode(f"alice:{alice}".encode()).decode()
        assert http.get(url, headers={"authorization": f"Basic {auth}"}).status_code == 200
    assert "Traceback" not in server.text()


# -- 7. concurrent stdio legacy calls --------------------------------------------------------------


def test_490_concurrent_stdio_legacy_calls_each_complete(tmp_path: Path) -> None:
    config = write_config(tmp_path, "[legacy]\nmax_calls_per_session = 500\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "labkit.cli", "serve", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    calls = 490
    try:
        proc.stdin.write(json.dumps(initialize_message(0, caps=URL_CAPS)).encode() + b"\n")
        for n in range(1, calls + 1):
            proc.stdin.write(json.dumps(export_call(n, "file:///work/alice")).encode() + b"\n")
        proc.stdin.write(json.dumps(export_call(calls + 1, "file:///work/alice")).encode() + b"\n")
        proc.stdin.flush()
        asked: list[dict[str, Any]] = []
        while len(asked) < calls + 1:
            message = json.loads(proc.stdout.readline())
            if message.get("method") == "elicitation/create":
                asked.append(message)
        # Every call waits on the client at once; answer them last first.
        for message in reversed(asked):
            proc.stdin.write(json.dumps(reply(message, {"action": "cancel"})).encode() + b"\n")
        proc.stdin.close()
        results = [json.loads(line) for line in proc.stdout]
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr = proc.stderr.read().decode()
        proc.stderr.close()
        proc.stdout.close()
    finished = {m["id"]: m for m in results if "id" in m}
    assert sorted(finished) == list(range(1, calls + 2)), "every call completed"
    assert all(m["result"]["structuredContent"]["status"] == "cancelled" for m in finished.values())
    assert "RecursionError" not in stderr and "Traceback" not in stderr


def test_stdio_calls_past_the_bound_get_a_clear_error_and_the_others_complete() -> None:
    import io

    from helpers import TPS, build_lab

    from labkit.transports.eras import ERAS
    from labkit.transports.stdio import StdioTransport

    lab = build_lab()
    first, second, third = (legacy_call(n, "notes_delete", dict(TPS)) for n in (1, 2, 3))
    lines = [initialize_message(0), first, second, third]
    # The answers come once the requests are out: the server names them labkit-1, labkit-2.
    answers = [
        {"jsonrpc": "2.0", "id": "labkit-2", "result": {"action": "decline"}},
        {"jsonrpc": "2.0", "id": "labkit-1", "result": {"action": "decline"}},
    ]
    stdin = io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in lines + answers))
    stdout = io.BytesIO()
    transport = StdioTransport(
        lab.server, "alice", eras=ERAS, limits=LegacyLimits(calls_per_session=2)
    )
    transport.serve(stdin, stdout)
    out = [json.loads(line) for line in stdout.getvalue().splitlines()]
    by_id = {m["id"]: m for m in out if "method" not in m}
    assert by_id[3]["error"]["code"] == -32001 and "at most 2" in by_id[3]["error"]["message"]
    assert by_id[1]["result"]["structuredContent"]["status"] == "declined"
    assert by_id[2]["result"]["structuredContent"]["status"] == "declined"
    order = [m["id"] for m in out if "method" not in m]
    assert order == [0, 3, 2, 1], "each answer reached its own call"


# -- 8. the grant is what the page says ------------------------------------------------------------


def test_a_grant_covers_the_shown_workspace_states_its_lifetime_and_can_be_revoked(
    served: Served,  # noqa: F811
) -> None:
    s = served
    url, state = url_entry(export(s.lab, 1))
    shown = s.http.get(url, headers=ALICE_BASIC)
    assert "covers only <code>file:///work/notes</code>" in shown.text
    until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(s.lab.clock() + 30 * 86_400))
    assert f"lasts 30 days, until {until}" in shown.text
    assert f"href='{CONNECT_PATH}'" in shown.text
    assert approve(s, url, token=form_token(shown.text)).status_code == 200
    assert export(s.lab, 2, state=state, action="accept")["result"]["structuredContent"]["exported"]
    # Another workspace of the same principal is not covered: it asks again.
    inner = {"workspaceUri": "file:///work/notes/sub"}
    assert export(s.lab, 3, arguments=inner)["result"]["resultType"] == "input_required"
    # The list shows the grant; a forged token, a foreign origin or another principal revoke
    # nothing; the real form does.
    mine = s.http.get(s.base + CONNECT_PATH, headers=ALICE_BASIC)
    assert mine.status_code == 200 and "file:///work/notes" in mine.text
    token = form_token(mine.text)
    form = {"content-type": "application/x-www-form-urlencoded"}
    body = f"form_token={token}&workspace=file%3A%2F%2F%2Fwork%2Fnotes"
    forged = body.replace(token, "k.forged")
    target = s.base + CONNECT_PATH
    assert s.http.post(target, headers={**ALICE_BASIC, **form}, content=forged).status_code == 403
    foreign = {**ALICE_BASIC, **form, "origin": "http://evil.example"}
    assert s.http.post(target, headers=foreign, content=body).status_code == 403
    assert s.http.post(target, headers={**MALLORY_BASIC, **form}, content=body).status_code == 403
    assert s.http.post(target, headers=form, content=body).status_code == 401
    assert s.lab.consent.credential("alice", NOTES["workspaceUri"]) is not None
    revoked = s.http.post(target, headers={**ALICE_BASIC, **form}, content=body)
    assert revoked.status_code == 200 and "was revoked" in revoked.text
    assert s.lab.consent.credential("alice", NOTES["workspaceUri"]) is None
    assert "nothing is connected" in s.http.get(target, headers=ALICE_BASIC).text
    assert export(s.lab, 4)["result"]["resultType"] == "input_required", "asked again"


# -- 9. completion only for a consent that landed --------------------------------------------------


def test_a_replaced_url_consent_is_never_reported_complete() -> None:
    lab = build_export_lab()
    session = open_session(lab.server)
    completions = 0
    call = session.call(export_call(1, NOTES["workspaceUri"]))
    step = call.start()
    for _ in range(3):
        (asked,) = [m for m in step.send if m.get("method") == "elicitation/create"]
        step = call.receive(reply(asked, {"action": "accept"}))
        assert step.wait is not None
        # The link expires while the call polls: the handler offers a new one.
        lab.clock.advance(DEFAULT_LINK_TTL_SECONDS + 1)
        step = call.poll()
        completions += sum(
            m.get("method") == "notifications/elicitation/complete" for m in step.send
        )
        assert step.result is None
    assert completions == 0, "an expired link is not a consent"
    (asked,) = [m for m in step.send if m.get("method") == "elicitation/create"]
    step = call.receive(reply(asked, {"action": "accept"}))
    assert lab.consent.grant(link_id_of(asked["params"]["url"]), "alice").value == "granted"
    step = call.poll()
    complete = [m for m in step.send if m.get("method") == "notifications/elicitation/complete"]
    assert [m["params"]["elicitationId"] for m in complete] == [asked["params"]["elicitationId"]]
    assert step.result is not None and step.result["result"]["structuredContent"]["exported"]


# -- 10. DELETE ends a call polling for consent ---------------------------------------------------


def test_delete_ends_a_call_that_polls_for_url_consent(tmp_path: Path) -> None:
    alice = TOKENS["alice"]
    with labkit_serve(write_config(tmp_path)) as server, httpx.Client(timeout=WAIT) as http:
        session = legacy_session(http, server.endpoint, alice)
        sock = open_stream(server.address, alice, session, export_call(7, "file:///work/alice"))
        with sock:
            status, data = status_of(sock)
            assert status == 200
            while b"elicitation/create" not in data or not data.endswith(b"\n\n\r\n"):
                data += sock.recv(65536)
            asked = json.loads(data.split(b"data: ", 1)[1].split(b"\n", 1)[0])
            accepted = http.post(
                server.endpoint,
                json=reply(asked, {"action": "accept"}),
                headers={"authorization": f"Bearer {alice}", "mcp-session-id": session},
            )
            assert accepted.status_code == 202
            time.sleep(1.0)  # the call now polls the consent record every 0.5 s
            ended = http.delete(
                server.endpoint,
                headers={"authorization": f"Bearer {alice}", "mcp-session-id": session},
            )
            assert ended.status_code == 204
            sock.settimeout(5.0)  # promptly: not after the 5-minute poll window
            tail = read_until(sock, b"the call ended")
            assert b"The session ended; the call ended" in tail
            assert b"0\r\n\r\n" in tail + read_until(sock, b"0\r\n\r\n"), "the stream closed"


# -- 11. the session table leaves room for every principal ----------------------------------------


def test_sixty_three_principals_cannot_lock_out_the_sixty_fourth() -> None:
    lab = build_export_lab()
    sessions = LegacyHttp(lab.server)  # the defaults: 1,000 in all, 16 per principal
    ids = itertools.count()
    for principal in range(63):
        for _ in range(16):
            sessions.route({}, initialize_message(next(ids)), f"p{principal}")
    assert len(sessions.sessions) == 1000
    sessions.route({}, initialize_message(next(ids)), "late")
    held = [h.principal for h in sessions.sessions.values()]
    assert held.count("late") == 1 and len(held) == 1000
    assert sorted(held.count(f"p{p}") for p in range(63))[-1] <= 16


def test_a_full_session_table_makes_room_on_a_real_server(tmp_path: Path) -> None:
    extra = "[legacy]\nmax_sessions = 6\nsessions_per_principal = 4\n"
    with labkit_serve(write_config(tmp_path, extra)) as server, httpx.Client(timeout=WAIT) as http:
        first = [legacy_session(http, server.endpoint, TOKENS["alice"]) for _ in range(4)]
        for _ in range(2):
            legacy_session(http, server.endpoint, TOKENS["mallory"])
        carol = legacy_session(http, server.endpoint, TOKENS["carol"])
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}

        def status(token: str, session: str) -> int:
            headers = {"authorization": f"Bearer {token}", "mcp-session-id": session}
            return http.post(server.endpoint, json=ping, headers=headers).status_code

        assert status(TOKENS["carol"], carol) == 200
        assert status(TOKENS["alice"], first[0]) == 404, "the fullest principal's oldest went"
        assert [status(TOKENS["alice"], s) for s in first[1:]] == [200, 200, 200]


# -- 13. a second initialize ----------------------------------------------------------------------


def test_a_second_initialize_in_a_session_is_http_400(tmp_path: Path) -> None:
    with labkit_serve(write_config(tmp_path)) as server, httpx.Client(timeout=WAIT) as http:
        alice = TOKENS["alice"]
        session = legacy_session(http, server.endpoint, alice)
        again = http.post(
            server.endpoint,
            json=initialize_message(5),
            headers={"authorization": f"Bearer {alice}", "mcp-session-id": session},
        )
        assert again.status_code == 400
        assert again.json()["error"]["code"] == -32600
