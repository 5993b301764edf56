"""The same tool on the official MCP Python SDK (`mcp` 2.3.0) beside labkit's, measured.

Owns: `build_sdk_server` (`notes_delete` written the idiomatic `MCPServer` way: a `Resolve`
dependency that returns `Elicit(...)`, the SDK's sealed `requestState`, authorization and
containment through `labkit.scope`), `Connection` (either server serving newline-delimited
JSON-RPC on a pair of OS pipes in a background thread, so both are driven over the same
framing), the lesson's cases run on both (`compare`, `render_table`), the timing of full
delete round trips (`time_round_trips`) and the size of each tool (`code_lines`).

What mcp 2.3.0 offers server-side (read in its installed source): `MCPServer` (the former
FastMCP) serves both eras on one connection. At 2026-07-28 a `Resolve(...)` dependency that
returns `Elicit(message, Model)` becomes an `input_required` result, and
`RequestStateBoundary` seals `requestState` (AES-256-GCM, bound to method, tool name, an
arguments digest, the principal and a TTL); at 2025-11-25 the same resolver sends a live
`elicitation/create` (`ctx.elicit`). It keeps no nonce: a sealed state stays valid until it
expires. Notebooks reach the SDK only through this module. Must not import a widget toolkit.
"""

# No `from __future__ import annotations`: the SDK reads the tool's signature at registration,
# and a string annotation naming the resolver (a closure) could not be evaluated there.
import ast
import base64
import binascii
import concurrent.futures
import contextlib
import importlib
import inspect
import io
import json
import logging
import os
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, BinaryIO, Final, Literal, TypeVar, cast

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import (
    AcceptedElicitation,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    MCPServer,
    RequestStateSecurity,
    Resolve,
)
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field, create_model

from labkit import forms, messages
from labkit.client import Host, McpError, Pending
from labkit.deployment import DEMO_ALLOWLIST, DEMO_NOTES, create_server, demo_notes
from labkit.scope import (
    AllowlistAuthorizer,
    Authorizer,
    ScopeError,
    authorize,
    format_file_uri,
    parse_file_uri,
    strictly_contains,
)
from labkit.scope import (
    Path as ScopePath,
)
from labkit.server import Server
from labkit.state import KeyRing
from labkit.stores import Note
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.transports.eras import ERAS
from labkit.transports.stdio import StdioTransport

# The SDK client imports jsonschema on its first tool call (to check structured output), and
# jsonschema compiles URI grammars at import: about 2 s here. Paying it on import of this module
# keeps it out of the first measured or tabulated call.
importlib.import_module("jsonschema")

TPS: Final = {"workspaceUri": "file:///work/notes", "title": "TPS report"}
PRINCIPAL: Final = "alice"
SDK_NAME: Final = "notes-sdk"
MAX_CANDIDATES: Final = 10
OUTSIDE: Final = "workspaceUri is not a workspace this principal may use"
KINDS: Final = ("labkit", "sdk")
Kind = Literal["labkit", "sdk"]


# -- the SDK version of notes_delete ------------------------------------------------------------


def choice_model(candidates: Sequence[tuple[str, str]]) -> type[BaseModel]:
    """The flat form as a pydantic model: a titled single select of the candidates (ids in
    `const`, titles shown) and a confirmation that defaults to false; both required."""
    ids = tuple(note_id for note_id, _ in candidates)
    one_of = [{"const": note_id, "title": title} for note_id, title in candidates]

    def titled(schema: dict[str, Any]) -> None:
        schema.pop("enum", None)  # the titled form (`oneOf`) replaces the bare enum
        schema["oneOf"] = one_of

    model: type[BaseModel] = create_model(
        "DeleteChoice",
        note_id=(cast(Any, Literal)[ids], Field(title="Note to delete", json_schema_extra=titled)),
        confirm=(
            bool,
            Field(title="Yes, delete this note permanently", json_schema_extra={"default": False}),
        ),
    )
    return model


