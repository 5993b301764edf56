"""start_tool, headless: it returns at once, the clicks drive the retries.

Run against the real `Host.in_process` on the demo server, and with two small hosts of the
`StepHost` protocol: `ServerHost` drives the real in-process demo
server (requests checked against the 2026-07-28 schema by conftest's `call`), and
`ScriptedHost` replays a script of rounds to reach the shapes the demo tool never sends.
"""

from __future__ import annotations

import html
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
import pytest
from helpers import FORM, TPS, call

from labkit.course import ElicitationForm, Host, LiveCall, McpError, UrlConsent, start_tool
from labkit.course.widgets.consent_panel import OPENED
from labkit.course.widgets.live_call import ASKED_AGAIN, STILL_OPEN
from labkit.deployment import Deployment, demo_deployment


@dataclass(frozen=True)
class Pending:
    name: str
    arguments: dict[str, Any]
    input_requests: dict[str, dict[str, Any]]
    request_state: str | None
    round: int


class StepError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class ServerHost:
    """The step API over `Server.handle`: new id per request, requestState echoed unchanged."""

    def __init__(self, deployment: Deployment, caps: Any = FORM) -> None:
        self.server = deployment.server
        self.caps = caps
        self.ids: Iterator[int] = itertools.count(1)
        self.sent: list[dict[str, Any]] = []

    def begin(self, name: str, arguments: dict[str, Any]) -> Pending | dict[str, Any]:
        return self._send(name, arguments, 1)

    def resume(
        self, pending: Pending, answers: dict[str, dict[str, Any]]
    ) -> Pending | dict[str, Any]:
        return self._send(
            pending.name, pending.arguments, pending.round + 1, pending.request_state, answers
        )

    def _send(
        self,
        name: str,
        arguments: dict[str, Any],
        round: int,
        state: str | None = None,
        answers: dict[str, dict[str, Any]] | None = None,
    ) -> Pending | dict[str, Any]:
        extra: dict[str, Any] = {}
        if state is not None:
            extra["state"] = state
        if answers is not None:
            extra["responses"] = answers
        request_id = next(self.ids)
        response = call(self.server, request_id, name, arguments, caps=self.caps, **extra)
        self.sent.append({"id": request_id, "state": state, "answers": answers})
        if "error" in response:
            raise StepError(**response["error"])
        result: dict[str, Any] = response["result"]
        if result["resultType"] == "input_required":
            return Pending(
                name,
                arguments,
                result.get("inputRequests", {}),
                result.get("requestState"),
                round,
            )
        return result


class ScriptedHost:
    """Answers `begin` and each `resume` from a script, recording what it was given."""

    def __init__(self, *steps: Any) -> None:
        self.steps = list(steps)
        self.resumed: list[dict[str, Any]] = []

    def begin(self, name: str, arguments: dict[str, Any]) -> Pending | dict[str, Any]:
        return self._next()

    def resume(
        self, pending: Pending, answers: dict[str, dict[str, Any]]
    ) -> Pending | dict[str, Any]:
        self.resumed.append(answers)
        return self._next()

    def _next(self) -> Any:
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def done(text: str, **structured: Any) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
    }


def form_entry(message: str = "Name?") -> dict[str, Any]:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def url_entry() -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": "Connect", "url": "https://example.org/connect"},
    }


def pending(entries: dict[str, Any], round: int = 1) -> Pending:
    return Pending("t", {}, entries, "state", round)


def shown(live: LiveCall[Any]) -> str:
    return " ".join(getattr(child, "value", "") for child in live.widget.children)


@pytest.fixture
def deployment() -> Deployment:
    return demo_deployment()


def form_of(live: LiveCall[Any]) -> ElicitationForm:
    panel = live.panels["delete_choice"]
    assert isinstance(panel, ElicitationForm)
    return panel


# -- the lesson's deletion, on the real in-process server ------------------------------------


