"""The `notes_delete` two-round flow on the official MCP Python SDK (`mcp` 2.3.0) low-level
`Server`: the reference point of the benchmark.

Written the way the SDK documents it: handlers passed to `Server(on_list_tools=...,
on_call_tool=...)`, typed pydantic results (`ListToolsResult`, `InputRequiredResult` with an
`ElicitRequest`, `CallToolResult`), `cache_hints` for `tools/list`, and `RequestStateBoundary`
with a `RequestStateSecurity` appended to `server.middleware`, so the SDK seals the plaintext
state the handler returns (AES-256-GCM, bound to method, tool name, argument digest, principal,
audience and expiry) and hands the handler the verified plaintext on the retry. The principal
comes from the SDK's bearer authentication (`AccessToken.client_id`), exactly what the SDK's
default `authenticated_principal` binds the state to.

Same notes, same form (a titled single select of note ids and a `confirm` boolean) and the
same checks as labkit: form capability, arguments, strict workspace URI and allowlist, the
answer validated against the form that was asked, a single-use nonce, and the live note
re-checked before the compare-and-delete. The application collaborators are labkit's own
(memory stores, allowlist, form validation) so the benchmark compares the servers.

Run it under uvicorn for the HTTP bench: `python bench/sdk_notes_server.py --port 8766`; over
stdio (the SDK's `stdio_server` and `Server.run`, as alice): `python bench/sdk_notes_server.py
--stdio`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from common import bench_authorizer, bench_notes, bench_replay
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette

from labkit import forms
from labkit.notes_delete import (
    INPUT_KEY,
    MAX_CANDIDATES,
    MAX_TITLE_CHARS,
    NAME,
    OUTSIDE_ERROR,
    delete_choice_schema,
)
from labkit.scope import (
    Authorizer,
    Path,
    ScopeError,
    authorize,
    contains,
    format_file_uri,
    parse_file_uri,
    strictly_contains,
)
from labkit.server import DEFAULT_LIST_TTL_MS
from labkit.state import CLOCK_SKEW_SECONDS, DEFAULT_TTL_SECONDS
from labkit.stores import (
    Claim,
    Confirmation,
    Deletion,
    Note,
    NoteStore,
    ReplayStore,
    commit_deletion,
)

SERVER_NAME = "sdk-notes"
STATE_ERROR = "Invalid, expired or already used requestState"
TOKENS = {"demo-alice": "alice", "demo-mallory": "mallory"}


def _descriptor() -> dict[str, Any]:
    # The same descriptor labkit serves, taken from labkit so both lists are byte-comparable.
    from labkit.deployment import demo_deployment
    from labkit.state import KeyRing

    deployment = demo_deployment(keys=KeyRing([b"k" * 32]))
    return deployment.server.tools[NAME].descriptor()


DESCRIPTOR = _descriptor()
TOOL = types.Tool.model_validate(DESCRIPTOR)


class DictTokenVerifier:
    """Static bearer tokens, the same demo credentials labkit's HTTP transport accepts."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        principal = self.tokens.get(token)
        if principal is None:
            return None
        return AccessToken(token=token, client_id=principal, scopes=[])


