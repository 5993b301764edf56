"""In-process comparison: labkit's `Server.handle` against the SDK's own in-process path.

labkit: `Server.handle(message, RequestContext(principal="alice"))` on a parsed JSON-RPC dict.

SDK, two entries, both the real request handling of `mcp.server.lowlevel.Server` (runner,
middleware chain with `RequestStateBoundary`, params validation, result serialization):

* `direct`: what `mcp.Client(server)` uses in-process at 2026-07-28: a `DirectDispatcher`
  pair with `modern_on_request` on the server side (no JSON-RPC framing, no streams).
* `jsonrpc`: one parsed JSON-RPC dict in, one response dict out, the same steps the SDK's
  modern Streamable HTTP entry takes between decoding the body and encoding the reply
  (`JSONRPCRequest` validation, `classify_inbound_request`, `Connection.from_envelope`,
  `serve_one`), minus the HTTP.

The ratio is taken against the faster SDK entry. Throughput is requests per CPU-second of this
process (`time.process_time`); the cells run alternately, several times, and the median is
reported. A delete is one round-one request plus its accept retry; a deleted note comes back
at once (`RefillingNoteStore`) in both servers.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from common import (
    BEARER,
    INPUT_KEY,
    META,
    PRINCIPAL,
    bench_authorizer,
    bench_notes,
    bench_replay,
    delete_params,
    delete_retry,
    delete_round1,
    format_table,
    rate,
    ratio,
    tools_list,
)
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server as SdkServer
from mcp.server.runner import modern_error_data, modern_on_request, serve_one
from mcp.shared.direct_dispatcher import create_direct_dispatcher_pair
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.transport_context import TransportContext
from pydantic import ValidationError
from sdk_notes_server import build_server

from labkit.deployment import demo_deployment
from labkit.server import RequestContext
from labkit.server import Server as LabkitServer
from labkit.state import KeyRing

REPEATS = 5
CELL_CPU_SECONDS = 0.4
NOTE = "note-7"

Call = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""One parsed JSON-RPC request in, one JSON-RPC response (result or error envelope) out."""


# -- the servers -----------------------------------------------------------------------------


def labkit_server(*, refill: bool = True) -> tuple[LabkitServer, Any]:
    notes = bench_notes(refill=refill)
    deployment = demo_deployment(keys=KeyRing.ephemeral(), notes=notes, replay=bench_replay())
    return deployment.server, notes


def sdk_server(*, refill: bool = True) -> tuple[SdkServer[Any], Any]:
    notes = bench_notes(refill=refill)
    server = build_server(notes=notes, replay=bench_replay(), authorizer=bench_authorizer())
    return server, notes


def authenticate_alice() -> None:
    """What the SDK's bearer middleware does for `Authorization: Bearer demo-alice`."""
    token = AccessToken(token=BEARER, client_id=PRINCIPAL, scopes=[])
    auth_context_var.set(AuthenticatedUser(token))


@dataclass
class _ExchangeContext:
    """A `DispatchContext` for one request with no back-channel (2026-07-28 forbids one)."""

    transport: TransportContext
    request_id: types.RequestId
    message_metadata: Any = None
    cancel_requested: anyio.Event | None = None
    can_send_request: bool = False

    async def send_raw_request(
        self, method: str, params: Any, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Any, opts: CallOptions | None = None) -> None:
        return None

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None


_TRANSPORT = TransportContext(kind="in-process", can_send_request=False)


def _error(request_id: types.RequestId | None, error: types.ErrorData) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.model_dump(exclude_none=True)}


def sdk_jsonrpc_entry(server: SdkServer[Any]) -> Call:
    async def call(message: dict[str, Any]) -> dict[str, Any]:
        try:
            request = types.JSONRPCRequest.model_validate(message)
        except ValidationError:
            return _error(None, types.ErrorData(code=types.INVALID_REQUEST, message="Invalid"))
        verdict = classify_inbound_request(message)
        if isinstance(verdict, InboundLadderRejection):
            error = types.ErrorData(code=verdict.code, message=verdict.message, data=verdict.data)
            return {
                "jsonrpc": "2.0",
                "id": request.id,
                "error": error.model_dump(exclude_none=True),
            }
        connection = Connection.from_envelope(
            verdict.protocol_version, verdict.client_info, verdict.client_capabilities
        )
        dctx = _ExchangeContext(_TRANSPORT, request.id, cancel_requested=anyio.Event())
        try:
            result = await serve_one(
                server,
                dctx,
                request.method,
                request.params,
                connection=connection,
                lifespan_state={},
            )
        except Exception as exc:
            error = modern_error_data(exc)
            return {
                "jsonrpc": "2.0",
                "id": request.id,
                "error": error.model_dump(exclude_none=True),
            }
        return {"jsonrpc": "2.0", "id": request.id, "result": result}

    return call


