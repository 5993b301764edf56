"""The sans-IO MCP 2026-07-28 server: one parsed JSON-RPC object in, one response (or None) out.

Owns: envelope validation, per-request `_meta` validation, method dispatch, the one error
boundary, `server/discover`, `tools/list` and `tools/call` routing.
Must not import a transport, a widget toolkit or anything that does I/O: transports call
`Server.handle` and own their sockets and pipes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from labkit._version import __version__
from labkit.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_VERSION,
    ProtocolError,
)
from labkit.wire import (
    META_CAPABILITIES,
    META_SERVER_INFO,
    META_VERSION,
    PROTOCOL_VERSION,
    RequestId,
    envelope_error,
    error_response,
    is_request_id,
)

log = logging.getLogger("labkit.server")

DEFAULT_LIST_TTL_MS = 60_000


@dataclass(frozen=True)
class RequestContext:
    """What the transport knows about the caller. `principal` comes from authentication
    (a verified bearer token, or the one configured stdio principal), never from the request."""

    principal: str | None = None
    transport: str = "direct"


class Request(NamedTuple):
    """A validated request: envelope, `_meta` and context checked. (A named tuple: one is
    built per request, and it costs a fraction of a frozen dataclass.)"""

    id: RequestId
    method: str
    params: dict[str, Any]
    version: str
    capabilities: dict[str, Any]
    context: RequestContext
    meta: dict[str, Any]


class Tool(Protocol):
    name: str

    def descriptor(self) -> dict[str, Any]:
        """A fresh descriptor each call: callers may mutate what they get."""
        ...

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        """A `CallToolResult` or an `input_required` result (without `_meta`)."""
        ...


Handler = Callable[[Request], dict[str, Any]]


class Server:
    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        name: str = "labkit",
        version: str = __version__,
        supported_versions: Sequence[str] = (PROTOCOL_VERSION,),
        list_ttl_ms: int = DEFAULT_LIST_TTL_MS,
        instructions: str | None = None,
        extra_methods: Mapping[str, Handler] | None = None,
        extra_capabilities: Mapping[str, Any] | None = None,
    ) -> None:
        self.tools = {tool.name: tool for tool in sorted(tools, key=lambda t: t.name)}
        self.server_info = {"name": name, "version": version}
        self.supported_versions = tuple(supported_versions)
        self.list_ttl_ms = list_ttl_ms
        self.instructions = instructions
        self.capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
        self.capabilities.update(extra_capabilities or {})
        self.methods: dict[str, Handler] = {
            "server/discover": self.discover,
            "tools/list": self.list_tools,
            "tools/call": self.call_tool,
        }
        self.methods.update(extra_methods or {})

    # -- the one error boundary ------------------------------------------------------------

    def handle(self, message: Any, context: RequestContext) -> dict[str, Any] | None:
        """Answer one parsed JSON-RPC message.

        Returns None for a notification (a well-formed object without an `id`), which is never
        dispatched: it cannot delete anything (LESSON.md section 13). An id-less object that is
        not well formed is an invalid request and gets -32600 with `id: null`. Transports
        only frame what this returns.
        """
        if isinstance(message, dict) and "id" not in message:
            invalid = envelope_error(message)
            if invalid is not None:
                return error_response(None, invalid)
            log.debug("notification %r ignored", message["method"])
            return None
        raw_id = message.get("id") if isinstance(message, dict) else None
        request_id = raw_id if is_request_id(raw_id) else None
        try:
            request = self._validate(message, request_id, context)
            result = self.methods[request.method](request)
            # A copy: a caller mutating a result must never change the server's identity.
            server_info = {META_SERVER_INFO: self.server_info.copy()}
            meta = result.get("_meta")
            result["_meta"] = {**meta, **server_info} if meta else server_info
            return {"jsonrpc": "2.0", "id": request_id, "result": result}
        except ProtocolError as error:
            return error_response(request_id, error)
        except Exception:
            log.exception("internal error answering request %r", request_id)
            return error_response(request_id, ProtocolError(INTERNAL_ERROR, "Internal error"))

    def _validate(
        self, message: Any, request_id: RequestId | None, context: RequestContext
    ) -> Request:
        invalid = envelope_error(message)
        if invalid is not None:
            raise invalid
        method: str = message["method"]
        params = message.get("params", {})
        if method not in self.methods:
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            raise ProtocolError(INVALID_PARAMS, "params._meta is required (MCP 2026-07-28)")
        version = meta.get(META_VERSION)
        if not isinstance(version, str):
            raise ProtocolError(INVALID_PARAMS, f"params._meta[{META_VERSION!r}] must be a string")
        if version not in self.supported_versions:
            raise ProtocolError(
                UNSUPPORTED_VERSION,
                f"Unsupported protocol version: {version}",
                {"supported": list(self.supported_versions), "requested": version},
            )
        capabilities = meta.get(META_CAPABILITIES)
        if not isinstance(capabilities, dict):
            raise ProtocolError(
                INVALID_PARAMS, f"params._meta[{META_CAPABILITIES!r}] must be an object"
            )
        assert request_id is not None  # envelope_error refused a present id of another type
        return Request(request_id, method, params, version, capabilities, context, meta)

    # -- methods -----------------------------------------------------------------------------

    def discover(self, request: Request) -> dict[str, Any]:
        result: dict[str, Any] = {
            "resultType": "complete",
            "supportedVersions": list(self.supported_versions),
            "capabilities": json.loads(json.dumps(self.capabilities)),
            "ttlMs": self.list_ttl_ms,
            "cacheScope": "public",
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    def list_tools(self, request: Request) -> dict[str, Any]:
        return {
            "resultType": "complete",
            "tools": [tool.descriptor() for tool in self.tools.values()],
            "ttlMs": self.list_ttl_ms,
            "cacheScope": "public",
        }

    def call_tool(self, request: Request) -> dict[str, Any]:
        name = request.params.get("name")
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "tools/call needs params.name (a string)")
        tool = self.tools.get(name)
        if tool is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = request.params.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ProtocolError(INVALID_PARAMS, "params.arguments must be an object")
        return tool.call(request, arguments)
