"""The fixtures of the official MCP conformance suite, for `labkit serve --profile conformance`.

Owns: the tools, prompts, resources and completions that the suite's 2026-07-28 server scenarios
call by name (`@modelcontextprotocol/conformance`, `src/scenarios/server/*.ts`; names and texts
are the suite's), the multi-round engine of its `input_required` fixtures, and
`conformance_server`, which registers all of them on the general core beside the lesson's tool.
They are test fixtures, not part of the lesson: only `labkit.serve` imports this module.

Pure: no I/O, no clock read, no sleeping; the key ring and the clock are injected. Progress goes
through `RequestContext.emit`, and the transport decides how it travels. Must not import a
transport.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import wave
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from labkit import forms
from labkit.clock import Clock, system_clock
from labkit.errors import INVALID_PARAMS, MISSING_CAPABILITY, ProtocolError
from labkit.server import (
    Prompt,
    Request,
    Resource,
    ResourceTemplate,
    Server,
    Tool,
    progress_token,
)
from labkit.state import Binding, InvalidState, KeyRing, StateSigner, digest
from labkit.wire import LOG_LEVELS, META_LOG_LEVEL

log = logging.getLogger("labkit.conformance")

# Every state failure answers this one message; the reason goes to the log (as for the lesson).
STATE_ERROR: Final = "Invalid or expired requestState"
AUDIENCE: Final = "labkit-conformance"
ANONYMOUS: Final = "conformance"

# A 1x1 PNG (the suite's own) and a one-sample 8 kHz mono WAV, base64.
PNG_BASE64: Final = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
    "AAAABJRU5ErkJggg=="
)


def _wav_base64() -> str:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(8000)
        sound.writeframes(b"\x00\x00")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


WAV_BASE64: Final = _wav_base64()
EMPTY_SCHEMA: Final = {"type": "object", "properties": {}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def image() -> dict[str, Any]:
    return {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}


def embedded(uri: str, mime_type: str, body: str) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": body}}


def complete_call(*content: dict[str, Any], is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "complete", "content": list(content)}
    if is_error:
        result["isError"] = True
    return result


# -- plain tools ------------------------------------------------------------------------------


@dataclass
class FixedTool:
    """A tool that answers the same content every time (`is_error`: a tool-level error)."""

    name: str
    description: str
    content: tuple[dict[str, Any], ...]
    is_error: bool = False

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": EMPTY_SCHEMA}

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        return complete_call(*json.loads(json.dumps(self.content)), is_error=self.is_error)


# SEP-1613/SEP-2106: an inputSchema using the JSON Schema 2020-12 vocabulary, which tools/list
# must hand out unchanged (the suite's pending `json-schema-2020-12` scenario).
SCHEMA_2020_12: Final = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


class SchemaTool:
    """`json_schema_2020_12_tool`: echoes its arguments; its descriptor carries SCHEMA_2020_12."""

    name = "json_schema_2020_12_tool"

    def descriptor(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "Tool with JSON Schema 2020-12 features for conformance testing "
            "(SEP-1613)",
            "inputSchema": json.loads(json.dumps(SCHEMA_2020_12)),
        }

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        echoed = json.dumps(arguments, sort_keys=True)
        return complete_call(text(f"JSON Schema 2020-12 tool called with: {echoed}"))


class ProgressTool:
    """`test_tool_with_progress`: progress 0, 50 and 100 of 100 for the request's token, then the
    result. The reference spaces them 50 ms apart; a sans-IO core does not sleep, and the suite
    checks only their order."""

    name = "test_tool_with_progress"

    def descriptor(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "Tests tool that reports progress notifications",
            "inputSchema": EMPTY_SCHEMA,
        }

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        token = progress_token(request)
        if token is not None:
            for step in (0, 50, 100):
                request.context.emit(
                    "notifications/progress",
                    {
                        "progressToken": token,
                        "progress": step,
                        "total": 100,
                        "message": f"Completed step {step} of 100",
                    },
                )
        return complete_call(text(f"Progress reported for token {token!r}"))


class LoggingTool:
    """`test_logging_tool`: logs one `info` message on the request's stream, only when the
    request asked for messages at `info` or below through `_meta[".../logLevel"]`. Without
    that key a 2026-07-28 server sends no `notifications/message` at all (SEP-2575)."""

    name = "test_logging_tool"

    def descriptor(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "Diagnostic logging validator tool: logs only when the request "
            "sets a log level",
            "inputSchema": EMPTY_SCHEMA,
        }

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        wanted = request.meta.get(META_LOG_LEVEL)
        if wanted in LOG_LEVELS and LOG_LEVELS.index(wanted) <= LOG_LEVELS.index("info"):
            request.context.emit(
                "notifications/message",
                {"level": "info", "logger": "labkit.conformance", "data": "Logging evaluated"},
            )
        return complete_call(text("Logging evaluated"))


class LoggingSequenceTool:
    """`test_tool_with_logging` (2025-11-25 `tools-call-with-logging`): three `info` messages,
    under the same `_meta` level rule as `LoggingTool`. The reference spaces them 50 ms apart;
    the suite counts them only."""

    name = "test_tool_with_logging"
    MESSAGES: Final = ("Tool execution started", "Tool processing data", "Tool execution completed")

    def descriptor(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "Tests tool that sends log messages during execution",
            "inputSchema": EMPTY_SCHEMA,
        }

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        wanted = request.meta.get(META_LOG_LEVEL)
        if wanted in LOG_LEVELS and LOG_LEVELS.index(wanted) <= LOG_LEVELS.index("info"):
            for message in self.MESSAGES:
                request.context.emit(
                    "notifications/message",
                    {"level": "info", "logger": "labkit.conformance", "data": message},
                )
        return complete_call(text("Logging completed"))


# -- input_required: asks, rounds and the engine -----------------------------------------------

# The client capability each kind of input request needs (docs/protocol.md, "MRTR").
CAPABILITY_OF: Final = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


class Ask(NamedTuple):
    """One entry of `inputRequests`: its key and the request the client answers."""

    key: str
    method: str
    params: Mapping[str, Any]

    def wire(self) -> dict[str, Any]:
        request: dict[str, Any] = {"method": self.method}
        if self.params:
            request["params"] = json.loads(json.dumps(self.params))
        return request


def ask_form(key: str, message: str, field: str, kind: str = "string") -> Ask:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return Ask(
        key, "elicitation/create", {"mode": "form", "message": message, "requestedSchema": schema}
    )


def ask_sampling(key: str, question: str, max_tokens: int) -> Ask:
    return Ask(
        key,
        "sampling/createMessage",
        {"messages": [{"role": "user", "content": text(question)}], "maxTokens": max_tokens},
    )


def ask_roots(key: str) -> Ask:
    return Ask(key, "roots/list", {})


def _elicitation_answer(ask: Ask, answer: Any) -> Any:
    """The accepted form content (validated against the asked schema), or None when the user
    declined or cancelled."""
    if not isinstance(answer, dict) or answer.get("action") not in ("accept", "decline", "cancel"):
        raise _bad_answer(ask, "an elicitation result with action accept, decline or cancel")
    if answer["action"] != "accept":
        return None
    try:
        return forms.validate_content(ask.params["requestedSchema"], answer.get("content"))
    except forms.FormError as exc:
        raise _bad_answer(ask, f"content that answers the form ({exc})") from None


def _sampling_answer(ask: Ask, answer: Any) -> Any:
    """The sampled text (empty for non-text content)."""
    if not isinstance(answer, dict) or answer.get("role") != "assistant":
        raise _bad_answer(ask, "a sampling result (role assistant, content)")
    content = answer.get("content")
    if not isinstance(content, dict | list):
        raise _bad_answer(ask, "a sampling result (role assistant, content)")
    first = content[0] if isinstance(content, list) and content else content
    value = first.get("text") if isinstance(first, dict) else None
    return value if isinstance(value, str) else ""


def _roots_answer(ask: Ask, answer: Any) -> Any:
    """The root URIs."""
    roots = answer.get("roots") if isinstance(answer, dict) else None
    if not isinstance(roots, list) or not all(
        isinstance(root, dict) and isinstance(root.get("uri"), str) for root in roots
    ):
        raise _bad_answer(ask, "a roots/list result (roots with uri)")
    return [root["uri"] for root in roots]


# What an answer to each kind of request must look like, and the value a fixture keeps of it.
ANSWER_READERS: Final[Mapping[str, Callable[[Ask, Any], Any]]] = {
    "elicitation/create": _elicitation_answer,
    "sampling/createMessage": _sampling_answer,
    "roots/list": _roots_answer,
}


def _bad_answer(ask: Ask, expected: str) -> ProtocolError:
    return ProtocolError(INVALID_PARAMS, f"inputResponses.{ask.key} must be {expected}")


Finish = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Flow:
    """The rounds of an `input_required` fixture.

    Round `i` asks `rounds[i]`; once every ask of a round is answered, the next round is asked,
    and after the last one `finish` turns the kept answers (key -> value) into the result.
    A flow with `signed` state carries the round and the answers so far in a requestState
    sealed by the server's key ring and bound to the principal, method, name and arguments; an
    unsigned flow has one round and keeps nothing between calls, so it issues no state.
    `optional` asks are made only when the client declared their capability; a required ask
    whose capability is missing answers -32021.

    A fixture state is not single-use: the fixtures change nothing, so a replayed state only
    repeats an answer. (The lesson's tool, which deletes, claims each of its states once.)
    """

    rounds: tuple[tuple[Ask, ...], ...]
    finish: Finish
    signed: bool = False
    optional: bool = False
    # What to answer when no ask can be made (every optional ask's capability is missing).
    nothing_to_ask: Finish | None = None

    def asks(self, round_index: int, capabilities: Mapping[str, Any]) -> tuple[Ask, ...]:
        asks = self.rounds[round_index]
        declared = tuple(a for a in asks if CAPABILITY_OF[a.method] in capabilities)
        if self.optional or declared == asks:
            return declared
        missing: dict[str, Any] = {CAPABILITY_OF[a.method]: {} for a in asks if a not in declared}
        raise ProtocolError(
            MISSING_CAPABILITY,
            f"this request needs the client capabilities {sorted(missing)}",
            {"requiredCapabilities": missing},
        )


class FlowRunner:
    """Runs a `Flow` for one named tool or prompt: state checks, answer checks, next round."""

    def __init__(self, name: str, flow: Flow, signer: StateSigner) -> None:
        self.name = name
        self.flow = flow
        self.signer = signer

    def run(self, request: Request, arguments: Mapping[str, Any]) -> dict[str, Any]:
        params = request.params
        responses = params.get("inputResponses", {})
        if not isinstance(responses, dict):
            raise ProtocolError(INVALID_PARAMS, "inputResponses must be an object")
        binding = self._binding(request, arguments)
        round_index, kept = self._resume(params, binding)
        if not self.flow.signed and "requestState" in params:
            raise ProtocolError(INVALID_PARAMS, STATE_ERROR)  # this flow never issues one
        asks = self.flow.asks(round_index, request.capabilities)
        if not asks:
            assert self.flow.nothing_to_ask is not None
            return self.flow.nothing_to_ask(kept)
        if round_index == 0 and self.flow.signed and "requestState" not in params:
            # Answers without the state that asked for them are not trusted: ask afresh.
            return self._ask(binding, 0, asks, kept)
        answered = {a.key: responses[a.key] for a in asks if a.key in responses}
        if len(answered) < len(asks):
            # A missing answer is asked again, never treated as an error (SEP-2322). Unknown
            # keys in inputResponses are ignored.
            return self._ask(binding, round_index, asks, kept)
        for ask in asks:
            kept[ask.key] = ANSWER_READERS[ask.method](ask, answered[ask.key])
        if round_index + 1 < len(self.flow.rounds):
            nxt = round_index + 1
            return self._ask(binding, nxt, self.flow.asks(nxt, request.capabilities), kept)
        return self.flow.finish(kept)

    def _binding(self, request: Request, arguments: Mapping[str, Any]) -> Binding:
        try:
            arguments_digest = digest(dict(arguments))
        except (TypeError, ValueError, UnicodeEncodeError):
            raise ProtocolError(INVALID_PARAMS, "arguments must be JSON text") from None
        principal = request.context.principal or ""
        return Binding(principal, request.method, self.name, arguments_digest)

    def _resume(self, params: Mapping[str, Any], binding: Binding) -> tuple[int, dict[str, Any]]:
        """The round a signed state is at and the answers it keeps; round one without one."""
        if not self.flow.signed or "requestState" not in params:
            return 0, {}
        try:
            payload = self.signer.verify(params["requestState"], binding).payload
            round_index, kept = payload["round"], payload["kept"]
            if not (
                isinstance(round_index, int)
                and 0 <= round_index < len(self.flow.rounds)
                and isinstance(kept, dict)
            ):
                raise InvalidState("malformed fixture state")
        except (InvalidState, KeyError) as exc:
            log.warning("requestState refused for %s: %s", self.name, exc)
            raise ProtocolError(INVALID_PARAMS, STATE_ERROR) from None
        return round_index, kept

    def _ask(
        self, binding: Binding, round_index: int, asks: Sequence[Ask], kept: dict[str, Any]
    ) -> dict[str, Any]:
        result: dict[str, Any] = {
            "resultType": "input_required",
            "inputRequests": {ask.key: ask.wire() for ask in asks},
        }
        if self.flow.signed:
            result["requestState"] = self.signer.mint(binding, {"round": round_index, "kept": kept})
        return result


class FlowTool:
    """A tool whose answer is a `Flow`."""

    def __init__(self, name: str, description: str, flow: Flow, signer: StateSigner) -> None:
        self.name = name
        self.description = description
        self.runner = FlowRunner(name, flow, signer)

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": EMPTY_SCHEMA}

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.runner.run(request, arguments)


class ArgumentAskTool:
    """A one-round `input_required` tool whose single ask is built from its arguments (the
    2025-11-25 `test_sampling`, `test_elicitation` and SEP-1034/SEP-1330 fixtures). It keeps
    nothing between calls, so it issues no requestState; the legacy adapter turns its ask into
    a live request. A client without the ask's capability gets -32021."""

    KEY: Final = "answer"

    def __init__(
        self,
        name: str,
        description: str,
        input_schema: dict[str, Any],
        ask: Callable[[Mapping[str, Any]], Ask],
        finish: Callable[[dict[str, Any]], str],
    ) -> None:
        self.name = name
        self.description = description
        self.input_schema = input_schema
        self.ask = ask
        self.finish = finish

    def descriptor(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": json.loads(json.dumps(self.input_schema)),
        }

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        ask = self.ask(arguments)
        capability = CAPABILITY_OF[ask.method]
        if capability not in request.capabilities:
            raise ProtocolError(
                MISSING_CAPABILITY,
                f"this request needs the client capabilities {[capability]}",
                {"requiredCapabilities": {capability: {}}},
            )
        if "requestState" in request.params:
            raise ProtocolError(INVALID_PARAMS, STATE_ERROR)  # this tool never issues one
        responses = request.params.get("inputResponses", {})
        if not isinstance(responses, dict):
            raise ProtocolError(INVALID_PARAMS, "inputResponses must be an object")
        answer = responses.get(self.KEY)
        if answer is None:
            return {"resultType": "input_required", "inputRequests": {self.KEY: ask.wire()}}
        if not isinstance(answer, dict):
            raise _bad_answer(ask, "an object")
        return complete_call(text(self.finish(answer)))


def _string_argument(arguments: Mapping[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str):
        raise ProtocolError(INVALID_PARAMS, f"arguments.{name} must be a string")
    return value


def _one_string_schema(name: str, about: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": about}},
        "required": [name],
    }


def _elicitation_summary(answer: dict[str, Any]) -> str:
    action = answer.get("action")
    if action not in ("accept", "decline", "cancel"):
        raise ProtocolError(INVALID_PARAMS, "inputResponses.answer must be an elicitation result")
    content = json.dumps(answer.get("content", {}), sort_keys=True)
    return f"Elicitation completed: action={action}, content={content}"


def _sampled_text(answer: dict[str, Any]) -> str:
    return str(_sampling_answer(Ask(ArgumentAskTool.KEY, "sampling/createMessage", {}), answer))


def _ask_elicitation(message: str, schema: dict[str, Any]) -> Ask:
    return Ask(
        ArgumentAskTool.KEY,
        "elicitation/create",
        {"mode": "form", "message": message, "requestedSchema": schema},
    )


ELICITATION_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}
# SEP-1034: a default for every primitive type.
DEFAULTS_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
}
# SEP-1330: the five enum shapes.
ENUMS_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