def _has_form_elicitation(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None


def _complete(
    text: str, structured: dict[str, Any], *, is_error: bool = False
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=is_error,
    )


class SdkNotesDelete:
    """The tool's two rounds as SDK handlers."""

    def __init__(
        self,
        *,
        notes: NoteStore,
        replay: ReplayStore,
        authorizer: Authorizer,
        max_candidates: int = MAX_CANDIDATES,
    ) -> None:
        self.notes = notes
        self.replay = replay
        self.authorizer = authorizer
        self.max_candidates = max_candidates

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[TOOL])

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.name != NAME:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        if not _has_form_elicitation(ctx):
            raise MCPError(
                code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="notes_delete needs form elicitation to confirm the deletion",
                data={"requiredCapabilities": {"elicitation": {"form": {}}}},
            )
        workspace, title = self._arguments(params.arguments or {})
        token = get_access_token()
        principal = token.client_id if token is not None else None
        root = authorize(self.authorizer, principal, workspace)
        if principal is None or root is None:
            raise MCPError(code=types.INVALID_PARAMS, message=OUTSIDE_ERROR)
        if params.request_state is None and params.input_responses is None:
            return self._ask(workspace, title)
        return self._retry(params, principal, root, workspace, title)

    def _arguments(self, arguments: dict[str, Any]) -> tuple[Path, str]:
        extra = sorted(set(arguments) - {"workspaceUri", "title"})
        if extra:
            raise MCPError(
                code=types.INVALID_PARAMS, message=f"notes_delete: unexpected argument(s) {extra}"
            )
        uri, title = arguments.get("workspaceUri"), arguments.get("title")
        if not isinstance(uri, str) or not isinstance(title, str):
            raise MCPError(
                code=types.INVALID_PARAMS,
                message="notes_delete needs workspaceUri and title, both strings",
            )
        if not title.strip() or len(title) > MAX_TITLE_CHARS:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"title must be 1 to {MAX_TITLE_CHARS} characters, not blank",
            )
        try:
            return parse_file_uri(uri), title
        except ScopeError as exc:
            message = OUTSIDE_ERROR if exc.kind == "outside" else f"workspaceUri {exc.reason}"
            raise MCPError(code=types.INVALID_PARAMS, message=message) from None

    def _ask(self, workspace: Path, title: str) -> types.CallToolResult | types.InputRequiredResult:
        found = list(self.notes.find(workspace, title, self.max_candidates + 1))
        shown = found[: self.max_candidates]
        ws_uri = format_file_uri(workspace)
        if not shown:
            return _complete(
                f"No note whose title contains {title!r} in the workspace {ws_uri}. "
                "Nothing was deleted.",
                {"deleted": False, "status": "no_match"},
            )
        # Plaintext: RequestStateBoundary seals it on the way out and verifies it on the way in.
        state = json.dumps(
            {
                "ws": ws_uri,
                "cands": [[n.id, n.identity] for n in shown],
                "nonce": os.urandom(16).hex(),
                # How long the nonce must stay in the replay store: as long as the sealed state
                # can verify (the boundary's TTL plus its clock-skew allowance).
                "exp": time.time() + DEFAULT_TTL_SECONDS + CLOCK_SKEW_SECONDS,
            },
            separators=(",", ":"),
        )
        message = (
            f"Choose the note to delete from {ws_uri} and confirm. The deletion cannot be undone."
        )
        if len(found) > len(shown):
            message += (
                f" More than {self.max_candidates} notes match {title!r}; only the first "
                f"{self.max_candidates} are listed. Cancel and use a more precise title if "
                "yours is missing."
            )
        form = types.ElicitRequestFormParams(
            message=message,
            requested_schema=delete_choice_schema([(n.id, n.title) for n in shown]),
        )
        return types.InputRequiredResult(
            input_requests={INPUT_KEY: types.ElicitRequest(params=form)},
            request_state=state,
        )

    def _retry(
        self,
        params: types.CallToolRequestParams,
        principal: str,
        root: Path,
        workspace: Path,
        title: str,
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.request_state is None:
            raise MCPError(code=types.INVALID_PARAMS, message=STATE_ERROR)
        try:
            payload = json.loads(params.request_state)
            if payload["ws"] != format_file_uri(workspace):
                raise ValueError("workspace does not match")
            candidates = {str(c[0]): str(c[1]) for c in payload["cands"]}
            nonce = str(payload["nonce"])
            expires_at = float(payload["exp"])
        except (ValueError, KeyError, TypeError, IndexError):
            raise MCPError(code=types.INVALID_PARAMS, message=STATE_ERROR) from None
        answer = (params.input_responses or {}).get(INPUT_KEY)
        if answer is not None and not isinstance(answer, types.ElicitResult):
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"inputResponses.{INPUT_KEY} must be an elicitation result",
            )
        if answer is None or answer.action == "cancel":
            # As labkit: neither path claims, so a state already used is refused first.
            if self.replay.used(principal, nonce):
                raise MCPError(code=types.INVALID_PARAMS, message=STATE_ERROR)
            if answer is None:
                return self._ask(workspace, title)
            return _complete(
                "Cancelled: nothing was deleted. The same confirmation can still be answered.",
                {"deleted": False, "status": "cancelled"},
            )
        if answer.action == "decline":
            self._consume(principal, nonce, expires_at)
            return _complete(
                "Declined: nothing was deleted.", {"deleted": False, "status": "declined"}
            )
        schema = delete_choice_schema([(note_id, note_id) for note_id in candidates])
        try:
            content = forms.validate_content(schema, answer.content)
        except forms.FormError as exc:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"inputResponses.{INPUT_KEY}.content does not answer the form: {exc}",
            ) from None
        if content["confirm"] is not True:
            self._consume(principal, nonce, expires_at)
            return _complete(
                "Not confirmed: nothing was deleted.", {"deleted": False, "status": "not_confirmed"}
            )
        note_id: str = content["note_id"]

        def recheck(live: Note) -> bool:
            return (
                live.identity == candidates[note_id]
                and strictly_contains(workspace, live.path)
                and contains(root, live.path)
                and root in self.authorizer.roots(principal)
            )

        outcome, note = commit_deletion(
            self.notes,
            self.replay,
            Confirmation(
                principal=principal,
                nonce=nonce,
                expires_at=expires_at,
                note_id=note_id,
                recheck=recheck,
            ),
        )
        ws_uri = format_file_uri(workspace)
        if outcome is Deletion.DELETED:
            assert note is not None
            return _complete(
                f"Deleted {note_id} ({note.title!r}) from {ws_uri}.",
                {"deleted": True, "status": "deleted", "noteId": note_id},
            )
        if outcome is Deletion.STALE:
            return _complete(
                f"{note_id} changed, moved or disappeared since the form was shown; nothing was "
                "deleted. Call notes_delete again to see the current notes.",
                {"deleted": False, "status": "stale", "noteId": note_id},
                is_error=True,
            )
        raise MCPError(code=types.INVALID_PARAMS, message=STATE_ERROR)

    def _consume(self, principal: str, nonce: str, expires_at: float) -> None:
        if self.replay.claim(principal, nonce, expires_at) is not Claim.CLAIMED:
            raise MCPError(code=types.INVALID_PARAMS, message=STATE_ERROR)


