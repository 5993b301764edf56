"""URL-mode elicitation: the capability gate, the `url` entry, and the consent service behind
the out-of-band page.

Owns: `has_url_elicitation` and `url_elicitation` (the two small pure functions a tool needs to
ask through URL mode), and `ConsentService`: minting one-time links bound to a principal and a
pending request, the anti-forgery tokens of the consent page, granting (the credential is
generated here and stored server-side, for the principal and the one workspace the page
showed; it never travels in an MCP message, a form, a URL or a log line), listing and revoking
grants. On the MCP side a consent store that stays busy is the busy error (-32001), never an
internal one. Pure: the store, the clock, the key ring and the id sources are injected. Must not
import a transport or the core.

Why URL mode (docs/LESSON.md section 7): the report service's grant is a third-party credential;
form mode would route it through the MCP client and possibly the model's context.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

from labkit.clock import Clock, system_clock
from labkit.errors import MISSING_CAPABILITY, SERVER_BUSY, ProtocolError
from labkit.state import CLOCK_SKEW_SECONDS, KeyRing
from labkit.stores import StoreBusy
from labkit.stores.consent import ConsentLink, ConsentStore, Grant, decide_grant

log = logging.getLogger("labkit.consent")  # the logger keeps its name across the module rename

REPORT_SERVICE: Final = "report-service"
CONNECT_PATH: Final = f"/connect/{REPORT_SERVICE}/"
# Shorter than a requestState (300 s), so an expired link is replaced while the state lives.
DEFAULT_LINK_TTL_SECONDS: Final = 240.0
DEFAULT_CREDENTIAL_TTL_SECONDS: Final = 30 * 86_400.0
# How long the revoke form of one view of the grants page stays valid (each view has its own
# token: one copied from a page seen earlier stops working).
REVOKE_FORM_TTL_SECONDS: Final = 3600.0


def has_url_elicitation(capabilities: dict[str, Any]) -> bool:
    """Only an explicit `url` key means URL mode: `elicitation: {}` means form only
    (docs/LESSON.md section 5)."""
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, dict) and "url" in elicitation


def require_url_elicitation(capabilities: dict[str, Any]) -> None:
    """-32021 with the exact requirement when *this* request did not declare `elicitation.url`
    (an earlier request's declaration never counts)."""
    if not has_url_elicitation(capabilities):
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation to connect the report service",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )


def url_elicitation(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
    """The `inputRequests` entry asking the user to open `url`, at 2026-07-28: no
    `elicitationId` (the client learns the outcome by retrying). Gated on this request's
    capabilities."""
    require_url_elicitation(capabilities)
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": message, "url": url},
    }


def _new_id() -> str:
    return secrets.token_urlsafe(24)  # 192 bits: the link is unguessable


def _new_credential() -> str:
    return secrets.token_urlsafe(32)


class ConsentService:
    """One-time consent links and the credentials they grant, for one report service.

    `base_url` (`http://127.0.0.1:PORT`) is set once the page's listener is bound; until then
    no link can be offered.
    """

    def __init__(
        self,
        store: ConsentStore,
        keys: KeyRing,
        *,
        clock: Clock = system_clock,
        id_source: Callable[[], str] = _new_id,
        credential_source: Callable[[], str] = _new_credential,
        link_ttl_seconds: float = DEFAULT_LINK_TTL_SECONDS,
        credential_ttl_seconds: float = DEFAULT_CREDENTIAL_TTL_SECONDS,
        base_url: str | None = None,
        service: str = REPORT_SERVICE,
    ) -> None:
        if not link_ttl_seconds > 0 or not credential_ttl_seconds > 0:
            raise ValueError("consent lifetimes must be positive")
        self.store = store
        self.keys = keys
        self.clock = clock
        self.id_source = id_source
        self.credential_source = credential_source
        self.link_ttl_seconds = link_ttl_seconds
        self.credential_ttl_seconds = credential_ttl_seconds
        self.base_url = base_url
        self.service = service

    # -- the MCP side ------------------------------------------------------------------------

    def issue(
        self, principal: str, request_digest: str, tool: str, workspace_uri: str
    ) -> ConsentLink:
        with _busy_as_error():
            return self._issue(principal, request_digest, tool, workspace_uri)

    def _issue(
        self, principal: str, request_digest: str, tool: str, workspace_uri: str
    ) -> ConsentLink:
        now = self.clock()
        link = ConsentLink(
            id=self.id_source(),
            principal=principal,
            request_digest=request_digest,
            tool=tool,
            workspace_uri=workspace_uri,
            service=self.service,
            created_at=now,
            expires_at=now + self.link_ttl_seconds,
        )
        self.store.add_link(link)
        return link

    def url(self, link: ConsentLink) -> str | None:
        return None if self.base_url is None else f"{self.base_url}{CONNECT_PATH}{link.id}"

    def usable_link(self, link_id: str, principal: str, request_digest: str) -> ConsentLink | None:
        """The link if `principal` could still use it for this very request."""
        with _busy_as_error():
            link = self.store.link(link_id)
        if decide_grant(link, principal, self.clock()) is not Grant.GRANTED:
            return None
        assert link is not None
        return link if link.request_digest == request_digest else None

    def credential(self, principal: str, workspace_uri: str) -> str | None:
        """The live credential `principal` granted for exactly `workspace_uri`, or None."""
        with _busy_as_error():
            return self.store.credential(principal, workspace_uri, self.clock())

    def revoke(self, link_id: str) -> None:
        with _busy_as_error():
            self.store.revoke_link(link_id)

    # -- the page side -----------------------------------------------------------------------

    def page_grant(self, link_id: str, principal: str) -> tuple[Grant, ConsentLink | None]:
        """Whether the page may be shown to `principal` (nothing is consumed)."""
        link = self.store.link(link_id)
        return decide_grant(link, principal, self.clock()), link

    def form_token(self, link_id: str, principal: str) -> str:
        """The anti-forgery token the consent page carries: bound to the link and the principal,
        keyed with the server's sealing key (`<key id>.<mac>`)."""
        kid, secret = self.keys.sealing
        return f"{kid}.{_form_mac(secret, link_id, principal)}"

    def form_token_valid(self, token: str, link_id: str, principal: str) -> bool:
        kid, _, mac = token.partition(".")
        secret = self.keys.get(kid)
        if secret is None:
            return False
        return hmac.compare_digest(mac.encode(), _form_mac(secret, link_id, principal).encode())

    def deny(self, link_id: str) -> None:
        """The user pressed Deny on the page: the link is withdrawn (a busy store raises
        `StoreBusy`, for the page to answer)."""
        self.store.revoke_link(link_id)

    def revoke_token(self, principal: str) -> str:
        """The anti-forgery token of one view of the page that revokes `principal`'s grants:
        `<key id>.<view>.<issued>.<mac>`, a random view id and the time it was shown, bound to
        the principal, valid for `REVOKE_FORM_TTL_SECONDS`. Every view gets a new one."""
        kid, secret = self.keys.sealing
        view = f"{secrets.token_hex(16)}.{int(self.clock())}"
        return f"{kid}.{view}.{_form_mac(secret, view, principal, purpose=b'revoke')}"

    def revoke_token_valid(self, token: str, principal: str) -> bool:
        parts = token.split(".")
        if len(parts) != 4 or not parts[2].isdigit():
            return False
        kid, view_id, issued, mac = parts
        secret = self.keys.get(kid)
        if secret is None:
            return False
        age = self.clock() - int(issued)
        if not -CLOCK_SKEW_SECONDS <= age <= REVOKE_FORM_TTL_SECONDS:
            return False
        expected = _form_mac(secret, f"{view_id}.{issued}", principal, purpose=b"revoke")
        return hmac.compare_digest(mac.encode(), expected.encode())

    def grants(self, principal: str) -> Sequence[tuple[str, float]]:
        """`principal`'s live grants: (workspace, valid until), never the credential."""
        return self.store.grants(principal, self.clock())

    def revoke_grant(self, principal: str, workspace_uri: str) -> bool:
        revoked = self.store.revoke_grant(principal, workspace_uri)
        log.info("consent for %s revoked by %r: %s", self.service, principal, revoked)
        return revoked

    def grant(self, link_id: str, principal: str) -> Grant:
        """Use the link: mint the credential and store it for `principal`, exactly once."""
        now = self.clock()
        outcome = self.store.grant(
            link_id, principal, self.credential_source(), now, now + self.credential_ttl_seconds
        )
        # The outcome and who, never the credential or the link id (a bearer of consent).
        log.info("consent for %s by %r: %s", self.service, principal, outcome.value)
        return outcome


def _form_mac(secret: bytes, link_id: str, principal: str, purpose: bytes = b"form") -> str:
    message = (
        b"labkit consent " + purpose + b"\x00" + link_id.encode() + b"\x00" + principal.encode()
    )
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


@contextmanager
def _busy_as_error() -> Iterator[None]:
    """A consent store that stayed busy is "try again" for the MCP client (-32001)."""
    try:
        yield
    except StoreBusy as exc:
        log.warning("consent store busy: %s", exc)
        raise ProtocolError(
            SERVER_BUSY, "The consent record is busy; nothing was changed, try again"
        ) from None
