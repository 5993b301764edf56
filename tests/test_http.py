"""Streamable HTTP: a real uvicorn server on a loopback port, driven with raw JSON over httpx.

Covers what the official SDK client never sends: malformed bodies, missing `_meta`, header
mismatches, notifications, wrong tokens, foreign Hosts and Origins, oversize and slow bodies,
plus `labkit serve --transport http` as a process (start, serve, stop on a signal).
"""

from __future__ import annotations

import base64
import json
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
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

from labkit.auth import TokenAuthenticator, demo_authenticator, hash_token
from labkit.server import Request, Server
from labkit.transports.guard import _MAX_ADMITTED, UNKNOWN_HOST, HostRule, TrustedOrigins
from labkit.transports.http import create_app

ALICE = {"authorization": "Bearer demo-alice"}
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Run `app` under uvicorn in a thread on a free loopback port; yield the endpoint URL.

    The socket is listening before uvicorn starts, so clients may connect at once: the kernel
    queues them until the event loop accepts.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"


@pytest.fixture
def lab() -> Lab:
    return build_lab()


@pytest.fixture
def url(lab: Lab) -> Iterator[str]:
    with serving(create_app(lab.server, demo_authenticator())) as endpoint:
        yield endpoint


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def routing_headers(message: Any) -> dict[str, str]:
    """The headers a conforming client derives from the body."""
    headers: dict[str, str] = {}
    if not isinstance(message, dict):
        return headers
    params = message.get("params")
    if isinstance(params, dict):
        version = (params.get("_meta") or {}).get(VERSION_KEY)
        if isinstance(version, str):
            headers["MCP-Protocol-Version"] = version
        name = params.get("name", params.get("uri"))
        if isinstance(name, str):
            headers["Mcp-Name"] = name
    if isinstance(message.get("method"), str):
        headers["Mcp-Method"] = message["method"]
    return headers


def post(
    http: httpx.Client,
    url: str,
    message: Any,
    *,
    headers: Mapping[str, str] | None = None,
    without: tuple[str, ...] = (),
    auth: Mapping[str, str] = ALICE,
) -> httpx.Response:
    dropped = {name.lower() for name in without}
    derived = {k: v for k, v in routing_headers(message).items() if k.lower() not in dropped}
    merged = {"content-type": "application/json", **auth, **derived, **(headers or {})}
    return http.post(url, content=json.dumps(message).encode(), headers=merged)


