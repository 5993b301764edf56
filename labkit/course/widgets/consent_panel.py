"""A URL-mode elicitation request as a consent panel (docs/LESSON.md section 7).

Owns: `UrlConsent`, the checks a URL must pass before it is even shown, and how the
destination is presented (the full URL, its host in bold, warnings).
The client shows the full destination and gets consent before opening it; it never
pre-fetches it. So this module performs no I/O at all: "opening" calls an injected `opener`
with the URL, and the default opener only shows a clickable link. `accept` means the user
agreed to open the page, not that the flow behind it finished (the server learns that from
its own records on the retry). Open hands the URL to the opener and nothing more; Continue,
pressed once the user is done on the page, sends `accept` (at 2026-07-28 the client learns the
outcome only by retrying). An opener that returns a widget (the course's in-notebook consent
page) has it shown under the panel. Nothing in the protocol core may import this module.
Must not import the grader.
"""

from __future__ import annotations

import html
import ipaddress
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import SplitResult, urlsplit

import ipywidgets as widgets

from labkit.course.widgets.elicitation_form import ElicitationResult, OneAnswer

Opener = Callable[[str], object]

OPENED: Final = "Opened: finish on the page, then press Continue."
SENT: Final = "Sent: accept. The server checks its own record of the page."

_LOOPBACK_NAMES = frozenset({"localhost"})
_WARNING_STYLE = "color: #b00020"


def check_url(url: object) -> SplitResult:
    """The parsed URL, or ValueError: only http(s), with a host and without userinfo."""
    if not isinstance(url, str):
        raise ValueError("url must be a string")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- parsing the port raises on garbage such as ":99999"
    except ValueError as exc:
        raise ValueError(f"url {url!r} is not a valid URL: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"url {url!r}: only http and https URLs may be opened")
    if "@" in parts.netloc:
        # `https://trusted.example@evil.example/` shows one host and opens another.
        raise ValueError(f"url {url!r}: a URL with userinfo (user@host) is refused")
    if not parts.hostname:
        raise ValueError(f"url {url!r} has no host")
    if any(ch.isspace() or ord(ch) < 0x20 or ch == "\x7f" for ch in url):
        raise ValueError(f"url {url!r} contains whitespace or control characters")
    if "\\" in url:
        # Browsers read `\` as `/`: `https://evil.example\.trusted.example/` opens evil.example
        # while Python's parser (and the user) would see one long trusted-looking host.
        raise ValueError(f"url {url!r} contains a backslash")
    return parts


def is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warnings_for(parts: SplitResult) -> list[str]:
    """Plain warnings about a destination the user should read twice."""
    host = parts.hostname or ""
    found: list[str] = []
    if parts.scheme.lower() != "https" and not is_loopback(host):
        found.append(f"This page is not served over HTTPS: what you send to {host} can be read.")
    if not host.isascii() or any(label.startswith("xn--") for label in host.split(".")):
        found.append(f"The host name {host} uses international characters: check every letter.")
    return found


class UrlConsent(OneAnswer, widgets.VBox):  # type: ignore[misc]
    """A URL-mode `elicitation/create` request: message, full destination, Open / Continue /
    Decline / Cancel. Same `answer` / `on_answer` / `reopen` contract as `ElicitationForm`."""

    def __init__(self, params: Mapping[str, Any], *, opener: Opener | None = None) -> None:
        if not isinstance(params, Mapping):
            raise ValueError("elicitation params must be an object")
        if params.get("mode") != "url":
            raise ValueError(f"UrlConsent renders url mode, not mode {params.get('mode')!r}")
        message = params.get("message")
        if not isinstance(message, str):
            raise ValueError("elicitation params need a message (a string)")
        # 2025-11-25 only (the legacy completion notification names it); never needed here.
        elicitation_id = params.get("elicitationId")
        if elicitation_id is not None and not isinstance(elicitation_id, str):
            raise ValueError("elicitationId must be a string")
        parts = check_url(params.get("url"))
        self.url: str = params["url"]
        self.host: str = parts.hostname or ""
        self.elicitation_id = elicitation_id
        self.warnings = warnings_for(parts)
        self.answer = None
        self._callbacks = []
        self._opener = opener if opener is not None else self._show_link
        self.opened = False
        self.link = widgets.HTML("")
        self.page = widgets.VBox([])  # what an opener that returns a widget shows
        self.open_button = widgets.Button(description="Open", button_style="primary")
        self.continue_button = widgets.Button(description="Continue", disabled=True)
        self.decline_button = widgets.Button(description="Decline", button_style="warning")
        self.cancel_button = widgets.Button(description="Cancel")
        self.open_button.on_click(lambda _b: self.open_page())
        self.continue_button.on_click(lambda _b: self.accept())
        self.decline_button.on_click(lambda _b: self.decline())
        self.cancel_button.on_click(lambda _b: self.cancel())
        self.buttons = (
            self.open_button,
            self.continue_button,
            self.decline_button,
            self.cancel_button,
        )
        self.status = widgets.HTML("")
        rows = [
            widgets.HTML(f"<h4>{html.escape(message)}</h4>"),
            widgets.HTML(self._destination_html()),
            *(
                widgets.HTML(f"<span style='{_WARNING_STYLE}'>{html.escape(w)}</span>")
                for w in self.warnings
            ),
            widgets.HBox(self.buttons),
            self.status,
            self.link,
            self.page,
        ]
        super().__init__(children=rows)

    def _destination_html(self) -> str:
        # The host is what the user must judge; the full URL is shown too, never shortened.
        return (
            f"Opens a page on <b>{html.escape(self.host)}</b><br>"
            f"<code>{html.escape(self.url)}</code><br>"
            "<small>Nothing is loaded until you click Open.</small>"
        )

    def _show_link(self, url: str) -> None:
        self.link.value = (
            f"<a href='{html.escape(url, quote=True)}' target='_blank' "
            f"rel='noopener noreferrer'>{html.escape(url)}</a>"
        )

    # -- opening, and the three answers ---------------------------------------------------

    # Not named `open`: `Widget.open()` opens the comm and runs inside `Widget.__init__`, so an
    # override called the opener before the user had seen the panel.
    def open_page(self) -> None:
        """Open was clicked: hand the URL to the opener (again, if the user closed the page);
        nothing is answered yet."""
        if self.answer is not None:
            return
        shown = self._opener(self.url)
        if isinstance(shown, widgets.Widget):
            self.page.children = (shown,)
        self.opened = True
        self.continue_button.disabled = False
        self.status.value = html.escape(OPENED)

    def accept(self) -> ElicitationResult:
        """Continue was clicked (the page is opened first if it was not): answer `accept`,
        which tells the server only that the user agreed to open the page."""
        if self.answer is not None:
            return self.answer
        if not self.opened:
            self.open_page()
        return self._finish({"action": "accept"}, SENT)

    def reopen(self, note: str) -> None:
        super().reopen(note)
        self.continue_button.disabled = not self.opened
