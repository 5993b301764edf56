"""`notes_export` and URL-mode elicitation: the capability gate, the out-of-band consent page,
the server's own consent record, and the credential that never leaves the server.

The core is driven as dicts in, dicts out (every response checked by `check_wire`); the consent
page runs on a real uvicorn server beside `/mcp`, as `labkit serve --transport http` runs it.
Time moves through the fake clock; ids and credentials come from counting sources, so the test
knows the credential's exact text and can look for it everywhere.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import (
    FORM,
    KEY_A,
    MISSING,
    CountingNonces,
    call,
    demo_notes,
    error_of,
    result_of,
    structured,
)
from test_http import serve_process, serving

from labkit.auth import demo_authenticator, hash_token
from labkit.clock import FakeClock
from labkit.config import ConfigError, parse_config
from labkit.deployment import DEMO_ALLOWLIST, create_server
from labkit.errors import ProtocolError
from labkit.notes_export import INPUT_KEY, MemoryReportService
from labkit.scope import AllowlistAuthorizer
from labkit.server import Server
from labkit.state import KeyRing
from labkit.stores import ReplayStore
from labkit.stores.consent import (
    ConsentLink,
    ConsentStore,
    Grant,
    MemoryConsentStore,
    SqliteConsentStore,
)
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.transports.consent_page import ConsentPage
from labkit.transports.http import create_app
from labkit.url_mode import (
    CONNECT_PATH,
    REVOKE_FORM_TTL_SECONDS,
    ConsentService,
    has_url_elicitation,
    require_url_elicitation,
    url_elicitation,
)

URL_CAPS: dict[str, Any] = {"elicitation": {"url": {}}}
BOTH_CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
NOTES = {"workspaceUri": "file:///work/notes"}
BASE = "http://127.0.0.1:9"
URL_REQUIRED = {
    "code": -32021,
    "message": "This tool needs URL-mode elicitation to connect the report service",
    "data": {"requiredCapabilities": {"elicitation": {"url": {}}}},
}
ALICE_NOTES = ["note-99", "note-3", "note-7", "note-14"]


class Counting:
    """`prefix-1`, `prefix-2`, ...: deterministic ids and credentials."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._next = itertools.count(1)
        self.issued: list[str] = []

    def __call__(self) -> str:
        value = f"{self.prefix}-{next(self._next)}"
        self.issued.append(value)
        return value


@dataclass
class ExportLab:
    server: Server
    consent: ConsentService
    store: ConsentStore
    reports: MemoryReportService
    clock: FakeClock
    notes: MemoryNoteStore
    replay: ReplayStore
    credentials: Counting = field(default_factory=lambda: Counting("CREDENTIAL-SECRET"))


def build_export_lab(
    clock: FakeClock | None = None,
    store: ConsentStore | None = None,
    replay: ReplayStore | None = None,
    base_url: str | None = BASE,
) -> ExportLab:
    clock = clock if clock is not None else FakeClock()
    store = store if store is not None else MemoryConsentStore()
    replay = replay if replay is not None else MemoryReplayStore(clock=clock)
    credentials = Counting("CREDENTIAL-SECRET")
    consent = ConsentService(
        store,
        KeyRing([KEY_A]),
        clock=clock,
        id_source=Counting("link"),
        credential_source=credentials,
        base_url=base_url,
    )
    reports = MemoryReportService()
    notes = demo_notes()
    server = create_server(
        keys=KeyRing([KEY_A]),
        notes=notes,
        replay=replay,
        authorizer=AllowlistAuthorizer(DEMO_ALLOWLIST),
        clock=clock,
        nonce_source=CountingNonces(),
        consent=consent,
        reports=reports,
    )
    return ExportLab(server, consent, store, reports, clock, notes, replay, credentials)


@pytest.fixture
def xlab() -> ExportLab:
    return build_export_lab()


def export(
    lab: ExportLab,
    id: int,
    *,
    caps: Any = URL_CAPS,
    state: Any = MISSING,
    action: str | None = None,
    principal: str = "alice",
    arguments: Any = MISSING,
) -> dict[str, Any]:
    responses: Any = MISSING if action is None else {INPUT_KEY: {"action": action}}
    return call(
        lab.server,
        id,
        "notes_export",
        dict(NOTES) if arguments is MISSING else arguments,
        caps=caps,
        state=state,
        responses=responses,
        principal=principal,
    )