async def _noop_request(dctx: Any, method: str, params: Any) -> dict[str, Any]:
    raise NoBackChannelError(method)


async def _noop_notify(dctx: Any, method: str, params: Any) -> None:
    return None


async def with_sdk_direct_entry(
    server: SdkServer[Any], body: Callable[[Call], Awaitable[None]]
) -> None:
    """Run `body` with the entry `mcp.Client(server)` uses in-process (modern mode)."""
    from mcp.shared.exceptions import MCPError

    client, peer = create_direct_dispatcher_pair(raise_handler_exceptions=False)
    async with anyio.create_task_group() as tg:
        await tg.start(peer.run, modern_on_request(server, {}), _noop_notify)
        await tg.start(client.run, _noop_request, _noop_notify)

        async def call(message: dict[str, Any]) -> dict[str, Any]:
            try:
                result = await client.send_raw_request(
                    message["method"], message.get("params"), {"request_id": message["id"]}
                )
            except MCPError as exc:
                return {"jsonrpc": "2.0", "id": message["id"], "error": exc.error.model_dump()}
            return {"jsonrpc": "2.0", "id": message["id"], "result": result}

        try:
            await body(call)
        finally:
            client.close()
            peer.close()


def labkit_entry(server: LabkitServer) -> Call:
    context = RequestContext(principal=PRINCIPAL)

    async def call(message: dict[str, Any]) -> dict[str, Any]:
        response = server.handle(message, context)
        assert response is not None
        return response

    return call


# -- the sanity check: both servers really do the same thing ------------------------------------


def _result(response: dict[str, Any]) -> dict[str, Any]:
    if "result" not in response:
        raise AssertionError(f"expected a result, got {response}")
    result: dict[str, Any] = response["result"]
    return result


