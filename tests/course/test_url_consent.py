"""UrlConsent, headless: nothing is opened before Open; Open calls the opener, Continue answers;
the in-notebook consent page performs the page's step."""

from __future__ import annotations

import html
import secrets
from typing import Any

import pytest

from labkit import KeyRing, demo_deployment
from labkit.course import ApprovalPage, Host, UrlConsent, start_tool
from labkit.course.widgets.approval_page import APPROVED, DENIED, REFUSED
from labkit.stores.consent import Grant

URL = "https://mcp.example.com/connect/report-service?step=1"


def params(url: Any = URL, **extra: Any) -> dict[str, Any]:
    return {"mode": "url", "message": "Connect the report service.", "url": url, **extra}


class RecordingOpener:
    def __init__(self) -> None:
        self.opened: list[str] = []

    def __call__(self, url: str) -> None:
        self.opened.append(url)


def shown(panel: UrlConsent) -> str:
    return " ".join(getattr(child, "value", "") for child in panel.children)


def test_nothing_is_opened_before_open_then_exactly_once():
    opener = RecordingOpener()
    panel = UrlConsent(params(), opener=opener)
    assert opener.opened == []
    assert panel.answer is None
    panel.open_button.click()
    assert opener.opened == [URL]
    assert panel.answer is None  # opening is not an answer: Continue is
    panel.continue_button.click()
    assert panel.answer == {"action": "accept"}
    panel.open_button.click()
    panel.accept()
    assert opener.opened == [URL]
    assert all(button.disabled for button in panel.buttons)


def test_full_url_and_bold_host_are_shown():
    panel = UrlConsent(params())
    text = shown(panel)
    assert "<b>mcp.example.com</b>" in text
    assert "https://mcp.example.com/connect/report-service?step=1" in text
    assert "Connect the report service." in text
    assert panel.warnings == []


def test_default_opener_only_shows_a_link_after_open():
    panel = UrlConsent(params())
    assert panel.link.value == ""
    panel.accept()
    assert "href='https://mcp.example.com/connect/report-service?step=1'" in panel.link.value
    assert "noopener" in panel.link.value


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_never_open(action: str):
    opener = RecordingOpener()
    panel = UrlConsent(params(), opener=opener)
    seen: list[dict[str, Any]] = []
    panel.on_answer(seen.append)
    getattr(panel, f"{action}_button").click()
    assert panel.answer == {"action": action} and seen == [{"action": action}]
    panel.open_button.click()
    assert opener.opened == []
    assert panel.answer == {"action": action}


def test_accept_opens_the_page_first_when_it_was_not_opened():
    opener = RecordingOpener()
    panel = UrlConsent(params(), opener=opener)
    assert panel.continue_button.disabled  # nothing to continue before the page is open
    assert panel.accept() == {"action": "accept"}
    assert opener.opened == [URL]
    assert panel.open_button.disabled


def test_plain_http_to_a_remote_host_warns():
    panel = UrlConsent(params("http://example.org/setup"))
    assert len(panel.warnings) == 1 and "HTTPS" in panel.warnings[0]
    assert "not served over HTTPS" in shown(panel)


@pytest.mark.parametrize(
    "url", ["http://localhost:8000/cb", "http://127.0.0.1/cb", "http://[::1]:9/cb"]
)
def test_plain_http_to_loopback_does_not_warn(url: str):
    assert UrlConsent(params(url)).warnings == []


def test_international_host_warns():
    panel = UrlConsent(params("https://xn--pple-43d.com/login"))
    assert any("international" in w for w in panel.warnings)


def test_message_and_url_are_escaped():
    panel = UrlConsent(
        {"mode": "url", "message": "<script>x</script>", "url": "https://e.org/?a=<b>"}
    )
    text = shown(panel)
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "?a=&lt;b&gt;" in text


def test_legacy_elicitation_id_is_accepted():
    panel = UrlConsent(params(elicitationId="el-1"))
    assert panel.elicitation_id == "el-1"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("javascript:alert(1)", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.org/x", "only http and https"),
        ("https://trusted.example@evil.example/", "userinfo"),
        ("https://user:pw@example.org/", "userinfo"),
        ("https:///no-host", "no host"),
        ("https://example.org:99999/", "not a valid URL"),
        ("https://example.org/a b", "whitespace"),
        ("https://example.org/\x7f", "control"),
        ("https://evil.example\\.trusted.example/", "backslash"),
        (42, "must be a string"),
        (None, "must be a string"),
    ],
)
def test_refused_urls(url: Any, why: str):
    with pytest.raises(ValueError, match=why):
        UrlConsent(params(url))


@pytest.mark.parametrize(
    "bad",
    [
        {"mode": "form", "message": "m", "url": URL},
        {"message": "m", "url": URL},
        {"mode": "url", "url": URL},
        {"mode": "url", "message": "m", "url": URL, "elicitationId": 7},
        "url",
    ],
)
def test_refused_params(bad: Any):
    with pytest.raises(ValueError):
        UrlConsent(bad)


# -- the consent page inside the notebook ---------------------------------------------------


def export_call() -> tuple[Any, Any, Any]:
    deployment = demo_deployment(keys=KeyRing([secrets.token_bytes(32)]))
    deployment.consent.base_url = "http://127.0.0.1:8000"
    host = Host.in_process(deployment.server, "alice", capabilities={"elicitation": {"url": {}}})
    live = start_tool(
        host,
        "notes_export",
        {"workspaceUri": "file:///work/notes"},
        opener=ApprovalPage(deployment.consent, "alice").open,
    )
    return deployment, live, live.panels["connect_report_service"]


def page_of(panel: Any) -> Any:
    (page,) = panel.page.children
    return page


def button(page: Any, name: str) -> Any:
    buttons = [b for row in page.children for b in getattr(row, "children", ())]
    return next(b for b in buttons if getattr(b, "description", "") == name)


def test_the_page_approves_and_continue_completes_the_export():
    deployment, live, panel = export_call()
    panel.open_button.click()
    page = page_of(panel)
    assert "file:///work/notes" in page.children[1].value and "30 days" in page.children[1].value
    panel.continue_button.click()  # back before approving: the server asks again
    assert not live.done and deployment.reports.published == []
    button(page, "Approve").click()
    assert page.children[-1].value == html.escape(APPROVED.format(principal="alice"))
    assert deployment.consent.credential("alice", "file:///work/notes") is not None
    panel.continue_button.click()
    assert live.done and live.result["structuredContent"]["status"] == "exported"
    assert len(deployment.reports.published) == 1


def test_the_page_denies_and_the_link_is_withdrawn():
    deployment, live, panel = export_call()
    panel.open_button.click()
    page = page_of(panel)
    button(page, "Deny").click()
    assert page.children[-1].value == html.escape(DENIED)
    panel.continue_button.click()  # a fresh link: a new round, a new panel
    assert len(live.rounds) == 2 and live.panels["connect_report_service"] is not panel
    assert deployment.consent.credential("alice", "file:///work/notes") is None


def test_a_used_link_shows_the_refusal_not_a_form():
    deployment, _live, panel = export_call()
    panel.open_button.click()
    button(page_of(panel), "Approve").click()
    page = ApprovalPage(deployment.consent, "alice").open(panel.url)
    assert [c.value for c in page.children[1:]] == [html.escape(REFUSED[Grant.USED])]
    mallory = ApprovalPage(deployment.consent, "mallory").open(panel.url)
    assert REFUSED[Grant.WRONG_PRINCIPAL] in mallory.children[1].value