def url_entry(response: dict[str, Any]) -> tuple[str, str]:
    """(url, requestState) of an `input_required` answer with its one URL entry."""
    result = result_of(response)
    assert result["resultType"] == "input_required", result
    (key,) = result["inputRequests"]
    assert key == INPUT_KEY
    entry = result["inputRequests"][key]
    assert entry["method"] == "elicitation/create"
    params = entry["params"]
    assert set(params) == {"mode", "message", "url"}, "2026-07-28 URL mode: no elicitationId"
    assert params["mode"] == "url"
    assert "report service" in params["message"]
    return params["url"], result["requestState"]


def link_id_of(url: str) -> str:
    return url.rsplit("/", 1)[1]


# -- the pure pieces ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "has_url"),
    [
        ({}, False),
        ({"elicitation": {}}, False),
        ({"elicitation": {"form": {}}}, False),
        ({"elicitation": {"url": {}}}, True),
        ({"elicitation": {"form": {}, "url": {}}}, True),
        ({"elicitation": None}, False),
        ({"elicitation": ["url"]}, False),
    ],
)
def test_only_an_explicit_url_key_means_url_mode(caps: dict[str, Any], has_url: bool) -> None:
    assert has_url_elicitation(caps) is has_url
    if has_url:
        assert url_elicitation(caps, "m", "http://x/") == {
            "method": "elicitation/create",
            "params": {"mode": "url", "message": "m", "url": "http://x/"},
        }
    else:
        with pytest.raises(ProtocolError) as refused:
            require_url_elicitation(caps)
        assert refused.value.to_wire() == URL_REQUIRED


# -- the capability gate ------------------------------------------------------------------------


@pytest.mark.parametrize("caps", [{}, {"elicitation": {}}, FORM], ids=["none", "empty", "form"])
def test_without_the_url_capability_the_exact_32021_and_no_link(
    xlab: ExportLab, caps: dict[str, Any]
) -> None:
    assert error_of(export(xlab, 1, caps=caps)) == URL_REQUIRED
    assert xlab.consent.page_grant("link-1", "alice")[0] is Grant.UNKNOWN, "no link was minted"


def test_a_later_request_without_url_is_refused_even_after_one_with_it(xlab: ExportLab) -> None:
    _, state = url_entry(export(xlab, 1))
    assert error_of(export(xlab, 2, caps=FORM, state=state, action="accept")) == URL_REQUIRED


def test_the_first_round_offers_a_link_to_labkits_own_page(xlab: ExportLab) -> None:
    url, state = url_entry(export(xlab, 1, caps=BOTH_CAPS))
    assert url == f"{BASE}{CONNECT_PATH}link-1"
    link = xlab.store.link("link-1")
    assert link is not None and link.principal == "alice" and link.tool == "notes_export"
    assert link.workspace_uri == "file:///work/notes" and not link.used
    assert link.expires_at - link.created_at == 240
    assert xlab.reports.published == []


def test_scope_is_checked_before_anything_is_offered(xlab: ExportLab) -> None:
    for principal, arguments in [
        ("mallory", NOTES),
        ("alice", {"workspaceUri": "file:///work/notes-evil"}),
        ("alice", {"workspaceUri": "file:///work/notes/%2e%2e/private"}),
    ]:
        error = error_of(export(xlab, 1, principal=principal, arguments=arguments))
        assert error["code"] == -32602
    for arguments in [{}, {"workspaceUri": 3}, {**NOTES, "title": "x"}]:
        assert error_of(export(xlab, 2, arguments=arguments))["code"] == -32602
    assert xlab.store.link("link-1") is None


# -- the retry: the server's own record decides --------------------------------------------------


def test_accept_before_consent_asks_again_with_the_same_link(xlab: ExportLab) -> None:
    url, state = url_entry(export(xlab, 1))
    again_url, again_state = url_entry(export(xlab, 2, state=state, action="accept"))
    assert again_url == url, "the page the user may have open stays valid"
    assert xlab.reports.published == []
    # A missing answer is re-asked too, never taken as consent.
    assert url_entry(export(xlab, 3, state=again_state))[0] == url