def build_sdk_server(
    notes: MemoryNoteStore,
    authorizer: Authorizer,
    principal: str | None,
    *,
    keys: Sequence[bytes] | None = None,
) -> MCPServer:
    """`notes_delete` on `MCPServer`, for one principal (the configured stdio principal; over
    HTTP it would come from the SDK's `get_access_token()`).

    `keys` is the request-state key ring (`keys[0]` seals, every key unseals); None gives a
    fresh process-local key, the SDK's default, so another instance cannot read the state.
    """
    security = RequestStateSecurity(
        keys=list(keys) if keys is not None else [os.urandom(32)],
        bind_principal=lambda ctx: principal,
        ttl=300.0,
    )
    # `MCPServer` calls `logging.basicConfig` at construction; WARNING keeps it quiet.
    mcp = MCPServer(SDK_NAME, request_state_security=security, log_level="WARNING")

    def choose_note(workspaceUri: str, title: str) -> BaseModel | None | Elicit[BaseModel]:
        # Runs on every round: authorization and the live candidate list are computed afresh,
        # and the SDK accepts an answer only to the question rendered now (a digest in the
        # sealed state), so a changed candidate list re-asks.
        try:
            workspace = parse_file_uri(workspaceUri)
        except ScopeError:
            raise MCPError(types.INVALID_PARAMS, OUTSIDE) from None
        if authorize(authorizer, principal, workspace) is None:
            raise MCPError(types.INVALID_PARAMS, OUTSIDE)
        found = notes.find(workspace, title, MAX_CANDIDATES)
        if not found:
            return None
        return Elicit(
            f"Choose the note to delete from {format_file_uri(workspace)} and confirm. "
            "The deletion cannot be undone.",
            choice_model([(note.id, note.title) for note in found]),
        )

    @mcp.tool(annotations=types.ToolAnnotations(destructive_hint=True))
    async def notes_delete(
        workspaceUri: str,
        title: str,
        choice: Annotated[ElicitationResult[BaseModel], Resolve(choose_note)],
    ) -> dict[str, Any]:
        """Delete one note whose title matches, after the user picks it and confirms."""
        if isinstance(choice, DeclinedElicitation):
            return {"deleted": False, "status": "declined"}
        if not isinstance(choice, AcceptedElicitation):
            return {"deleted": False, "status": "cancelled"}
        if choice.data is None:
            return {"deleted": False, "status": "no_match"}
        answer = choice.data.model_dump()
        if not answer["confirm"]:
            return {"deleted": False, "status": "not_confirmed"}
        # Final revalidation on the live record, just before the mutation.
        workspace = parse_file_uri(workspaceUri)
        root = authorize(authorizer, principal, workspace)
        note = notes.get(answer["note_id"])
        if root is None or note is None or not strictly_contains(workspace, note.path):
            return {"deleted": False, "status": "stale"}
        if not notes.delete(note):
            return {"deleted": False, "status": "stale"}
        return {"deleted": True, "status": "deleted", "noteId": note.id}

    return mcp


# -- both servers on a pair of pipes ------------------------------------------------------------


@dataclass
class Lab:
    """One side of the comparison: its notes, and how to serve one more connection to the
    same server object (`serve(stdin, stdout)` runs until stdin ends)."""

    kind: Kind
    notes: MemoryNoteStore
    serve: Callable[[BinaryIO, BinaryIO], None]


def labkit_lab(
    notes: MemoryNoteStore | None = None,
    *,
    keys: KeyRing | None = None,
    replay: MemoryReplayStore | None = None,
) -> Lab:
    """labkit's deployment (alice's stdio connection, the 2025-11-25 adapter switched on)."""
    notes = notes if notes is not None else demo_notes()
    server: Server = create_server(
        keys=keys if keys is not None else KeyRing([os.urandom(32)]),
        notes=notes,
        replay=replay if replay is not None else MemoryReplayStore(),
        authorizer=AllowlistAuthorizer(DEMO_ALLOWLIST),
    )

    def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
        StdioTransport(server, PRINCIPAL, eras=ERAS).serve(stdin, stdout)

    return Lab("labkit", notes, serve)