def test_start_tool_returns_at_once_with_the_form(deployment: Deployment):
    host = ServerHost(deployment)
    live = start_tool(host, "notes_delete", dict(TPS))
    form = form_of(live)
    assert form in live.widget.children
    assert live.result is None and live.error is None and not live.done
    assert len(live.rounds) == 1 and len(host.sent) == 1
    titles = [label for label, _ in form.fields["note_id"].options]
    assert titles == ["TPS report 2023", "TPS report 2024", "TPS report 2025"]


def test_accept_retries_and_deletes_the_chosen_note(deployment: Deployment):
    host = ServerHost(deployment)
    live = start_tool(host, "notes_delete", dict(TPS))
    form = form_of(live)
    form.fields["note_id"].value = "note-14"
    form.fields["confirm"].value = True
    assert len(host.sent) == 1  # picking values sends nothing
    form.accept_button.click()
    assert len(host.sent) == 2
    first, retry = host.sent
    assert retry["id"] != first["id"]
    assert retry["state"] == live.rounds[0].request_state
    assert retry["answers"] == {
        "delete_choice": {"action": "accept", "content": {"note_id": "note-14", "confirm": True}}
    }
    assert live.result is not None and live.result["structuredContent"]["deleted"] is True
    assert deployment.notes.get("note-14") is None
    assert deployment.notes.get("note-3") is not None
    assert "Deleted note-14" in shown(live)
    assert live.panels == {}


def test_decline_keeps_the_note(deployment: Deployment):
    host = ServerHost(deployment)
    live = start_tool(host, "notes_delete", dict(TPS))
    form_of(live).decline_button.click()
    assert live.result is not None
    assert live.result["structuredContent"] == {"deleted": False, "status": "declined"}
    assert [n for n in ("note-3", "note-7", "note-14") if deployment.notes.get(n) is None] == []
    assert "Declined: nothing was deleted." in shown(live)


def test_cancel_keeps_the_note_and_the_form_answerable_with_the_same_state(
    deployment: Deployment,
):
    host = ServerHost(deployment)
    live = start_tool(host, "notes_delete", dict(TPS))
    form = form_of(live)
    form.cancel_button.click()
    assert live.result is not None and live.result["structuredContent"]["status"] == "cancelled"
    assert deployment.notes.get("note-14") is not None
    # The server said "the same confirmation can still be answered": the form says so, works.
    assert "The same confirmation can still be answered." in shown(live)
    assert not live.done and not any(button.disabled for button in form.buttons)
    assert form.status.value == html.escape(STILL_OPEN)
    form.fields["note_id"].value = "note-14"
    form.fields["confirm"].value = True
    form.accept_button.click()
    assert deployment.notes.get("note-14") is None and live.done
    assert host.sent[1]["state"] == host.sent[2]["state"] is not None
    assert all(button.disabled for button in form.buttons)


def test_a_decline_after_cancel_ends_the_call(deployment: Deployment):
    live = start_tool(ServerHost(deployment), "notes_delete", dict(TPS))
    form = form_of(live)
    form.cancel_button.click()
    form.decline_button.click()
    assert live.done and live.result is not None
    assert live.result["structuredContent"]["status"] == "declined"
    assert all(button.disabled for button in form.buttons)


def test_the_same_url_asked_again_re_arms_the_panel_instead_of_a_copy():
    opened: list[str] = []
    host = ScriptedHost(
        pending({"link": url_entry()}),
        pending({"link": url_entry()}, round=2),
        done("exported", exported=True),
    )
    live = start_tool(host, "t", {}, opener=opened.append)
    link = live.panels["link"]
    assert isinstance(link, UrlConsent) and link.continue_button.disabled
    link.open_button.click()
    assert link.status.value == html.escape(OPENED) and not link.continue_button.disabled
    link.continue_button.click()
    assert host.resumed == [{"link": {"action": "accept"}}]
    assert live.panels["link"] is link and len(live.rounds) == 2
    assert "Round 2" not in shown(live)
    assert link.status.value == html.escape(ASKED_AGAIN[UrlConsent])
    assert not link.continue_button.disabled
    link.continue_button.click()
    assert live.done and live.result == done("exported", exported=True)


