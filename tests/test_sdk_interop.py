"""Interoperability with a real peer: the official Python SDK client (`mcp` 2.3.0).

The client runs in `mode="2026-07-28"` with `cache=None`, over stdio (it spawns
`labkit serve` itself) and over Streamable HTTP (a uvicorn server on a free loopback port,
authenticated with the demo bearer tokens). Every test gets a fresh demo deployment: a new
process for stdio, a new server object for HTTP.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from helpers import Lab, build_lab
from mcp import Client
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from test_http import serving

from labkit.auth import demo_authenticator, hash_token
from labkit.config import load_config
from labkit.deployment import create_server
from labkit.transports.http import create_app

PROTOCOL = "2026-07-28"
TPS = {"workspaceUri": "file:///work/notes", "title": "TPS report"}
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


@dataclass
class Elicitor:
    """The client's `elicitation_callback`: answers each form with the next scripted action."""

    actions: list[str]
    offers: list[list[str]] = field(default_factory=list)

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams), "labkit asks with a form"
        choices = params.requested_schema["properties"]["note_id"]["oneOf"]
        self.offers.append([choice["const"] for choice in choices])
        action = self.actions[len(self.offers) - 1]
        if action == "accept":
            return types.ElicitResult(
                action="accept", content={"note_id": "note-14", "confirm": True}
            )
        if action == "decline":
            return types.ElicitResult(action="decline")
        assert action == "cancel"
        return types.ElicitResult(action="cancel")


@dataclass
class Target:
    """Where the SDK client connects: a `labkit serve` process, or an HTTP endpoint."""

    kind: str
    stderr: Path
    url: str = ""
    lab: Lab | None = None

    @asynccontextmanager
    async def connect(
        self, elicitor: ElicitationFnT | None = None, token: str = "demo-alice"
    ) -> AsyncIterator[Client]:
        options: dict[str, Any] = {"mode": PROTOCOL, "cache": None}
        if elicitor is not None:
            options["elicitation_callback"] = elicitor
        if self.kind == "stdio":
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "labkit.cli", "serve"]
            )
            with self.stderr.open("w") as errlog:
                async with Client(stdio_client(params, errlog=errlog), **options) as client:
                    yield client
            return
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(self.url, http_client=http), **options) as client,
        ):
            yield client


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    stderr = tmp_path / "server-stderr.txt"
    if request.param == "stdio":
        yield Target("stdio", stderr)
        # Logs went to stderr only, and the server said which deployment it runs.
        assert "demo deployment" in stderr.read_text()
        return
    lab = build_lab()
    with serving(create_app(lab.server, demo_authenticator())) as url:
        yield Target("http", stderr, url=url, lab=lab)


def run(test: Callable[[], Awaitable[None]]) -> None:
    anyio.run(test)


def test_server_discover(target: Target) -> None:
    async def test() -> None:
        async with target.connect() as client:
            raw = await client.session.send_discover(PROTOCOL)
        discovered = types.DiscoverResult.model_validate(raw)
        assert discovered.supported_versions == [PROTOCOL]
        assert discovered.capabilities.tools is not None
        assert "roots" not in raw["capabilities"]
        assert raw["_meta"][SERVER_INFO_KEY]["name"] == "labkit"

    run(test)


def test_tools_list(target: Target) -> None:
    async def test() -> None:
        async with target.connect() as client:
            listing = await client.list_tools()
        # The demo served over stdio also offers notes_export (URL mode, tests/test_notes_export).
        names = [t.name for t in listing.tools]
        assert names == (
            ["notes_delete", "notes_export"] if target.lab is None else ["notes_delete"]
        )
        tool = listing.tools[0]
        assert tool.name == "notes_delete"
        assert set(tool.input_schema["required"]) == {"workspaceUri", "title"}
        assert tool.annotations is not None and tool.annotations.destructive_hint is True
        assert listing.ttl_ms is not None and listing.cache_scope == "public"

    run(test)


def test_notes_delete_accept_deletes_the_chosen_note(target: Target) -> None:
    async def test() -> None:
        elicitor = Elicitor(["accept"])
        async with target.connect(elicitor) as client:
            result = await client.call_tool("notes_delete", dict(TPS))
            assert result.is_error is not True
            assert result.structured_content == {
                "deleted": True,
                "status": "deleted",
                "noteId": "note-14",
            }
            assert elicitor.offers == [["note-3", "note-7", "note-14"]]
            gone = await client.call_tool("notes_delete", {**TPS, "title": "TPS report 2025"})
            assert gone.structured_content == {"deleted": False, "status": "no_match"}
        assert len(elicitor.offers) == 1, "no form for a note that no longer exists"
        if target.lab is not None:
            assert "note-14" not in target.lab.ids()

    run(test)


@pytest.mark.parametrize(("action", "status"), [("decline", "declined"), ("cancel", "cancelled")])
def test_notes_delete_decline_or_cancel_keeps_the_note(
    target: Target, action: str, status: str
) -> None:
    async def test() -> None:
        elicitor = Elicitor([action, "cancel"])
        async with target.connect(elicitor) as client:
            result = await client.call_tool("notes_delete", dict(TPS))
            assert result.structured_content == {"deleted": False, "status": status}
            assert result.is_error is not True
            # Asking again offers the very same notes: nothing was deleted.
            await client.call_tool("notes_delete", dict(TPS))
        assert elicitor.offers == [["note-3", "note-7", "note-14"]] * 2
        if target.lab is not None:
            assert "note-14" in target.lab.ids()

    run(test)