def test_consent_then_retry_exports_once(xlab: ExportLab) -> None:
    url, state = url_entry(export(xlab, 1))
    assert xlab.consent.grant(link_id_of(url), "alice") is Grant.GRANTED
    done = export(xlab, 2, state=state, action="accept")
    assert structured(done) == {
        "exported": True,
        "status": "exported",
        "workspaceUri": "file:///work/notes",
        "noteIds": ALICE_NOTES,
        "reportId": "report-1",
    }
    assert xlab.reports.published == [
        ("CREDENTIAL-SECRET-1", "alice", "file:///work/notes", tuple(ALICE_NOTES))
    ]
    # The same state cannot export twice.
    assert error_of(export(xlab, 3, state=state, action="accept"))["code"] == -32602
    # Connected now: the next export needs no elicitation at all, not even the capability.
    assert structured(export(xlab, 4, caps={}))["reportId"] == "report-2"


def test_a_link_that_expired_is_replaced_by_a_new_one(xlab: ExportLab) -> None:
    url, state = url_entry(export(xlab, 1))
    xlab.clock.advance(241)
    new_url, _ = url_entry(export(xlab, 2, state=state, action="accept"))
    assert new_url != url and new_url.endswith("/link-2")


def test_decline_is_terminal_and_withdraws_the_link(xlab: ExportLab) -> None:
    url, state = url_entry(export(xlab, 1))
    assert structured(export(xlab, 2, state=state, action="decline")) == {
        "exported": False,
        "status": "declined",
    }
    assert xlab.consent.grant(link_id_of(url), "alice") is Grant.USED
    assert xlab.consent.credential("alice", NOTES["workspaceUri"]) is None
    assert error_of(export(xlab, 3, state=state, action="accept"))["code"] == -32602
    assert xlab.reports.published == []


def test_cancel_exports_nothing_and_leaves_the_flow_open(xlab: ExportLab) -> None:
    url, state = url_entry(export(xlab, 1))
    assert structured(export(xlab, 2, state=state, action="cancel")) == {
        "exported": False,
        "status": "cancelled",
    }
    assert xlab.reports.published == []
    assert xlab.consent.grant(link_id_of(url), "alice") is Grant.GRANTED
    assert structured(export(xlab, 3, state=state, action="accept"))["status"] == "exported"


def test_a_state_for_other_arguments_or_principal_is_refused(xlab: ExportLab) -> None:
    url, state = url_entry(export(xlab, 1))
    xlab.consent.grant(link_id_of(url), "alice")
    other = {"workspaceUri": "file:///work/notes/sub"}
    assert error_of(export(xlab, 2, state=state, action="accept", arguments=other))["code"] == (
        -32602
    )
    mallory = {"workspaceUri": "file:///work/mallory"}
    refused = export(xlab, 3, state=state, action="accept", principal="mallory", arguments=mallory)
    assert error_of(refused)["code"] == -32602
    assert xlab.reports.published == []


def test_without_a_listener_no_link_is_offered() -> None:
    lab = build_export_lab(base_url=None)
    assert error_of(export(lab, 1)) == {"code": -32603, "message": "Internal error"}


# -- the consent store contract, on both backends -----------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def consent_store(request: pytest.FixtureRequest, tmp_path: Path) -> ConsentStore:
    if request.param == "memory":
        return MemoryConsentStore(pending_per_principal=3)
    return SqliteConsentStore(tmp_path / "consent.db", pending_per_principal=3)


def make_link(link_id: str, principal: str = "alice", at: float = 100.0) -> ConsentLink:
    return ConsentLink(link_id, principal, "digest", "notes_export", "file:///w", "rs", at, at + 60)