def test_a_text_that_repeats_the_structured_content_is_shown_once():
    structured = {"deleted": True, "noteId": "note-14"}
    result = {
        "resultType": "complete",
        "content": [{"type": "text", "text": json.dumps(structured)}],
        "structuredContent": structured,
    }
    live = start_tool(ScriptedHost(result), "t", {})
    assert shown(live).count("note-14") == 1


def test_an_invalid_accept_sends_nothing(deployment: Deployment):
    host = ServerHost(deployment)
    live = start_tool(host, "notes_delete", dict(TPS))
    form = form_of(live)
    form.accept_button.click()
    assert form.errors == {"note_id": "required: fill this in"}
    assert len(host.sent) == 1 and live.result is None


def test_unconfirmed_accept_is_a_refusal_not_an_error(deployment: Deployment):
    live = start_tool(ServerHost(deployment), "notes_delete", dict(TPS))
    form = form_of(live)
    form.fields["note_id"].value = "note-3"
    form.accept()
    assert live.result is not None and live.result["structuredContent"]["status"] == "not_confirmed"
    assert deployment.notes.get("note-3") is not None


def test_a_protocol_error_is_shown_with_its_code(deployment: Deployment):
    host = ServerHost(deployment, caps={"elicitation": {"url": {}}})
    live = start_tool(host, "notes_delete", dict(TPS))
    assert isinstance(live.error, StepError) and live.error.code == -32021
    assert live.result is None and live.done
    assert "Error -32021" in shown(live) and "requiredCapabilities" in shown(live)


def test_a_complete_first_answer_is_shown(deployment: Deployment):
    arguments = {"workspaceUri": TPS["workspaceUri"], "title": "no such note"}
    live = start_tool(ServerHost(deployment), "notes_delete", arguments)
    assert live.rounds == [] and live.result is not None
    assert live.result["structuredContent"]["status"] == "no_match"


