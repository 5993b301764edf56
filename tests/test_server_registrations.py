"""The general core beside tools: prompts, resources, resource templates, completion, caching
hints per method, the MRTR method rule and per-request notifications. Dicts in, dicts out
through `Server.handle`, each answer checked against the 2026-07-28 schema.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import build_lab, check_wire, error_of, request, result_of
from mcp_types import _v2026_07_28 as v
from pydantic import BaseModel

from labkit.server import CacheHint, Request, RequestContext, Server

# Complete results of the methods `helpers.check_wire` has no model for.
RESULT_MODELS: dict[str, type[BaseModel]] = {
    "prompts/list": v.ListPromptsResultResponse,
    "prompts/get": v.GetPromptResultResponse,
    "resources/list": v.ListResourcesResultResponse,
    "resources/templates/list": v.ListResourceTemplatesResultResponse,
    "resources/read": v.ReadResourceResultResponse,
    "completion/complete": v.CompleteResultResponse,
}
CACHED = ("prompts/list", "resources/list", "resources/templates/list", "resources/read")


def checked(server: Server, message: dict[str, Any], **context: Any) -> dict[str, Any]:
    """One answer, schema-checked: the helpers check where it has a model, else ours."""
    response = server.handle(message, RequestContext(principal="alice", **context))
    assert response is not None
    method = message["method"]
    result = response.get("result")
    if result is None or result.get("resultType") != "complete" or method not in RESULT_MODELS:
        check_wire(message, response)
        return response
    RESULT_MODELS[method].model_validate(response, strict=True)
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "labkit"
    if method in CACHED:
        assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
        assert result["cacheScope"] in ("public", "private")
    else:
        assert "ttlMs" not in result and "cacheScope" not in result
    return response


class Greeting:
    name = "greet"

    def descriptor(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "Greets someone",
            "arguments": [{"name": "who", "required": True}, {"name": "tone"}],
        }

    def get(self, request: Request, arguments: dict[str, str]) -> dict[str, Any]:
        if arguments["who"] == "ask":
            return {
                "resultType": "input_required",
                "inputRequests": {
                    "who": {
                        "method": "elicitation/create",
                        "params": {
                            "mode": "form",
                            "message": "Whom?",
                            "requestedSchema": {
                                "type": "object",
                                "properties": {"who": {"type": "string"}},
                            },
                        },
                    }
                },
            }
        text = f"Hello, {arguments['who']}{arguments.get('tone', '.')}"
        return {
            "resultType": "complete",
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        }


class Page:
    def __init__(self, uri: str, text: str, **hint: Any) -> None:
        self.uri = uri
        self.text = text
        self.hint = hint

    def descriptor(self) -> dict[str, Any]:
        return {"uri": self.uri, "name": self.uri.rsplit("/", 1)[-1]}

    def read(self, request: Request, uri: str) -> dict[str, Any]:
        return {
            "resultType": "complete",
            "contents": [{"uri": uri, "mimeType": "text/plain", "text": self.text}],
            **self.hint,
        }


class Doc:
    uri_template = "doc://{kind}/{id}"

    def descriptor(self) -> dict[str, Any]:
        return {"uriTemplate": self.uri_template, "name": "doc"}

    def read(self, request: Request, uri: str, variables: dict[str, str]) -> dict[str, Any]:
        return {
            "resultType": "complete",
            "contents": [{"uri": uri, "text": f"{variables['kind']}:{variables['id']}"}],
        }


def completer(
    request: Request, ref: dict[str, Any], argument: str, value: str, given: dict[str, str]
) -> list[str]:
    if argument == "many":
        return [f"v{i}" for i in range(150)]
    return [
        name for name in ("ann", "anna", "bob", given.get("tone", "")) if name.startswith(value)
    ]


def general(**kwargs: Any) -> Server:
    return Server(
        [],
        prompts=[Greeting()],
        resources=[Page("page://b", "second"), Page("page://a", "first")],
        resource_templates=[Doc()],
        completer=completer,
        **kwargs,
    )


# -- the lesson's deployment is unchanged --------------------------------------------------------


def test_a_server_with_only_tools_declares_and_answers_only_tools() -> None:
    server = build_lab().server
    discover = result_of(checked(server, request(1, "server/discover")))
    assert discover["capabilities"] == {"tools": {"listChanged": False}}
    for method in ("prompts/list", "resources/list", "resources/read", "completion/complete"):
        assert error_of(checked(server, request(2, method)))["code"] == -32601


def test_registrations_declare_their_capabilities() -> None:
    discover = result_of(checked(general(), request(1, "server/discover")))
    assert discover["capabilities"] == {
        "tools": {"listChanged": False},
        "prompts": {"listChanged": False},
        "resources": {"subscribe": False, "listChanged": False},
        "completions": {},
    }
    assert "roots" not in discover["capabilities"]


# -- prompts -------------------------------------------------------------------------------------


def test_prompts_list_and_get() -> None:
    server = general()
    listing = result_of(checked(server, request(1, "prompts/list")))
    assert [p["name"] for p in listing["prompts"]] == ["greet"]
    assert (listing["ttlMs"], listing["cacheScope"]) == (server.list_ttl_ms, "public")
    got = result_of(
        checked(server, request(2, "prompts/get", {"name": "greet", "arguments": {"who": "Bo"}}))
    )
    assert got["messages"][0]["content"]["text"] == "Hello, Bo."


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"name": 7},
        {"name": "nope"},
        {"name": "greet"},
        {"name": "greet", "arguments": {"tone": "!"}},
        {"name": "greet", "arguments": {"who": 3}},
        {"name": "greet", "arguments": ["who"]},
    ],
    ids=["no-name", "name-type", "unknown", "no-args", "missing-required", "non-string", "list"],
)
def test_prompts_get_refuses_bad_params(params: dict[str, Any]) -> None:
    assert error_of(checked(general(), request(1, "prompts/get", params)))["code"] == -32602


def test_prompts_get_may_answer_input_required_without_cache_hints() -> None:
    message = request(1, "prompts/get", {"name": "greet", "arguments": {"who": "ask"}})
    result = result_of(checked(general(), message))
    assert result["resultType"] == "input_required"
    assert "ttlMs" not in result and "cacheScope" not in result


# -- resources -----------------------------------------------------------------------------------


def test_resources_list_in_registration_order_and_templates_list() -> None:
    server = general()
    listing = result_of(checked(server, request(1, "resources/list")))
    assert [r["uri"] for r in listing["resources"]] == ["page://b", "page://a"]
    templates = result_of(checked(server, request(2, "resources/templates/list")))
    assert templates["resourceTemplates"] == [{"uriTemplate": "doc://{kind}/{id}", "name": "doc"}]


def test_resources_read_a_resource_with_default_private_hints() -> None:
    result = result_of(checked(general(), request(1, "resources/read", {"uri": "page://a"})))
    assert result["contents"][0]["text"] == "first"
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


def test_a_handlers_own_cache_hints_win_and_the_table_can_be_changed() -> None:
    server = Server(
        [],
        resources=[Page("page://own", "x", ttlMs=5, cacheScope="public"), Page("page://d", "y")],
        cache_hints={"resources/read": CacheHint(42, "public")},
    )
    own = result_of(checked(server, request(1, "resources/read", {"uri": "page://own"})))
    assert (own["ttlMs"], own["cacheScope"]) == (5, "public")
    table = result_of(checked(server, request(2, "resources/read", {"uri": "page://d"})))
    assert (table["ttlMs"], table["cacheScope"]) == (42, "public")


@pytest.mark.parametrize(
    ("uri", "text"),
    [("doc://memo/7", "memo:7"), ("doc://a%20b/x.y", "a%20b:x.y")],
)
def test_resources_read_through_a_template(uri: str, text: str) -> None:
    result = result_of(checked(general(), request(1, "resources/read", {"uri": uri})))
    assert result["contents"] == [{"uri": uri, "text": text}]


@pytest.mark.parametrize("uri", ["page://c", "doc://memo", "doc://memo/7/extra", "doc:///7", ""])
def test_an_unknown_resource_is_invalid_params_naming_the_uri(uri: str) -> None:
    error = error_of(checked(general(), request(1, "resources/read", {"uri": uri})))
    assert error["code"] == -32602 and error["data"] == {"uri": uri}


def test_resources_read_needs_a_string_uri() -> None:
    error = error_of(checked(general(), request(1, "resources/read", {"uri": 3})))
    assert error["code"] == -32602 and "data" not in error


# -- completion ----------------------------------------------------------------------------------


def complete_message(ref: Any, argument: Any, **extra: Any) -> dict[str, Any]:
    return request(1, "completion/complete", {"ref": ref, "argument": argument, **extra})


def test_completion_offers_the_completers_values() -> None:
    message = complete_message(
        {"type": "ref/prompt", "name": "greet"},
        {"name": "who", "value": "an"},
    )
    result = result_of(checked(general(), message))
    assert result["completion"] == {"values": ["ann", "anna"], "total": 2, "hasMore": False}


def test_completion_passes_the_context_arguments_and_takes_template_refs() -> None:
    message = complete_message(
        {"type": "ref/resource", "uri": "doc://{kind}/{id}"},
        {"name": "kind", "value": "lo"},
        context={"arguments": {"tone": "loud"}},
    )
    assert result_of(checked(general(), message))["completion"]["values"] == ["loud"]


def test_completion_caps_values_at_one_hundred() -> None:
    message = complete_message(
        {"type": "ref/prompt", "name": "greet"}, {"name": "many", "value": ""}
    )
    completion = result_of(checked(general(), message))["completion"]
    assert len(completion["values"]) == 100
    assert completion["total"] == 150 and completion["hasMore"] is True


@pytest.mark.parametrize(
    ("ref", "argument", "extra"),
    [
        ({"type": "ref/prompt", "name": "nope"}, {"name": "who", "value": ""}, {}),
        ({"type": "ref/resource", "uri": "page://zzz"}, {"name": "who", "value": ""}, {}),
        ({"type": "ref/tool", "name": "greet"}, {"name": "who", "value": ""}, {}),
        ("greet", {"name": "who", "value": ""}, {}),
        ({"type": "ref/prompt", "name": "greet"}, {"name": "who"}, {}),
        ({"type": "ref/prompt", "name": "greet"}, {"name": "who", "value": ""}, {"context": 1}),
        (
            {"type": "ref/prompt", "name": "greet"},
            {"name": "who", "value": ""},
            {"context": {"arguments": {"tone": 1}}},
        ),
    ],
    ids=[
        "unknown-prompt",
        "unknown-resource",
        "ref-type",
        "ref-string",
        "no-value",
        "context",
        "context-args",
    ],
)
def test_completion_refuses_bad_params(ref: Any, argument: Any, extra: dict[str, Any]) -> None:
    error = error_of(checked(general(), complete_message(ref, argument, **extra)))
    assert error["code"] == -32602


# -- rules every handler's result meets ------------------------------------------------------------


def test_input_required_from_a_method_mrtr_does_not_allow_is_an_internal_error() -> None:
    def broken(request: Request) -> dict[str, Any]:
        return {"resultType": "input_required", "requestState": "x"}

    server = Server([], extra_methods={"x/broken": broken})
    error = error_of(checked(server, request(1, "x/broken")))
    assert error == {"code": -32603, "message": "Internal error"}


def test_emit_hands_notifications_to_the_transports_sink_or_drops_them() -> None:
    seen: list[dict[str, Any]] = []
    RequestContext(notify=seen.append).emit("notifications/progress", {"progress": 1})
    RequestContext().emit("notifications/progress", {"progress": 2})  # no sink: dropped
    assert seen == [
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    ]