async def sanity_check(name: str, call: Call, notes: Any) -> None:
    """Fail loudly unless `call` lists the tool and really deletes the chosen note."""
    listed = _result(await call(tools_list(1)))
    assert listed["resultType"] == "complete", (name, listed)
    assert "notes_delete" in [t["name"] for t in listed["tools"]], (name, listed)
    assert listed["ttlMs"] == 60_000 and listed["cacheScope"] == "public", (name, listed)
    assert "io.modelcontextprotocol/serverInfo" in listed["_meta"], (name, listed)
    schema = listed["tools"][0]["inputSchema"]
    assert schema["required"] == ["workspaceUri", "title"], (name, schema)

    first = _result(await call(delete_round1(2)))
    assert first["resultType"] == "input_required", (name, first)
    form = first["inputRequests"][INPUT_KEY]["params"]
    assert first["inputRequests"][INPUT_KEY]["method"] == "elicitation/create", (name, first)
    offered = [o["const"] for o in form["requestedSchema"]["properties"]["note_id"]["oneOf"]]
    assert offered == ["note-3", "note-7", "note-14"], (name, offered)
    assert form["requestedSchema"]["properties"]["confirm"]["type"] == "boolean", (name, form)
    state = first["requestState"]
    assert isinstance(state, str) and len(state) > 40, (name, state)

    tampered = state[:-6] + ("AAAAAA" if not state.endswith("AAAAAA") else "BBBBBB")
    refused = await call(delete_retry(3, tampered, NOTE))
    assert refused.get("error", {}).get("code") == -32602, (name, "tampered state", refused)
    assert NOTE in notes.ids(), (name, "a tampered retry deleted the note")

    done = _result(await call(delete_retry(4, state, NOTE)))
    assert done["resultType"] == "complete", (name, done)
    assert done["structuredContent"] == {"deleted": True, "status": "deleted", "noteId": NOTE}, (
        name,
        done,
    )
    assert NOTE not in notes.ids(), (name, "the note is still there")
    assert "note-3" in notes.ids() and "note-14" in notes.ids(), (name, notes.ids())

    replayed = await call(delete_retry(5, state, NOTE))
    assert replayed.get("error", {}).get("code") == -32602, (name, "replayed state", replayed)
    cancel = delete_retry(7, state, NOTE)
    cancel["params"]["inputResponses"][INPUT_KEY] = {"action": "cancel"}
    over = await call(cancel)
    assert over.get("error", {}).get("code") == -32602, (name, "cancel on a used state", over)

    no_caps = {**delete_round1(6), "params": {**delete_params(), "_meta": {**META}}}
    no_caps["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {}
    missing = await call(no_caps)
    assert missing.get("error", {}).get("code") == -32021, (name, "no elicitation", missing)


async def run_sanity_checks() -> list[str]:
    authenticate_alice()
    checked = []
    server, notes = labkit_server(refill=False)
    await sanity_check("labkit", labkit_entry(server), notes)
    checked.append("labkit")
    sdk, notes = sdk_server(refill=False)
    await sanity_check("sdk jsonrpc", sdk_jsonrpc_entry(sdk), notes)
    checked.append("sdk jsonrpc")
    sdk, notes = sdk_server(refill=False)

    async def body(call: Call) -> None:
        await sanity_check("sdk direct", call, notes)

    await with_sdk_direct_entry(sdk, body)
    checked.append("sdk direct")
    return checked


# -- the timed loops ---------------------------------------------------------------------------


async def _list_loop(call: Call, n: int) -> None:
    request = tools_list(1)
    for _ in range(n):
        response = await call(request)
        if "result" not in response:
            raise AssertionError(response)


async def _delete_loop(call: Call, n: int) -> None:
    request_id = 0
    for _ in range(n):
        request_id += 2
        first = await call(delete_round1(request_id))
        state = first["result"]["requestState"]
        done = await call(delete_retry(request_id + 1, state, NOTE))
        if not done["result"]["structuredContent"]["deleted"]:
            raise AssertionError(done)


async def measure(loop: Callable[[Call, int], Awaitable[None]], call: Call) -> float:
    """Operations per CPU-second: grow the batch until it takes CELL_CPU_SECONDS of CPU."""
    await loop(call, 20)  # warm caches and lazily built state
    n = 50
    while True:
        start = time.process_time()
        await loop(call, n)
        spent = time.process_time() - start
        if spent >= CELL_CPU_SECONDS:
            return n / spent
        n = max(n * 2, int(n * CELL_CPU_SECONDS * 1.2 / max(spent, 1e-3)))


@dataclass
class Cell:
    name: str
    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


async def run_cells() -> dict[str, Cell]:
    authenticate_alice()
    cells: dict[str, Cell] = {}

    def add(key: str, value: float) -> None:
        cells.setdefault(key, Cell(key, [])).samples.append(value)

    loops = {"tools/list": _list_loop, "delete": _delete_loop}
    for _ in range(REPEATS):
        for op, loop in loops.items():
            server, _notes = labkit_server()
            add(f"labkit {op}", await measure(loop, labkit_entry(server)))
            sdk, _notes = sdk_server()
            add(f"sdk-jsonrpc {op}", await measure(loop, sdk_jsonrpc_entry(sdk)))
            sdk, _notes = sdk_server()
            result: list[float] = []

            async def body(call: Call, loop: Any = loop, result: list[float] = result) -> None:
                result.append(await measure(loop, call))

            await with_sdk_direct_entry(sdk, body)
            add(f"sdk-direct {op}", result[0])
    return cells


def summarize(cells: dict[str, Cell]) -> list[dict[str, Any]]:
    rows = []
    for op, unit in (("tools/list", "requests"), ("delete", "two-round deletes")):
        labkit = cells[f"labkit {op}"].median
        direct = cells[f"sdk-direct {op}"].median
        jsonrpc = cells[f"sdk-jsonrpc {op}"].median
        sdk = max(direct, jsonrpc)
        rows.append(
            {
                "cell": f"in-process {op}",
                "unit": f"{unit} per CPU-second",
                "labkit": labkit,
                "sdk_direct": direct,
                "sdk_jsonrpc": jsonrpc,
                "sdk": sdk,
                "ratio": labkit / sdk,
                "goal": 10.0,
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    return format_table(
        ["cell (per CPU-second)", "labkit", "SDK direct", "SDK jsonrpc", "labkit/SDK", "goal"],
        [
            [
                r["cell"] + (" (deletes)" if "delete" in r["cell"] else " (requests)"),
                rate(r["labkit"]),
                rate(r["sdk_direct"]),
                rate(r["sdk_jsonrpc"]),
                ratio(r["labkit"], r["sdk"]),
                f">= {r['goal']:.0f}x " + ("met" if r["ratio"] >= r["goal"] else "MISSED"),
            ]
            for r in rows
        ],
    )


async def _main() -> list[dict[str, Any]]:
    checked = await run_sanity_checks()
    print(f"sanity: {', '.join(checked)} list the tool and really delete the chosen note")
    rows = summarize(await run_cells())
    print(table(rows))
    return rows


def main() -> list[dict[str, Any]]:
    return asyncio.run(_main())


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)  # expected refusals in the sanity checks
    main()