def test_a_live_call_displays_as_its_area(deployment: Deployment):
    live = start_tool(ServerHost(deployment), "notes_delete", dict(TPS))
    view = live._repr_mimebundle_()["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == live.widget.model_id


def test_the_given_area_is_used(deployment: Deployment):
    area = widgets.VBox([widgets.HTML("intro")])
    live = start_tool(ServerHost(deployment), "notes_delete", dict(TPS), out=area)
    assert live.widget is area
    assert area.children[0].value == "intro" and form_of(live) in area.children


# -- the same path through the real course Host ------------------------------------------------


def requests(host: Host) -> list[dict[str, Any]]:
    return [message for message in host.transcript if "method" in message]


def test_real_host_accept_deletes_the_chosen_note(deployment: Deployment):
    host = Host.in_process(deployment.server)
    live = start_tool(host, "notes_delete", dict(TPS))
    form = form_of(live)
    assert len(requests(host)) == 1  # one request sent, nothing waited for
    form.fields["note_id"].value = "note-7"
    form.fields["confirm"].value = True
    form.accept_button.click()
    first, retry = requests(host)  # the transcript restarts with each call's begin
    assert retry["id"] != first["id"]
    assert retry["params"]["requestState"] == live.rounds[0].request_state
    assert len(live.rounds) == 1
    assert live.result is not None
    assert live.result["structuredContent"] == {
        "deleted": True,
        "status": "deleted",
        "noteId": "note-7",
    }
    assert deployment.notes.get("note-7") is None


def test_real_host_decline_keeps_the_note(deployment: Deployment):
    live = start_tool(Host.in_process(deployment.server), "notes_delete", dict(TPS))
    form_of(live).decline()
    assert live.result is not None and live.result["structuredContent"]["status"] == "declined"
    assert all(deployment.notes.get(n) is not None for n in ("note-3", "note-7", "note-14"))


def test_real_host_error_is_shown(deployment: Deployment):
    host = Host.in_process(deployment.server, capabilities={"elicitation": {"url": {}}})
    live = start_tool(host, "notes_delete", dict(TPS))
    assert isinstance(live.error, McpError) and live.error.code == -32021
    assert "Error -32021" in shown(live)


# -- shapes the demo tool never sends ---------------------------------------------------------


def test_resume_waits_for_every_entry_of_the_round_then_shows_the_next_round():
    opened: list[str] = []
    host = ScriptedHost(
        pending({"who": form_entry(), "link": url_entry()}),
        pending({"again": form_entry("Once more?")}, round=2),
        done("all done", ok=True),
    )
    live = start_tool(host, "t", {}, opener=opened.append)
    who, link = live.panels["who"], live.panels["link"]
    assert isinstance(who, ElicitationForm) and isinstance(link, UrlConsent)
    who.fields["name"].value = "Ada"
    who.accept()
    assert host.resumed == []  # one entry is still open
    link.open_button.click()
    assert opened == ["https://example.org/connect"]
    assert host.resumed == []  # opened, not answered: Continue answers
    link.continue_button.click()
    assert host.resumed == [
        {"who": {"action": "accept", "content": {"name": "Ada"}}, "link": {"action": "accept"}}
    ]
    assert len(live.rounds) == 2 and live.result is None
    again = live.panels["again"]
    assert isinstance(again, ElicitationForm)
    again.decline()
    assert host.resumed[-1] == {"again": {"action": "decline"}}
    assert live.result == done("all done", ok=True)
    text = shown(live)
    assert "Round 2" in text and "all done" in text and "&quot;ok&quot;: true" in text


def test_state_only_round_offers_a_retry_button():
    host = ScriptedHost(pending({}), done("later it worked"))
    live = start_tool(host, "t", {})
    assert host.resumed == [] and live.panels == {}
    retry = live.widget.children[-1]
    assert isinstance(retry, widgets.Button)
    retry.click()
    assert host.resumed == [{}]
    assert retry.disabled and live.result == done("later it worked")


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ({"method": "sampling/createMessage", "params": {}}, "cannot be answered"),
        ({"method": "roots/list"}, "cannot be answered"),
        ({"method": "elicitation/create", "params": {"mode": "voice"}}, "unknown elicitation"),
        ({"method": "elicitation/create"}, "params must be an object"),
        (
            {
                "method": "elicitation/create",
                "params": {
                    "message": "m",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"deep": {"type": "object"}},
                    },
                },
            },
            "'deep'",
        ),
        (
            {
                "method": "elicitation/create",
                "params": {"mode": "url", "message": "m", "url": "http://u@evil.example/"},
            },
            "userinfo",
        ),
    ],
)
def test_an_entry_that_cannot_be_rendered_ends_the_call_with_a_shown_error(
    entry: dict[str, Any], why: str
):
    host = ScriptedHost(pending({"fine": form_entry(), "bad": entry}))
    live = start_tool(host, "t", {})
    assert isinstance(live.error, ValueError) and why in str(live.error)
    assert "'bad'" in str(live.error)
    assert live.panels == {} and live.rounds == []
    assert not any(isinstance(child, ElicitationForm) for child in live.widget.children)
    assert "ValueError" in shown(live)


def test_an_error_on_resume_is_shown():
    host = ScriptedHost(
        pending({"who": form_entry()}), StepError(-32602, "Invalid or expired requestState")
    )
    live = start_tool(host, "t", {})
    live.panels["who"].cancel()
    assert isinstance(live.error, StepError)
    assert "Error -32602: Invalid or expired requestState" in shown(live)


def test_server_text_is_escaped():
    host = ScriptedHost(done("<img src=x onerror=alert(1)>"))
    live = start_tool(host, "t", {})
    assert "<img" not in shown(live) and "&lt;img" in shown(live)
