"""The HTTP endpoint's direct path and its body deadline, driven as ASGI in this process.

`create_app` hands a request for its path straight to the endpoint; anything else (another
path, a trailing slash, a mounted root path, the lifespan) goes through the Starlette router,
which answers as it always did. `read_body` shares one timer among the reads of a loop: at a
read's deadline it refuses that read with 408 and no other, a read that has ended is never
cancelled by it, and a cancellation from elsewhere (a shutdown) is never turned into a 408.
No test here asserts on a speed: the deadlines are already past or never reached.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from helpers import build_lab, request

from labkit.auth import demo_authenticator
from labkit.transports.http import create_app
from labkit.transports.limits import BodyRefused, read_body

PORT = 8000
LIST = request(1, "tools/list")
VERSION = LIST["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]


def _scope(path: str, *, root_path: str = "", method: str = "POST", token: str = "demo-alice"):
    headers = [
        (b"host", f"127.0.0.1:{PORT}".encode()),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", VERSION.encode()),
        (b"mcp-method", b"tools/list"),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": headers,
        "server": ("127.0.0.1", PORT),
        "client": ("127.0.0.1", 40000),
    }


def _drive(app: Any, scope: dict[str, Any], body: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    sent: list[dict[str, Any]] = []

    async def run() -> None:
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop()
            await asyncio.Event().wait()  # nothing more until the response is sent
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(scope, receive, send)

    asyncio.run(run())
    start = sent[0]
    assert start["type"] == "http.response.start"
    body_out = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body_out


@pytest.fixture
def app() -> Any:
    return create_app(build_lab().server, demo_authenticator())


def test_the_endpoint_path_is_answered_directly(app: Any) -> None:
    status, headers, body = _drive(app, _scope("/mcp"), orjson.dumps(LIST))
    assert status == 200
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(body)
    assert [t["name"] for t in orjson.loads(body)["result"]["tools"]]


def test_a_mounted_root_path_goes_through_the_router_to_the_same_endpoint(app: Any) -> None:
    direct = _drive(app, _scope("/mcp"), orjson.dumps(LIST))
    mounted = _drive(app, _scope("/lab/mcp", root_path="/lab"), orjson.dumps(LIST))
    assert mounted == direct


def test_other_paths_are_the_routers_and_checks_still_hold_on_the_direct_path(app: Any) -> None:
    assert _drive(app, _scope("/elsewhere"), orjson.dumps(LIST))[0] == 404
    status, headers, _ = _drive(app, _scope("/mcp/"), orjson.dumps(LIST))
    assert status in (307, 308) and headers[b"location"].endswith(b"/mcp")
    assert _drive(app, _scope("/mcp", token="wrong"), orjson.dumps(LIST))[0] == 401
    assert _drive(app, _scope("/mcp", method="GET"), b"")[0] == 405


def test_headers_the_endpoint_does_not_read_change_nothing(app: Any) -> None:
    scope = _scope("/mcp")
    plain = _drive(app, scope, orjson.dumps(LIST))
    scope["headers"] = [*scope["headers"], (b"x-unknown", b"\xff\xfe"), (b"cookie", b"a=b")]
    assert _drive(app, scope, orjson.dumps(LIST)) == plain


def test_a_repeated_routing_header_is_still_seen(app: Any) -> None:
    scope = _scope("/mcp")
    scope["headers"] = [*scope["headers"], (b"mcp-method", b"tools/list")]
    status, _, body = _drive(app, scope, orjson.dumps(LIST))
    assert status == 400
    assert orjson.loads(body)["error"]["code"] == -32020


def _routing(scope: dict[str, Any], change: str, method: str) -> dict[str, Any]:
    headers = [(n, v) for n, v in scope["headers"] if n != b"mcp-method"]
    headers.append((b"mcp-method", method.encode()))
    if change == "repeated":
        headers.append((b"mcp-method", method.encode()))
    elif change == "other-method":
        headers[-1] = (b"mcp-method", b"tools/call")
    elif change == "no-version":
        headers = [(n, v) for n, v in headers if n != b"mcp-protocol-version"]
    elif change == "other-version":
        headers = [(n, v) for n, v in headers if n != b"mcp-protocol-version"]
        headers.append((b"mcp-protocol-version", b"2025-11-25"))
    return {**scope, "headers": headers}


@pytest.mark.parametrize("method", ["tools/list", "server/discover"])
@pytest.mark.parametrize(
    "change", ["none", "repeated", "other-method", "no-version", "other-version"]
)
@pytest.mark.parametrize("blocking", [frozenset(), frozenset({"tools/list", "server/discover"})])
def test_a_listing_encoded_once_is_answered_as_the_first_was(
    method: str, change: str, blocking: frozenset[str]
) -> None:
    """Once a listing is encoded, the endpoint answers it without dispatching: the same status
    and bytes as the first answer, routing-header refusals included, whether or not the
    method is configured to block."""
    app = create_app(build_lab().server, demo_authenticator(), blocking_methods=blocking)
    scope = _routing(_scope("/mcp"), change, method)
    body = orjson.dumps(request(9, method))
    first = _drive(app, scope, body)
    _drive(app, _routing(_scope("/mcp"), "none", method), body)  # encodes it, if not yet
    assert method in app.server.listings
    assert _drive(app, scope, body) == first
    status, _, answer = first
    if change == "none":
        assert status == 200 and orjson.loads(answer)["id"] == 9
    else:
        assert status == 400 and orjson.loads(answer)["error"]["code"] == -32020


# -- read_body's deadline ----------------------------------------------------------------------


async def _never() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def test_a_body_past_its_deadline_is_408_and_the_task_is_not_left_cancelled() -> None:
    async def run() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        with pytest.raises(BodyRefused) as refused:
            await read_body(_never, None, max_bytes=10, deadline=loop.time())
        task = asyncio.current_task()
        assert task is not None
        await asyncio.sleep(0)  # the task runs on: no cancellation is pending
        return refused.value.status, task.cancelling()

    status, cancelling = asyncio.run(run())
    assert status == 408
    assert cancelling == 0


def test_a_cancellation_from_elsewhere_is_not_a_408() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.ensure_future(
            read_body(_never, None, max_bytes=10, deadline=loop.time() + 3600)
        )
        await asyncio.sleep(0)
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader

    asyncio.run(run())


def test_a_body_within_its_deadline_is_read_whole_and_the_timer_is_gone() -> None:
    async def run() -> bytes:
        loop = asyncio.get_running_loop()
        chunks = [
            {"type": "http.request", "body": b"c", "more_body": False},
            {"type": "http.request", "body": b"b", "more_body": True},
            {"type": "http.request", "body": b"a", "more_body": True},
        ]

        async def receive() -> dict[str, Any]:
            return chunks.pop()

        body = await read_body(receive, "3", max_bytes=10, deadline=loop.time() + 3600)
        await asyncio.sleep(0)
        return body

    assert asyncio.run(run()) == b"abc"


def _fed_after(seconds: float, body: bytes) -> Any:
    async def receive() -> dict[str, Any]:
        await asyncio.sleep(seconds)
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _within(waiting: Any) -> Any:
    """`waiting`, or a failure (not a hang) if a deadline is never enforced."""
    return await asyncio.wait_for(waiting, 30)


async def _status(reading: Any) -> Any:
    try:
        return await reading
    except BodyRefused as refused:
        return refused.status


@pytest.mark.parametrize("later_first", [False, True])
def test_only_the_read_past_its_deadline_is_refused(later_first: bool) -> None:
    """Reads in flight together, registered in either order: the one whose deadline comes is
    408, the one with time left receives its whole body."""

    async def run() -> list[Any]:
        loop = asyncio.get_running_loop()
        late = read_body(_fed_after(0.2, b"late"), None, max_bytes=10, deadline=loop.time() + 3600)
        stuck = read_body(_never, None, max_bytes=10, deadline=loop.time() + 0.05)
        order = [late, stuck] if later_first else [stuck, late]
        results = await _within(asyncio.gather(*(_status(reading) for reading in order)))
        return results if later_first else results[::-1]

    assert asyncio.run(run()) == [b"late", 408]


def test_each_stuck_read_is_refused_at_its_own_deadline() -> None:
    async def run() -> list[Any]:
        loop = asyncio.get_running_loop()
        now = loop.time()
        return await _within(
            asyncio.gather(
                *(
                    _status(read_body(_never, None, max_bytes=10, deadline=now + delay))
                    for delay in (0.05, 0.15, 0.1)
                )
            )
        )

    assert asyncio.run(run()) == [408, 408, 408]


def test_a_read_that_has_ended_is_never_cancelled_by_its_deadline() -> None:
    async def run() -> str:
        loop = asyncio.get_running_loop()

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"x", "more_body": False}

        for _ in range(3):
            await read_body(receive, None, max_bytes=10, deadline=loop.time() + 0.01)
        await asyncio.sleep(0.1)  # every deadline passes: the task goes on
        task = asyncio.current_task()
        assert task is not None
        return f"cancelling={task.cancelling()}"

    assert asyncio.run(run()) == "cancelling=0"


def test_deadlines_hold_under_uvloop_and_across_loops() -> None:
    """uvloop (the server's loop) and a new loop after it: each read keeps its deadline."""
    import uvloop

    async def run() -> list[Any]:
        loop = asyncio.get_running_loop()
        return await _within(
            asyncio.gather(
                _status(read_body(_never, None, max_bytes=10, deadline=loop.time() + 0.05)),
                _status(
                    read_body(_fed_after(0.1, b"ok"), None, max_bytes=10, deadline=loop.time() + 60)
                ),
            )
        )

    assert uvloop.run(run()) == [408, b"ok"]
    assert asyncio.run(run()) == [408, b"ok"]


def test_a_body_over_the_cap_is_413_whether_declared_or_received() -> None:
    async def run(declared: str | None) -> int:
        loop = asyncio.get_running_loop()

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"x" * 11, "more_body": False}

        with pytest.raises(BodyRefused) as refused:
            await read_body(receive, declared, max_bytes=10, deadline=loop.time() + 3600)
        return refused.value.status

    assert asyncio.run(run("11")) == 413
    assert asyncio.run(run(None)) == 413
