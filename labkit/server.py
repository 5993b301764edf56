"""The sans-IO MCP 2026-07-28 server: one parsed JSON-RPC object in, one encoded response (or
None) out, through `Server.respond`, the one entry every transport calls.

Owns: envelope validation, per-request `_meta` validation, method dispatch, the one error
boundary, `server/discover`, `tools/list` and `tools/call` routing, and the general registrations
beside tools: prompts (`prompts/list`, `prompts/get`), resources and resource templates
(`resources/list`, `resources/templates/list`, `resources/read`), a completer
(`completion/complete`), and the caching hints per method. A method exists, and its capability
is declared, only when something is registered for it: the lesson's deployment registers one tool
and answers exactly what it did before.
Must not import a transport, a widget toolkit or anything that does I/O: transports call
`Server.respond` and own their sockets and pipes. A handler that reports progress hands the
notification to `RequestContext.emit`; the transport decides whether it travels (an SSE event
before the response) or is dropped.

`server/discover` and `tools/list` answer the same for every valid request of a deployment
(their `ttlMs` says so): their results are built and encoded once, on first use
(`EncodedOnce`), and `respond` writes those bytes as they are, inside the envelope's byte
template (`labkit.wire.encoded_result_response`). `handle` is `respond`'s response parsed, for
callers that work with objects: each gets a fresh copy, so a caller that changes its result
never changes what the next caller gets.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

import orjson

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
    decode,
    encode,
    encoded_result_response,
    error_response,
    is_request_id,
    request_parts,
    result_response,
)

log = logging.getLogger("labkit.server")

DEFAULT_LIST_TTL_MS = 60_000
# Only these methods may answer `input_required` (docs/protocol.md, "MRTR").
MRTR_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
# At most this many completion values per answer (the schema's `values` limit).
MAX_COMPLETION_VALUES: Final = 100
# Methods whose complete result is the same for every valid request of a deployment: built and
# encoded once (when the server's own handler answers them).
CACHED_METHODS: Final = frozenset({"server/discover", "tools/list"})

Notify = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class RequestContext:
    """What the transport knows about the caller. `principal` comes from authentication
    (a verified bearer token, or the one configured stdio principal), never from the request.

    `notify` is the transport's sink for notifications a handler sends while answering this
    request (progress): the HTTP transport writes them as SSE events ahead of the response.
    None drops them, so the core never does I/O and a JSON-only answer stays valid.
    """

    principal: str | None = None
    transport: str = "direct"
    notify: Notify | None = None

    def emit(self, method: str, params: dict[str, Any]) -> None:
        """Send a JSON-RPC notification on this request's response stream, if it has one."""
        if self.notify is not None:
            self.notify({"jsonrpc": "2.0", "method": method, "params": params})


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


_new_request: Final = functools.partial(tuple.__new__, Request)


class EncodedOnce:
    """The results that are the same for every valid request of a deployment (`tools/list`,
    `server/discover` when the server's own handlers answer them), encoded on first use and
    kept as bytes. A result orjson cannot encode (an integer past 64 bits in a descriptor)
    is never kept: its method is built afresh every time."""

    def __init__(self, methods: Iterable[str]) -> None:
        self._methods = frozenset(methods)
        self._encoded: dict[str, bytes] = {}
        # The hot path: one dict lookup, no Python frame.
        self.get: Callable[[str], bytes | None] = self._encoded.get

    def __contains__(self, method: object) -> bool:
        """Whether `method`'s result is encoded already."""
        return method in self._encoded

    def keep(self, method: str, result: dict[str, Any]) -> bytes | None:
        """`result` encoded and kept, when `method` is one kept once; else None."""
        if method not in self._methods:
            return None
        try:
            encoded = orjson.dumps(result)
        except TypeError:
            self._methods = self._methods - {method}
            return None
        self._encoded[method] = encoded
        return encoded


class Tool(Protocol):
    name: str

    def descriptor(self) -> dict[str, Any]:
        """A fresh descriptor each call: callers may mutate what they get. The server asks once
        per deployment (its `tools/list` is built once)."""
        ...

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        """A `CallToolResult` or an `input_required` result (without `_meta`)."""
        ...


class Prompt(Protocol):
    name: str

    def descriptor(self) -> dict[str, Any]:
        """A fresh `Prompt` descriptor (name, description, arguments) each call."""
        ...

    def get(self, request: Request, arguments: dict[str, str]) -> dict[str, Any]:
        """A `GetPromptResult` or an `input_required` result (without `_meta`)."""
        ...


