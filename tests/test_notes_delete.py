"""`notes_delete` through the public core: dicts in, dicts out, every response schema-checked.

Sections: the 21 behaviours of the original reference (docs/LESSON.md section 14), the weaknesses it
must not repeat (section 13), then scope, candidates, the form, every retry branch, the live
re-checks before the mutation, and the replay store as the core sees it.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import (
    CANCEL,
    DECLINE,
    DEMO_IDS,
    FORM,
    MISSING,
    NOTES_URI,
    STATE_FAILURE,
    TPS,
    TPS_OFFER,
    Lab,
    accept,
    answer,
    ask,
    build_lab,
    call,
    call_message,
    error_of,
    form_of,
    offered,
    request,
    result_of,
    send,
    state_of,
    structured,
)

from labkit.clock import FakeClock
from labkit.deployment import demo_deployment
from labkit.errors import SERVER_BUSY, http_status
from labkit.notes_delete import OUTSIDE_ERROR, STORE_BUSY_ERROR
from labkit.scope import AllowlistAuthorizer, Path
from labkit.stores import Claim, StoreBusy
from labkit.stores.memory import MemoryReplayStore

OUTSIDE = {"code": -32602, "message": OUTSIDE_ERROR}
NEEDS_FORM = {
    "code": -32021,
    "message": "notes_delete needs form elicitation to confirm the deletion",
    "data": {"requiredCapabilities": {"elicitation": {"form": {}}}},
}
WITHOUT_14 = ["note-100", "note-3", "note-7", "note-99"]


def deleted(response: dict[str, Any]) -> bool:
    result: bool = structured(response)["deleted"]
    return result


def invalid_answer(response: dict[str, Any]) -> str:
    """A -32602 about the answer itself (not the state)."""
    error = error_of(response)
    assert error["code"] == -32602 and error != STATE_FAILURE, error
    message: str = error["message"]
    return message


class MutableAuthorizer:
    """An allowlist an operator can change while a confirmation is pending."""

    def __init__(self, allowlist: dict[str, list[str]]) -> None:
        self.allowlist = allowlist

    def roots(self, principal: str | None) -> tuple[Path, ...]:
        return AllowlistAuthorizer(self.allowlist).roots(principal)


# == docs/LESSON.md section 14: the 21 behaviours of the original reference ========================


class TestReferenceBehaviours:
    def test_01_a_child_path_of_the_workspace_is_inside_it(self, clock: FakeClock) -> None:
        extra = [("note-20", "file:///work/notes/2025/q4.md", "TPS report Q4")]
        lab = build_lab(clock, extra_notes=extra)
        sub = {"workspaceUri": "file:///work/notes/2025", "title": "TPS"}
        assert offered(call(lab.server, 1, arguments=sub)) == [("note-20", "TPS report Q4")]
        assert ("note-20", "TPS report Q4") in offered(call(lab.server, 2))

    def test_02_prefix_sibling_and_encoded_traversal_are_both_outside(
        self, clock: FakeClock
    ) -> None:
        evil = [("note-66", "file:///work/notes-evil/secret.md", "TPS secret")]
        lab = build_lab(clock, extra_notes=evil)
        errors = []
        for index, uri in enumerate(
            [
                "file:///work/notes-evil/secret.md",
                "file:///work/notes-evil",
                "file:///work/Notes-evil/secret.md",
                "file:///work/notes/%2e%2e/private.md",
                "file:///work/notes/%2E%2E/notes-evil",
                "file:///work/notes/../private",
                "file:///work/notes/..%2fprivate",
            ]
        ):
            response = call(lab.server, index, arguments={"workspaceUri": uri, "title": "TPS"})
            errors.append(error_of(response))
        assert errors == [OUTSIDE] * len(errors)
        assert "note-66" in lab.ids()

    def test_03_discovery_is_complete_without_roots(self, lab: Lab) -> None:
        response = send(lab.server, request(1, "server/discover"))
        assert response is not None
        result = result_of(response)
        assert result["resultType"] == "complete"
        assert result["supportedVersions"] == ["2026-07-28"]
        assert "roots" not in result["capabilities"]

    def test_04_tools_list_is_complete_cached_identified_and_sorted(self, lab: Lab) -> None:
        response = send(lab.server, request(1, "tools/list"))
        assert response is not None
        result = result_of(response)
        assert result["resultType"] == "complete"
        assert result["ttlMs"] > 0 and result["cacheScope"] == "public"
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "labkit"
        names = [tool["name"] for tool in result["tools"]]
        assert names == sorted(names) == ["notes_delete"]
        (tool,) = result["tools"]
        assert tool["inputSchema"]["required"] == ["workspaceUri", "title"]
        assert tool["annotations"]["destructiveHint"] is True

    def test_05_the_first_call_returns_a_form_mode_elicitation(self, lab: Lab) -> None:
        result = result_of(call(lab.server, 1))
        assert result["resultType"] == "input_required"
        choice = result["inputRequests"]["delete_choice"]
        assert choice["method"] == "elicitation/create"
        assert choice["params"]["mode"] == "form"
        assert isinstance(result["requestState"], str) and result["requestState"]
        assert lab.ids() == DEMO_IDS

    def test_06_an_accepted_retry_with_a_new_id_deletes_the_chosen_note(self, lab: Lab) -> None:
        state = ask(lab, 1)
        response = call(lab.server, 2, state=state, responses=accept("note-14"))
        assert response["id"] == 2
        result = result_of(response)
        assert result["resultType"] == "complete" and not result.get("isError")
        assert result["structuredContent"] == {
            "deleted": True,
            "status": "deleted",
            "noteId": "note-14",
        }
        assert "note-14" in result["content"][0]["text"]
        assert lab.ids() == WITHOUT_14

    def test_07_a_declined_retry_deletes_nothing(self, lab: Lab) -> None:
        response = call(lab.server, 2, state=ask(lab), responses=DECLINE)
        assert result_of(response).get("isError") is None
        assert structured(response) == {"deleted": False, "status": "declined"}
        assert lab.ids() == DEMO_IDS

    def test_08_decline_is_terminal(self, lab: Lab) -> None:
        state = ask(lab)
        assert not deleted(call(lab.server, 2, state=state, responses=DECLINE))
        response = call(lab.server, 3, state=state, responses=accept("note-14"))
        assert error_of(response) == STATE_FAILURE
        assert lab.ids() == DEMO_IDS

    def test_09_a_state_that_deleted_once_cannot_delete_another(self, lab: Lab) -> None:
        state = ask(lab)
        assert deleted(call(lab.server, 2, state=state, responses=accept("note-14")))
        response = call(lab.server, 3, state=state, responses=accept("note-7"))
        assert error_of(response) == STATE_FAILURE
        assert lab.ids() == WITHOUT_14

    def test_10_two_server_objects_cannot_both_execute_one_confirmation(self, lab: Lab) -> None:
        other = lab.twin()
        state = ask(lab)
        first = call(lab.server, 2, state=state, responses=accept("note-14"))
        second = call(other, 3, state=state, responses=accept("note-7"))
        assert deleted(first)
        assert error_of(second) == STATE_FAILURE
        assert lab.ids() == WITHOUT_14

    def test_11_the_replay_store_is_bounded_and_prunes_with_the_injected_clock(
        self, clock: FakeClock
    ) -> None:
        replay = MemoryReplayStore(capacity=1, per_principal=1, clock=clock)
        lab = build_lab(clock, replay=replay)
        assert not deleted(call(lab.server, 2, state=ask(lab, 1), responses=DECLINE))
        clock.advance(200)
        state = ask(lab, 3)
        full = call(lab.server, 4, state=state, responses=accept("note-14"))
        assert error_of(full)["code"] == -32001
        assert "nothing was done" in error_of(full)["message"]
        assert lab.ids() == DEMO_IDS  # the deletion never ran
        clock.advance(161)  # the first claim is kept for its state's 300 s plus 60 s of skew
        assert deleted(call(lab.server, 5, state=state, responses=accept("note-14")))

    def test_12_an_invalid_accept_or_a_cancel_consumes_nothing(self, lab: Lab) -> None:
        state = ask(lab)
        assert "not one of the offered choices" in invalid_answer(
            call(lab.server, 2, state=state, responses=accept("note-99"))
        )
        cancelled = call(lab.server, 3, state=state, responses=CANCEL)
        assert structured(cancelled) == {"deleted": False, "status": "cancelled"}
        assert lab.ids() == DEMO_IDS
        assert deleted(call(lab.server, 4, state=state, responses=accept("note-14")))
        assert lab.ids() == WITHOUT_14

    def test_13_a_title_only_outside_the_workspace_reveals_nothing(self, lab: Lab) -> None:
        response = call(lab.server, 1, arguments={**TPS, "title": "outside root"})
        result = result_of(response)
        assert result["resultType"] == "complete" and not result.get("isError")
        assert result["structuredContent"] == {"deleted": False, "status": "no_match"}
        for secret in ("note-100", "private", "outside.md"):
            assert secret not in str(response)
        assert lab.ids() == DEMO_IDS

    def test_14_no_elicitation_capability_is_32021(self, lab: Lab) -> None:
        response = call(lab.server, 1, caps={})
        assert error_of(response) == NEEDS_FORM
        assert http_status(-32021) == 400

    def test_15_an_empty_elicitation_object_means_form(self, lab: Lab) -> None:
        state = ask(lab, 1, caps={"elicitation": {}})
        response = call(
            lab.server, 2, caps={"elicitation": {}}, state=state, responses=accept("note-14")
        )
        assert deleted(response)

    def test_16_url_only_is_not_form(self, lab: Lab) -> None:
        response = call(lab.server, 1, caps={"elicitation": {"url": {}}})
        assert error_of(response) == NEEDS_FORM

    def test_17_another_title_invalidates_the_state(self, lab: Lab) -> None:
        state = ask(lab)
        response = call(
            lab.server,
            2,
            arguments={**TPS, "title": "TPS report 2025"},
            state=state,
            responses=accept("note-14"),
        )
        assert error_of(response) == STATE_FAILURE
        assert lab.ids() == DEMO_IDS

    def test_18_state_and_answers_must_come_together_and_well_formed(self, lab: Lab) -> None:
        state = ask(lab)
        # A state without an answer is re-asked (docs/protocol.md), never an error or consent.
        again = result_of(call(lab.server, 2, state=state))
        assert again["resultType"] == "input_required"
        assert again["requestState"] != state
        for index, (kwargs, expected) in enumerate(
            [
                ({"responses": accept("note-14")}, STATE_FAILURE),  # an answer without state
                ({"state": None, "responses": accept("note-14")}, STATE_FAILURE),
                ({"state": state, "responses": []}, None),
                ({"state": state, "responses": "accept"}, None),
                ({"state": state, "responses": None}, None),
            ]
        ):
            error = error_of(call(lab.server, 10 + index, **kwargs))
            assert error["code"] == -32602
            if expected is not None:
                assert error == expected
        assert lab.ids() == DEMO_IDS
        assert deleted(call(lab.server, 20, state=state, responses=accept("note-14")))

    def test_19_an_unsupported_version_is_32022_with_the_exact_data(self, lab: Lab) -> None:
        response = call(lab.server, 1, version="2025-11-25")
        assert error_of(response) == {
            "code": -32022,
            "message": "Unsupported protocol version: 2025-11-25",
            "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"},
        }

    @pytest.mark.parametrize("version", [20260728, None, ["2026-07-28"], {"v": 1}, True])
    def test_20_a_non_string_version_is_32602(self, lab: Lab, version: Any) -> None:
        assert error_of(call(lab.server, 1, version=version))["code"] == -32602

    def test_21_a_notification_gets_no_response_and_deletes_nothing(self, lab: Lab) -> None:
        state = ask(lab)
        issued = lab.nonces.issued
        for responses in (accept("note-14"), DECLINE, CANCEL, MISSING):
            message = call_message(MISSING, state=state, responses=responses)
            assert "id" not in message
            assert send(lab.server, message) is None
        assert lab.ids() == DEMO_IDS
        assert lab.nonces.issued == issued  # not even a form was prepared
        # Nothing was consumed either: the real request with an id still works.
        assert deleted(call(lab.server, 2, state=state, responses=accept("note-14")))


# == docs/LESSON.md section 13: weaknesses of the original that labkit must not repeat =============


class TestOriginalWeaknesses:
    def test_the_allowlist_is_per_principal_and_comes_from_authentication(self, lab: Lab) -> None:
        cases: list[tuple[str | None, dict[str, str]]] = [
            ("mallory", TPS),
            ("eve", TPS),
            (None, TPS),
            ("alice", {"workspaceUri": "file:///work/mallory", "title": "x"}),
        ]
        for index, (principal, arguments) in enumerate(cases):
            response = call(lab.server, index, arguments=arguments, principal=principal)
            assert error_of(response) == OUTSIDE
        assert lab.nonces.issued == 0

    def test_client_info_never_authorizes(self, lab: Lab) -> None:
        message = call_message(1)
        message["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] = {
            "name": "alice",
            "version": "1",
        }
        response = send(lab.server, message, principal="mallory")
        assert response is not None
        assert error_of(response) == OUTSIDE

    def test_a_principal_in_the_arguments_is_refused(self, lab: Lab) -> None:
        response = call(lab.server, 1, arguments={**TPS, "principal": "alice"}, principal="mallory")
        assert error_of(response)["code"] == -32602
        assert lab.nonces.issued == 0

    def test_an_unauthorized_workspace_reveals_nothing_about_its_notes(self, lab: Lab) -> None:
        private = {"workspaceUri": "file:///work/private", "title": "outside"}
        nowhere = {"workspaceUri": "file:///work/nowhere", "title": "outside"}
        first = call(lab.server, 1, arguments=private)
        second = call(lab.server, 2, arguments=nowhere)
        third = call(lab.server, 3, arguments=TPS, principal="mallory")
        assert error_of(first) == error_of(second) == error_of(third) == OUTSIDE
        for response in (first, third):
            for secret in ("note-", "TPS report", "outside root"):
                assert secret not in str(response)

    def test_one_caller_cannot_fill_the_replay_store_for_everyone(self, clock: FakeClock) -> None:
        replay = MemoryReplayStore(capacity=100, per_principal=2, clock=clock)
        theirs = [(f"m-{i}", f"file:///work/mallory/junk-{i}.md", "junk") for i in range(3)]
        lab = build_lab(clock, replay=replay, extra_notes=theirs)
        junk = {"workspaceUri": "file:///work/mallory", "title": "junk"}
        for index in range(2):
            state = ask(lab, index, arguments=junk, principal="mallory")
            response = call(
                lab.server,
                10 + index,
                arguments=junk,
                state=state,
                responses=DECLINE,
                principal="mallory",
            )
            assert structured(response)["status"] == "declined"
        state = ask(lab, 20, arguments=junk, principal="mallory")
        refused = call(
            lab.server,
            21,
            arguments=junk,
            state=state,
            responses=accept("m-0"),
            principal="mallory",
        )
        assert error_of(refused)["code"] == -32001
        assert "m-0" in lab.ids()
        # Alice's share is untouched.
        assert deleted(call(lab.server, 30, state=ask(lab, 29), responses=accept("note-14")))

    def test_accept_without_confirmation_is_a_non_error_terminal_refusal(self, lab: Lab) -> None:
        state = ask(lab)
        response = call(lab.server, 2, state=state, responses=accept("note-14", confirm=False))
        result = result_of(response)
        assert result["resultType"] == "complete" and not result.get("isError")
        assert result["structuredContent"] == {"deleted": False, "status": "not_confirmed"}
        assert lab.ids() == DEMO_IDS
        again = call(lab.server, 3, state=state, responses=accept("note-14"))
        assert error_of(again) == STATE_FAILURE
        assert lab.ids() == DEMO_IDS

    @pytest.mark.parametrize(
        "responses",
        [
            pytest.param(MISSING, id="absent"),
            pytest.param({}, id="empty"),
            pytest.param({"other_key": {"action": "accept", "content": {}}}, id="unknown-key"),
            pytest.param({"delete_choice": None}, id="null-answer"),
        ],
    )
    def test_a_missing_answer_is_re_asked(self, lab: Lab, responses: Any) -> None:
        state = ask(lab)
        response = call(lab.server, 2, state=state, responses=responses)
        assert offered(response) == TPS_OFFER
        fresh = state_of(response)
        assert fresh != state
        assert lab.ids() == DEMO_IDS
        assert deleted(call(lab.server, 3, state=fresh, responses=accept("note-7")))
        # The original state was not consumed by the re-ask either.
        assert deleted(call(lab.server, 4, state=state, responses=accept("note-3")))

    def test_extra_fields_in_the_answer_are_refused_without_consuming(self, lab: Lab) -> None:
        state = ask(lab)
        content = {"note_id": "note-14", "confirm": True, "also_delete": "note-7"}
        message = invalid_answer(
            call(lab.server, 2, state=state, responses=answer("accept", content))
        )
        assert "unexpected" in message
        assert lab.ids() == DEMO_IDS
        assert deleted(call(lab.server, 3, state=state, responses=accept("note-14")))

    def test_an_encoded_nul_is_refused(self, lab: Lab) -> None:
        for index, uri in enumerate(["file:///work/notes%00", "file:///work/notes/%00/x"]):
            response = call(lab.server, index, arguments={"workspaceUri": uri, "title": "TPS"})
            error = error_of(response)
            assert error["code"] == -32602 and "workspaceUri" in error["message"]
        assert lab.nonces.issued == 0

    @pytest.mark.parametrize(
        "uri",
        ["file://localhost/work/notes", "file:///work/notes/", "file://localhost/work/notes/"],
    )
    def test_localhost_and_a_trailing_slash_name_the_authorized_workspace(
        self, lab: Lab, uri: str
    ) -> None:
        arguments = {"workspaceUri": uri, "title": "TPS report"}
        response = call(lab.server, 1, arguments=arguments)
        assert offered(response) == TPS_OFFER
        assert "file:///work/notes" in form_of(response)["message"]
        state = state_of(response)
        retry = call(lab.server, 2, arguments=arguments, state=state, responses=accept("note-14"))
        assert deleted(retry)

    def test_an_allowlist_configured_with_a_trailing_slash_works(self, clock: FakeClock) -> None:
        lab = build_lab(clock, allowlist={"alice": ["file:///work/notes/"]})
        assert deleted(call(lab.server, 2, state=ask(lab), responses=accept("note-14")))

    def test_the_form_shows_titles_not_bare_ids(self, lab: Lab) -> None:
        assert offered(call(lab.server, 1)) == TPS_OFFER


# == arguments, capability gate and scope =======================================================


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(MISSING, id="no-arguments"),
        pytest.param({}, id="empty"),
        pytest.param({"title": "TPS"}, id="no-workspace"),
        pytest.param({"workspaceUri": NOTES_URI}, id="no-title"),
        pytest.param({"workspaceUri": 7, "title": "TPS"}, id="workspace-number"),
        pytest.param({"workspaceUri": [NOTES_URI], "title": "TPS"}, id="workspace-array"),
        pytest.param({"workspaceUri": NOTES_URI, "title": 2025}, id="title-number"),
        pytest.param({"workspaceUri": NOTES_URI, "title": None}, id="title-null"),
        pytest.param({"workspaceUri": NOTES_URI, "title": ""}, id="title-empty"),
        pytest.param({"workspaceUri": NOTES_URI, "title": "   "}, id="title-blank"),
        pytest.param({"workspaceUri": NOTES_URI, "title": "x" * 201}, id="title-too-long"),
        pytest.param({**TPS, "force": True}, id="extra-argument"),
        pytest.param({"workspaceUri": "/work/notes", "title": "TPS"}, id="not-a-uri"),
        pytest.param({"workspaceUri": "file:///work/notes?x", "title": "TPS"}, id="query"),
    ],
)
def test_bad_arguments_are_32602_and_prepare_nothing(lab: Lab, arguments: Any) -> None:
    message = call_message(1, arguments=arguments)
    if arguments is MISSING:
        del message["params"]["arguments"]
    response = send(lab.server, message)
    assert response is not None
    assert error_of(response)["code"] == -32602
    assert lab.nonces.issued == 0


def test_a_title_of_200_characters_is_accepted(lab: Lab) -> None:
    response = call(lab.server, 1, arguments={**TPS, "title": "x" * 200})
    assert structured(response)["status"] == "no_match"


def test_the_capability_gate_comes_before_anything_else(lab: Lab) -> None:
    response = call(lab.server, 1, arguments={"junk": 1}, caps={}, principal="eve")
    assert error_of(response) == NEEDS_FORM


@pytest.mark.parametrize(
    "caps",
    [
        {"elicitation": {}},
        {"elicitation": {"form": {}}},
        {"elicitation": {"form": {}, "url": {}}},
        {"elicitation": {"form": {}}, "sampling": {}, "roots": {}},
    ],
)
def test_every_form_declaration_is_accepted(lab: Lab, caps: dict[str, Any]) -> None:
    assert offered(call(lab.server, 1, caps=caps)) == TPS_OFFER


@pytest.mark.parametrize(
    "caps",
    [
        {},
        {"elicitation": {"url": {}}},
        {"sampling": {}},
        {"roots": {"listChanged": True}},
        {"elicitation": None},
        {"elicitation": True},
        {"elicitation": "form"},
    ],
)
def test_every_declaration_without_form_is_32021(lab: Lab, caps: dict[str, Any]) -> None:
    assert error_of(call(lab.server, 1, caps=caps)) == NEEDS_FORM


def test_capabilities_are_judged_per_request_on_the_retry_too(lab: Lab) -> None:
    state = ask(lab, 1, caps=FORM)
    response = call(
        lab.server, 2, caps={"elicitation": {"url": {}}}, state=state, responses=accept("note-14")
    )
    assert error_of(response) == NEEDS_FORM
    assert lab.ids() == DEMO_IDS
    assert deleted(call(lab.server, 3, state=state, responses=accept("note-14")))


@pytest.mark.parametrize(
    "uri", ["file:///work", "file:///", "file:///work/private", "file:///work/mallory"]
)
def test_a_workspace_outside_the_allowlist_is_refused(lab: Lab, uri: str) -> None:
    response = call(lab.server, 1, arguments={"workspaceUri": uri, "title": "TPS"})
    assert error_of(response) == OUTSIDE


def test_re_authorization_on_the_retry(clock: FakeClock) -> None:
    authorizer = MutableAuthorizer({"alice": ["file:///work/notes"]})
    lab = build_lab(clock, authorizer=authorizer)
    state = ask(lab)
    authorizer.allowlist = {"alice": []}  # an operator revokes the workspace meanwhile
    response = call(lab.server, 2, state=state, responses=accept("note-14"))
    assert error_of(response) == OUTSIDE
    assert lab.ids() == DEMO_IDS
    authorizer.allowlist = {"alice": ["file:///work/notes"]}
    assert deleted(call(lab.server, 3, state=state, responses=accept("note-14")))


# == candidates and the form ===================================================================


def test_title_matching_is_case_insensitive_and_ordered(lab: Lab) -> None:
    for index, title in enumerate(["tps REPORT", "TPS report", "Report 20"]):
        response = call(lab.server, index, arguments={**TPS, "title": title})
        assert offered(response) == TPS_OFFER


def test_a_single_match_is_still_confirmed(lab: Lab) -> None:
    response = call(lab.server, 1, arguments={**TPS, "title": "2025"})
    assert offered(response) == [("note-14", "TPS report 2025")]
    assert lab.ids() == DEMO_IDS


def test_no_match_is_a_non_error_result(lab: Lab) -> None:
    result = result_of(call(lab.server, 1, arguments={**TPS, "title": "budget"}))
    assert result["resultType"] == "complete" and not result.get("isError")
    assert result["structuredContent"] == {"deleted": False, "status": "no_match"}
    assert "Nothing was deleted" in result["content"][0]["text"]


def test_candidates_are_bounded_with_a_clear_message(clock: FakeClock) -> None:
    many = [(f"n-{i:02}", f"file:///work/notes/r{i:02}.md", f"Report {i:02}") for i in range(25)]
    lab = build_lab(clock, extra_notes=many)
    response = call(lab.server, 1, arguments={**TPS, "title": "Report "})
    choices = offered(response)
    assert len(choices) == 20
    assert choices == [(f"n-{i:02}", f"Report {i:02}") for i in range(20)]
    assert "More than 20" in form_of(response)["message"]


def test_exactly_twenty_candidates_need_no_warning(clock: FakeClock) -> None:
    many = [(f"n-{i:02}", f"file:///work/notes/r{i:02}.md", f"Memo {i:02}") for i in range(20)]
    lab = build_lab(clock, extra_notes=many)
    response = call(lab.server, 1, arguments={**TPS, "title": "memo"})
    assert len(offered(response)) == 20
    assert "More than" not in form_of(response)["message"]


def test_the_form_names_the_workspace_and_warns(lab: Lab) -> None:
    params = form_of(call(lab.server, 1))
    assert params["mode"] == "form"
    assert "file:///work/notes" in params["message"]
    assert "cannot be undone" in params["message"]
    schema = params["requestedSchema"]
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"note_id", "confirm"}
    assert set(schema["required"]) == {"note_id", "confirm"}
    assert schema["properties"]["confirm"]["type"] == "boolean"
    assert schema["properties"]["note_id"]["oneOf"][2] == {
        "const": "note-14",
        "title": "TPS report 2025",
    }


def test_a_deeper_workspace_offers_only_its_own_notes(clock: FakeClock) -> None:
    extra = [("note-20", "file:///work/notes/2025/q4.md", "TPS report Q4")]
    lab = build_lab(clock, extra_notes=extra)
    sub = {"workspaceUri": "file:///work/notes/2025", "title": "TPS"}
    state = ask(lab, 1, arguments=sub)
    response = call(lab.server, 2, arguments=sub, state=state, responses=accept("note-14"))
    assert "not one of the offered choices" in invalid_answer(response)
    assert deleted(call(lab.server, 3, arguments=sub, state=state, responses=accept("note-20")))


# == the retry branches =========================================================================


def test_cancel_consumes_nothing_and_can_repeat(lab: Lab) -> None:
    state = ask(lab)
    for index in range(3):
        response = call(lab.server, 10 + index, state=state, responses=CANCEL)
        result = result_of(response)
        assert not result.get("isError")
        assert result["structuredContent"] == {"deleted": False, "status": "cancelled"}
    assert deleted(call(lab.server, 20, state=state, responses=accept("note-3")))
    assert "note-3" not in lab.ids()


def test_a_cancelled_state_still_expires(lab: Lab) -> None:
    state = ask(lab)
    assert structured(call(lab.server, 2, state=state, responses=CANCEL))["status"] == "cancelled"
    lab.clock.advance(300)
    assert error_of(call(lab.server, 3, state=state, responses=accept("note-14"))) == STATE_FAILURE


@pytest.mark.parametrize("first", ["decline", "delete"])
def test_a_used_state_is_not_re_asked_nor_reported_cancellable(lab: Lab, first: str) -> None:
    state = ask(lab)
    if first == "delete":
        assert deleted(call(lab.server, 2, state=state, responses=accept("note-14")))
    else:
        assert structured(call(lab.server, 2, state=state, responses=DECLINE))["status"] == (
            "declined"
        )
    kept = lab.ids()
    # Cancel, a missing answer, and state alone: the confirmation is over, not answerable.
    for index, responses in enumerate([CANCEL, {}, MISSING]):
        response = call(lab.server, 3 + index, state=state, responses=responses)
        assert error_of(response) == STATE_FAILURE
    assert lab.ids() == kept


def test_decline_with_stray_content_is_still_a_decline(lab: Lab) -> None:
    state = ask(lab)
    stray = answer("decline", {"note_id": "note-14", "confirm": True})
    assert structured(call(lab.server, 2, state=state, responses=stray))["status"] == "declined"
    assert lab.ids() == DEMO_IDS


def test_after_a_decline_nothing_can_delete_with_that_state(lab: Lab) -> None:
    state = ask(lab)
    assert structured(call(lab.server, 2, state=state, responses=DECLINE))["status"] == "declined"
    for index, responses in enumerate(
        [DECLINE, accept("note-14", confirm=False), accept("note-7")]
    ):
        assert error_of(call(lab.server, 3 + index, state=state, responses=responses)) == (
            STATE_FAILURE
        )
    call(lab.server, 9, state=state, responses=CANCEL)
    assert error_of(call(lab.server, 10, state=state, responses=accept("note-3"))) == STATE_FAILURE
    assert lab.ids() == DEMO_IDS


INVALID_ANSWERS = [
    pytest.param(accept("note-99"), id="in-workspace-not-offered"),
    pytest.param(accept("note-100"), id="outside-not-offered"),
    pytest.param(accept("NOTE-14"), id="wrong-case"),
    pytest.param(accept(14), id="id-number"),
    pytest.param(accept(None), id="id-null"),
    pytest.param(accept("note-14", confirm="yes"), id="confirm-string"),
    pytest.param(accept("note-14", confirm=1), id="confirm-number"),
    pytest.param(answer("accept"), id="no-content"),
    pytest.param(answer("accept", None), id="content-null"),
    pytest.param(answer("accept", []), id="content-array"),
    pytest.param(answer("accept", {"note_id": "note-14"}), id="no-confirm"),
    pytest.param(answer("accept", {"confirm": True}), id="no-note-id"),
    pytest.param(answer("accept", {}), id="content-empty"),
    pytest.param(answer("approve", {"note_id": "note-14", "confirm": True}), id="unknown-action"),
    pytest.param({"delete_choice": {"content": {"note_id": "note-14"}}}, id="no-action"),
    pytest.param({"delete_choice": "accept"}, id="answer-string"),
    pytest.param({"delete_choice": ["accept"]}, id="answer-array"),
]


@pytest.mark.parametrize("responses", INVALID_ANSWERS)
def test_an_invalid_answer_is_32602_and_consumes_nothing(lab: Lab, responses: Any) -> None:
    state = ask(lab)
    invalid_answer(call(lab.server, 2, state=state, responses=responses))
    assert lab.ids() == DEMO_IDS
    assert deleted(call(lab.server, 3, state=state, responses=accept("note-14")))


def test_the_state_is_verified_before_the_answer(lab: Lab) -> None:
    state = ask(lab)
    tampered = state[:-2] + ("AA" if state[-2:] != "AA" else "BB")
    response = call(lab.server, 2, state=tampered, responses=accept("note-99"))
    assert error_of(response) == STATE_FAILURE


def test_a_retry_may_reuse_the_id_space_freely(lab: Lab) -> None:
    state = ask(lab, "first")
    response = call(lab.server, "second", state=state, responses=accept("note-14"))
    assert response["id"] == "second" and deleted(response)


# == live re-checks right before the mutation ==================================================


def test_a_note_moved_out_of_the_workspace_is_not_deleted(lab: Lab) -> None:
    state = ask(lab)
    lab.notes.move("note-14", "file:///work/private/moved.md")
    result = result_of(call(lab.server, 2, state=state, responses=accept("note-14")))
    assert result["isError"] is True
    assert result["structuredContent"] == {
        "deleted": False,
        "status": "stale",
        "noteId": "note-14",
    }
    assert "note-14" in lab.ids()
    # A stale target burns nothing: once the note is back, the same confirmation works.
    lab.notes.move("note-14", "file:///work/notes/tps-report-2025.md")
    assert deleted(call(lab.server, 3, state=state, responses=accept("note-14")))


def test_a_note_moved_within_the_workspace_is_still_the_same_note(lab: Lab) -> None:
    state = ask(lab)
    lab.notes.move("note-14", "file:///work/notes/archive/tps-report-2025.md")
    assert deleted(call(lab.server, 2, state=state, responses=accept("note-14")))


def test_a_note_replaced_after_the_form_is_not_deleted(lab: Lab) -> None:
    state = ask(lab)
    lab.notes.add("note-14", "file:///work/notes/tps-report-2025.md", "TPS report 2025")
    response = call(lab.server, 2, state=state, responses=accept("note-14"))
    assert structured(response)["status"] == "stale"
    assert "note-14" in lab.ids()


def test_a_note_deleted_meanwhile_is_stale_and_the_state_survives(lab: Lab) -> None:
    first, second = ask(lab, 1), ask(lab, 2)
    assert deleted(call(lab.server, 3, state=second, responses=accept("note-14")))
    response = call(lab.server, 4, state=first, responses=accept("note-14"))
    assert structured(response)["status"] == "stale"
    assert deleted(call(lab.server, 5, state=first, responses=accept("note-7")))
    assert lab.ids() == ["note-100", "note-3", "note-99"]


# == the demo deployment of the issue ===========================================================


def test_the_demo_deployment(clock: FakeClock) -> None:
    demo = demo_deployment(clock=clock)
    assert demo.authorizer.roots("alice") == (("work", "notes"),)
    assert demo.authorizer.roots("mallory") == (("work", "mallory"),)
    assert demo.authorizer.roots("eve") == ()
    notes = {n: demo.notes.get(n) for n in demo.notes.ids()}
    assert {n: (note.title, "/" + "/".join(note.path)) for n, note in notes.items() if note} == {
        "note-3": ("TPS report 2023", "/work/notes/tps-report-2023.md"),
        "note-7": ("TPS report 2024", "/work/notes/tps-report-2024.md"),
        "note-14": ("TPS report 2025", "/work/notes/tps-report-2025.md"),
        "note-99": ("shopping list", "/work/notes/shopping-list.md"),
        "note-100": ("outside root", "/work/private/outside.md"),
    }
    state = state_of(send_checked(demo.server, call_message(1)))
    done = send_checked(demo.server, call_message(2, state=state, responses=accept("note-14")))
    assert deleted(done)
    assert demo.notes.get("note-14") is None


def send_checked(server: Any, message: dict[str, Any]) -> dict[str, Any]:
    response = send(server, message)
    assert response is not None
    return response


@pytest.mark.parametrize("title", ["TPS\ud800", "\udfff", "report \ud83d"])
def test_a_title_that_is_not_unicode_text_is_32602_not_an_internal_error(
    lab: Lab, title: str
) -> None:
    response = call(lab.server, 1, arguments={**TPS, "title": title})
    assert error_of(response)["code"] == -32602
    assert lab.nonces.issued == 0


# == a store that reports itself busy ===========================================================


class BusyReplay:
    """A replay store whose claims report `StoreBusy` while `busy` is set (a locked database)."""

    def __init__(self, clock: FakeClock) -> None:
        self.inner = MemoryReplayStore(clock=clock)
        self.busy = True

    def claim(self, principal: str, nonce: str, expires_at: float) -> Claim:
        if self.busy:
            raise StoreBusy("stores.db stayed locked for 60.0s; nothing was changed")
        return self.inner.claim(principal, nonce, expires_at)

    def release(self, principal: str, nonce: str) -> None:
        self.inner.release(principal, nonce)

    def used(self, principal: str, nonce: str) -> bool:
        return self.inner.used(principal, nonce)


def test_a_busy_store_is_the_busy_error_with_503_and_the_retry_still_works(
    clock: FakeClock,
) -> None:
    replay = BusyReplay(clock)
    lab = build_lab(clock, replay=replay)
    state = ask(lab)
    error = error_of(call(lab.server, 2, state=state, responses=accept("note-14")))
    assert error == {"code": SERVER_BUSY, "message": STORE_BUSY_ERROR}
    assert http_status(error["code"]) == 503
    assert "locked" not in error["message"]  # the reason goes to the log, not the wire
    assert lab.ids() == DEMO_IDS
    replay.busy = False  # the lock is gone: the same confirmation goes through
    assert deleted(call(lab.server, 3, state=state, responses=accept("note-14")))
