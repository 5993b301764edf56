"""A 2025-11-25 session with the official SDK client against `labkit serve`, for the notebooks.

Owns: `run_legacy_session`, which starts `labkit serve` over stdio (the demo deployment,
acting for alice), connects the SDK's `Client(mode="legacy")` (the `initialize` handshake:
the connection is the session), makes the given tool calls in that one session, answers
every live `elicitation/create` with the caller's plain function and every live
`roots/list` with the given roots, and returns a `LegacyTranscript` of plain values (dicts,
strings, numbers; no SDK types) that a notebook can print.

The SDK is asynchronous and a notebook kernel already runs an event loop, so the session
runs on its own loop in a worker thread and the caller simply waits for the transcript.
Notebooks reach the SDK client only through this module. Must not import ipywidgets.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, TextIO

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

# The SDK imports jsonschema lazily, at the first tool result it validates: about 1.3 s here.
# Importing it with this module moves that cost into a notebook's setup cell, so the cell
# that runs the session stays well inside the per-cell time limit.
importlib.import_module("jsonschema.validators")

SERVE_ARGV: Final = (sys.executable, "-m", "labkit.cli", "serve")
DEFAULT_TIMEOUT_SECONDS: Final = 60.0

Answer = Callable[[dict[str, Any]], Mapping[str, Any]]
"""`answer(params) -> elicitation result`: the params of one live `elicitation/create` as on
the wire (`message`, `requestedSchema`, ...), answered with `{"action": ..., "content": ...}`."""


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
    def refused(self) -> bool:
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
    server_stderr: str


def run_legacy_session(
    calls: Sequence[tuple[str, Mapping[str, Any]]],
    answer: Answer,
    *,
    roots: Sequence[str] = (),
    argv: Sequence[str] = SERVE_ARGV,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> LegacyTranscript:
    """Run `calls` (`(tool name, arguments)` pairs) in one legacy SDK session with the server
    `argv` starts (by default `labkit serve` over stdio). A call the server refuses with a
    JSON-RPC error is recorded in its `CallOutcome`, and the session goes on."""
    session = _Session(answer, [types.Root.model_validate({"uri": uri}) for uri in roots])
    plan = [(name, dict(arguments)) for name, arguments in calls]
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="legacy-sdk") as pool:
            future = pool.submit(anyio.run, session.run, list(argv), plan, errlog)
            transcript = future.result(timeout=timeout_seconds)
        errlog.seek(0)
        return LegacyTranscript(**transcript, server_stderr=errlog.read())


class _Session:
    def __init__(self, answer: Answer, roots: list[types.Root]) -> None:
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
        self, argv: list[str], plan: list[tuple[str, dict[str, Any]]], errlog: TextIO
    ) -> dict[str, Any]:
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        outcomes: list[CallOutcome] = []
        async with Client(
            stdio_client(params, errlog=errlog),
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