def build_server(
    *,
    notes: NoteStore,
    replay: ReplayStore,
    authorizer: Authorizer,
    security: RequestStateSecurity | None = None,
) -> Server[Any]:
    tool = SdkNotesDelete(notes=notes, replay=replay, authorizer=authorizer)
    server: Server[Any] = Server(
        SERVER_NAME,
        version="0.1.0",
        on_list_tools=tool.list_tools,
        on_call_tool=tool.call_tool,
        cache_hints={"tools/list": CacheHint(ttl_ms=DEFAULT_LIST_TTL_MS, scope="public")},
        # Resolves Mcp-Param-* header validation without re-running tools/list per call.
        get_tool_input_schema=lambda name: DESCRIPTOR["inputSchema"] if name == NAME else None,
    )
    security = security or RequestStateSecurity.ephemeral(ttl=DEFAULT_TTL_SECONDS)
    server.middleware.append(RequestStateBoundary(security, default_audience=SERVER_NAME))
    return server


def build_http_app(server: Server[Any]) -> Starlette:
    """Streamable HTTP with bearer authentication, JSON responses (no SSE), no sessions."""
    return server.streamable_http_app(
        json_response=True,
        stateless_http=True,
        token_verifier=DictTokenVerifier(TOKENS),
        auth=AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None),
    )


async def serve_stdio(server: Server[Any]) -> None:
    """The SDK's stdio transport. stdio has no bearer token: the process acts for alice, as
    labkit's stdio transport does, through the same context the SDK's bearer middleware sets."""
    from mcp.server.auth.middleware.auth_context import auth_context_var
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.stdio import stdio_server

    auth_context_var.set(
        AuthenticatedUser(AccessToken(token="stdio", client_id="alice", scopes=[]))
    )
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the SDK notes_delete server over HTTP")
    parser.add_argument("--port", type=int)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--stdio", action="store_true", help="serve stdio as alice instead")
    args = parser.parse_args(argv)
    server = build_server(
        notes=bench_notes(per_thread=True), replay=bench_replay(), authorizer=bench_authorizer()
    )
    if args.stdio:
        anyio.run(serve_stdio, server)
        return
    if args.port is None:
        parser.error("--port is required for HTTP")
    # The uvicorn settings `labkit serve` uses, so the servers differ only in their apps.
    config = uvicorn.Config(
        build_http_app(server),
        host=args.host,
        port=args.port,
        log_config=None,
        access_log=False,
        server_header=False,
        proxy_headers=False,
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