def legacy_fixture_tools() -> list[Tool]:
    """The 2025-11-25 scenarios' live-request tools, as modern `input_required` tools."""
    return [
        ArgumentAskTool(
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            _one_string_schema("prompt", "The prompt to send to the LLM"),
            lambda args: ask_sampling(ArgumentAskTool.KEY, _string_argument(args, "prompt"), 100),
            lambda answer: f"LLM response: {_sampled_text(answer)}",
        ),
        ArgumentAskTool(
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            _one_string_schema("message", "The message to show the user"),
            lambda args: _ask_elicitation(_string_argument(args, "message"), ELICITATION_SCHEMA),
            lambda answer: "User response: " + _elicitation_summary(answer),
        ),
        ArgumentAskTool(
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values for every primitive type (SEP-1034)",
            EMPTY_SCHEMA,
            lambda args: _ask_elicitation(
                "Please review and update the form fields with defaults", DEFAULTS_SCHEMA
            ),
            _elicitation_summary,
        ),
        ArgumentAskTool(
            "test_elicitation_sep1330_enums",
            "Tests elicitation with the enum schema variants (SEP-1330)",
            EMPTY_SCHEMA,
            lambda args: _ask_elicitation(
                "Please select options from the enum fields", ENUMS_SCHEMA
            ),
            _elicitation_summary,
        ),
    ]


