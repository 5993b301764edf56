"""The out-of-band consent page of URL-mode elicitation, served by labkit itself.

Owns: `GET /connect/report-service/<link id>` (who is asking, for what, and a consent form) and
the `POST` from that form (anti-forgery token checked, then the grant), the browser's proof of
principal, and the refusal pages. The form's body is read by `limits.read_body`, the reader of
`/mcp`: a size cap (413) and the per-request deadline (408), and the connection layer under
both accounts for and discards what a refused client still sends. The credential is minted
and stored by `ConsentService`; this module never sees it.

How a browser proves its principal: the same secret as the MCP client, sent as
`Authorization: Bearer <token>`, or as HTTP Basic `<principal>:<token>` (a browser asks for it
with its own login dialog, prompted by the 401's `WWW-Authenticate: Basic`). A link is bound to
the principal that started the MCP operation, so a link opened by anybody else is refused (403),
whoever holds the URL. The form's hidden token is an HMAC over the link id and the principal,
compared in constant time; because browsers resend Basic credentials on their own, the token
(plus the Origin check) is what stops a cross-site POST.

Must not import the core.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import html
import logging
from collections.abc import Collection
from typing import Final
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from labkit.auth import Authenticator
from labkit.consent import CONNECT_PATH, ConsentService
from labkit.stores.consent import ConsentLink, Grant
from labkit.transports.limits import DEFAULT_TIMEOUT_SECONDS, BodyRefused, read_body

log = logging.getLogger("labkit.transports.consent_page")

MAX_FORM_BYTES: Final = 4096  # the form is two short fields: a far smaller cap than /mcp's
LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")

_HEADERS: Final = {
    "cache-control": "no-store",
    # The link id is in the path: it must not leak through a Referer to anything.
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'",
}

# Outcome -> (HTTP status, what the page says). Never a stack trace, never the link id.
_REFUSALS: Final[dict[Grant, tuple[int, str]]] = {
    Grant.UNKNOWN: (404, "This consent link is not valid."),
    Grant.USED: (410, "This consent link has already been used. Nothing was changed."),
    Grant.EXPIRED: (410, "This consent link has expired. Ask again from your MCP client."),
    Grant.WRONG_PRINCIPAL: (
        403,
        "This consent link was issued to another user. Sign in as the user who asked, "
        "or ask again from your own MCP client. Nothing was changed.",
    ),
}


def _page(status: int, title: str, body: str, headers: dict[str, str] | None = None) -> Response:
    text = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title></head>"
        f"<body style='font-family:sans-serif;max-width:40em;margin:2em auto'>"
        f"<h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(text, status_code=status, headers={**_HEADERS, **(headers or {})})


def _refusal(outcome: Grant) -> Response:
    status, text = _REFUSALS[outcome]
    return _page(status, "Consent refused", f"<p>{html.escape(text)}</p>")


class ConsentPage:
    def __init__(
        self,
        consent: ConsentService,
        authenticator: Authenticator,
        *,
        allowed_hosts: Collection[str] = (),
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.consent = consent
        self.authenticator = authenticator
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)
        # From the end of the request head: the form's body must have arrived by then.
        self.timeout_seconds = timeout_seconds

    def routes(self) -> list[Route]:
        return [Route(CONNECT_PATH + "{link_id}", self.endpoint, methods=["GET", "POST"])]

    async def endpoint(self, request: Request) -> Response:
        deadline = asyncio.get_running_loop().time() + self.timeout_seconds
        host = request.headers.get("host", "").lower()
        port = (request.scope.get("server") or ("", 0))[1]  # where it arrived, not what Host says
        if not self._host_allowed(host, port):
            # DNS rebinding: a foreign name resolved to loopback must not reach this page.
            return _page(421, "Misdirected request", "<p>Unknown host.</p>")
        principal = self._principal(request.headers.get("authorization"))
        if principal is None:
            return _page(
                401,
                "Sign in",
                "<p>Sign in as the user who asked (user name and MCP token).</p>",
                {"www-authenticate": 'Basic realm="labkit consent", charset="UTF-8"'},
            )
        link_id = request.path_params["link_id"]
        outcome, link = self.consent.check(link_id, principal)
        if outcome is not Grant.GRANTED:
            log.info("consent page refused for %r: %s", principal, outcome.value)
            return _refusal(outcome)
        assert link is not None
        if request.method == "GET":
            return self._form(link, principal)
        return await self._submit(request, link, principal, host, deadline)

    def _host_allowed(self, host: str, port: int) -> bool:
        if host in self.allowed_hosts or host.rsplit(":", 1)[0] in self.allowed_hosts:
            return True
        if port == 80 and host in LOOPBACK_NAMES:
            return True
        return host in {f"{name}:{port}" for name in LOOPBACK_NAMES}

    def _principal(self, authorization: str | None) -> str | None:
        if authorization is None:
            return None
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            return self.authenticator.authenticate(authorization)
        if scheme.lower() != "basic":
            return None
        try:
            user, colon, token = (
                base64.b64decode(value.strip(), validate=True).decode().partition(":")
            )
        except (binascii.Error, UnicodeDecodeError):
            return None
        if not colon:
            return None
        principal = self.authenticator.authenticate(f"Bearer {token}")
        # The token decides; the user name must agree with it, so nobody signs in as "alice"
        # with mallory's token and sees a page that names alice.
        return principal if principal == user else None

    def _form(self, link: ConsentLink, principal: str) -> Response:
        token = self.consent.form_token(link.id, principal)
        body = (
            f"<p><b>{html.escape(principal)}</b>, an MCP client acting for you asks to connect "
            f"<b>{html.escape(link.service)}</b> so that the tool <code>{html.escape(link.tool)}"
            f"</code> can publish the notes of <code>{html.escape(link.workspace_uri)}</code>.</p>"
            "<p>If you approve, labkit keeps the connection on the server. Your MCP client "
            "never sees it.</p>"
            "<form method=post>"
            f"<input type=hidden name=form_token value='{html.escape(token, quote=True)}'>"
            "<button name=decision value=approve>Approve</button> "
            "<button name=decision value=deny>Deny</button></form>"
        )
        return _page(200, f"Connect {link.service}", body)

    async def _submit(
        self, request: Request, link: ConsentLink, principal: str, host: str, deadline: float
    ) -> Response:
        origin = request.headers.get("origin")
        if origin is not None and origin.lower().rstrip("/") not in (
            f"http://{host}",
            f"https://{host}",
        ):
            log.warning("consent form posted from a foreign Origin for %r", principal)
            return _page(403, "Consent refused", "<p>Foreign origin. Nothing was changed.</p>")
        try:
            body = await read_body(
                request.receive,
                request.headers.get("content-length"),
                max_bytes=MAX_FORM_BYTES,
                deadline=deadline,
            )
        except BodyRefused as refused:
            headers = {k.decode(): v.decode() for k, v in refused.headers}
            text = f"<p>{html.escape(refused.text)}. Nothing was changed.</p>"
            return _page(refused.status, "Consent refused", text, headers)
        try:
            fields = parse_qs(body.decode("latin-1"), max_num_fields=8)
        except ValueError:  # more fields than the form has
            return _page(400, "Consent refused", "<p>The form is not valid.</p>")
        token = fields.get("form_token", [""])[0]
        decision = fields.get("decision", [""])[0]
        if not self.consent.form_token_valid(token, link.id, principal):
            log.warning("consent form with a bad anti-forgery token for %r", principal)
            return _page(
                403, "Consent refused", "<p>The form is not valid. Nothing was changed.</p>"
            )
        if decision == "deny":
            self.consent.revoke(link.id)
            return _page(200, "Not connected", "<p>Nothing was connected. You can close this.</p>")
        if decision != "approve":
            return _page(400, "Consent refused", "<p>Choose Approve or Deny.</p>")
        outcome = self.consent.grant(link.id, principal)
        if outcome is not Grant.GRANTED:
            return _refusal(outcome)
        return _page(
            200,
            f"{link.service} connected",
            "<p>Done. Return to your MCP client and continue.</p>",
        )


def create_consent_app(page: ConsentPage) -> Starlette:
    """The consent page alone: what a stdio server serves on its loopback listener."""
    return Starlette(routes=page.routes())
