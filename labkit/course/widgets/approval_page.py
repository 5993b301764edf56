"""The consent page of URL mode, inside the notebook: the out-of-band step, one click away.

Owns: `ApprovalPage`, an opener for `UrlConsent` (`start_tool(..., opener=page.open)`) that
shows, under the panel, what `labkit serve`'s consent page shows for a link (who asks, for
which workspace, how long the grant lasts) with its Approve and Deny buttons, and performs the
step the real page performs once it has checked the browser's sign-in and anti-forgery token:
`ConsentService.grant` (the credential is minted and stored server-side) or
`ConsentService.deny` (the link is withdrawn). The notebook's kernel is its host, so the page
needs no listener a remote JupyterLab could not reach; the credential never passes through
the MCP client here either.

Does not own consent itself: links, grants and their rules are `labkit.url_mode`'s. Nothing
in the protocol core may import this module.
Must not import the grader.
"""

from __future__ import annotations

import html
import time
from typing import Any, Final
from urllib.parse import urlsplit

import ipywidgets as widgets

from labkit.stores.consent import Grant
from labkit.url_mode import CONNECT_PATH, ConsentService

# What the page answers instead of a form, as the real page words it (never the link id).
REFUSED: Final[dict[Grant, str]] = {
    Grant.UNKNOWN: "This consent link is not valid.",
    Grant.USED: "This consent link has already been used. Nothing was changed.",
    Grant.EXPIRED: "This consent link has expired. Ask again from your MCP client.",
    Grant.WRONG_PRINCIPAL: "This consent link was issued to another user. Nothing was changed.",
}
APPROVED: Final = (
    "Approved: the server created the report-service credential and keeps it for {principal}. "
    "Back in the panel above, press Continue: your client retries, and the server finds its "
    "record."
)
DENIED: Final = (
    "Denied: the link is withdrawn and nothing was stored. Continue now gets a fresh link; "
    "Decline ends the request."
)


class ApprovalPage:
    """The consent page for `principal`, signed in (as the real page requires), shown by
    `open(url)` under the panel that opened it."""

    def __init__(self, consent: ConsentService, principal: str) -> None:
        self.consent = consent
        self.principal = principal

    def open(self, url: str) -> Any:
        """The page for `url` (a link of this consent service): a widget to show."""
        path = urlsplit(url).path
        link_id = path[len(CONNECT_PATH) :] if path.startswith(CONNECT_PATH) else ""
        outcome, link = self.consent.page_grant(link_id, self.principal)
        title = widgets.HTML(
            f"<b>Consent page</b> <small>(as <code>labkit serve</code> serves "
            f"<code>{html.escape(url)}</code>; signed in as {html.escape(self.principal)})</small>"
        )
        if outcome is not Grant.GRANTED or link is None:
            return widgets.VBox([title, widgets.HTML(html.escape(REFUSED[outcome]))])
        days = self.consent.credential_ttl_seconds / 86_400
        until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(link.expires_at))
        body = widgets.HTML(
            f"<p><b>{html.escape(link.tool)}</b> asks to connect the <b>{html.escape(link.service)}"
            f"</b> for <code>{html.escape(link.workspace_uri)}</code> only.</p>"
            f"<p>Approving lets the server publish that workspace's notes to the "
            f"{html.escape(link.service)} for {days:g} days. This link works once, until "
            f"{until}.</p>"
        )
        approve = widgets.Button(description="Approve", button_style="success")
        deny = widgets.Button(description="Deny", button_style="warning")
        status = widgets.HTML("")

        def done(text: str) -> None:
            approve.disabled = deny.disabled = True
            status.value = html.escape(text)

        def on_approve(_button: Any) -> None:
            granted = self.consent.grant(link_id, self.principal)
            if granted is Grant.GRANTED:
                done(APPROVED.format(principal=self.principal))
            else:
                done(REFUSED[granted])

        def on_deny(_button: Any) -> None:
            self.consent.deny(link_id)
            done(DENIED)

        approve.on_click(on_approve)
        deny.on_click(on_deny)
        page = widgets.VBox([title, body, widgets.HBox([approve, deny]), status])
        page.add_class("labkit-consent-page")
        return page