# -- prompts ----------------------------------------------------------------------------------


def user(content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": content}


@dataclass
class FixedPrompt:
    """A prompt rendered from its arguments (`render` gets them checked by the core)."""

    name: str
    title: str
    description: str
    render: Callable[[Mapping[str, str]], list[dict[str, Any]]]
    arguments: tuple[tuple[str, str], ...] = ()  # (name, description), all required

    def descriptor(self) -> dict[str, Any]:
        descriptor: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
        }
        if self.arguments:
            descriptor["arguments"] = [
                {"name": name, "description": about, "required": True}
                for name, about in self.arguments
            ]
        return descriptor

    def get(self, request: Request, arguments: dict[str, str]) -> dict[str, Any]:
        return {"resultType": "complete", "messages": self.render(arguments)}


class FlowPrompt:
    """A prompt whose answer is a `Flow` (MRTR on `prompts/get`)."""

    def __init__(self, name: str, description: str, flow: Flow, signer: StateSigner) -> None:
        self.name = name
        self.description = description
        self.runner = FlowRunner(name, flow, signer)

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description}

    def get(self, request: Request, arguments: dict[str, str]) -> dict[str, Any]:
        return self.runner.run(request, arguments)


# -- resources --------------------------------------------------------------------------------


@dataclass
class FixedResource:
    uri: str
    name: str
    title: str
    description: str
    mime_type: str
    body: str
    binary: bool = False  # `body` is base64 and travels as `blob`

    def descriptor(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mimeType": self.mime_type,
        }

    def read(self, request: Request, uri: str) -> dict[str, Any]:
        key = "blob" if self.binary else "text"
        return {
            "resultType": "complete",
            "contents": [{"uri": uri, "mimeType": self.mime_type, key: self.body}],
        }