def test_store_grants_once_to_the_bound_principal_before_expiry(
    consent_store: ConsentStore,
) -> None:
    consent_store.add_link(make_link("a"))
    assert consent_store.grant("a", "mallory", "C-m", 110, 1000) is Grant.WRONG_PRINCIPAL
    assert consent_store.credential("mallory", "file:///w", 110) is None
    assert consent_store.grant("nope", "alice", "C-x", 110, 1000) is Grant.UNKNOWN
    assert consent_store.grant("a", "alice", "C-a", 160, 1000) is Grant.EXPIRED
    assert consent_store.credential("alice", "file:///w", 110) is None
    assert consent_store.grant("a", "alice", "C-a", 110, 1000) is Grant.GRANTED
    assert consent_store.grant("a", "alice", "C-b", 111, 1000) is Grant.USED
    assert consent_store.credential("alice", "file:///w", 999) == "C-a"
    assert consent_store.credential("alice", "file:///other", 999) is None, "one workspace"
    assert consent_store.credential("alice", "file:///w", 1000) is None, "credentials expire"


def test_store_grant_is_listed_and_revoked_per_workspace(consent_store: ConsentStore) -> None:
    consent_store.add_link(make_link("a"))
    other = ConsentLink("b", "alice", "d", "notes_export", "file:///v", "rs", 100.0, 160.0)
    consent_store.add_link(other)
    assert consent_store.grant("a", "alice", "C-a", 110, 1000) is Grant.GRANTED
    assert consent_store.grant("b", "alice", "C-b", 110, 900) is Grant.GRANTED
    assert list(consent_store.grants("alice", 120)) == [("file:///v", 900), ("file:///w", 1000)]
    assert list(consent_store.grants("mallory", 120)) == []
    assert consent_store.revoke_grant("alice", "file:///w") is True
    assert consent_store.revoke_grant("alice", "file:///w") is False
    assert consent_store.credential("alice", "file:///w", 120) is None
    assert consent_store.credential("alice", "file:///v", 120) == "C-b"
    assert list(consent_store.grants("alice", 950)) == [], "expired grants are not listed"


def test_store_revokes_and_bounds_pending_links(consent_store: ConsentStore) -> None:
    consent_store.add_link(make_link("r"))
    consent_store.revoke_link("r")
    assert consent_store.grant("r", "alice", "C", 110, 1000) is Grant.USED
    for i in range(4):
        consent_store.add_link(make_link(f"p{i}", at=100.0 + i))
    consent_store.add_link(make_link("m", principal="mallory"))
    kept = [i for i in range(4) if consent_store.link(f"p{i}") is not None]
    assert kept == [1, 2, 3], "the oldest pending links go first, per principal"
    assert consent_store.link("m") is not None


def test_sqlite_consent_survives_a_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "consent.db"
    replay = MemoryReplayStore(clock=clock)
    first = build_export_lab(clock, SqliteConsentStore(path), replay)
    url, state = url_entry(export(first, 1))
    first.consent.grant(link_id_of(url), "alice")
    # A new process: new server, new store object, the same file (and the same keys).
    second = build_export_lab(clock, SqliteConsentStore(path), replay)
    assert structured(export(second, 2, state=state, action="accept"))["status"] == "exported"
    assert second.reports.published[0][0] == "CREDENTIAL-SECRET-1"


# -- the page, on the same server and port as /mcp ----------------------------------------------


@dataclass
class Served:
    lab: ExportLab
    base: str
    mcp: str
    http: httpx.Client


@pytest.fixture
def served() -> Iterator[Served]:
    lab = build_export_lab(base_url=None)
    page = ConsentPage(lab.consent, demo_authenticator())
    with serving(create_app(lab.server, demo_authenticator(), consent_page=page)) as mcp:
        base = mcp.removesuffix("/mcp")
        lab.consent.base_url = base
        with httpx.Client(timeout=30) as http:
            yield Served(lab, base, mcp, http)


def basic(principal: str, token: str) -> dict[str, str]:
    raw = base64.b64encode(f"{principal}:{token}".encode()).decode()
    return {"authorization": f"Basic {raw}"}


ALICE_BASIC = basic("alice", "demo-alice")
MALLORY_BASIC = basic("mallory", "demo-mallory")


def form_token(page: str) -> str:
    match = re.search(r"name=form_token value='([^']+)'", page)
    assert match is not None, page
    return match.group(1)


def approve(
    s: Served, url: str, auth: dict[str, str] = ALICE_BASIC, token: str | None = None
) -> httpx.Response:
    if token is None:
        shown = s.http.get(url, headers=auth)
        assert shown.status_code == 200, shown.text
        token = form_token(shown.text)
    return s.http.post(
        url,
        headers={**auth, "content-type": "application/x-www-form-urlencoded"},
        content=f"form_token={token}&decision=approve".encode(),
    )


