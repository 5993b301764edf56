"""The client side of MRTR: a host that calls tools on an MCP 2026-07-28 server, answers the
`input_required` rounds and retries.

Owns: `Host` (the non-blocking `begin`/`resume` steps, the `call_tool` loop over them, the
transcript of the last call and its text rendering), `Pending`, the errors a caller sees
(`McpError`, the `ProtocolError` a server answered; `TransportError` below it; `TooManyRounds`),
and the three channels a host talks through: in process (`Server.handle`), a `labkit serve`
subprocess over stdio, and Streamable HTTP (stdlib `urllib`). Every message is built by
`labkit.messages`.
Collaborators are injected (the channel, the id source, an observer), never patched.
Must not import the course toolkit or a widget toolkit: it sits below the course (the
walkthrough of `labkit demo` uses it without the course), and forms are rendered by the course's
widgets on top of `begin` and `resume`.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any, Final, Protocol

from labkit import messages
from labkit._version import __version__
from labkit.errors import ProtocolError
from labkit.server import RequestContext, Server
from labkit.transports.envelope import NAME_BEARING, encode_header_value
from labkit.wire import META_VERSION, PROTOCOL_VERSION, RequestId, decode, encode

DEFAULT_MAX_ROUNDS: Final = 8
DEFAULT_HTTP_TIMEOUT_SECONDS: Final = 30.0
CLIENT_NAME: Final = "labkit-host"

RequestIdSource = Callable[[], RequestId]
Answerer = Callable[[str, dict[str, Any]], dict[str, Any]]
"""`answer(key, params) -> elicitation result`, asked once per `inputRequests` entry."""
Observer = Callable[[dict[str, Any]], None]
"""Told every message the host sends or receives, as it happens (the demo prints them)."""


# -- what a caller sees ----------------------------------------------------------------------


class McpError(ProtocolError):
    """A JSON-RPC error the server answered: the protocol's one error value (`code`, `message`
    and `data` as on the wire), raised on the client's side. Shown as "code message"."""

    def __str__(self) -> str:
        return f"{self.code} {self.message}"

    def __repr__(self) -> str:
        return f"McpError({self.code}, {self.message!r}, data={self.data!r})"


def _error_object(error: Any) -> bool:
    """Whether `error` is a JSON-RPC error object: an integer code and a string message."""
    if not isinstance(error, dict):
        return False
    code = error.get("code")
    return (
        isinstance(code, int)
        and not isinstance(code, bool)
        and isinstance(error.get("message"), str)
    )


class TransportError(Exception):
    """The exchange itself failed: an HTTP refusal that is not JSON-RPC (401, 403, 415...),
    a server process that exited, an answer that is not a JSON-RPC response."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TooManyRounds(Exception):
    """The server still asked for input after the round cap: the last `Pending` is kept."""

    def __init__(self, pending: Pending, max_rounds: int) -> None:
        super().__init__(
            f"{pending.name} still asks for input after {max_rounds} rounds "
            f"(keys: {sorted(pending.input_requests)}); giving up"
        )
        self.pending = pending
        self.max_rounds = max_rounds


@dataclass(frozen=True)
class Pending:
    """A tool call waiting for answers: what `begin` or `resume` returns for `input_required`.

    `request_state` is exactly the string the server sent (None when it sent none); `resume`
    echoes it byte for byte. `round` counts the requests of this call so far (1 after `begin`).
    """

    name: str
    arguments: dict[str, Any]
    input_requests: dict[str, dict[str, Any]]
    request_state: str | None
    round: int


# -- channels: where messages go ----------------------------------------------------------------


class Channel(Protocol):
    def exchange(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send one message; the response, or None for a notification."""
        ...

    def close(self) -> None: ...


class InProcessChannel:
    """The sans-IO core called directly, as `principal` (what authentication would give)."""

    def __init__(self, server: Server, principal: str | None) -> None:
        self.server = server
        self.context = RequestContext(principal=principal)

    def exchange(self, message: dict[str, Any]) -> dict[str, Any] | None:
        # Through the JSON text, as a real transport would: the host never shares objects
        # with the server (a caller mutating a result must not reach into either side).
        response = self.server.handle(decode(encode(message)), self.context)
        return None if response is None else _response(decode(encode(response)))

    def close(self) -> None:
        return None