class DataTemplate:
    """`test://template/{id}/data`: a JSON document per id."""

    uri_template = "test://template/{id}/data"

    def descriptor(self) -> dict[str, Any]:
        return {
            "uriTemplate": self.uri_template,
            "name": "template",
            "title": "Resource Template",
            "description": "A resource template with parameter substitution",
            "mimeType": "application/json",
        }

    def read(self, request: Request, uri: str, variables: dict[str, str]) -> dict[str, Any]:
        document = {
            "id": variables["id"],
            "templateTest": True,
            "data": f"Data for ID: {variables['id']}",
        }
        return {
            "resultType": "complete",
            "contents": [
                {"uri": uri, "mimeType": "application/json", "text": json.dumps(document)}
            ],
        }


# -- completion -------------------------------------------------------------------------------

# Candidate values per (prompt, argument); a completion offers those starting with the value.
COMPLETIONS: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {
    ("test_prompt_with_arguments", "arg1"): ("test", "testValue1", "testing"),
    ("test_prompt_with_arguments", "arg2"): ("test", "testValue2", "tested"),
    ("test_prompt_with_embedded_resource", "resourceUri"): ("test://example-resource",),
}


def complete(
    request: Request, ref: dict[str, Any], argument: str, value: str, given: dict[str, str]
) -> list[str]:
    candidates = COMPLETIONS.get((str(ref.get("name", ref.get("uri"))), argument), ())
    return [candidate for candidate in candidates if candidate.startswith(value)]