def test_the_page_shows_who_asks_and_for_what(served: Served) -> None:
    url, _ = url_entry(export(served.lab, 1))
    assert url.startswith(served.base + CONNECT_PATH)
    page = served.http.get(url, headers=ALICE_BASIC)
    assert page.status_code == 200
    for shown in ("alice", "report-service", "notes_export", "file:///work/notes", "Approve"):
        assert shown in page.text
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    # The bearer token proves the same principal as Basic does.
    assert served.http.get(url, headers={"authorization": "Bearer demo-alice"}).status_code == 200


def test_consent_on_the_page_then_retry_completes(served: Served) -> None:
    url, state = url_entry(export(served.lab, 1))
    done = approve(served, url)
    assert done.status_code == 200 and "connected" in done.text
    assert structured(export(served.lab, 2, state=state, action="accept"))["exported"] is True


def test_without_a_sign_in_the_browser_is_asked_for_one(served: Served) -> None:
    url, _ = url_entry(export(served.lab, 1))
    for headers in ({}, {"authorization": "Bearer wrong"}, basic("alice", "demo-mallory")):
        page = served.http.get(url, headers=headers)
        assert page.status_code == 401
        assert page.headers["www-authenticate"].startswith("Basic ")
    assert served.lab.consent.credential("alice", NOTES["workspaceUri"]) is None


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_another_principal_is_refused_and_nothing_is_stored(served: Served, method: str) -> None:
    url, state = url_entry(export(served.lab, 1))
    if method == "GET":
        refused = served.http.get(url, headers=MALLORY_BASIC)
    else:
        # Even with alice's own form token, mallory's sign-in does not pass.
        token = form_token(served.http.get(url, headers=ALICE_BASIC).text)
        refused = approve(served, url, MALLORY_BASIC, token)
    assert refused.status_code == 403
    assert "issued to another user" in refused.text
    assert served.lab.consent.credential("mallory", NOTES["workspaceUri"]) is None
    assert served.lab.consent.credential("alice", NOTES["workspaceUri"]) is None
    assert url_entry(export(served.lab, 2, state=state, action="accept"))[0] == url


def test_a_link_used_once_is_refused_the_second_time(served: Served) -> None:
    url, _ = url_entry(export(served.lab, 1))
    shown = served.http.get(url, headers=ALICE_BASIC)
    assert approve(served, url, token=form_token(shown.text)).status_code == 200
    for again in (
        served.http.get(url, headers=ALICE_BASIC),
        approve(served, url, token=form_token(shown.text)),
    ):
        assert again.status_code == 410 and "already been used" in again.text
    assert served.lab.credentials.issued == ["CREDENTIAL-SECRET-1"], "one credential, once"


def test_an_expired_link_is_refused_and_stores_nothing(served: Served) -> None:
    url, _ = url_entry(export(served.lab, 1))
    token = form_token(served.http.get(url, headers=ALICE_BASIC).text)
    served.lab.clock.advance(240)
    refused = approve(served, url, token=token)
    assert refused.status_code == 410 and "expired" in refused.text
    assert served.lab.consent.credential("alice", NOTES["workspaceUri"]) is None


def test_unknown_link_forged_token_and_foreign_origin_are_refused(served: Served) -> None:
    url, _ = url_entry(export(served.lab, 1))
    assert served.http.get(url + "x", headers=ALICE_BASIC).status_code == 404
    real = form_token(served.http.get(url, headers=ALICE_BASIC).text)
    kid, mac = real.split(".")
    for forged in ("", kid, f"{kid}.{'0' * len(mac)}", f"nokey.{mac}"):
        assert approve(served, url, token=forged).status_code == 403
    foreign = served.http.post(
        url,
        headers={
            **ALICE_BASIC,
            "origin": "http://evil.example",
            "content-type": "application/x-www-form-urlencoded",
        },
        content=f"form_token={real}&decision=approve".encode(),
    )
    assert foreign.status_code == 403
    rebinding = served.http.get(url, headers={**ALICE_BASIC, "host": "evil.example"})
    assert rebinding.status_code == 421
    other_port = served.http.get(url, headers={**ALICE_BASIC, "host": "127.0.0.1:1"})
    assert other_port.status_code == 421, "the port is the listening one, not the Host's"
    assert served.lab.consent.credential("alice", NOTES["workspaceUri"]) is None
    # The real token still works afterwards: nothing above used the link up.
    assert approve(served, url, token=real).status_code == 200


