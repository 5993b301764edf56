"""The conformance suite's fixtures on the general core (`labkit.conformance`): dicts in, dicts
out through `Server.handle`, every answer checked against the 2026-07-28 schema. The suite itself
runs in `make conformance` (tests/conformance/run.py); these pin the fixtures' behaviour case by
case, including the refusals the suite only samples.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from helpers import KEY_A, KEY_B, MISSING, build_lab, check_wire, error_of, request, result_of
from mcp_types import _v2026_07_28 as v
from test_server_registrations import checked

from labkit.clock import FakeClock
from labkit.conformance import (
    PNG_BASE64,
    SCHEMA_2020_12,
    STATE_ERROR,
    WAV_BASE64,
    AnonymousAuthenticator,
    conformance_server,
)
from labkit.server import RequestContext, Server
from labkit.state import KeyRing

ALL_CAPS: dict[str, Any] = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
ELICITATION = "test_input_required_result_elicitation"
STATEFUL = "test_input_required_result_request_state"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def server(clock: FakeClock) -> Server:
    lesson = build_lab(clock).server
    return conformance_server(keys=KeyRing([KEY_A]), clock=clock, tools=[*lesson.tools.values()])


def call(
    server: Server,
    name: str,
    *,
    caps: Any = ALL_CAPS,
    responses: Any = MISSING,
    state: Any = MISSING,
    principal: str = "alice",
    meta: dict[str, Any] | None = None,
    arguments: dict[str, Any] | None = None,
    **context: Any,
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if responses is not MISSING:
        params["inputResponses"] = responses
    if state is not MISSING:
        params["requestState"] = state
    message = request(7, "tools/call", params, caps=caps)
    message["params"]["_meta"].update(meta or {})
    response = server.handle(message, RequestContext(principal=principal, **context))
    check_wire(message, response)
    assert response is not None
    return response


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "Paris"},
    "model": "test-model",
    "stopReason": "endTurn",
}
ROOTS = {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}


def text_of(response: dict[str, Any]) -> str:
    result = result_of(response)
    assert result["resultType"] == "complete", result
    return str(result["content"][0]["text"])


def asks(response: dict[str, Any]) -> dict[str, str]:
    result = result_of(response)
    assert result["resultType"] == "input_required", result
    return {key: ask["method"] for key, ask in result["inputRequests"].items()}


# -- discovery -------------------------------------------------------------------------------


def test_discover_declares_tools_prompts_resources_and_completions(server: Server) -> None:
    result = result_of(checked(server, request(1, "server/discover")))
    assert set(result["capabilities"]) == {"tools", "prompts", "resources", "completions"}


def test_every_tool_and_prompt_has_a_description_and_the_lesson_tool_is_one_of_them(
    server: Server,
) -> None:
    tools = result_of(checked(server, request(1, "tools/list")))["tools"]
    names = [tool["name"] for tool in tools]
    assert names == sorted(names) and "notes_delete" in names and len(names) == 25
    assert all(tool["description"] and tool["inputSchema"]["type"] == "object" for tool in tools)
    prompts = result_of(checked(server, request(2, "prompts/list")))["prompts"]
    assert [p["name"] for p in prompts] == [
        "test_simple_prompt",
        "test_prompt_with_arguments",
        "test_prompt_with_embedded_resource",
        "test_prompt_with_image",
        "test_input_required_result_prompt",
    ]
    assert all(prompt["description"] for prompt in prompts)


# -- content tools ---------------------------------------------------------------------------


def test_content_tools(server: Server) -> None:
    simple = result_of(call(server, "test_simple_text"))["content"]
    assert simple == [{"type": "text", "text": "This is a simple text response for testing."}]
    assert result_of(call(server, "test_image_content"))["content"] == [
        {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}
    ]
    audio = result_of(call(server, "test_audio_content"))["content"][0]
    assert audio["mimeType"] == "audio/wav" and audio["data"] == WAV_BASE64
    assert base64.b64decode(WAV_BASE64)[:4] == b"RIFF"
    assert base64.b64decode(PNG_BASE64)[:8] == b"\x89PNG\r\n\x1a\n"
    embedded = result_of(call(server, "test_embedded_resource"))["content"][0]["resource"]
    assert embedded == {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    mixed = result_of(call(server, "test_multiple_content_types"))["content"]
    assert [item["type"] for item in mixed] == ["text", "image", "resource"]
    assert json.loads(mixed[2]["resource"]["text"]) == {"test": "data", "value": 123}


def test_the_2020_12_schema_is_listed_unchanged_and_the_tool_echoes(server: Server) -> None:
    tools = result_of(checked(server, request(1, "tools/list")))["tools"]
    (schema_tool,) = [tool for tool in tools if tool["name"] == "json_schema_2020_12_tool"]
    assert schema_tool["inputSchema"] == SCHEMA_2020_12
    assert schema_tool["inputSchema"]["$defs"]["address"]["$anchor"] == "addressDef"
    message = request(
        2,
        "tools/call",
        {"name": "json_schema_2020_12_tool", "arguments": {"name": "n", "email": "e"}},
    )
    text = text_of(checked(server, message))
    assert text == 'JSON Schema 2020-12 tool called with: {"email": "e", "name": "n"}'


def test_a_tool_error_is_a_result_not_a_protocol_error(server: Server) -> None:
    result = result_of(call(server, "test_error_handling"))
    assert result["isError"] is True
    assert result["content"][0]["text"] == "This tool intentionally returns an error for testing"


def test_a_fixture_result_is_a_fresh_copy(server: Server) -> None:
    result_of(call(server, "test_simple_text"))["content"][0]["text"] = "changed"
    assert text_of(call(server, "test_simple_text")).startswith("This is a simple")


def test_progress_goes_to_the_requests_sink_in_order(server: Server) -> None:
    seen: list[dict[str, Any]] = []
    response = call(
        server, "test_tool_with_progress", meta={"progressToken": "p-1"}, notify=seen.append
    )
    assert result_of(response)["resultType"] == "complete"
    assert [n["method"] for n in seen] == ["notifications/progress"] * 3
    for notification in seen:
        v.ProgressNotification.model_validate(notification, strict=True)
    assert [(n["params"]["progressToken"], n["params"]["progress"]) for n in seen] == [
        ("p-1", 0),
        ("p-1", 50),
        ("p-1", 100),
    ]


@pytest.mark.parametrize("token", [MISSING, None, 1.5, {"x": 1}])
def test_no_progress_without_a_valid_token(server: Server, token: Any) -> None:
    seen: list[dict[str, Any]] = []
    meta = {} if token is MISSING else {"progressToken": token}
    call(server, "test_tool_with_progress", meta=meta, notify=seen.append)
    assert seen == []


@pytest.mark.parametrize(
    ("level", "logged"),
    [(MISSING, False), ("debug", True), ("info", True), ("warning", False), ("loud", False)],
)
def test_logging_tool_logs_only_at_the_level_the_request_asked(
    server: Server, level: Any, logged: bool
) -> None:
    seen: list[dict[str, Any]] = []
    meta = {} if level is MISSING else {"io.modelcontextprotocol/logLevel": level}
    response = call(server, "test_logging_tool", meta=meta, notify=seen.append)
    assert text_of(response) == "Logging evaluated"
    assert [n["method"] for n in seen] == (["notifications/message"] if logged else [])
    for notification in seen:
        v.LoggingMessageNotification.model_validate(notification, strict=True)


# -- capabilities ----------------------------------------------------------------------------


def test_missing_capability_is_32021_with_the_capability_as_an_object(server: Server) -> None:
    error = error_of(call(server, "test_missing_capability", caps={}))
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_missing_capability_asks_for_sampling_when_declared(server: Server) -> None:
    first = call(server, "test_missing_capability", caps={"sampling": {}})
    assert asks(first) == {"capital_question": "sampling/createMessage"}
    done = call(
        server,
        "test_missing_capability",
        caps={"sampling": {}},
        responses={"capital_question": SAMPLED},
    )
    assert text_of(done) == "Success: Paris"


def test_elicitation_without_the_capability_is_refused(server: Server) -> None:
    error = error_of(call(server, ELICITATION, caps={"sampling": {}}))
    assert error["data"] == {"requiredCapabilities": {"elicitation": {}}}


@pytest.mark.parametrize(
    ("caps", "expected"),
    [
        ({"sampling": {}}, {"sample_input": "sampling/createMessage"}),
        ({"elicitation": {}}, {"elicit_input": "elicitation/create"}),
        (
            ALL_CAPS,
            {"elicit_input": "elicitation/create", "sample_input": "sampling/createMessage"},
        ),
    ],
)
def test_capabilities_fixture_asks_only_what_was_declared(
    server: Server, caps: dict[str, Any], expected: dict[str, str]
) -> None:
    first = call(server, "test_input_required_result_capabilities", caps=caps)
    assert asks(first) == expected
    answers = {"sample_input": SAMPLED, "elicit_input": accept(value="v")}
    done = call(
        server,
        "test_input_required_result_capabilities",
        caps=caps,
        responses={key: answers[key] for key in expected},
        state=result_of(first)["requestState"],
    )
    assert text_of(done) == f"capabilities-ok: received {','.join(sorted(expected))}"


def test_capabilities_fixture_with_nothing_declared_completes(server: Server) -> None:
    text = text_of(call(server, "test_input_required_result_capabilities", caps={}))
    assert text.startswith("No supported capabilities declared")


# -- one-round flows -------------------------------------------------------------------------


def test_elicitation_round_trip(server: Server) -> None:
    first = result_of(call(server, ELICITATION))
    assert "requestState" not in first  # nothing is carried: no state to trust
    ask = first["inputRequests"]["user_name"]
    assert ask["params"]["message"] == "What is your name?"
    assert ask["params"]["requestedSchema"]["required"] == ["name"]
    done = call(server, ELICITATION, responses={"user_name": accept(name="Alice")})
    assert text_of(done) == "Hello, Alice!"


def test_a_missing_answer_is_asked_again_and_unknown_keys_are_ignored(server: Server) -> None:
    again = call(server, ELICITATION, responses={"wrong_key": accept(data="x")})
    assert asks(again) == {"user_name": "elicitation/create"}
    extra = {"user_name": accept(name="Alice"), "other": accept(foo="bar"), "more": 3}
    assert text_of(call(server, ELICITATION, responses=extra)) == "Hello, Alice!"


@pytest.mark.parametrize(
    "responses",
    [
        None,
        [],
        {"user_name": 12345},
        {"user_name": {"action": "maybe"}},
        {"user_name": accept(name=5)},
        {"user_name": accept(nom="Alice")},
        {"user_name": accept(name="Alice", extra=1)},
        {"user_name": {"action": "accept"}},
    ],
    ids=["null", "list", "number", "action", "type", "field", "extra-field", "no-content"],
)
def test_an_unusable_answer_is_invalid_params(server: Server, responses: Any) -> None:
    assert error_of(call(server, ELICITATION, responses=responses))["code"] == -32602


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_elicitation_completes_without_a_name(server: Server, action: str) -> None:
    done = call(server, ELICITATION, responses={"user_name": {"action": action}})
    assert text_of(done) == "Hello, stranger!"


def test_a_state_on_a_flow_that_issues_none_is_refused(server: Server) -> None:
    state = result_of(call(server, STATEFUL))["requestState"]
    response = call(server, ELICITATION, responses={"user_name": accept(name="A")}, state=state)
    assert error_of(response) == {"code": -32602, "message": STATE_ERROR}


def test_sampling_and_roots_round_trips(server: Server) -> None:
    sampling = "test_input_required_result_sampling"
    first = result_of(call(server, sampling))["inputRequests"]["capital_question"]
    assert first["params"]["maxTokens"] == 100
    done = call(server, sampling, responses={"capital_question": SAMPLED})
    assert text_of(done) == "Sampling result: Paris"
    roots = "test_input_required_result_list_roots"
    assert result_of(call(server, roots))["inputRequests"] == {
        "client_roots": {"method": "roots/list"}
    }
    assert text_of(call(server, roots, responses={"client_roots": ROOTS})) == "Found 1 root(s)"


@pytest.mark.parametrize(
    ("name", "key", "answer"),
    [
        ("test_input_required_result_sampling", "capital_question", {"role": "user"}),
        ("test_input_required_result_sampling", "capital_question", {"role": "assistant"}),
        ("test_input_required_result_list_roots", "client_roots", {"roots": [{"name": "x"}]}),
        ("test_input_required_result_list_roots", "client_roots", {"roots": "file:///"}),
    ],
)
def test_malformed_sampling_and_roots_answers_are_refused(
    server: Server, name: str, key: str, answer: Any
) -> None:
    assert error_of(call(server, name, responses={key: answer}))["code"] == -32602


# -- signed flows ----------------------------------------------------------------------------


def test_request_state_round_trip(server: Server) -> None:
    first = result_of(call(server, STATEFUL))
    state = first["requestState"]
    assert isinstance(state, str) and state.startswith("lk1.")
    done = call(server, STATEFUL, responses={"confirm": accept(ok=True)}, state=state)
    assert text_of(done).startswith("state-ok")


def test_answers_without_the_state_that_asked_are_asked_again(server: Server) -> None:
    again = call(server, STATEFUL, responses={"confirm": accept(ok=True)})
    assert asks(again) == {"confirm": "elicitation/create"}


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s + "-TAMPERED",
        lambda s: s[:-1] + ("A" if s[-1] != "A" else "B"),
        lambda s: "",
        lambda s: 5,
    ],
    ids=["suffix", "last-char", "empty", "number"],
)
def test_a_tampered_state_is_refused(server: Server, change: Any) -> None:
    name = "test_input_required_result_tampered_state"
    state = result_of(call(server, name))["requestState"]
    response = call(server, name, responses={"confirm": accept(ok=True)}, state=change(state))
    assert error_of(response) == {"code": -32602, "message": STATE_ERROR}


def test_a_state_is_bound_to_its_tool_principal_and_lifetime(
    server: Server, clock: FakeClock
) -> None:
    state = result_of(call(server, STATEFUL))["requestState"]
    answer = {"confirm": accept(ok=True)}
    other_tool = call(
        server, "test_input_required_result_tampered_state", responses=answer, state=state
    )
    assert error_of(other_tool)["message"] == STATE_ERROR
    other_principal = call(server, STATEFUL, responses=answer, state=state, principal="mallory")
    assert error_of(other_principal)["message"] == STATE_ERROR
    clock.advance(301)
    assert error_of(call(server, STATEFUL, responses=answer, state=state))["message"] == STATE_ERROR


def test_a_state_from_another_key_ring_is_refused(server: Server, clock: FakeClock) -> None:
    stranger = conformance_server(keys=KeyRing([KEY_B]), clock=clock)
    state = result_of(call(stranger, STATEFUL))["requestState"]
    response = call(server, STATEFUL, responses={"confirm": accept(ok=True)}, state=state)
    assert error_of(response)["message"] == STATE_ERROR


def test_multiple_inputs_round_trip(server: Server) -> None:
    name = "test_input_required_result_multiple_inputs"
    first = call(server, name)
    assert asks(first) == {
        "user_name": "elicitation/create",
        "greeting": "sampling/createMessage",
        "client_roots": "roots/list",
    }
    responses = {"user_name": accept(name="Alice"), "greeting": SAMPLED, "client_roots": ROOTS}
    done = call(server, name, responses=responses, state=result_of(first)["requestState"])
    assert text_of(done) == "Name: Alice; Greeting: Paris; Roots: 1"


def test_multi_round_carries_the_first_answer_in_a_new_state(server: Server) -> None:
    name = "test_input_required_result_multi_round"
    first = result_of(call(server, name))
    assert list(first["inputRequests"]) == ["step1"]
    second = result_of(
        call(server, name, responses={"step1": accept(name="Alice")}, state=first["requestState"])
    )
    assert list(second["inputRequests"]) == ["step2"]
    assert second["requestState"] != first["requestState"]
    # The second round's state asks for step2: a step1 answer alone is asked again.
    again = call(
        server, name, responses={"step1": accept(name="Eve")}, state=second["requestState"]
    )
    assert asks(again) == {"step2": "elicitation/create"}
    done = call(
        server, name, responses={"step2": accept(color="blue")}, state=second["requestState"]
    )
    assert text_of(done) == "Multi-round complete for Alice who likes blue"


# -- prompts, resources, completion ----------------------------------------------------------


def get_prompt(
    server: Server, name: str, arguments: Any = MISSING, **params: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **params}
    if arguments is not MISSING:
        body["arguments"] = arguments
    return checked(server, request(3, "prompts/get", body, caps=ALL_CAPS))


def test_fixed_prompts(server: Server) -> None:
    simple = result_of(get_prompt(server, "test_simple_prompt"))["messages"]
    assert simple == [
        {
            "role": "user",
            "content": {"type": "text", "text": "This is a simple prompt for testing."},
        }
    ]
    args = {"arg1": "testValue1", "arg2": "testValue2"}
    with_args = result_of(get_prompt(server, "test_prompt_with_arguments", args))["messages"]
    assert with_args[0]["content"]["text"] == (
        "Prompt with arguments: arg1='testValue1', arg2='testValue2'"
    )
    uri = {"resourceUri": "test://example-resource"}
    embedded = result_of(get_prompt(server, "test_prompt_with_embedded_resource", uri))
    assert embedded["messages"][0]["content"]["resource"]["uri"] == "test://example-resource"
    imaged = result_of(get_prompt(server, "test_prompt_with_image"))["messages"]
    assert imaged[0]["content"] == {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}


def test_a_prompt_with_arguments_needs_them(server: Server) -> None:
    response = get_prompt(server, "test_prompt_with_arguments", {"arg1": "x"})
    assert error_of(response)["code"] == -32602


def test_input_required_on_prompts_get(server: Server) -> None:
    name = "test_input_required_result_prompt"
    assert asks(get_prompt(server, name)) == {"user_context": "elicitation/create"}
    done = get_prompt(server, name, inputResponses={"user_context": accept(context="test context")})
    result = result_of(done)
    assert result["resultType"] == "complete"
    assert result["messages"][0]["content"]["text"] == "Prompt with context: test context"


@pytest.mark.parametrize(
    ("uri", "content"),
    [
        (
            "test://static-text",
            {"mimeType": "text/plain", "text": "This is the content of the static text resource."},
        ),
        ("test://static-binary", {"mimeType": "image/png", "blob": PNG_BASE64}),
        (
            "test://template/123/data",
            {
                "mimeType": "application/json",
                "text": json.dumps({"id": "123", "templateTest": True, "data": "Data for ID: 123"}),
            },
        ),
    ],
)
def test_resources(server: Server, uri: str, content: dict[str, Any]) -> None:
    result = result_of(checked(server, request(1, "resources/read", {"uri": uri})))
    assert result["contents"] == [{"uri": uri, **content}]


def test_resource_listings(server: Server) -> None:
    listing = result_of(checked(server, request(1, "resources/list")))["resources"]
    assert [r["uri"] for r in listing] == [
        "test://static-text",
        "test://static-binary",
        "test://watched-resource",
    ]
    templates = result_of(checked(server, request(2, "resources/templates/list")))
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == [
        "test://template/{id}/data"
    ]


def test_an_unknown_resource(server: Server) -> None:
    uri = "test://nonexistent-resource-for-conformance-testing"
    error = error_of(checked(server, request(1, "resources/read", {"uri": uri})))
    assert error["code"] == -32602 and error["data"] == {"uri": uri}


def test_completion_of_prompt_arguments(server: Server) -> None:
    params = {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": "test"},
    }
    result = result_of(checked(server, request(1, "completion/complete", params)))
    assert result["completion"]["values"] == ["test", "testValue1", "testing"]
    params["argument"] = {"name": "arg1", "value": "zzz"}
    result = result_of(checked(server, request(2, "completion/complete", params)))
    assert result["completion"] == {"values": [], "total": 0, "hasMore": False}


def test_the_anonymous_authenticator_names_one_principal() -> None:
    assert AnonymousAuthenticator().authenticate(None) == "conformance"
    assert AnonymousAuthenticator("p").authenticate("Bearer x") == "p"


# -- the 2025-11-25 scenarios' fixtures ----------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "count"), [(MISSING, 0), ("debug", 3), ("info", 3), ("error", 0)]
)
def test_logging_sequence_sends_three_info_messages_at_the_asked_level(
    server: Server, level: Any, count: int
) -> None:
    seen: list[dict[str, Any]] = []
    meta = {} if level is MISSING else {"io.modelcontextprotocol/logLevel": level}
    response = call(server, "test_tool_with_logging", meta=meta, notify=seen.append)
    assert text_of(response) == "Logging completed"
    assert len(seen) == count
    for notification in seen:
        v.LoggingMessageNotification.model_validate(notification, strict=True)
        assert notification["params"]["level"] == "info"


def test_sampling_fixture_asks_with_the_prompt_and_answers_with_the_sample(
    server: Server,
) -> None:
    first = call(server, "test_sampling", arguments={"prompt": "Say hi"})
    ask = result_of(first)["inputRequests"]["answer"]
    assert ask == {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
            "maxTokens": 100,
        },
    }
    assert "requestState" not in result_of(first)
    done = call(
        server, "test_sampling", arguments={"prompt": "Say hi"}, responses={"answer": SAMPLED}
    )
    assert text_of(done) == "LLM response: Paris"


def test_sampling_fixture_needs_the_capability_and_a_prompt(server: Server) -> None:
    missing = error_of(call(server, "test_sampling", caps={}, arguments={"prompt": "p"}))
    assert missing["code"] == -32021
    assert missing["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert error_of(call(server, "test_sampling", arguments={}))["code"] == -32602
    stated = call(server, "test_sampling", arguments={"prompt": "p"}, state="forged")
    assert error_of(stated)["message"] == STATE_ERROR


def test_elicitation_fixture_asks_the_message_and_reports_the_answer(server: Server) -> None:
    args = {"message": "Who are you?"}
    ask = result_of(call(server, "test_elicitation", arguments=args))["inputRequests"]["answer"]
    assert ask["method"] == "elicitation/create"
    assert ask["params"]["message"] == "Who are you?"
    assert ask["params"]["requestedSchema"]["required"] == ["username", "email"]
    done = call(
        server,
        "test_elicitation",
        arguments=args,
        responses={"answer": accept(username="u", email="e@x")},
    )
    assert text_of(done) == (
        'User response: Elicitation completed: action=accept, content={"email": "e@x", '
        '"username": "u"}'
    )
    bad = call(server, "test_elicitation", arguments=args, responses={"answer": {"x": 1}})
    assert error_of(bad)["code"] == -32602


def test_sep1034_fixture_has_a_default_for_every_primitive(server: Server) -> None:
    first = call(server, "test_elicitation_sep1034_defaults")
    props = result_of(first)["inputRequests"]["answer"]["params"]["requestedSchema"]["properties"]
    assert {name: (p["type"], p["default"]) for name, p in props.items()} == {
        "name": ("string", "John Doe"),
        "age": ("integer", 30),
        "score": ("number", 95.5),
        "status": ("string", "active"),
        "verified": ("boolean", True),
    }
    assert props["status"]["default"] in props["status"]["enum"]
    done = call(
        server, "test_elicitation_sep1034_defaults", responses={"answer": {"action": "decline"}}
    )
    assert text_of(done) == "Elicitation completed: action=decline, content={}"


def test_sep1330_fixture_asks_all_five_enum_shapes(server: Server) -> None:
    first = call(server, "test_elicitation_sep1330_enums")
    props = result_of(first)["inputRequests"]["answer"]["params"]["requestedSchema"]["properties"]
    assert "oneOf" not in props["untitledSingle"] and props["untitledSingle"]["enum"]
    assert all({"const", "title"} <= set(o) for o in props["titledSingle"]["oneOf"])
    legacy_enum = props["legacyEnum"]
    assert len(legacy_enum["enumNames"]) == len(legacy_enum["enum"]) == 3
    assert props["untitledMulti"]["items"]["enum"] and props["untitledMulti"]["type"] == "array"
    assert all({"const", "title"} <= set(o) for o in props["titledMulti"]["items"]["anyOf"])