def rpc(response: httpx.Response, message: Any, status: int) -> dict[str, Any]:
    """The JSON-RPC body of a response with the expected status, checked against the schema."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in response.headers
    body: dict[str, Any] = response.json()
    check_wire(message, body)
    return body


# -- requests that succeed ---------------------------------------------------------------------


def test_discover_answers_json_with_status_200(http: httpx.Client, url: str) -> None:
    message = request(1, "server/discover")
    body = rpc(post(http, url, message), message, 200)
    assert body["result"]["supportedVersions"] == ["2026-07-28"]
    assert "roots" not in body["result"]["capabilities"]


def test_full_delete_flow_over_raw_http(http: httpx.Client, url: str, lab: Lab) -> None:
    first = call_message(1)
    ask = rpc(post(http, url, first), first, 200)["result"]
    assert ask["resultType"] == "input_required"
    retry = call_message(2, state=ask["requestState"], responses=accept("note-14"))
    done = rpc(post(http, url, retry), retry, 200)["result"]
    assert done["structuredContent"] == {"deleted": True, "status": "deleted", "noteId": "note-14"}
    assert "note-14" not in lab.ids()


def test_cancel_over_http_keeps_the_note(http: httpx.Client, url: str, lab: Lab) -> None:
    first = call_message(1)
    state = rpc(post(http, url, first), first, 200)["result"]["requestState"]
    retry = call_message(2, state=state, responses=CANCEL)
    assert rpc(post(http, url, retry), retry, 200)["result"]["structuredContent"]["status"] == (
        "cancelled"
    )
    assert "note-14" in lab.ids()


def test_session_id_is_ignored_and_never_minted(http: httpx.Client, url: str) -> None:
    message = request(1, "tools/list")
    response = post(http, url, message, headers={"Mcp-Session-Id": "made-up-session"})
    assert rpc(response, message, 200)["result"]["tools"][0]["name"] == "notes_delete"


def test_header_names_are_case_insensitive(http: httpx.Client, url: str) -> None:
    message = call_message(1)
    headers = {
        "MCP-PROTOCOL-VERSION": "2026-07-28",
        "mcp-method": "tools/call",
        "MCP-name": "notes_delete",
    }
    response = post(http, url, message, headers=headers, without=tuple(routing_headers(message)))
    assert rpc(response, message, 200)["result"]["resultType"] == "input_required"


def test_base64_wrapped_mcp_name_is_decoded(http: httpx.Client, url: str) -> None:
    message = call_message(1)
    wrapped = "=?base64?" + base64.b64encode(b"notes_delete").decode() + "?="
    response = post(http, url, message, headers={"Mcp-Name": wrapped})
    assert rpc(response, message, 200)["result"]["resultType"] == "input_required"


def test_accept_and_content_type_parameters_are_tolerated(http: httpx.Client, url: str) -> None:
    message = request(1, "server/discover")
    headers = {
        "content-type": "application/json; charset=utf-8",
        "accept": "application/json, text/event-stream",
    }
    rpc(post(http, url, message, headers=headers), message, 200)


# -- notifications ------------------------------------------------------------------------------


def test_notification_gets_202_and_an_empty_body(http: httpx.Client, url: str) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response = post(http, url, message)
    assert response.status_code == 202
    assert response.content == b""


def test_a_notification_never_deletes(http: httpx.Client, url: str, lab: Lab) -> None:
    first = call_message(1)
    state = rpc(post(http, url, first), first, 200)["result"]["requestState"]
    sneaky = call_message(MISSING, state=state, responses=accept("note-14"))
    assert post(http, url, sneaky).status_code == 202
    assert "note-14" in lab.ids()


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "method": "notifications/cancelled"},
        {"jsonrpc": "2.0", "method": 7},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": [1]},
        {"foo": "bar"},
    ],
    ids=["bad-jsonrpc", "method-not-string", "params-not-object", "no-method"],
)
def test_malformed_id_less_object_is_invalid_request(
    http: httpx.Client, url: str, message: dict[str, Any]
) -> None:
    body = rpc(post(http, url, message), [message], 400)  # a list: the answer's id is null
    assert body["id"] is None
    assert body["error"]["code"] == -32600


# -- malformed envelopes and _meta ---------------------------------------------------------------


def test_body_that_is_not_json_is_parse_error_with_null_id(http: httpx.Client, url: str) -> None:
    headers = {"content-type": "application/json", **ALICE}
    response = http.post(url, content=b'{"jsonrpc": "2.0", "id": 1,', headers=headers)
    body = rpc(response, "not json", 400)
    assert body == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": body["error"]["message"]},
    }


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32", "utf-8-sig"])
def test_a_body_that_is_not_utf8_is_a_parse_error(
    http: httpx.Client, url: str, encoding: str
) -> None:
    message = request(1, "server/discover")
    headers = {"content-type": "application/json", **ALICE, **routing_headers(message)}
    response = http.post(url, content=json.dumps(message).encode(encoding), headers=headers)
    assert rpc(response, "not UTF-8", 400)["error"]["code"] == -32700


@pytest.mark.parametrize(
    ("message", "code", "status"),
    [
        ([request(1, "server/discover")], -32600, 400),
        ({"jsonrpc": "2.0", "id": True, "method": "server/discover"}, -32600, 400),
        ({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}, -32602, 400),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {}}},
            -32602,
            400,
        ),
        (request(1, "server/discover", version=5), -32602, 400),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
            },
            -32601,
            404,
        ),
        (request(1, "ping"), -32601, 404),
        (request(1, "tools/call", {"name": "no_such_tool"}), -32602, 400),
    ],
    ids=[
        "batch",
        "boolean-id",
        "no-meta",
        "empty-meta",
        "non-string-version",
        "legacy-initialize",
        "removed-ping",
        "unknown-tool",
    ],
)
def test_core_errors_map_to_their_http_status(
    http: httpx.Client, url: str, message: Any, code: int, status: int
) -> None:
    body = rpc(post(http, url, message), message, status)
    assert body["error"]["code"] == code


def test_unsupported_version_in_header_and_meta_is_32022_with_data(
    http: httpx.Client, url: str
) -> None:
    message = request(7, "server/discover", version="v999.0.0")
    body = rpc(post(http, url, message), message, 400)
    assert body["id"] == 7
    assert body["error"]["code"] == -32022
    assert body["error"]["data"] == {"supported": ["2026-07-28"], "requested": "v999.0.0"}


# -- routing headers against the body (-32020) ---------------------------------------------------


@pytest.mark.parametrize(
    ("message", "headers", "without"),
    [
        (request(1, "server/discover"), {}, ("MCP-Protocol-Version",)),
        (
            request(1, "server/discover", version="v999.0.0"),
            {"MCP-Protocol-Version": "2026-07-28"},
            (),
        ),
        (request(1, "server/discover"), {"MCP-Protocol-Version": "2025-11-25"}, ()),
        (request(1, "tools/list"), {}, ("Mcp-Method",)),
        (request(1, "tools/list"), {"Mcp-Method": "server/discover"}, ()),
        (call_message(1), {}, ("Mcp-Name",)),
        (call_message(1), {"Mcp-Name": "other_tool"}, ()),
        (call_message(1), {"Mcp-Name": "=?base64?not base64?="}, ()),
    ],
    ids=[
        "version-missing",
        "meta-version-differs",
        "header-version-differs",
        "method-missing",
        "method-differs",
        "name-missing",
        "name-differs",
        "name-corrupt-base64",
    ],
)
def test_header_disagreeing_with_body_is_32020(
    http: httpx.Client,
    url: str,
    lab: Lab,
    message: dict[str, Any],
    headers: dict[str, str],
    without: tuple[str, ...],
) -> None:
    body = rpc(post(http, url, message, headers=headers, without=without), message, 400)
    assert body["id"] == 1
    assert body["error"]["code"] == -32020
    assert lab.nonces.issued == 0, "a rejected request never reached the tool"


def test_duplicated_routing_header_is_32020(http: httpx.Client, url: str) -> None:
    message = request(1, "tools/list")
    headers = [
        ("content-type", "application/json"),
        ("authorization", "Bearer demo-alice"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
        ("mcp-method", "tools/call"),
    ]
    response = http.post(url, content=json.dumps(message).encode(), headers=headers)
    assert rpc(response, message, 400)["error"]["code"] == -32020


# -- HTTP-level refusals ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_only_post_is_served(http: httpx.Client, url: str, method: str) -> None:
    response = http.request(method, url, headers=ALICE)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


@pytest.mark.parametrize(
    "auth",
    [{}, {"authorization": "Bearer wrong"}, {"authorization": "Basic ZGVtbzphbGljZQ=="}],
    ids=["missing", "wrong", "other-scheme"],
)
def test_missing_or_wrong_token_is_401_with_a_bearer_challenge(
    http: httpx.Client, url: str, lab: Lab, auth: dict[str, str]
) -> None:
    response = post(http, url, call_message(1), auth=auth)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    # The same few bytes whatever was wrong: nothing tells the cases apart.
    assert response.text == "Unauthorized"
    assert lab.nonces.issued == 0


def test_principal_comes_from_the_token_never_from_client_info(
    http: httpx.Client, url: str, lab: Lab
) -> None:
    message = call_message(1)
    message["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] = {
        "name": "alice",
        "version": "1",
    }
    body = rpc(
        post(http, url, message, auth={"authorization": "Bearer demo-mallory"}), message, 400
    )
    assert body["error"]["code"] == -32602
    assert lab.nonces.issued == 0, "mallory was never shown alice's notes"


def test_configured_tokens_map_to_their_principals(lab: Lab, http: httpx.Client) -> None:
    authenticator = TokenAuthenticator({"alice": hash_token("s3cret-token-for-alice")})
    with serving(create_app(lab.server, authenticator)) as endpoint:
        message = call_message(1)
        good = {"authorization": "Bearer s3cret-token-for-alice"}
        assert post(http, endpoint, message, auth=good).status_code == 200
        assert post(http, endpoint, message, auth=ALICE).status_code == 401


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"host": "evil.example.com"}, 421),
        ({"host": "evil.example.com", "origin": "http://evil.example.com"}, 421),
        ({"origin": "http://evil.example.com"}, 403),
        ({"origin": "null"}, 403),
        ({"origin": "http://127.0.0.1:1"}, 403),
    ],
    ids=["host", "host-and-origin", "origin", "null-origin", "loopback-other-port"],
)
def test_foreign_host_or_origin_is_refused(
    http: httpx.Client, url: str, headers: dict[str, str], status: int
) -> None:
    response = post(http, url, request(1, "server/discover"), headers=headers)
    assert response.status_code == status


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_own_loopback_host_and_origin_are_served(http: httpx.Client, url: str, name: str) -> None:
    port = httpx.URL(url).port
    headers = {"host": f"{name}:{port}", "origin": f"http://{name}:{port}"}
    message = request(1, "server/discover")
    rpc(post(http, url, message, headers=headers), message, 200)


def test_configured_host_and_origin_are_served(lab: Lab, http: httpx.Client) -> None:
    app = create_app(
        lab.server,
        demo_authenticator(),
        allowed_hosts=["mcp.example.com"],
        allowed_origins=["https://app.example.com"],
    )
    with serving(app) as endpoint:
        headers = {"host": "mcp.example.com:443", "origin": "https://app.example.com"}
        message = request(1, "server/discover")
        rpc(post(http, endpoint, message, headers=headers), message, 200)


def test_wrong_content_type_is_415_and_unacceptable_accept_is_406(
    http: httpx.Client, url: str
) -> None:
    message = request(1, "server/discover")
    assert post(http, url, message, headers={"content-type": "text/plain"}).status_code == 415
    assert post(http, url, message, headers={"accept": "text/html"}).status_code == 406


def test_oversize_body_is_413(lab: Lab, http: httpx.Client) -> None:
    with serving(create_app(lab.server, demo_authenticator(), max_body_bytes=2048)) as endpoint:
        message = request(1, "server/discover", {"padding": "x" * 4096})
        assert post(http, endpoint, message).status_code == 413

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while streaming
            yield json.dumps(message).encode()

        headers = {"content-type": "application/json", **ALICE, **routing_headers(message)}
        assert http.post(endpoint, content=chunks(), headers=headers).status_code == 413
        small = request(2, "server/discover")
        rpc(post(http, endpoint, small), small, 200)


def test_a_body_that_never_finishes_is_408(lab: Lab) -> None:
    app = create_app(lab.server, demo_authenticator(), timeout_seconds=0.5)
    with serving(app) as endpoint:
        port = httpx.URL(endpoint).port
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer demo-alice\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.sendall(head.encode())
            reply = conn.recv(4096)
        assert reply.startswith(b"HTTP/1.1 408 ")


# -- the core call: timeouts and internal errors ------------------------------------------------


class Stalling:
    """A tool that holds its worker thread until released (the core never sleeps)."""

    name = "stall"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "description": "waits", "inputSchema": {"type": "object"}}

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        self.entered.set()
        self.release.wait(60)
        return {"resultType": "complete", "content": []}


class Broken:
    name = "broken"

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "description": "fails", "inputSchema": {"type": "object"}}

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("secret internal detail")


def test_a_call_past_the_timeout_is_answered_503_while_the_loop_keeps_serving(
    http: httpx.Client,
) -> None:
    stalling = Stalling()
    app = create_app(Server([stalling]), demo_authenticator(), timeout_seconds=0.5)
    try:
        with serving(app) as endpoint:
            message = call_message(1, "stall", {})
            body = rpc(post(http, endpoint, message), message, 503)
            assert stalling.entered.is_set()
            assert body["error"]["code"] == -32001
            probe = request(2, "tools/list")
            rpc(post(http, endpoint, probe), probe, 200)
    finally:
        stalling.release.set()


def test_an_internal_error_is_500_without_details(http: httpx.Client) -> None:
    with serving(create_app(Server([Broken()]), demo_authenticator())) as endpoint:
        message = call_message(1, "broken", {})
        body = rpc(post(http, endpoint, message), message, 500)
        assert body["error"] == {"code": -32603, "message": "Internal error"}
        assert "secret" not in json.dumps(body)


# -- `labkit serve --transport http` as a process ----------------------------------------------


@contextmanager
def serve_process(*args: str) -> Iterator[tuple[subprocess.Popen[str], str, list[str]]]:
    """Start `labkit serve --transport http --port 0 ARGS`; yield it, its URL and stderr so far."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "labkit.cli", "serve", "--transport", "http", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None and proc.stdout is not None
    try:
        lines: list[str] = []
        endpoint = None
        for line in proc.stderr:
            lines.append(line)
            found = re.search(r"at (http://\S+:\d+/mcp)", line)
            if found:
                endpoint = found.group(1)
                break
        assert endpoint is not None, "".join(lines)
        yield proc, endpoint, lines
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_http_demo_serves_then_stops_cleanly_on_a_signal(
    http: httpx.Client, signum: signal.Signals
) -> None:
    with serve_process() as (proc, endpoint, lines):
        assert any("demo credentials are on" in line for line in lines)
        assert any("demo deployment" in line for line in lines)
        message = request(1, "server/discover")
        rpc(post(http, endpoint, message), message, 200)
        assert post(http, endpoint, message, auth={}).status_code == 401
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == 0
        assert proc.stdout is not None and proc.stdout.read() == ""