@pytest.fixture
def http_target(tmp_path: Path) -> Iterator[Target]:
    lab = build_lab()
    with serving(create_app(lab.server, demo_authenticator())) as url:
        yield Target("http", tmp_path / "unused", url=url, lab=lab)


def test_mallory_cannot_use_alices_workspace_through_the_sdk(http_target: Target) -> None:
    async def test() -> None:
        elicitor = Elicitor(["accept"])
        async with http_target.connect(elicitor, token="demo-mallory") as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("notes_delete", dict(TPS))
        assert refused.value.code == -32602
        assert elicitor.offers == []

    run(test)
    assert http_target.lab is not None and "note-14" in http_target.lab.ids()


def test_a_wrong_token_fails_the_sdk_call(http_target: Target) -> None:
    async def test() -> None:
        async with http_target.connect(token="not-a-token") as client:
            with pytest.raises(MCPError) as refused:
                await client.list_tools()
        # The 401 body is not JSON-RPC, so the SDK reports a generic server error.
        assert refused.value.code == -32603

    run(test)


def test_a_client_without_elicitation_gets_the_exact_capability_requirement(
    target: Target,
) -> None:
    async def test() -> None:
        async with target.connect() as client:  # no callback: no elicitation capability
            with pytest.raises(MCPError) as refused:
                await client.call_tool("notes_delete", dict(TPS))
        assert refused.value.code == -32021
        assert refused.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
        if target.lab is not None:
            assert target.lab.nonces.issued == 0

    run(test)


# -- a configured deployment: real files, SQLite replay, the sandbox on -----------------------


@dataclass
class TitleChooser:
    """Answers the form by picking the offered note whose title is `title`."""

    title: str
    offered_titles: list[list[str]] = field(default_factory=list)

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        choices = params.requested_schema["properties"]["note_id"]["oneOf"]
        self.offered_titles.append(sorted(choice["title"] for choice in choices))
        (chosen,) = [c["const"] for c in choices if c["title"] == self.title]
        return types.ElicitResult(action="accept", content={"note_id": chosen, "confirm": True})


def write_filesystem_deployment(tmp_path: Path) -> tuple[Path, Path]:
    """A config with real `.md` notes, a SQLite replay store and the sandbox on; returns the
    config file and the workspace directory."""
    workspace = tmp_path / "notes"
    state = tmp_path / "state"
    workspace.mkdir()
    state.mkdir()
    (workspace / "tps-2024.md").write_text("# TPS report 2024\n\nQ1 figures.\n")
    (workspace / "tps-2025.md").write_text("Intro line\n# TPS report 2025\n")
    (workspace / "TPS report draft.md").write_text("no heading here\n")
    key = tmp_path / "signing.key"
    key.write_bytes(b"k" * 48)
    key.chmod(0o600)
    config = tmp_path / "labkit.toml"
    config.write_text(
        f"""
[server]
signing_key_files = ["signing.key"]
sandbox = "best_effort"

[stores]
notes = "filesystem://{state}/journal.db"
replay = "sqlite://{state}/replay.db"

[[principals]]
name = "alice"
token_sha256 = "{hash_token("alice-file-token")}"
workspaces = ["file://{workspace}"]
stdio = true
"""
    )
    return config, workspace


def assert_only_the_chosen_file_went(chooser: TitleChooser, workspace: Path) -> None:
    assert chooser.offered_titles == [["TPS report 2024", "TPS report 2025", "TPS report draft"]]
    assert sorted(p.name for p in workspace.iterdir()) == ["TPS report draft.md", "tps-2024.md"]


def test_configured_filesystem_deployment_over_stdio_deletes_the_real_file(
    tmp_path: Path,
) -> None:
    config, workspace = write_filesystem_deployment(tmp_path)
    chooser = TitleChooser("TPS report 2025")
    errlog_path = tmp_path / "stderr.txt"

    async def test() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "labkit.cli", "serve", "--config", str(config)]
        )
        with errlog_path.open("w") as errlog:
            async with Client(
                stdio_client(params, errlog=errlog),
                mode=PROTOCOL,
                cache=None,
                elicitation_callback=chooser,
            ) as client:
                arguments = {"workspaceUri": f"file://{workspace}", "title": "tps report"}
                result = await client.call_tool("notes_delete", arguments)
        assert result.structured_content is not None
        assert result.structured_content["status"] == "deleted"

    run(test)
    assert_only_the_chosen_file_went(chooser, workspace)
    err = errlog_path.read_text()
    assert "demo" not in err and "sandbox" in err


def test_configured_filesystem_deployment_over_http_runs_the_call_in_a_worker_thread(
    tmp_path: Path,
) -> None:
    config_path, workspace = write_filesystem_deployment(tmp_path)
    config = load_config(config_path)
    chooser = TitleChooser("TPS report 2025")
    notes, replay = config.open_stores()
    server = create_server(
        keys=config.key_ring(),
        notes=notes,
        replay=replay,
        authorizer=config.authorizer(),
    )
    # In process: the sandbox is `labkit serve`'s business and would confine the test runner.
    app = create_app(server, config.authenticator())
    with ExitStack() as stores, serving(app) as url:
        for store in (notes, replay):
            stores.callback(getattr(store, "close"))  # noqa: B009 (not in the store protocols)
        target = Target("http", tmp_path / "unused", url=url)

        async def test() -> None:
            async with target.connect(chooser, token="alice-file-token") as client:
                arguments = {"workspaceUri": f"file://{workspace}", "title": "tps report"}
                result = await client.call_tool("notes_delete", arguments)
            assert result.structured_content is not None
            assert result.structured_content["status"] == "deleted"

        run(test)
    assert_only_the_chosen_file_went(chooser, workspace)