class StdioChannel:
    """A server process speaking newline-delimited JSON-RPC on its stdin and stdout."""

    def __init__(self, argv: Sequence[str], *, stderr: int | IO[Any] | None = None) -> None:
        self.process = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
        )

    def exchange(self, message: dict[str, Any]) -> dict[str, Any] | None:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None  # both are pipes
        try:
            stdin.write(encode(message) + b"\n")
            stdin.flush()
        except (BrokenPipeError, ValueError):
            raise TransportError(self._gone()) from None
        if "id" not in message:
            return None  # a notification gets no line back (docs/protocol.md, "stdio")
        line = stdout.readline()
        if not line:
            raise TransportError(self._gone())
        return _response(_decode_answer(line))

    def _gone(self) -> str:
        status = self.process.poll()
        return "the server process has exited" + ("" if status is None else f" (status {status})")

    def close(self) -> None:
        """Close stdin (the server stops at EOF) and wait; kill it if it does not stop."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):  # it exited first: nothing to flush
                self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class HttpChannel:
    """Streamable HTTP at 2026-07-28: one POST per message, with the routing headers the
    transport checks against the body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_seconds: float = DEFAULT_HTTP_TIMEOUT_SECONDS,
    ) -> None:
        self.url = url
        self.token = token
        self.timeout_seconds = timeout_seconds

    def headers(self, message: dict[str, Any]) -> dict[str, str]:
        params = message.get("params") or {}
        method = message["method"]
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": str(params.get("_meta", {}).get(META_VERSION, "")),
            "Mcp-Method": method,
        }
        key = NAME_BEARING.get(method)
        if key is not None and isinstance(params.get(key), str):
            headers["Mcp-Name"] = encode_header_value(params[key])
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def exchange(self, message: dict[str, Any]) -> dict[str, Any] | None:
        request = urllib.request.Request(
            self.url, data=encode(message), headers=self.headers(message), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as reply:
                status, kind, body = reply.status, reply.headers.get_content_type(), reply.read()
        except urllib.error.HTTPError as refusal:
            # A JSON-RPC error travels with a 4xx or 5xx status and a JSON body.
            status, kind, body = refusal.code, refusal.headers.get_content_type(), refusal.read()
            refusal.close()
        except OSError as exc:
            raise TransportError(f"cannot reach {self.url}: {exc}") from None
        if status == 202 and not body:
            return None  # an accepted notification
        if kind == "text/event-stream":
            return _response(_last_event(body))
        if kind != "application/json":
            text = body.decode("utf-8", "replace").strip()
            raise TransportError(f"HTTP {status}: {text[:200]}", status=status)
        return _response(_decode_answer(body))

    def close(self) -> None:
        return None


def _decode_answer(raw: bytes) -> Any:
    try:
        return decode(raw)
    except ProtocolError:
        raise TransportError(
            f"the server answered something that is not JSON: {raw[:200]!r}"
        ) from None


def _last_event(body: bytes) -> Any:
    """The JSON-RPC response of an SSE stream: the last `data:` line that is one."""
    found: Any = None
    for line in body.splitlines():
        if line.startswith(b"data:"):
            message = _decode_answer(line[5:].strip())
            if isinstance(message, dict) and ("result" in message or "error" in message):
                found = message
    if found is None:
        raise TransportError("the event stream ended without a response")
    return found


def _response(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict) or ("result" in message) == ("error" in message):
        raise TransportError(f"not a JSON-RPC response: {str(message)[:200]}")
    return message


# -- the host ------------------------------------------------------------------------------------


class Host:
    """An MCP 2026-07-28 client for one principal, over one channel.

    `begin`/`resume` are the steps (a UI shows the form between them); `call_tool` loops them
    with an `answer` function. Every request carries the per-request `_meta` built from
    `capabilities` and `protocol_version`, and the id the id source hands out.
    """

    def __init__(
        self,
        channel: Channel,
        *,
        capabilities: Mapping[str, Any] | None = None,
        protocol_version: str = PROTOCOL_VERSION,
        ids: RequestIdSource | None = None,
        observer: Observer | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> None:
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self.channel = channel
        self.capabilities = (
            messages.form_capabilities() if capabilities is None else dict(capabilities)
        )
        self.protocol_version = protocol_version
        self.client_info = messages.client_info(CLIENT_NAME, __version__)
        self.ids: RequestIdSource = ids if ids is not None else itertools.count(1).__next__
        self.observer = observer
        self.max_rounds = max_rounds
        self.transcript: list[dict[str, Any]] = []

    # -- constructors ---------------------------------------------------------------------

    @classmethod
    def in_process(
        cls,
        server: Server,
        principal: str | None = "alice",
        *,
        capabilities: Mapping[str, Any] | None = None,
        protocol_version: str = PROTOCOL_VERSION,
        ids: RequestIdSource | None = None,
        observer: Observer | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> Host:
        return cls(
            InProcessChannel(server, principal),
            capabilities=capabilities,
            protocol_version=protocol_version,
            ids=ids,
            observer=observer,
            max_rounds=max_rounds,
        )

    @classmethod
    def stdio(
        cls,
        argv: Sequence[str],
        *,
        stderr: int | IO[Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        protocol_version: str = PROTOCOL_VERSION,
        ids: RequestIdSource | None = None,
        observer: Observer | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> Host:
        """Spawn `argv` (for example `[sys.executable, "-m", "labkit.cli", "serve"]`); close the
        host, or use it as a context manager, to stop the process."""
        return cls(
            StdioChannel(argv, stderr=stderr),
            capabilities=capabilities,
            protocol_version=protocol_version,
            ids=ids,
            observer=observer,
            max_rounds=max_rounds,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        token: str | None = None,
        timeout_seconds: float = DEFAULT_HTTP_TIMEOUT_SECONDS,
        capabilities: Mapping[str, Any] | None = None,
        protocol_version: str = PROTOCOL_VERSION,
        ids: RequestIdSource | None = None,
        observer: Observer | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> Host:
        return cls(
            HttpChannel(url, token, timeout_seconds=timeout_seconds),
            capabilities=capabilities,
            protocol_version=protocol_version,
            ids=ids,
            observer=observer,
            max_rounds=max_rounds,
        )

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Host:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- one exchange -----------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send any message as it is (a notification, a hand-made retry) and return the raw
        response; starts a new transcript. For lessons that show what a server refuses."""
        self.transcript = []
        return self._exchange(message)

    def _exchange(self, message: dict[str, Any]) -> dict[str, Any] | None:
        self._record(message)
        response = self.channel.exchange(message)
        if response is not None:
            self._record(response)
        return response

    def _record(self, message: dict[str, Any]) -> None:
        self.transcript.append(message)
        if self.observer is not None:
            self.observer(message)

    def _result(self, message: dict[str, Any]) -> dict[str, Any]:
        response = self._exchange(message)
        if response is None:
            raise TransportError(f"no response to request {message.get('id')!r}")
        if response["id"] not in (message["id"], None):
            raise TransportError(f"response id {response['id']!r} != {message['id']!r}")
        if "error" in response:
            error = response["error"]
            if not _error_object(error):
                raise TransportError(f"a malformed JSON-RPC error object: {error!r:.200}")
            raise McpError(error["code"], error["message"], error.get("data"))
        result: dict[str, Any] = response["result"]
        return result

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One request with this host's `_meta`; its result, or McpError. A new transcript."""
        self.transcript = []
        return self._result(
            messages.request(
                self.ids(),
                method,
                params,
                capabilities=self.capabilities,
                version=self.protocol_version,
                client_info=self.client_info,
            )
        )

    def discover(self) -> dict[str, Any]:
        return self.request("server/discover")

    def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = self.request("tools/list")["tools"]
        return tools

    # -- MRTR steps -------------------------------------------------------------------------

    def begin(self, name: str, arguments: Mapping[str, Any]) -> Pending | dict[str, Any]:
        """Round one of a tool call (a new transcript): the complete result, or a `Pending`
        holding what the server asks for."""
        self.transcript = []
        return self._round(name, arguments, None, None, 1)

    def resume(
        self, pending: Pending, answers: Mapping[str, Mapping[str, Any]]
    ) -> Pending | dict[str, Any]:
        """Retry `pending` with `answers` (key -> elicitation result): a new id, the same name
        and arguments, `inputResponses`, and the state echoed byte for byte."""
        return self._round(
            pending.name,
            pending.arguments,
            {key: dict(value) for key, value in answers.items()},
            pending.request_state,
            pending.round + 1,
        )

    def _round(
        self,
        name: str,
        arguments: Mapping[str, Any],
        answers: dict[str, Any] | None,
        state: str | None,
        number: int,
    ) -> Pending | dict[str, Any]:
        result = self._result(
            messages.tools_call(
                self.ids(),
                name,
                arguments,
                capabilities=self.capabilities,
                version=self.protocol_version,
                client_info=self.client_info,
                input_responses=answers,
                request_state=state,
            )
        )
        if not messages.is_input_required(result):
            return result
        return Pending(
            name=name,
            arguments=copy.deepcopy(dict(arguments)),
            input_requests=messages.input_requests(result),
            request_state=messages.request_state(result),
            round=number,
        )

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        answer: Answerer | None = None,
        *,
        max_rounds: int | None = None,
    ) -> dict[str, Any]:
        """Call a tool to completion: each `inputRequests` entry is answered by
        `answer(key, params)`, then the call is retried, up to `max_rounds` requests.
        Returns the complete result; raises McpError for a JSON-RPC error, TooManyRounds past
        the cap, and ValueError if input is asked for and there is no `answer`."""
        cap = self.max_rounds if max_rounds is None else max_rounds
        outcome = self.begin(name, arguments)
        while isinstance(outcome, Pending):
            if outcome.round >= cap:
                raise TooManyRounds(outcome, cap)
            outcome = self.resume(outcome, _answers(outcome, answer))
        return outcome

    # -- showing what happened ----------------------------------------------------------------

    def render(self, width: int = 200) -> str:
        """The transcript of the last call, one compact line per message."""
        return "\n".join(render_message(message, width) for message in self.transcript)


def _answers(pending: Pending, answer: Answerer | None) -> dict[str, dict[str, Any]]:
    if answer is None and pending.input_requests:
        keys = sorted(pending.input_requests)
        raise ValueError(f"{pending.name} asks for input {keys}: pass answer=")
    return {
        key: answer(key, request.get("params", {}))
        for key, request in pending.input_requests.items()
        if answer is not None
    }


def render_message(message: Mapping[str, Any], width: int = 200) -> str:
    """`-> {...}` for a request or notification, `<- {...}` for a response; `jsonrpc` dropped,
    `_meta` elided and `requestState` abbreviated (long and the same every time), then cut
    to `width` characters."""
    arrow = "->" if "method" in message else "<-"
    text = json.dumps(_abbreviate(message), separators=(",", ":"))
    if len(text) > width:
        text = text[: max(width - 3, 0)] + "..."
    return f"{arrow} {text}"


def abbreviate_state(value: Any) -> Any:
    return value[:18] + "..." if isinstance(value, str) and len(value) > 24 else value


# Printed compactly: the state is long and `_meta` is the same on every message.
_ELIDE: Final[dict[str, Callable[[Any], Any]]] = {
    "requestState": abbreviate_state,
    "_meta": lambda value: "{...}",
}


def _abbreviate(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _ELIDE.get(k, _abbreviate)(v) for k, v in obj.items() if k != "jsonrpc"}
    if isinstance(obj, list):
        return [_abbreviate(v) for v in obj]
    return obj