@pytest.mark.parametrize("host", ["127.0.0.2", "::1", "localhost"])
def test_the_listening_address_is_always_an_allowed_host(http: httpx.Client, host: str) -> None:
    # --host 127.0.0.2 used to bind and log its URL, then answer every request to it 421.
    with serve_process("--host", host) as (proc, endpoint, lines):
        message = request(1, "server/discover")
        rpc(post(http, endpoint, message), message, 200)
        foreign = post(http, endpoint, message, headers={"host": "evil.example"})
        assert foreign.status_code == 421


def test_serve_http_demo_refuses_a_non_loopback_address() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "serve", "--transport", "http", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("labkit serve: --host: ") and "loopback" in last


def test_serve_http_reports_a_port_in_use_with_exit_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        proc = subprocess.run(
            [sys.executable, "-m", "labkit.cli", "serve", "--transport", "http", "--port", port],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr


def test_the_admitted_hosts_and_origins_kept_are_only_those_admitted() -> None:
    """`TrustedOrigins` keeps what it admitted (answered again by one lookup) and never what
    it refused: a refused Host or Origin is refused again, however often it comes, and the
    kept values stop growing at their bound."""
    trusted = TrustedOrigins(HostRule(()), ())
    own = (8000, "localhost:8000", "http://localhost:8000")
    for _ in range(2):
        assert trusted.refusal(*own) is None
        assert trusted.refusal(8000, "evil.example:8000", None) == (421, UNKNOWN_HOST)
        assert trusted.refusal(8000, "localhost:8000", "http://evil.example") is not None
        assert trusted.refusal(8001, "localhost:8000", None) is not None  # another port
    assert trusted._admitted == {own}
    for port in range(1, 2 * _MAX_ADMITTED):
        assert trusted.refusal(port, f"127.0.0.1:{port}", None) is None
    assert len(trusted._admitted) == _MAX_ADMITTED