# -- the whole set ----------------------------------------------------------------------------


def _content_of(kept: Mapping[str, Any], key: str, field: str, default: str) -> str:
    content = kept.get(key)
    value = content.get(field) if isinstance(content, dict) else None
    return value if isinstance(value, str) else default


def fixture_tools(signer: StateSigner) -> list[Tool]:
    name_flow = Flow(
        rounds=((ask_form("user_name", "What is your name?", "name"),),),
        finish=lambda kept: complete_call(
            text(f"Hello, {_content_of(kept, 'user_name', 'name', 'stranger')}!")
        ),
    )
    confirm = ask_form("confirm", "Please confirm", "ok", "boolean")
    tools: list[Tool] = [
        FixedTool(
            "test_simple_text",
            "Tests simple text content response",
            (text("This is a simple text response for testing."),),
        ),
        FixedTool("test_image_content", "Tests image content response", (image(),)),
        FixedTool(
            "test_audio_content",
            "Tests audio content response",
            ({"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"},),
        ),
        FixedTool(
            "test_embedded_resource",
            "Tests embedded resource content response",
            (
                embedded(
                    "test://embedded-resource",
                    "text/plain",
                    "This is an embedded resource content.",
                ),
            ),
        ),
        FixedTool(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
            (
                text("Multiple content types test:"),
                image(),
                embedded(
                    "test://mixed-content-resource",
                    "application/json",
                    json.dumps({"test": "data", "value": 123}),
                ),
            ),
        ),
        FixedTool(
            "test_error_handling",
            "Tests error response handling",
            (text("This tool intentionally returns an error for testing"),),
            is_error=True,
        ),
        ProgressTool(),
        SchemaTool(),
        LoggingTool(),
        LoggingSequenceTool(),
        FlowTool(
            "test_missing_capability",
            "Test tool requiring sampling",
            Flow(
                rounds=(
                    (ask_sampling("capital_question", "What is the capital of France?", 100),),
                ),
                finish=lambda kept: complete_call(text(f"Success: {kept['capital_question']}")),
            ),
            signer,
        ),
        FlowTool(
            "test_streaming_elicitation",
            "Diagnostic tool validating response streams: asks for a name",
            Flow(
                rounds=((ask_form("user_name", "What is your name?", "name"),),),
                finish=lambda kept: complete_call(text("Streaming complete")),
            ),
            signer,
        ),
        FlowTool(
            "test_input_required_result_elicitation",
            "MRTR: returns InputRequiredResult with elicitation request",
            name_flow,
            signer,
        ),
        FlowTool(
            "test_input_required_result_sampling",
            "MRTR: returns InputRequiredResult with sampling request",
            Flow(
                rounds=(
                    (ask_sampling("capital_question", "What is the capital of France?", 100),),
                ),
                finish=lambda kept: complete_call(
                    text(f"Sampling result: {kept['capital_question']}")
                ),
            ),
            signer,
        ),
        FlowTool(
            "test_input_required_result_list_roots",
            "MRTR: returns InputRequiredResult with roots/list request",
            Flow(
                rounds=((ask_roots("client_roots"),),),
                finish=lambda kept: complete_call(
                    text(f"Found {len(kept['client_roots'])} root(s)")
                ),
            ),
            signer,
        ),
        FlowTool(
            "test_input_required_result_request_state",
            "MRTR: returns InputRequiredResult with requestState",
            Flow(
                rounds=((confirm,),),
                finish=lambda kept: complete_call(text("state-ok: requestState validated")),
                signed=True,
            ),
            signer,
        ),
        FlowTool(
            "test_input_required_result_multiple_inputs",
            "MRTR: returns InputRequiredResult with multiple input requests",
            Flow(
                rounds=(
                    (
                        ask_form("user_name", "What is your name?", "name"),
                        ask_sampling("greeting", "Generate a greeting", 50),
                        ask_roots("client_roots"),
                    ),
                ),
                finish=lambda kept: complete_call(
                    text(
                        f"Name: {_content_of(kept, 'user_name', 'name', 'stranger')}; "
                        f"Greeting: {kept['greeting']}; Roots: {len(kept['client_roots'])}"
                    )
                ),
                signed=True,
            ),
            signer,
        ),
        FlowTool(
            "test_input_required_result_multi_round",
            "MRTR: multi-round InputRequiredResult workflow",
            Flow(
                rounds=(
                    (ask_form("step1", "Step 1: What is your name?", "name"),),
                    (ask_form("step2", "Step 2: What is your favorite color?", "color"),),
                ),
                finish=lambda kept: complete_call(
                    text(
                        f"Multi-round complete for {_content_of(kept, 'step1', 'name', 'friend')}"
                        f" who likes {_content_of(kept, 'step2', 'color', 'no color')}"
                    )
                ),
                signed=True,
            ),
            signer,
        ),
        FlowTool(
            "test_input_required_result_tampered_state",
            "MRTR: HMAC-signed requestState integrity test",
            Flow(
                rounds=((confirm,),),
                finish=lambda kept: complete_call(text("integrity-ok: state verified")),
                signed=True,
            ),
            signer,
        ),
        FlowTool(
            "test_input_required_result_capabilities",
            "MRTR: respects client capabilities in inputRequests",
            Flow(
                rounds=(
                    (
                        ask_form("elicit_input", "Elicitation input", "value"),
                        ask_sampling("sample_input", "Sample request", 50),
                    ),
                ),
                finish=lambda kept: complete_call(
                    text(f"capabilities-ok: received {','.join(sorted(kept))}")
                ),
                signed=True,
                optional=True,
                nothing_to_ask=lambda kept: complete_call(
                    text("No supported capabilities declared: nothing to ask")
                ),
            ),
            signer,
        ),
    ]
    return [*tools, *legacy_fixture_tools()]