def sdk_lab(notes: MemoryNoteStore | None = None, *, keys: Sequence[bytes] | None = None) -> Lab:
    """The SDK deployment of the same tool, same notes, same allowlist, same principal."""
    notes = notes if notes is not None else demo_notes()
    mcp = build_sdk_server(notes, AllowlistAuthorizer(DEMO_ALLOWLIST), PRINCIPAL, keys=keys)
    # `MCPServer.run_stdio_async` serves the process's own stdio; a connection on other pipes
    # runs the underlying server the same way (the SDK's in-memory transport reaches it so too).
    lowlevel = mcp._lowlevel_server

    async def run(stdin: BinaryIO, stdout: BinaryIO) -> None:
        text_in = io.TextIOWrapper(stdin, encoding="utf-8")
        text_out = io.TextIOWrapper(stdout, encoding="utf-8", write_through=True)
        with text_in, text_out:
            async with stdio_server(
                stdin=anyio.wrap_file(text_in), stdout=anyio.wrap_file(text_out)
            ) as (read, write):
                await lowlevel.run(read, write, lowlevel.create_initialization_options())

    def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
        anyio.run(run, stdin, stdout)

    return Lab("sdk", notes, serve)


def make_lab(kind: Kind, notes: MemoryNoteStore | None = None) -> Lab:
    return labkit_lab(notes) if kind == "labkit" else sdk_lab(notes)


class Connection:
    """One client connection to a lab: two OS pipes and a server thread. Use it as a context
    manager; closing the client's end ends the server thread.

    `exchange` is labkit's host `Channel` (one JSON line out, one line back, nothing for a
    notification); `transport()` is the same pipes as the SDK client's transport."""

    def __init__(self, lab: Lab) -> None:
        to_server_r, self._to_server = os.pipe()
        self._from_server, from_server_w = os.pipe()
        server_in = os.fdopen(to_server_r, "rb")
        server_out = os.fdopen(from_server_w, "wb")

        def run() -> None:
            with server_in, server_out:
                lab.serve(server_in, server_out)

        self._thread = threading.Thread(target=run, name=f"{lab.kind}-connection", daemon=True)
        self._thread.start()
        self._writer = os.fdopen(self._to_server, "wb")
        self._reader = os.fdopen(self._from_server, "rb")

    def write(self, message: dict[str, Any]) -> None:
        self._writer.write(json.dumps(message).encode() + b"\n")
        self._writer.flush()

    def read(self) -> dict[str, Any]:
        line = self._reader.readline()
        if not line:
            raise EOFError("the server closed the connection")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def exchange(self, message: dict[str, Any]) -> dict[str, Any] | None:
        self.write(message)
        return None if "id" not in message else self.read()

    @asynccontextmanager
    async def transport(self) -> AsyncIterator[Any]:
        """The pipes as an SDK client transport (the SDK's own line framing, the same code
        its stdio server reads and writes with). Leaving it ends the connection."""
        text_in = io.TextIOWrapper(self._reader, encoding="utf-8")
        text_out = io.TextIOWrapper(self._writer, encoding="utf-8", write_through=True)
        with text_in:
            async with stdio_server(
                stdin=anyio.wrap_file(text_in), stdout=anyio.wrap_file(text_out)
            ) as streams:
                try:
                    yield streams
                finally:
                    # The SDK reads the pipe in a worker thread that only a server EOF
                    # releases: end the server's input first, so the server closes its side.
                    text_out.close()

    def close(self) -> None:
        if not self._writer.closed:
            self._writer.close()
        self._thread.join(timeout=10)
        if not self._reader.closed:
            self._reader.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


T = TypeVar("T")


def run_async(main: Callable[[], Awaitable[T]]) -> T:
    """`anyio.run(main)` in a thread of its own: a notebook's kernel already runs an event
    loop in the calling thread, and a second one cannot start there."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, main).result()


# -- the lesson's cases, run on both --------------------------------------------------------------

URL_ONLY: Final[dict[str, Any]] = {"elicitation": {"url": {}}}
ACCEPT_14: Final[dict[str, Any]] = {"note_id": "note-14", "confirm": True}


@dataclass
class Scripted:
    """The SDK client's `elicitation_callback`: answers each form with the next action."""

    actions: list[str]
    asked: int = 0

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        action = self.actions[self.asked]
        self.asked += 1
        if action == "accept":
            return types.ElicitResult(action="accept", content=dict(ACCEPT_14))
        return types.ElicitResult(action="decline" if action == "decline" else "cancel")


