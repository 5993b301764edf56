"""The legacy adapter against the official SDK client in `mode="legacy"` (`mcp` 2.3.0: the
2025-11-25 `initialize` handshake), over stdio (`labkit serve`, the connection is the session)
and over Streamable HTTP (`Mcp-Session-Id`, SSE response streams, DELETE on close), with a
2026-07-28 client on the same HTTP server at the same time.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from test_http import serve_process, serving
from test_notes_export import ALICE_NOTES, ExportLab, build_export_lab
from test_sdk_url_mode import approve_in_browser

from labkit.auth import demo_authenticator
from labkit.server import Request, Server
from labkit.transports.consent_page import ConsentPage
from labkit.transports.http import create_app
from labkit.transports.legacy_http import LegacyHttp

TPS = {"workspaceUri": "file:///work/notes", "title": "TPS report"}
NOTES = {"workspaceUri": "file:///work/notes"}
OUTSIDE_ROOT = "file:///work/private"


@dataclass
class User:
    """Both callbacks of a legacy client: forms get the next scripted action, URL requests are
    approved in the browser, roots are offered (one of them outside the allowlist)."""

    form_actions: list[str] = field(default_factory=list)
    offers: list[list[str]] = field(default_factory=list)
    urls: list[tuple[str, str | None]] = field(default_factory=list)
    roots_asked: int = 0
    completions: list[str] = field(default_factory=list)
    meanwhile: Any = None

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            self.urls.append((params.url, params.elicitation_id))
            assert await approve_in_browser(params.url) == 200
            return types.ElicitResult(action="accept")
        choices = params.requested_schema["properties"]["note_id"]["oneOf"]
        self.offers.append([choice["const"] for choice in choices])
        if self.meanwhile is not None:
            await self.meanwhile()
        action = self.form_actions[len(self.offers) - 1]
        if action == "accept":
            chosen_note = "note-14" if "note-14" in self.offers[-1] else self.offers[-1][0]
            return types.ElicitResult(
                action="accept", content={"note_id": chosen_note, "confirm": True}
            )
        chosen: Any = action
        return types.ElicitResult(action=chosen)

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.roots_asked += 1
        return types.ListRootsResult(
            roots=[types.Root(uri="file:///work/notes"), types.Root(uri=OUTSIDE_ROOT)]
        )

    async def messages(self, message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            self.completions.append(message.params.elicitation_id)


class RootsProbe:
    """A test tool that asks the client for its roots (the modern way, `input_required`) and
    reports them: what a handler may learn from roots, and nothing it may do with them."""

    name = "roots_probe"

    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "inputSchema": {"type": "object"}}

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = request.params.get("inputResponses", {}).get("roots")
        if answer is None:
            return {
                "resultType": "input_required",
                "inputRequests": {"roots": {"method": "roots/list"}},
                "requestState": "no state needed",
            }
        uris = [root["uri"] for root in answer["roots"]]
        return {
            "resultType": "complete",
            "content": [{"type": "text", "text": " ".join(uris)}],
            "structuredContent": {"roots": uris},
        }


@dataclass
class Target:
    kind: str
    stderr: Path
    url: str = ""
    lab: ExportLab | None = None

    @asynccontextmanager
    async def connect(self, user: User, mode: str = "legacy") -> AsyncIterator[Client]:
        options: dict[str, Any] = {
            "mode": mode,
            "cache": None,
            "elicitation_callback": user.elicit,
            "message_handler": user.messages,
        }
        if mode == "legacy":
            options["list_roots_callback"] = user.roots
        if self.kind == "stdio":
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "labkit.cli", "serve"]
            )
            with self.stderr.open("w") as errlog:
                async with Client(stdio_client(params, errlog=errlog), **options) as client:
                    yield client
            return
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer demo-alice"}) as http,
            Client(streamable_http_client(self.url, http_client=http), **options) as client,
        ):
            yield client


def http_server(lab: ExportLab, *extra: Any) -> Any:
    server = Server([*lab.server.tools.values(), *extra])
    page = ConsentPage(lab.consent, demo_authenticator())
    legacy = LegacyHttp(server, blocking=False)
    return create_app(server, demo_authenticator(), consent_page=page, eras=[legacy]), legacy


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    stderr = tmp_path / "server-stderr.txt"
    if request.param == "stdio":
        yield Target("stdio", stderr)
        assert "Traceback" not in stderr.read_text()
        return
    lab = build_export_lab(base_url=None)
    app, legacy = http_server(lab)
    with serving(app) as url:
        lab.consent.base_url = url.removesuffix("/mcp")
        yield Target("http", stderr, url=url, lab=lab)
    assert legacy.sessions == {}, "the client's DELETE ended its session"


def run(test: Any) -> None:
    anyio.run(test)


def test_legacy_handshake_and_tools_list(target: Target) -> None:
    async def test() -> None:
        async with target.connect(User()) as client:
            assert client.protocol_version == "2025-11-25"
            assert client.server_info is not None and client.server_info.name == "labkit"
            assert client.server_capabilities.tools is not None
            listing = await client.list_tools()
        assert [t.name for t in listing.tools] == ["notes_delete", "notes_export"]
        assert set(listing.tools[0].input_schema["required"]) == {"workspaceUri", "title"}

    run(test)


def test_legacy_notes_delete_accept_deletes(target: Target) -> None:
    async def test() -> None:
        user = User(["accept"])
        async with target.connect(user) as client:
            result = await client.call_tool("notes_delete", dict(TPS))
            gone = await client.call_tool("notes_delete", {**TPS, "title": "TPS report 2025"})
        assert result.structured_content == {
            "deleted": True,
            "status": "deleted",
            "noteId": "note-14",
        }
        assert gone.structured_content == {"deleted": False, "status": "no_match"}
        assert user.offers == [["note-3", "note-7", "note-14"]]
        if target.lab is not None:
            assert "note-14" not in target.lab.notes.ids()

    run(test)


@pytest.mark.parametrize(("action", "status"), [("decline", "declined"), ("cancel", "cancelled")])
def test_legacy_notes_delete_decline_or_cancel_keeps(
    target: Target, action: str, status: str
) -> None:
    async def test() -> None:
        user = User([action, "cancel"])
        async with target.connect(user) as client:
            result = await client.call_tool("notes_delete", dict(TPS))
            await client.call_tool("notes_delete", dict(TPS))
        assert result.structured_content == {"deleted": False, "status": status}
        assert result.is_error is not True
        assert user.offers == [["note-3", "note-7", "note-14"]] * 2

    run(test)


def test_legacy_notes_export_through_url_mode(target: Target) -> None:
    async def test() -> None:
        user = User()
        async with target.connect(user) as client:
            result = await client.call_tool("notes_export", dict(NOTES))
        assert result.structured_content is not None
        assert result.structured_content["status"] == "exported"
        assert result.structured_content["noteIds"] == ALICE_NOTES
        ((url, elicitation_id),) = user.urls
        assert url.startswith("http://127.0.0.1:") and "/connect/report-service/" in url
        assert elicitation_id, "2025-11-25 URL mode carries an elicitationId"
        assert user.completions == [elicitation_id], "notifications/elicitation/complete"

    run(test)


def test_legacy_roots_outside_the_allowlist_authorize_nothing(target: Target) -> None:
    async def test() -> None:
        user = User(["accept"])
        async with target.connect(user) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("notes_delete", {"workspaceUri": OUTSIDE_ROOT, "title": "o"})
            with pytest.raises(MCPError) as refused_export:
                await client.call_tool("notes_export", {"workspaceUri": OUTSIDE_ROOT})
        assert refused.value.code == refused_export.value.code == -32602
        assert "not a workspace this principal may use" in refused.value.message
        assert user.offers == [] and user.urls == []
        if target.lab is not None:
            assert "note-100" in target.lab.notes.ids()

    run(test)


def test_legacy_live_roots_list_reaches_the_handler_and_nothing_more(tmp_path: Path) -> None:
    lab = build_export_lab(base_url=None)
    app, _ = http_server(lab, RootsProbe())

    async def test(url: str) -> None:
        user = User(["accept"])
        target = Target("http", tmp_path / "unused", url=url, lab=lab)
        async with target.connect(user) as client:
            probed = await client.call_tool("roots_probe", {})
            with pytest.raises(MCPError) as refused:
                await client.call_tool("notes_delete", {"workspaceUri": OUTSIDE_ROOT, "title": "o"})
        assert user.roots_asked == 1, "a live roots/list request"
        assert probed.structured_content == {"roots": ["file:///work/notes", OUTSIDE_ROOT]}
        assert refused.value.code == -32602

    with serving(app) as url:
        lab.consent.base_url = url.removesuffix("/mcp")
        anyio.run(test, url)
    assert "note-100" in lab.notes.ids()


def test_a_modern_client_on_the_same_server_at_the_same_time(tmp_path: Path) -> None:
    lab = build_export_lab(base_url=None)
    app, legacy = http_server(lab)

    async def test(url: str) -> None:
        target = Target("http", tmp_path / "unused", url=url, lab=lab)
        modern_user = User(["accept"])
        modern_results: list[Any] = []

        async def modern_meanwhile() -> None:
            # While the legacy call's SSE stream waits for this form, a 2026-07-28 client
            # lists, exports and deletes statelessly on the same endpoint.
            async with target.connect(modern_user, mode="2026-07-28") as modern:
                assert modern.protocol_version == "2026-07-28"
                listing = await modern.list_tools()
                modern_results.append([t.name for t in listing.tools])
                modern_results.append(await modern.call_tool("notes_export", dict(NOTES)))
                modern_results.append(
                    await modern.call_tool("notes_delete", {**TPS, "title": "TPS report 2023"})
                )
            assert len(legacy.sessions) == 1, "the modern client opened no session"

        legacy_user = User(["accept"], meanwhile=modern_meanwhile)
        async with target.connect(legacy_user) as client:
            result = await client.call_tool("notes_delete", dict(TPS))
        assert result.structured_content == {
            "deleted": True,
            "status": "deleted",
            "noteId": "note-14",
        }
        names, exported, deleted = modern_results
        assert names == ["notes_delete", "notes_export"]
        assert exported.structured_content["status"] == "exported"
        assert modern_user.urls[0][1] is None, "the modern client got 2026-07-28 URL mode"
        assert modern_user.completions == []
        assert deleted.structured_content["status"] == "deleted"
        assert modern_user.offers == [["note-3"]]

    with serving(app) as url:
        lab.consent.base_url = url.removesuffix("/mcp")
        anyio.run(test, url)
    assert sorted(lab.notes.ids()) == ["note-100", "note-7", "note-99"]


def test_labkit_serve_http_serves_both_eras_and_the_consent_page(tmp_path: Path) -> None:
    """The wiring of `labkit serve --transport http`: legacy sessions, the modern path and the
    consent page on one port."""

    async def test(url: str) -> None:
        target = Target("http", tmp_path / "unused", url=url)
        legacy_user, modern_user = User(), User()
        async with target.connect(legacy_user) as client:
            assert client.protocol_version == "2025-11-25"
            exported = await client.call_tool("notes_export", dict(NOTES))
        async with target.connect(modern_user, mode="2026-07-28") as modern:
            again = await modern.call_tool("notes_export", dict(NOTES))
        assert exported.structured_content is not None and again.structured_content is not None
        assert exported.structured_content["status"] == again.structured_content["status"]
        ((link, _),) = legacy_user.urls
        assert link.startswith(url.removesuffix("/mcp") + "/connect/report-service/")
        assert modern_user.urls == [], "connected once, for both eras: consent is per principal"

    with serve_process() as (proc, endpoint, _lines):
        anyio.run(test, endpoint)
        proc.terminate()
        assert proc.wait(timeout=30) == 0
