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

The page says what approving grants: the report service for the one workspace shown, for the
credential lifetime it states. `GET /connect/report-service/` lists the signed-in principal's
grants, each with a Revoke button; that POST is guarded like the approval (sign-in, a token
bound to the principal, the Origin check). Every consent-store call runs in a worker thread, so
a store that waits on a lock never stalls the server; a store that stays busy is a 503 page.

Must not import the core.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import html
import logging
import time
from collections.abc import Callable, Collection
from typing import Final, TypeVar
from urllib.parse import parse_qs

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from labkit.auth import Authenticator
from labkit.stores import StoreBusy
from labkit.stores.consent import ConsentLink, Grant
from labkit.transports.guard import Guarded, HostRule
from labkit.transports.limits import DEFAULT_TIMEOUT_SECONDS, BodyRefused, read_body
from labkit.url_mode import CONNECT_PATH, ConsentService

log = logging.getLogger("labkit.transports.consent_page")

_T = TypeVar("_T")

MAX_FORM_BYTES: Final = 4096  # the form is two short fields: a far smaller cap than /mcp's

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
        # From the end of the request head: the form's body must have arrived by then.
        self.timeout_seconds = timeout_seconds
        self.authenticator = authenticator
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)

    def routes(self) -> list[Route]:
        return [
            Route(CONNECT_PATH, self.grants_endpoint, methods=["GET", "POST"]),
            Route(CONNECT_PATH + "{link_id}", self.endpoint, methods=["GET", "POST"]),
        ]

    async def _store(self, work: Callable[[], _T]) -> _T:
        """Consent-store work off the event loop: a database waiting on a lock (up to its
        busy timeout) must not stall every other request of the server."""
        return await anyio.to_thread.run_sync(work)

    async def endpoint(self, request: Request) -> Response:
        deadline = asyncio.get_running_loop().time() + self.timeout_seconds
        try:
            return await self._endpoint(request, deadline)
        except StoreBusy as exc:
            return _busy(exc)

    async def grants_endpoint(self, request: Request) -> Response:
        deadline = asyncio.get_running_loop().time() + self.timeout_seconds
        try:
            return await self._grants_endpoint(request, deadline)
        except StoreBusy as exc:
            return _busy(exc)

    async def _signed_in(self, request: Request) -> tuple[str, str] | Response:
        """(principal, host), or the refusal: no sign-in. (The Host was checked before the
        page was reached: `labkit.transports.guard`.)"""
        host = request.headers.get("host", "").lower()
        principal = self._principal(request.headers.get("authorization"))
        if principal is None:
            return _page(
                401,
                "Sign in",
                "<p>Sign in as the user who asked (user name and MCP token).</p>",
                {"www-authenticate": 'Basic realm="labkit consent", charset="UTF-8"'},
            )
        return principal, host

    async def _grants_endpoint(self, request: Request, deadline: float) -> Response:
        signed_in = await self._signed_in(request)
        if isinstance(signed_in, Response):
            return signed_in
        principal, host = signed_in
        if request.method == "POST":
            fields = await self._form_fields(request, host, principal, deadline)
            if isinstance(fields, Response):
                return fields
            if not self.consent.revoke_token_valid(fields.get("form_token", ""), principal):
                log.warning("revoke form with a bad anti-forgery token for %r", principal)
                return _page(
                    403, "Consent refused", "<p>The form is not valid. Nothing was changed.</p>"
                )
            workspace = fields.get("workspace", "")
            revoked = await self._store(
                functools.partial(self.consent.revoke_grant, principal, workspace)
            )
            text = "was revoked" if revoked else "was not connected (nothing to revoke)"
            return _page(
                200,
                "Revoked" if revoked else "Nothing to revoke",
                f"<p>{html.escape(self.consent.service)} for "
                f"<code>{html.escape(workspace)}</code> {text}.</p>",
            )
        grants = await self._store(functools.partial(self.consent.grants, principal))
        token = html.escape(self.consent.revoke_token(principal), quote=True)
        rows = "".join(
            f"<li><code>{html.escape(workspace)}</code>, until {_when(until)} "
            "<form method=post style='display:inline'>"
            f"<input type=hidden name=form_token value='{token}'>"
            f"<input type=hidden name=workspace value='{html.escape(workspace, quote=True)}'>"
            "<button>Revoke</button></form></li>"
            for workspace, until in grants
        )
        body = (
            f"<p><b>{html.escape(principal)}</b>, {html.escape(self.consent.service)} is "
            "connected for these workspaces:</p>"
            f"<ul>{rows}</ul>"
            if grants
            else f"<p><b>{html.escape(principal)}</b>, nothing is connected.</p>"
        )
        return _page(200, f"{self.consent.service} connections", body)

    async def _endpoint(self, request: Request, deadline: float) -> Response:
        signed_in = await self._signed_in(request)
        if isinstance(signed_in, Response):
            return signed_in
        principal, host = signed_in
        link_id = request.path_params["link_id"]
        outcome, link = await self._store(
            functools.partial(self.consent.page_grant, link_id, principal)
        )
        if outcome is not Grant.GRANTED:
            log.info("consent page refused for %r: %s", principal, outcome.value)
            return _refusal(outcome)
        assert link is not None
        if request.method == "GET":
            return self._form(link, principal)
        return await self._submit(request, link, principal, host, deadline)

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

    async def _form_fields(
        self, request: Request, host: str, principal: str, deadline: float
    ) -> dict[str, str] | Response:
        """A POSTed form's fields (first value of each), or the refusal: a foreign Origin, a
        form too large or not valid."""
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
        return {name: values[0] for name, values in fields.items()}

    def _form(self, link: ConsentLink, principal: str) -> Response:
        token = self.consent.form_token(link.id, principal)
        lifetime = self.consent.credential_ttl_seconds
        until = _when(self.consent.clock() + lifetime)
        body = (
            f"<p><b>{html.escape(principal)}</b>, an MCP client acting for you asks to connect "
            f"<b>{html.escape(link.service)}</b> so that the tool <code>{html.escape(link.tool)}"
            f"</code> can publish the notes of <code>{html.escape(link.workspace_uri)}</code>.</p>"
            "<p>If you approve, labkit keeps the connection on the server. Your MCP client "
            "never sees it. It covers only "
            f"<code>{html.escape(link.workspace_uri)}</code> (any other workspace asks again) "
            f"and lasts {_duration(lifetime)}, until {until}. You can revoke it at any time "
            f"on <a href='{CONNECT_PATH}'>{CONNECT_PATH}</a>.</p>"
            "<form method=post>"
            f"<input type=hidden name=form_token value='{html.escape(token, quote=True)}'>"
            "<button name=decision value=approve>Approve</button> "
            "<button name=decision value=deny>Deny</button></form>"
        )
        return _page(200, f"Connect {link.service}", body)

    async def _submit(
        self, request: Request, link: ConsentLink, principal: str, host: str, deadline: float
    ) -> Response:
        fields = await self._form_fields(request, host, principal, deadline)
        if isinstance(fields, Response):
            return fields
        token = fields.get("form_token", "")
        decision = fields.get("decision", "")
        if not self.consent.form_token_valid(token, link.id, principal):
            log.warning("consent form with a bad anti-forgery token for %r", principal)
            return _page(
                403, "Consent refused", "<p>The form is not valid. Nothing was changed.</p>"
            )
        if decision == "deny":
            await self._store(functools.partial(self.consent.deny, link.id))
            return _page(200, "Not connected", "<p>Nothing was connected. You can close this.</p>")
        if decision != "approve":
            return _page(400, "Consent refused", "<p>Choose Approve or Deny.</p>")
        outcome = await self._store(functools.partial(self.consent.grant, link.id, principal))
        if outcome is not Grant.GRANTED:
            return _refusal(outcome)
        return _page(
            200,
            f"{link.service} connected",
            "<p>Done. Return to your MCP client and continue.</p>",
        )


def _busy(exc: StoreBusy) -> Response:
    log.warning("consent page: store busy: %s", exc)
    return _page(
        503,
        "Try again",
        "<p>The consent record is busy right now. Nothing was changed; reload in a moment.</p>",
        {"retry-after": "5"},
    )


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def _duration(seconds: float) -> str:
    days, hours = seconds / 86_400, seconds / 3600
    if days >= 1 and days == int(days):
        return f"{int(days)} day{'s' if days != 1 else ''}"
    if hours >= 1:
        return f"{hours:g} hours"
    return f"{seconds:g} seconds"


def create_consent_app(page: ConsentPage) -> ASGIApp:
    """The consent page alone, behind the checks every route has (one copy of each header
    the page reads, a Host of this server's): what a stdio server serves on its loopback
    listener."""
    return Guarded(Starlette(routes=page.routes()), HostRule(page.allowed_hosts))