def _summary(response: dict[str, Any] | None) -> str:
    """A response in a few words: the status of a complete result, "asked again" for
    another `input_required`, the code of an error, "no response" for silence."""
    if response is None:
        return "no response"
    if "error" in response:
        return f"error {response['error']['code']}"
    result = response["result"]
    if messages.is_input_required(result):
        return "asked again"
    status = str(result.get("structuredContent", {}).get("status", "?"))
    return status + (" (isError)" if result.get("isError") else "")


def _sdk_summary(result: types.CallToolResult) -> str:
    status = str((result.structured_content or {}).get("status", "?"))
    return status + (" (isError)" if result.is_error else "")


@dataclass
class CaseOutcome:
    """What one case did on one server: the answer to the step that matters, and the notes it
    deleted (`Lab.notes` before and after)."""

    answer: str
    deleted: list[str]
    summary: str | None = None  # said instead, when which note went is not the point

    def __str__(self) -> str:
        if self.summary is not None:
            return self.summary
        gone = ", ".join(self.deleted)
        if self.answer == "deleted":
            return f"deleted {gone}"
        return f"{self.answer} (deleted {gone})" if gone else f"{self.answer} (kept)"


def _run_sdk_client(lab: Lab, mode: str, actions: list[str] | None) -> str:
    """Call `notes_delete` with the official SDK client over the lab's pipes."""

    async def main() -> str:
        callback = Scripted(actions) if actions is not None else None
        with Connection(lab) as connection:
            async with Client(
                connection.transport(), mode=mode, elicitation_callback=callback, cache=None
            ) as client:
                try:
                    result = await client.call_tool("notes_delete", dict(TPS))
                except MCPError as exc:
                    return f"error {exc.code}"
                return _sdk_summary(result)

    answer: str = run_async(main)
    return answer


def _first_round(host: Host, arguments: dict[str, Any] | None = None) -> Pending:
    pending = host.begin("notes_delete", dict(TPS if arguments is None else arguments))
    if not isinstance(pending, Pending):
        raise AssertionError(f"expected a form, got {pending}")
    return pending


