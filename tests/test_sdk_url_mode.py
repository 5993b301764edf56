"""URL-mode elicitation with the official SDK client (`mcp` 2.3.0) at 2026-07-28, over stdio
(`labkit serve` with its loopback consent listener) and over Streamable HTTP (the consent page
beside `/mcp`). The client's `elicitation_callback` plays the user: it opens the link in a
"browser" (httpx, signed in with HTTP Basic), approves or not, then answers.
"""

from __future__ import annotations

import base64
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from test_http import serving
from test_notes_export import ALICE_NOTES, ExportLab, build_export_lab

from labkit.auth import demo_authenticator
from labkit.transports.consent_page import ConsentPage
from labkit.transports.http import create_app
from labkit.url_mode import CONNECT_PATH

NOTES = {"workspaceUri": "file:///work/notes"}


def basic(principal: str, token: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{principal}:{token}".encode()).decode()}


async def approve_in_browser(url: str, principal: str = "alice", token: str = "demo-alice") -> int:
    """What a user does in the browser: open the page signed in, press Approve."""
    auth = basic(principal, token)
    async with httpx.AsyncClient(timeout=30) as browser:
        page = await browser.get(url, headers=auth)
        if page.status_code != 200:
            return page.status_code
        match = re.search(r"name=form_token value='([^']+)'", page.text)
        assert match is not None
        done = await browser.post(
            url,
            headers={**auth, "content-type": "application/x-www-form-urlencoded"},
            content=f"form_token={match.group(1)}&decision=approve".encode(),
        )
        return done.status_code


@dataclass
class User:
    """The `elicitation_callback`: per URL request, what the user does (`approve` then accept,
    `accept` without approving, `decline`, `cancel`)."""

    plan: list[str]
    urls: list[str] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    page_status: list[int] = field(default_factory=list)

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        self.urls.append(params.url)
        self.ids.append(params.elicitation_id)
        step = self.plan[len(self.urls) - 1]
        if step == "approve":
            self.page_status.append(await approve_in_browser(params.url))
            return types.ElicitResult(action="accept")
        action: Any = step
        return types.ElicitResult(action=action)


@dataclass
class Target:
    kind: str
    stderr: Path
    url: str = ""
    lab: ExportLab | None = None

    @asynccontextmanager
    async def connect(
        self, user: User | None, mode: str = "2026-07-28", token: str = "demo-alice"
    ) -> AsyncIterator[Client]:
        options: dict[str, Any] = {"mode": mode, "cache": None}
        if user is not None:
            options["elicitation_callback"] = user
        if self.kind == "stdio":
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "labkit.cli", "serve"]
            )
            with self.stderr.open("w") as errlog:
                async with Client(stdio_client(params, errlog=errlog), **options) as client:
                    yield client
            return
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(self.url, http_client=http), **options) as client,
        ):
            yield client


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    stderr = tmp_path / "server-stderr.txt"
    if request.param == "stdio":
        yield Target("stdio", stderr)
        assert "serving the consent page at http://127.0.0.1:" in stderr.read_text()
        return
    lab = build_export_lab(base_url=None)
    page = ConsentPage(lab.consent, demo_authenticator())
    with serving(create_app(lab.server, demo_authenticator(), consent_page=page)) as url:
        lab.consent.base_url = url.removesuffix("/mcp")
        yield Target("http", stderr, url=url, lab=lab)


def run(test: Any) -> None:
    anyio.run(test)


def test_the_sdk_exports_after_consent_in_the_browser(target: Target) -> None:
    async def test() -> None:
        user = User(["approve"])
        async with target.connect(user) as client:
            listing = await client.list_tools()
            assert [t.name for t in listing.tools] == ["notes_delete", "notes_export"]
            result = await client.call_tool("notes_export", dict(NOTES))
            again = await client.call_tool("notes_export", dict(NOTES))
        assert result.structured_content is not None
        assert result.structured_content["status"] == "exported"
        assert result.structured_content["noteIds"] == ALICE_NOTES
        assert again.structured_content is not None and again.structured_content["exported"]
        (url,) = user.urls  # connected once; the second export asked nothing
        assert CONNECT_PATH in url and url.startswith("http://127.0.0.1:")
        assert user.ids == [None], "2026-07-28 URL mode has no elicitationId"
        assert user.page_status == [200]
        if target.lab is not None:
            assert [p[1:3] for p in target.lab.reports.published] == [
                ("alice", "file:///work/notes")
            ] * 2

    run(test)


def test_accept_without_consent_is_asked_again_then_cancel_exports_nothing(
    target: Target,
) -> None:
    async def test() -> None:
        user = User(["accept", "cancel"])
        async with target.connect(user) as client:
            result = await client.call_tool("notes_export", dict(NOTES))
        assert result.structured_content == {"exported": False, "status": "cancelled"}
        assert len(user.urls) == 2 and user.urls[0] == user.urls[1]
        if target.lab is not None:
            assert target.lab.reports.published == []

    run(test)


def test_decline_exports_nothing(target: Target) -> None:
    async def test() -> None:
        user = User(["decline"])
        async with target.connect(user) as client:
            result = await client.call_tool("notes_export", dict(NOTES))
        assert result.structured_content == {"exported": False, "status": "declined"}
        assert result.is_error is not True

    run(test)


def test_a_client_without_elicitation_gets_the_url_requirement(target: Target) -> None:
    async def test() -> None:
        async with target.connect(None) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("notes_export", dict(NOTES))
        assert refused.value.code == -32021
        assert refused.value.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}

    run(test)