def test_the_revoke_token_is_bound_to_one_page_view_and_expires(served: Served) -> None:
    url, _ = url_entry(export(served.lab, 1))
    shown = served.http.get(url, headers=ALICE_BASIC)
    assert approve(served, url, token=form_token(shown.text)).status_code == 200
    grants = served.base + CONNECT_PATH

    def view() -> str:
        return form_token(served.http.get(grants, headers=ALICE_BASIC).text)

    def revoke(token: str) -> httpx.Response:
        return served.http.post(
            grants,
            headers={**ALICE_BASIC, "content-type": "application/x-www-form-urlencoded"},
            content=f"form_token={token}&workspace=file%3A%2F%2F%2Fwork%2Fnotes".encode(),
        )

    first, second = view(), view()
    assert first != second  # every view of the page has its own token
    consent = served.lab.consent
    assert consent.revoke_token_valid(first, "alice") and consent.revoke_token_valid(
        second, "alice"
    )
    assert not consent.revoke_token_valid(first, "mallory")
    assert not consent.revoke_token_valid(first.replace(".", ".1", 1), "alice")
    served.lab.clock.advance(REVOKE_FORM_TTL_SECONDS + 1)
    assert revoke(first).status_code == 403  # a page seen too long ago revokes nothing
    assert consent.credential("alice", NOTES["workspaceUri"]) is not None
    revoked = revoke(view())
    assert revoked.status_code == 200 and "was revoked" in revoked.text


def test_deny_on_the_page_withdraws_the_link(served: Served) -> None:
    url, state = url_entry(export(served.lab, 1))
    token = form_token(served.http.get(url, headers=ALICE_BASIC).text)
    denied = served.http.post(
        url,
        headers={**ALICE_BASIC, "content-type": "application/x-www-form-urlencoded"},
        content=f"form_token={token}&decision=deny".encode(),
    )
    assert denied.status_code == 200 and "Nothing was connected" in denied.text
    assert served.lab.consent.credential("alice", NOTES["workspaceUri"]) is None
    # The retry offers a fresh link, since the old one is gone.
    assert url_entry(export(served.lab, 2, state=state, action="accept"))[0] != url


# -- the credential never leaves the server ------------------------------------------------------


def test_the_credential_is_in_no_mcp_message_page_or_log_record(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wire: list[Any] = []
    s = served
    first = export(s.lab, 1)
    url, state = url_entry(first)
    wire.append(first)
    again = export(s.lab, 2, state=state, action="accept")
    wire.append(again)
    pages = [s.http.get(url, headers=ALICE_BASIC), approve(s, url)]
    pages.append(s.http.get(url, headers=ALICE_BASIC))
    # Over the real HTTP endpoint too, request and response bodies alike.
    _, state = url_entry(again)
    message = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {
            "name": "notes_export",
            "arguments": NOTES,
            "requestState": state,
            "inputResponses": {INPUT_KEY: {"action": "accept"}},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": URL_CAPS,
            },
        },
    }
    response = s.http.post(
        s.mcp,
        json=message,
        headers={
            "authorization": "Bearer demo-alice",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": "notes_export",
        },
    )
    assert response.status_code == 200
    assert response.json()["result"]["structuredContent"]["status"] == "exported"
    wire += [message, response.json()]
    (credential,) = s.lab.credentials.issued
    assert s.lab.reports.published[0][0] == credential, "it did reach the report service"
    texts = [json.dumps(wire)] + [p.text + json.dumps(dict(p.headers)) for p in pages]
    texts += [r.getMessage() + repr(r.args) for r in caplog.records]
    assert caplog.records, "the capture saw the server's logging"
    for text in texts:
        assert credential not in text
    assert "CREDENTIAL-SECRET" not in json.dumps(wire)


# -- configuration ------------------------------------------------------------------------------