def _answer(pending: Pending, answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    # Each server names its question: labkit "delete_choice", the SDK the resolver's path.
    (key,) = pending.input_requests
    return {key: answer}


def _step(host: Host, pending: Pending, answer: dict[str, Any]) -> str:
    try:
        outcome = host.resume(pending, _answer(pending, answer))
    except McpError as exc:
        return f"error {exc.code}"
    if isinstance(outcome, Pending):
        return "asked again"
    return _summary({"result": outcome})


@dataclass
class Stage:
    """The notes a case watches: what was deleted since the last `mark` (the case's first
    step by default) is the case's effect."""

    notes: MemoryNoteStore
    baseline: list[str] = field(default_factory=list)

    def mark(self) -> None:
        self.baseline = self.notes.ids()

    def judge(self, answer: str) -> CaseOutcome:
        return CaseOutcome(answer, sorted(set(self.baseline) - set(self.notes.ids())))


Play = Callable[[Host, Connection, Stage], str]


def _accept_after_decline(host: Host, connection: Connection, stage: Stage) -> str:
    pending = _first_round(host)
    _step(host, pending, messages.decline())
    return _step(host, pending, messages.accept(ACCEPT_14))


def _replay_accepted(host: Host, connection: Connection, stage: Stage) -> str:
    pending = _first_round(host)
    _step(host, pending, messages.accept(ACCEPT_14))
    stage.mark()
    return _step(host, pending, messages.accept(ACCEPT_14))


def _replay_other_note(host: Host, connection: Connection, stage: Stage) -> str:
    pending = _first_round(host)
    _step(host, pending, messages.accept(ACCEPT_14))
    stage.mark()
    return _step(host, pending, messages.accept({"note_id": "note-7", "confirm": True}))


def _changed_title(host: Host, connection: Connection, stage: Stage) -> str:
    pending = _first_round(host)
    other = {**pending.arguments, "title": "TPS report 2024"}
    moved = Pending(pending.name, other, pending.input_requests, pending.request_state, 1)
    return _step(host, moved, messages.accept({"note_id": "note-7", "confirm": True}))


def _tampered(host: Host, connection: Connection, stage: Stage) -> str:
    pending = _first_round(host)
    state = pending.request_state or ""
    flipped = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
    forged = Pending(pending.name, pending.arguments, pending.input_requests, flipped, 1)
    return _step(host, forged, messages.accept(ACCEPT_14))


def _notification(host: Host, connection: Connection, stage: Stage) -> str:
    pending = _first_round(host)
    retry = messages.tools_call(
        "dropped",
        "notes_delete",
        pending.arguments,
        input_responses=_answer(pending, messages.accept(ACCEPT_14)),
        request_state=pending.request_state,
    )
    connection.write(messages.as_notification(retry))
    # The next line the server writes answers the next request: the notification got none.
    follow_up = connection.exchange(messages.request(99, "tools/list"))
    if follow_up is None or follow_up.get("id") != 99:
        return f"answered: {follow_up}"
    return "no response"


def _outside(uri: str) -> Play:
    def play(host: Host, connection: Connection, stage: Stage) -> str:
        try:
            host.begin("notes_delete", {**TPS, "workspaceUri": uri})
        except McpError as exc:
            return f"error {exc.code}"
        return "asked"

    return play


def _url_only(host: Host, connection: Connection, stage: Stage) -> str:
    try:
        host.begin("notes_delete", dict(TPS))
    except McpError as exc:
        return f"error {exc.code}"
    return "asked"


def _state_reveals_ids(host: Host, connection: Connection, stage: Stage) -> str:
    state = _first_round(host).request_state or ""
    return (
        "readable" if any(_decodes_to(part, "note-14") for part in state.split(".")) else "opaque"
    )


def _decodes_to(part: str, needle: str) -> bool:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        return False
    return needle.encode() in raw


class RacingNotes(MemoryNoteStore):
    """Once `armed`, each `find` returns only when a second one has looked too (or after `wait`
    seconds): two retries checked at the same instant on two instances, made repeatable. A
    server that does not look the candidates up again on the retry never waits."""

    def __init__(self, wait: float = 5.0) -> None:
        super().__init__()
        self.armed = False
        self._barrier = threading.Barrier(2, timeout=wait)

    def find(self, workspace: ScopePath, title: str, limit: int) -> Sequence[Note]:
        found = super().find(workspace, title, limit)
        if self.armed:
            # After the lookup: neither caller goes on to act before both have looked.
            with contextlib.suppress(threading.BrokenBarrierError):
                self._barrier.wait()
        return found


def _race(kind: Kind) -> CaseOutcome:
    """One state, two retries at once on two instances sharing notes, keys (and, for labkit,
    the replay store), choosing two different notes: how many deletions?"""
    notes = RacingNotes()
    for note_id, uri, title in DEMO_NOTES:
        notes.add(note_id, uri, title)
    secret = os.urandom(32)
    if kind == "labkit":
        replay = MemoryReplayStore()
        labs = [labkit_lab(notes, keys=KeyRing([secret]), replay=replay) for _ in range(2)]
    else:
        labs = [sdk_lab(notes, keys=[secret]) for _ in range(2)]
    with Connection(labs[0]) as one, Connection(labs[1]) as two:
        pending = _first_round(Host(one))
        hosts = [Host(one), Host(two)]
        hosts[1].list_tools()  # both connections are up before the two retries go out
        notes.armed = True
        answers: list[str] = []

        def retry(host: Host, note_id: str) -> None:
            answer = messages.accept({"note_id": note_id, "confirm": True})
            answers.append(_step(host, pending, answer))

        threads = [
            threading.Thread(target=retry, args=(host, note_id))
            for host, note_id in zip(hosts, ("note-14", "note-7"), strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    wins = answers.count("deleted")
    gone = 5 - len(notes.ids())
    summary = f"{wins} of 2 deleted" if gone == wins else f"{wins} of 2 deleted, {gone} gone"
    return CaseOutcome("", [], summary=summary)


def _two_instances(kind: Kind, *, shared_keys: bool) -> CaseOutcome:
    """Round one on one server object, the retry on another over the same notes (and, for
    labkit, the same replay store): with its own key, or with one key ring for both."""
    notes = demo_notes()
    secret = os.urandom(32)
    if kind == "labkit":
        replay = MemoryReplayStore()
        first = labkit_lab(notes, keys=KeyRing([secret]), replay=replay)
        second = labkit_lab(
            notes, keys=KeyRing([secret if shared_keys else os.urandom(32)]), replay=replay
        )
    else:
        first = sdk_lab(notes, keys=[secret])
        second = sdk_lab(notes, keys=[secret if shared_keys else os.urandom(32)])
    stage = Stage(notes)
    stage.mark()
    with Connection(first) as one:
        pending = _first_round(Host(one))
    with Connection(second) as two:
        answer = _step(Host(two), pending, messages.accept(ACCEPT_14))
    return stage.judge(answer)


@dataclass(frozen=True)
class Case:
    """One row: what is tried, and how (`run(kind)` returns the outcome on that server)."""

    name: str
    run: Callable[[Kind], CaseOutcome]


def _hosted(play: Play, **options: Any) -> Callable[[Kind], CaseOutcome]:
    """A case played with labkit's `Host` (hand-made 2026-07-28 requests) over the pipes."""

    def run(kind: Kind) -> CaseOutcome:
        lab = make_lab(kind)
        stage = Stage(lab.notes)
        stage.mark()
        with Connection(lab) as connection:
            answer = play(Host(connection, **options), connection, stage)
        return stage.judge(answer)

    return run


def _client(mode: str, actions: list[str] | None) -> Callable[[Kind], CaseOutcome]:
    """A case played with the official SDK client (None: it declares no elicitation)."""

    def run(kind: Kind) -> CaseOutcome:
        lab = make_lab(kind)
        stage = Stage(lab.notes)
        stage.mark()
        return stage.judge(_run_sdk_client(lab, mode, actions))

    return run


def _secret_field(kind: Kind) -> CaseOutcome:
    """Does the library refuse a form field that asks for an API key? (Neither does: keeping
    secrets out of forms is a design rule, the skill's hard reject.)"""
    if kind == "labkit":
        forms.check_schema({"type": "object", "properties": {"api_key": {"type": "string"}}})
    else:
        render_elicitation_schema(create_model("Connect", api_key=(str, ...)))
    return CaseOutcome("accepted", [])


CASES: Final[tuple[Case, ...]] = (
    Case("accept (SDK client, 2026-07-28)", _client("2026-07-28", ["accept"])),
    Case("accept (SDK client, 2025-11-25 live)", _client("legacy", ["accept"])),
    Case("decline", _client("2026-07-28", ["decline"])),
    Case("cancel", _client("2026-07-28", ["cancel"])),
    Case("accept after decline, same state", _hosted(_accept_after_decline)),
    Case("replay the accepted retry", _hosted(_replay_accepted)),
    Case("replay the state for note-7", _hosted(_replay_other_note)),
    Case("old state, changed title", _hosted(_changed_title)),
    Case("tampered requestState", _hosted(_tampered)),
    Case("accepted retry sent without id", _hosted(_notification)),
    Case("no elicitation capability", _client("2026-07-28", None)),
    Case(
        "URL-only elicitation capability",
        _hosted(_url_only, capabilities={"elicitation": {"url": {}}}),
    ),
    Case("look-alike file:///work/notes-evil", _hosted(_outside("file:///work/notes-evil"))),
    Case("retry on 2nd instance, own key", lambda kind: _two_instances(kind, shared_keys=False)),
    Case("retry on 2nd instance, shared keys", lambda kind: _two_instances(kind, shared_keys=True)),
    Case("one state, 2 instances, 2 notes at once", _race),
    Case("note ids in requestState", _hosted(_state_reveals_ids)),
    Case("form field for an API key", _secret_field),
)


@dataclass
class Row:
    case: str
    labkit: str
    sdk: str

    @property
    def same(self) -> bool:
        return self.labkit == self.sdk


def compare(cases: Sequence[Case] = CASES) -> list[Row]:
    """Every case on a fresh labkit server and a fresh SDK server (same notes, same allowlist,
    same principal, both over the same pipes)."""
    with quiet():
        return [Row(case.name, str(case.run("labkit")), str(case.run("sdk"))) for case in cases]


def render_table(rows: Sequence[Row]) -> str:
    """A fixed-width table; `*` marks the rows where the two servers behave differently."""
    header = Row("case", "labkit", "SDK MCPServer")
    widths = [
        max(len(getattr(r, name)) for r in [header, *rows]) for name in ("case", "labkit", "sdk")
    ]
    lines = []
    for row in [header, *rows]:
        mark = " " if row is header or row.same else "*"
        cells = (row.case, row.labkit, row.sdk)
        lines.append(
            mark + " " + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        )
    lines.insert(1, "  " + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


@contextmanager
def quiet() -> Iterator[None]:
    """Silence logging while cases run: refusals are logged by design, from server threads,
    in an order that varies; the table is the output."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


def question_key(kind: Kind) -> str:
    """The key under which each server asks its question in `inputRequests`."""
    with Connection(make_lab(kind)) as connection:
        (key,) = _first_round(Host(connection)).input_requests
    return key


# -- timing ---------------------------------------------------------------------------------------


@dataclass
class Timing:
    """Full delete round trips (call, form, accepted retry, deletion) on one path."""

    path: str
    kind: Kind
    round_trips: int
    seconds: float

    @property
    def ms_per_round_trip(self) -> float:
        return 1000 * self.seconds / self.round_trips

    @property
    def per_second(self) -> float:
        return self.round_trips / self.seconds


def _restore(notes: MemoryNoteStore) -> None:
    note_id, uri, title = next(n for n in DEMO_NOTES if n[0] == "note-14")
    notes.add(note_id, uri, title)


async def _client_batches(lab: Lab, client: Client, batch: int) -> float:
    started = time.perf_counter()
    for _ in range(batch):
        result = await client.call_tool("notes_delete", dict(TPS))
        if not (result.structured_content or {}).get("deleted"):
            raise AssertionError(f"{lab.kind}: the round trip did not delete: {result}")
        _restore(lab.notes)
    return time.perf_counter() - started


def time_round_trips(seconds: float = 2.0, batch: int = 10) -> list[Timing]:
    """ms per full delete round trip, both servers side by side in one run, on two paths:
    the official SDK client over the pipes (the same client and framing for both), and each
    library's own in-process path (labkit's `Host` on `Server.handle`; the SDK `Client` on
    the `MCPServer` object). Batches alternate between the two servers until about `seconds`
    have passed; the first call of each (imports, caches) is not counted."""
    budget = seconds / 2

    async def over_pipes() -> list[Timing]:
        labs = [make_lab(kind) for kind in KINDS]
        totals = {kind: Timing("SDK client over pipes", kind, 0, 0.0) for kind in KINDS}
        async with AsyncExitStack() as stack:
            clients = []
            for lab in labs:
                connection = stack.enter_context(Connection(lab))
                client = await stack.enter_async_context(
                    Client(
                        connection.transport(),
                        mode="2026-07-28",
                        elicitation_callback=Scripted(["accept"] * 1_000_000),
                        cache=None,
                    )
                )
                await _client_batches(lab, client, 1)  # warm-up, not counted
                clients.append(client)
            started = time.perf_counter()
            while time.perf_counter() - started < budget:
                for lab, client in zip(labs, clients, strict=True):
                    totals[lab.kind].seconds += await _client_batches(lab, client, batch)
                    totals[lab.kind].round_trips += batch
        return list(totals.values())

    with quiet():
        timings = run_async(over_pipes)
        timings += _in_process(budget, batch)
    return timings


def _in_process(budget: float, batch: int) -> list[Timing]:
    labkit_notes = demo_notes()
    server = create_server(
        keys=KeyRing([os.urandom(32)]),
        notes=labkit_notes,
        replay=MemoryReplayStore(),
        authorizer=AllowlistAuthorizer(DEMO_ALLOWLIST),
    )
    host = Host.in_process(server, PRINCIPAL)

    def answer(key: str, params: dict[str, Any]) -> dict[str, Any]:
        return messages.accept(ACCEPT_14)

    def labkit_batch(count: int) -> float:
        started = time.perf_counter()
        for _ in range(count):
            result = host.call_tool("notes_delete", TPS, answer)
            if not result["structuredContent"]["deleted"]:
                raise AssertionError(f"labkit: the round trip did not delete: {result}")
            _restore(labkit_notes)
        return time.perf_counter() - started

    sdk_notes = demo_notes()
    mcp = build_sdk_server(sdk_notes, AllowlistAuthorizer(DEMO_ALLOWLIST), PRINCIPAL)
    sdk = Lab("sdk", sdk_notes, lambda stdin, stdout: None)
    labkit_total = Timing("each library in process", "labkit", 0, 0.0)
    sdk_total = Timing("each library in process", "sdk", 0, 0.0)

    async def run() -> None:
        callback = Scripted(["accept"] * 1_000_000)
        async with Client(
            mcp, mode="2026-07-28", elicitation_callback=callback, cache=None
        ) as client:
            labkit_batch(1)
            await _client_batches(sdk, client, 1)
            started = time.perf_counter()
            while time.perf_counter() - started < budget:
                labkit_total.seconds += labkit_batch(batch)
                labkit_total.round_trips += batch
                sdk_total.seconds += await _client_batches(sdk, client, batch)
                sdk_total.round_trips += batch

    run_async(run)
    return [labkit_total, sdk_total]


def render_timings(timings: Sequence[Timing]) -> str:
    lines = [f"{'path':<26} {'server':<7} {'round trips':>11} {'ms each':>8} {'per second':>10}"]
    for t in timings:
        lines.append(
            f"{t.path:<26} {t.kind:<7} {t.round_trips:>11} {t.ms_per_round_trip:>8.2f} "
            f"{t.per_second:>10.0f}"
        )
    return "\n".join(lines)


# -- size -----------------------------------------------------------------------------------------


def code_lines(source: str) -> int:
    """Lines of code: not blank, not only a comment, not part of a docstring."""
    tree = ast.parse(source)
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.update(range(body[0].lineno, (body[0].end_lineno or 0) + 1))
    return sum(
        1
        for number, line in enumerate(source.splitlines(), start=1)
        if line.strip() and not line.strip().startswith("#") and number not in docstrings
    )


def _module_source(name: str) -> str:
    module = importlib.import_module(name)
    return inspect.getsource(module)


@dataclass
class Size:
    what: str
    labkit: int
    sdk: int


def sizes() -> list[Size]:
    """Lines of code of each tool, and of the machinery each stands on (labkit's own signer
    and form checks; the SDK's resolvers, request-state boundary and schema rendering). Both
    use `labkit.scope` for the workspace, which is not counted."""
    sdk_tool = inspect.getsource(choice_model) + inspect.getsource(build_sdk_server)
    labkit_machinery = ("labkit.state", "labkit.forms", "labkit.stores.memory")
    sdk_machinery = (
        "mcp.server.mcpserver.resolve",
        "mcp.server.request_state",
        "mcp.server.elicitation",
    )
    return [
        Size(
            "the tool",
            code_lines(_module_source("labkit.notes_delete")),
            code_lines(textwrap.dedent(sdk_tool)),
        ),
        Size(
            "its state/elicitation machinery",
            sum(code_lines(_module_source(m)) for m in labkit_machinery),
            sum(code_lines(_module_source(m)) for m in sdk_machinery),
        ),
    ]


def render_sizes(rows: Sequence[Size]) -> str:
    lines = [f"{'lines of code':<34} {'labkit':>7} {'SDK':>7}"]
    lines += [f"{r.what:<34} {r.labkit:>7} {r.sdk:>7}" for r in rows]
    return "\n".join(lines)