class Resource(Protocol):
    uri: str

    def descriptor(self) -> dict[str, Any]:
        """A fresh `Resource` descriptor (uri, name, ...) each call."""
        ...

    def read(self, request: Request, uri: str) -> dict[str, Any]:
        """A `ReadResourceResult` or an `input_required` result (without `_meta`)."""
        ...


class ResourceTemplate(Protocol):
    uri_template: str

    def descriptor(self) -> dict[str, Any]:
        """A fresh `ResourceTemplate` descriptor (uriTemplate, name, ...) each call."""
        ...

    def read(self, request: Request, uri: str, variables: dict[str, str]) -> dict[str, Any]:
        """The resource at `uri`, whose template `variables` were matched by the core."""
        ...


class CacheHint(NamedTuple):
    """SEP-2549 caching hints for one method's complete results."""

    ttl_ms: int
    scope: str  # "public" or "private"


Handler = Callable[[Request], dict[str, Any]]
# (request, ref, argument name, partial value, other arguments) -> candidate values.
Completer = Callable[[Request, dict[str, Any], str, str, dict[str, str]], Sequence[str]]


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
        prompts: Sequence[Prompt] = (),
        resources: Sequence[Resource] = (),
        resource_templates: Sequence[ResourceTemplate] = (),
        completer: Completer | None = None,
        cache_hints: Mapping[str, CacheHint] | None = None,
    ) -> None:
        self.tools = {tool.name: tool for tool in sorted(tools, key=lambda t: t.name)}
        # Registration order is the listing order: deterministic, and the first resource is
        # the one a client reads first.
        self.prompts = {prompt.name: prompt for prompt in prompts}
        self.resources = {resource.uri: resource for resource in resources}
        self.resource_templates = [
            (_template_pattern(template.uri_template), template) for template in resource_templates
        ]
        self.completer = completer
        self.server_info = {"name": name, "version": version}
        self.supported_versions = tuple(supported_versions)
        self._versions = frozenset(self.supported_versions)  # looked up on every request
        self.list_ttl_ms = list_ttl_ms
        self.instructions = instructions
        self.cache_hints = default_cache_hints(list_ttl_ms)
        self.cache_hints.update(cache_hints or {})
        self.capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
        self.methods: dict[str, Handler] = {
            "server/discover": self.discover,
            "tools/list": self.list_tools,
            "tools/call": self.call_tool,
        }
        if self.prompts:
            self.capabilities["prompts"] = {"listChanged": False}
            self.methods["prompts/list"] = self.list_prompts
            self.methods["prompts/get"] = self.get_prompt
        if self.resources or self.resource_templates:
            self.capabilities["resources"] = {"subscribe": False, "listChanged": False}
            self.methods["resources/list"] = self.list_resources
            self.methods["resources/templates/list"] = self.list_resource_templates
            self.methods["resources/read"] = self.read_resource
        if completer is not None:
            self.capabilities["completions"] = {}
            self.methods["completion/complete"] = self.complete
        self.capabilities.update(extra_capabilities or {})
        self.methods.update(extra_methods or {})
        own = {"server/discover": Server.discover, "tools/list": Server.list_tools}
        self.listings = EncodedOnce(
            method
            for method in CACHED_METHODS
            if getattr(self.methods.get(method), "__func__", None) is own[method]
        )

    # -- the entry point ---------------------------------------------------------------------

    def respond(self, message: Any, context: RequestContext) -> bytes | None:
        """The response to one parsed JSON-RPC message, as the bytes a transport writes; None
        for a notification. Every transport answers through here.

        A notification (a well-formed object without an `id`) is never dispatched: it cannot
        delete anything (docs/LESSON.md section 13). An id-less object that is not well formed
        is an invalid request and gets -32600 with `id: null`. This is the one error boundary:
        a `ProtocolError` becomes its error response, anything else -32603.
        """
        try:
            request_id, method, params = request_parts(message)
            if request_id is None:  # a notification
                log.debug("notification %r ignored", method)
                return None
            self._validate(method, params)
            encoded = self.listings.get(method)
            if encoded is not None:  # encoded once: nothing to dispatch, no `Request` to build
                return encoded_result_response(request_id, encoded)
            return self._dispatch(self._request(request_id, method, params, context))
        except ProtocolError as error:
            return encode(error_response(_echoed_id(message), error))
        except Exception:
            request_id = _echoed_id(message)
            log.exception("internal error answering request %r", request_id)
            internal = ProtocolError(INTERNAL_ERROR, "Internal error")
            return encode(error_response(request_id, internal))

    def handle(self, message: Any, context: RequestContext) -> dict[str, Any] | None:
        """`respond`'s response parsed, for callers that work with objects (the legacy adapter,
        the in-process client, tests): exactly what went on the wire, and the caller's own, so
        changing it changes nothing the server keeps."""
        encoded = self.respond(message, context)
        return None if encoded is None else decode(encoded)

    def _validate(self, method: str, params: dict[str, Any]) -> None:
        """Raise the refusal of a well-formed request (its parts read by
        `labkit.wire.request_parts`) whose method is not registered or whose `_meta` does not
        carry a version and capabilities this server takes. Exact types are tested first: the
        usual request costs no call."""
        if method not in self.methods:
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")
        meta = params.get("_meta")
        if type(meta) is not dict and not isinstance(meta, dict):
            raise ProtocolError(INVALID_PARAMS, "params._meta is required (MCP 2026-07-28)")
        version = meta.get(META_VERSION)
        if type(version) is not str and not isinstance(version, str):
            raise ProtocolError(INVALID_PARAMS, f"params._meta[{META_VERSION!r}] must be a string")
        if version not in self._versions:
            raise ProtocolError(
                UNSUPPORTED_VERSION,
                f"Unsupported protocol version: {version}",
                {"supported": list(self.supported_versions), "requested": version},
            )
        capabilities = meta.get(META_CAPABILITIES)
        if type(capabilities) is not dict and not isinstance(capabilities, dict):
            raise ProtocolError(
                INVALID_PARAMS, f"params._meta[{META_CAPABILITIES!r}] must be an object"
            )

    @staticmethod
    def _request(
        request_id: RequestId,
        method: str,
        params: dict[str, Any],
        context: RequestContext,
    ) -> Request:
        """The `Request` a message `_validate` passed makes (its params and `_meta` are there,
        of the types checked)."""
        meta: dict[str, Any] = params["_meta"]
        version, capabilities = meta[META_VERSION], meta[META_CAPABILITIES]
        return _new_request((request_id, method, params, version, capabilities, context, meta))

    def _dispatch(self, request: Request) -> bytes:
        """The result response to a valid request its handler answers. A listing kept once
        (`EncodedOnce`) is encoded here on first use; `respond` writes it from then on."""
        result = self._result(request)
        encoded = self.listings.keep(request.method, result)
        if encoded is None:
            return encode(result_response(request.id, result))
        return encoded_result_response(request.id, encoded)

    def _result(self, request: Request) -> dict[str, Any]:
        result = self.methods[request.method](request)
        self._finish(request.method, result)
        # A copy: a caller mutating a result must never change the server's identity.
        server_info = {META_SERVER_INFO: self.server_info.copy()}
        meta = result.get("_meta")
        result["_meta"] = {**meta, **server_info} if meta else server_info
        return result

    def _finish(self, method: str, result: dict[str, Any]) -> None:
        """The rules every handler's result meets: `input_required` only where MRTR allows it
        (a handler that breaks this is a bug: -32603), caching hints on complete results of
        the methods that carry them, never on an `input_required` one (docs/protocol.md)."""
        if result.get("resultType") == "input_required":
            if method not in MRTR_METHODS:
                raise RuntimeError(f"{method} answered input_required")
            return
        hint = self.cache_hints.get(method)
        if hint is not None:
            result.setdefault("ttlMs", hint.ttl_ms)
            result.setdefault("cacheScope", hint.scope)

    # -- methods -----------------------------------------------------------------------------

    def discover(self, request: Request) -> dict[str, Any]:
        result: dict[str, Any] = {
            "resultType": "complete",
            "supportedVersions": list(self.supported_versions),
            "capabilities": copy.deepcopy(self.capabilities),
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

    def list_prompts(self, request: Request) -> dict[str, Any]:
        return {
            "resultType": "complete",
            "prompts": [prompt.descriptor() for prompt in self.prompts.values()],
        }

    def get_prompt(self, request: Request) -> dict[str, Any]:
        name = request.params.get("name")
        if not isinstance(name, str):
            raise ProtocolError(INVALID_PARAMS, "prompts/get needs params.name (a string)")
        prompt = self.prompts.get(name)
        if prompt is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown prompt: {name}")
        arguments = _string_arguments(request.params.get("arguments", {}))
        missing = [
            argument["name"]
            for argument in prompt.descriptor().get("arguments", ())
            if argument.get("required") and argument["name"] not in arguments
        ]
        if missing:
            raise ProtocolError(INVALID_PARAMS, f"prompt {name} needs argument(s) {missing}")
        return prompt.get(request, arguments)

    def list_resources(self, request: Request) -> dict[str, Any]:
        return {
            "resultType": "complete",
            "resources": [resource.descriptor() for resource in self.resources.values()],
        }

    def list_resource_templates(self, request: Request) -> dict[str, Any]:
        return {
            "resultType": "complete",
            "resourceTemplates": [template.descriptor() for _, template in self.resource_templates],
        }

    def read_resource(self, request: Request) -> dict[str, Any]:
        uri = request.params.get("uri")
        if not isinstance(uri, str):
            raise ProtocolError(INVALID_PARAMS, "resources/read needs params.uri (a string)")
        resource = self.resources.get(uri)
        if resource is not None:
            return resource.read(request, uri)
        for pattern, template in self.resource_templates:
            match = pattern.fullmatch(uri)
            if match is not None:
                return template.read(request, uri, match.groupdict())
        # SEP-2164: an unknown resource is an error naming the URI, never empty contents.
        raise ProtocolError(INVALID_PARAMS, "Resource not found", {"uri": uri})

    def complete(self, request: Request) -> dict[str, Any]:
        assert self.completer is not None  # registered only with a completer
        ref, argument = request.params.get("ref"), request.params.get("argument")
        if not isinstance(ref, dict) or not self._known_ref(ref):
            raise ProtocolError(
                INVALID_PARAMS, "params.ref must name a registered prompt or resource template"
            )
        if not (
            isinstance(argument, dict)
            and isinstance(argument.get("name"), str)
            and isinstance(argument.get("value"), str)
        ):
            raise ProtocolError(
                INVALID_PARAMS, "params.argument needs name and value, both strings"
            )
        context = request.params.get("context", {})
        if not isinstance(context, dict):
            raise ProtocolError(INVALID_PARAMS, "params.context must be an object")
        given = _string_arguments(context.get("arguments", {}))
        values = list(self.completer(request, ref, argument["name"], argument["value"], given))
        return {
            "resultType": "complete",
            "completion": {
                "values": values[:MAX_COMPLETION_VALUES],
                "total": len(values),
                "hasMore": len(values) > MAX_COMPLETION_VALUES,
            },
        }

    def _known_ref(self, ref: dict[str, Any]) -> bool:
        kind = ref.get("type")
        if kind == "ref/prompt":
            return ref.get("name") in self.prompts
        if kind == "ref/resource":
            uri = ref.get("uri")
            return uri in self.resources or any(
                template.uri_template == uri for _, template in self.resource_templates
            )
        return False


def default_cache_hints(list_ttl_ms: int) -> dict[str, CacheHint]:
    """The methods whose complete results carry `ttlMs` and `cacheScope` (SEP-2549). Lists are
    the same for every caller; a resource's contents may depend on who reads it."""
    listing = CacheHint(list_ttl_ms, "public")
    return {
        "server/discover": listing,
        "tools/list": listing,
        "prompts/list": listing,
        "resources/list": listing,
        "resources/templates/list": listing,
        "resources/read": CacheHint(0, "private"),
    }


def _echoed_id(message: Any) -> RequestId | None:
    """The id an error response to `message` carries: its id when that is a valid one, else
    null (JSON-RPC 2.0 section 5)."""
    raw_id = message.get("id") if isinstance(message, dict) else None
    return raw_id if is_request_id(raw_id) else None


def progress_token(request: Request) -> str | int | None:
    """The request's `_meta.progressToken`, when it is a valid one."""
    token = request.meta.get("progressToken")
    return token if is_request_id(token) else None


_TEMPLATE_VARIABLE: Final = re.compile(r"\{([A-Za-z0-9_]+)\}")


def _template_pattern(uri_template: str) -> re.Pattern[str]:
    """An RFC 6570 level-1 template (`test://template/{id}/data`) as a regex whose named
    groups are its variables; a variable matches one non-empty path segment."""
    parts = _TEMPLATE_VARIABLE.split(uri_template)
    pattern = "".join(
        f"(?P<{part}>[^/?#]+)" if index % 2 else re.escape(part) for index, part in enumerate(parts)
    )
    return re.compile(pattern)


def _string_arguments(arguments: object) -> dict[str, str]:
    """Prompt and completion arguments: an object of strings (the schema's shape)."""
    if not isinstance(arguments, dict) or not all(
        isinstance(value, str) for value in arguments.values()
    ):
        raise ProtocolError(INVALID_PARAMS, "arguments must be an object of strings")
    return arguments
