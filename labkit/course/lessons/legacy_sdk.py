"""A 2025-11-25 session with the official SDK client against a labkit stdio server.

Owns: `run_legacy_session`, which connects the SDK's `Client(mode="legacy")` (the
`initialize` handshake: the connection is the session) to a labkit server speaking
newline-delimited JSON-RPC, makes the given tool calls in that one session, answers every
live `elicitation/create` with the caller's plain function and every live `roots/list` with
the given roots, and returns a `LegacyTranscript` of plain values (dicts, strings, numbers;
no SDK types) that a notebook can print.

The server is either `labkit serve` started as a process (`command`), or, by default, the
same thing without the process: the demo deployment's server behind `StdioTransport(...,
eras=ERAS)` (the class `labkit serve` runs over stdio, acting for alice) on a pair of OS
pipes in a thread. The default needs no process and no TCP listener: `labkit serve` binds a
loopback port for its consent page, which the grader's confined kernel may not do.

The SDK is asynchronous and a notebook kernel already runs an event loop, so the session
runs on its own loop in a worker thread and the caller simply waits for the transcript.
Notebooks reach the SDK client only through this module. Must not import ipywidgets.
"""

from __future__ import annotations

import importlib
import io
import os
import secrets
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, TextIO

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from labkit.deployment import Deployment, demo_deployment
from labkit.state import KeyRing
from labkit.transports.eras import ERAS
from labkit.transports.stdio import StdioTransport

# The SDK imports jsonschema lazily, at the first tool result it validates: about 1.3 s here.
# Importing it with this module moves that cost into a notebook's setup cell, so the cell
# that runs the session stays well inside the per-cell time limit.
importlib.import_module("jsonschema.validators")

PRINCIPAL: Final = "alice"  # whom `labkit serve` acts for over stdio in the demo deployment
DEFAULT_TIMEOUT_SECONDS: Final = 60.0
_JOIN_SECONDS: Final = 10.0

ElicitationHandler = Callable[[dict[str, Any]], Mapping[str, Any]]
"""`answer(params) -> elicitation result`: the params of one live `elicitation/create` as on
the wire (`message`, `requestedSchema`, ...), answered with `{"action": ..., "content": ...}`."""

_Streams = AbstractAsyncContextManager[Any]


@dataclass(frozen=True)
class CallOutcome:
    """One `tools/call` of the session: a complete result, or the JSON-RPC error it got."""

    name: str
    arguments: dict[str, Any]
    structured: dict[str, Any] | None = None
    text: str = ""
    is_error: bool = False
    error_code: int | None = None
    error_message: str = ""

    @property
    def was_refused(self) -> bool:
        return self.error_code is not None


@dataclass(frozen=True)
class LegacyTranscript:
    """What the SDK client saw in one legacy session, in order of arrival."""

    protocol_version: str
    server_name: str
    tools: tuple[str, ...]
    elicitations: tuple[dict[str, Any], ...]
    """The params of every live `elicitation/create` the client received (wire names)."""
    answers: tuple[dict[str, Any], ...]
    """What the client answered to each of them."""
    roots_asked: int
    """How many live `roots/list` requests the server sent."""
    outcomes: tuple[CallOutcome, ...]
    notes_left: tuple[str, ...] | None
    """The ids still in the server's note store afterwards (None for a server process)."""
    server_stderr: str
    """What a server process wrote on stderr (empty for the in-thread server)."""