def test_configured_consent_store_and_its_refusals(tmp_path: Path) -> None:
    key = tmp_path / "k.key"
    key.write_bytes(base64.b64encode(hashlib.sha512(b"consent test key").digest()))
    key.chmod(0o600)

    def configured(consent: str, token: bool = True) -> Any:
        principal: dict[str, Any] = {"name": "alice", "workspaces": ["file:///work/notes"]}
        if token:
            principal["token_sha256"] = hash_token("t")
        raw = {
            "server": {"signing_key_files": ["k.key"]},
            "stores": {"consent": consent},
            "principals": [principal],
        }
        return parse_config(raw, base_dir=tmp_path)

    database = tmp_path / "consent.db"
    config = configured(f"sqlite://{database}")
    assert config.has_tokens()
    assert isinstance(config.consent_service().store, SqliteConsentStore)
    assert database.exists()
    assert tmp_path in config.sandbox_paths(), "the consent database stays writable"
    names = [
        t["name"]
        for t in config.build_server(consent=config.consent_service()).list_tools(
            None  # type: ignore[arg-type]
        )["tools"]
    ]
    assert names == ["notes_delete", "notes_export"]
    assert isinstance(configured("memory").consent_service().store, MemoryConsentStore)
    assert not configured("memory", token=False).has_tokens()
    with pytest.raises(ConfigError) as refused:
        configured("redis://x")
    assert refused.value.key == "stores.consent"


def test_a_form_with_extra_fields_is_refused(served: Served) -> None:
    url, _ = url_entry(export(served.lab, 1))
    token = form_token(served.http.get(url, headers=ALICE_BASIC).text)
    stuffed = "&".join([f"form_token={token}", "decision=approve"] + [f"x{i}=1" for i in range(9)])
    refused = served.http.post(
        url,
        headers={**ALICE_BASIC, "content-type": "application/x-www-form-urlencoded"},
        content=stuffed.encode(),
    )
    assert refused.status_code == 400
    assert served.lab.consent.credential("alice", NOTES["workspaceUri"]) is None


@pytest.mark.parametrize(
    ("public_url", "accepted"),
    [
        ("https://mcp.example.com", True),
        ("http://127.0.0.1:9000", True),
        ("https://mcp.example.com/path", False),
        ("ftp://mcp.example.com", False),
        ("https://mcp.example.com?x=1", False),
    ],
)
def test_public_url_is_a_bare_origin(tmp_path: Path, public_url: str, accepted: bool) -> None:
    key = tmp_path / "k.key"
    key.write_bytes(base64.b64encode(hashlib.sha512(b"consent test key").digest()))
    raw = {
        "server": {"signing_key_files": ["k.key"]},
        "http": {"public_url": public_url},
        "principals": [{"name": "alice"}],
    }
    if accepted:
        assert parse_config(raw, base_dir=tmp_path).settings.http.public_url == public_url
    else:
        with pytest.raises(ConfigError) as refused:
            parse_config(raw, base_dir=tmp_path)
        assert refused.value.key == "http.public_url"


def test_labkit_serve_with_a_config_offers_links_at_its_public_url(tmp_path: Path) -> None:
    key = tmp_path / "k.key"
    key.write_bytes(base64.b64encode(hashlib.sha512(b"consent test key").digest()))
    key.chmod(0o600)
    config = tmp_path / "labkit.toml"
    config.write_text(
        f"""
[server]
signing_key_files = ["k.key"]
sandbox = "off"

[stores]
consent = "sqlite://{tmp_path}/consent.db"

[http]
public_url = "https://mcp.example.com"

[[principals]]
name = "alice"
token_sha256 = "{hash_token("alice-token")}"
workspaces = ["file:///work/notes"]
"""
    )
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "notes_export",
            "arguments": NOTES,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": URL_CAPS,
            },
        },
    }
    headers = {
        "authorization": "Bearer alice-token",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "notes_export",
    }
    with serve_process("--config", str(config)) as (proc, endpoint, _), httpx.Client() as http:
        answer = http.post(endpoint, json=message, headers=headers, timeout=30)
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    url = answer.json()["result"]["inputRequests"][INPUT_KEY]["params"]["url"]
    assert url.startswith("https://mcp.example.com/connect/report-service/")
    assert SqliteConsentStore(tmp_path / "consent.db").link(link_id_of(url)) is not None