def fixture_prompts(signer: StateSigner) -> list[Prompt]:
    return [
        FixedPrompt(
            "test_simple_prompt",
            "Simple Test Prompt",
            "A simple prompt without arguments",
            lambda args: [user(text("This is a simple prompt for testing."))],
        ),
        FixedPrompt(
            "test_prompt_with_arguments",
            "Prompt With Arguments",
            "A prompt with required arguments",
            lambda args: [
                user(text(f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"))
            ],
            (("arg1", "First test argument"), ("arg2", "Second test argument")),
        ),
        FixedPrompt(
            "test_prompt_with_embedded_resource",
            "Prompt With Embedded Resource",
            "A prompt that includes an embedded resource",
            lambda args: [
                user(
                    embedded(
                        args["resourceUri"], "text/plain", "Embedded resource content for testing."
                    )
                ),
                user(text("Please process the embedded resource above.")),
            ],
            (("resourceUri", "URI of the resource to embed"),),
        ),
        FixedPrompt(
            "test_prompt_with_image",
            "Prompt With Image",
            "A prompt that includes image content",
            lambda args: [user(image()), user(text("Please analyze the image above."))],
        ),
        FlowPrompt(
            "test_input_required_result_prompt",
            "MRTR: prompt that requires elicitation input",
            Flow(
                rounds=(
                    (ask_form("user_context", "What context should the prompt use?", "context"),),
                ),
                finish=lambda kept: {
                    "resultType": "complete",
                    "messages": [
                        user(
                            text(
                                "Prompt with context: "
                                + _content_of(kept, "user_context", "context", "none given")
                            )
                        )
                    ],
                },
            ),
            signer,
        ),
    ]


def fixture_resources() -> list[Resource]:
    return [
        FixedResource(
            "test://static-text",
            "static-text",
            "Static Text Resource",
            "A static text resource for testing",
            "text/plain",
            "This is the content of the static text resource.",
        ),
        FixedResource(
            "test://static-binary",
            "static-binary",
            "Static Binary Resource",
            "A static binary resource (image) for testing",
            "image/png",
            PNG_BASE64,
            binary=True,
        ),
        # The legacy subscription scenarios subscribe to this URI; a session subscribes only
        # to what the server serves.
        FixedResource(
            "test://watched-resource",
            "watched-resource",
            "Watched Resource",
            "A resource a 2025-11-25 client may subscribe to (it never changes)",
            "text/plain",
            "This resource never changes.",
        ),
    ]


def fixture_templates() -> list[ResourceTemplate]:
    return [DataTemplate()]


def conformance_server(
    *,
    keys: KeyRing,
    clock: Clock = system_clock,
    tools: Sequence[Tool] = (),
    name: str = "labkit",
) -> Server:
    """The general core with every fixture registered, beside `tools` (the lesson's)."""
    signer = StateSigner(keys, audience=AUDIENCE, clock=clock)
    return Server(
        [*tools, *fixture_tools(signer)],
        name=name,
        prompts=fixture_prompts(signer),
        resources=fixture_resources(),
        resource_templates=fixture_templates(),
        completer=complete,
    )


class AnonymousAuthenticator:
    """Every request acts for one fixed principal. The suite sends no credentials; the profile
    that uses this serves loopback only."""

    def __init__(self, principal: str = ANONYMOUS) -> None:
        self.principal = principal

    def authenticate(self, authorization: str | None) -> str | None:
        return self.principal