def run_legacy_session(
    calls: Sequence[tuple[str, Mapping[str, Any]]],
    answer: ElicitationHandler,
    *,
    roots: Sequence[str] = (),
    command: Sequence[str] | None = None,
    deployment: Deployment | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> LegacyTranscript:
    """Run `calls` (`(tool name, arguments)` pairs) in one legacy SDK session.

    The server is `command` started as a process (for example `[sys.executable, "-m",
    "labkit.cli", "serve"]`), or by default `deployment` (a fresh demo deployment when None)
    served in a thread exactly as `labkit serve` serves it over stdio. A call the server
    refuses with a JSON-RPC error is recorded in its `CallOutcome`, and the session goes on.
    """
    session = _Session(answer, [types.Root.model_validate({"uri": uri}) for uri in roots])
    plan = [(name, dict(arguments)) for name, arguments in calls]
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        if command is not None:
            params = StdioServerParameters(command=command[0], args=list(command[1:]))
            found = _in_worker(
                session.run, stdio_client(params, errlog=errlog), plan, timeout_seconds
            )
            errlog.seek(0)
            return LegacyTranscript(**found, notes_left=None, server_stderr=errlog.read())
    if deployment is None:
        deployment = demo_deployment(keys=KeyRing([secrets.token_bytes(32)]))
    with _Pipes(StdioTransport(deployment.server, PRINCIPAL, eras=ERAS)) as pipes:
        found = _in_worker(session.run, pipes.client_streams(), plan, timeout_seconds)
    notes_left = tuple(sorted(deployment.notes.ids()))
    return LegacyTranscript(**found, notes_left=notes_left, server_stderr="")


def _in_worker(
    run: Callable[[_Streams, list[tuple[str, dict[str, Any]]]], Any],
    streams: _Streams,
    plan: list[tuple[str, dict[str, Any]]],
    timeout_seconds: float,
) -> dict[str, Any]:
    """`anyio.run` on a thread of its own: the calling thread may already run a loop."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="legacy-sdk") as pool:
        found: dict[str, Any] = pool.submit(anyio.run, run, streams, plan).result(
            timeout=timeout_seconds
        )
    return found


class _Pipes:
    """A labkit stdio transport on two OS pipes, served by a thread; the client's ends are
    offered as SDK streams. Closing the client's output ends the server's loop (EOF)."""

    def __init__(self, transport: StdioTransport) -> None:
        server_in_fd, self._client_out_fd = os.pipe()
        self._client_in_fd, server_out_fd = os.pipe()
        server_in, server_out = os.fdopen(server_in_fd, "rb"), os.fdopen(server_out_fd, "wb")

        def serve() -> None:
            with server_in, server_out:
                transport.serve(server_in, server_out)

        self._thread = threading.Thread(target=serve, name="labkit-stdio", daemon=True)
        self._thread.start()
        self._to_server: TextIO = io.TextIOWrapper(
            os.fdopen(self._client_out_fd, "wb"), encoding="utf-8", write_through=True
        )
        self._from_server: TextIO = io.TextIOWrapper(
            os.fdopen(self._client_in_fd, "rb"), encoding="utf-8"
        )

    @asynccontextmanager
    async def client_streams(self) -> AsyncIterator[Any]:
        # The SDK's newline-delimited JSON framing, read and written over our pipes.
        async with stdio_server(
            stdin=anyio.wrap_file(self._from_server), stdout=anyio.wrap_file(self._to_server)
        ) as streams:
            try:
                yield streams
            finally:
                # The SDK's reader waits in a worker thread that only EOF releases: end the
                # server's input so it stops and closes its output.
                self._to_server.close()

    def __enter__(self) -> _Pipes:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._to_server.closed:
            self._to_server.close()
        self._thread.join(timeout=_JOIN_SECONDS)
        self._from_server.close()


class _Session:
    def __init__(self, answer: ElicitationHandler, roots: list[types.Root]) -> None:
        self.answer = answer
        self.roots = roots
        self.elicitations: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []
        self.roots_asked = 0

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        received = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.elicitations.append(received)
        given = dict(self.answer(received))
        self.answers.append(given)
        return types.ElicitResult.model_validate(given)

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.roots_asked += 1
        return types.ListRootsResult(roots=self.roots)

    async def run(
        self, streams: _Streams, plan: list[tuple[str, dict[str, Any]]]
    ) -> dict[str, Any]:
        outcomes: list[CallOutcome] = []
        async with Client(
            streams,
            mode="legacy",
            cache=None,
            elicitation_callback=self.elicit,
            list_roots_callback=self.list_roots,
        ) as client:
            listing = await client.list_tools()
            for name, arguments in plan:
                outcomes.append(await _call(client, name, arguments))
            info = client.server_info
            return {
                "protocol_version": str(client.protocol_version),
                "server_name": info.name if info is not None else "",
                "tools": tuple(tool.name for tool in listing.tools),
                "elicitations": tuple(self.elicitations),
                "answers": tuple(self.answers),
                "roots_asked": self.roots_asked,
                "outcomes": tuple(outcomes),
            }


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> CallOutcome:
    try:
        result = await client.call_tool(name, dict(arguments))
    except MCPError as exc:
        return CallOutcome(name, arguments, error_code=exc.code, error_message=exc.message)
    text = " ".join(block.text for block in result.content if isinstance(block, types.TextContent))
    return CallOutcome(
        name,
        arguments,
        structured=result.structured_content,
        text=text,
        is_error=bool(result.is_error),
    )
