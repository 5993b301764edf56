"""UrlConsent, headless: nothing is opened before Open; the opener is called once on Open."""

from __future__ import annotations

from typing import Any

import pytest

from labkit.course import UrlConsent

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


def test_accept_method_is_the_open_button():
    opener = RecordingOpener()
    panel = UrlConsent(params(), opener=opener)
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
