"""The reference walkthrough: the lesson's 11 checkpoints, run against the real core.

Owns: the checkpoint table (number, title, step) and the steps. Each step talks to the core
through the client (`labkit.client.Host`, in process), the one client-side MRTR loop of the
project; the host's observer prints every message compactly, and PASS or FAIL is
computed from what actually came back and what actually happened to the notes.
Must not import the course toolkit or the grader.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from labkit import messages
from labkit.client import Host, McpError, Pending, render_message
from labkit.clock import FakeClock
from labkit.deployment import Deployment, demo_deployment, demo_notes
from labkit.server import Server
from labkit.state import KeyRing
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.wire import PROTOCOL_VERSION

TOOL = "notes_delete"
KEY = "delete_choice"
TPS = {"workspaceUri": "file:///work/notes", "title": "TPS report"}


def accept(note_id: str, confirm: bool = True) -> dict[str, dict[str, Any]]:
    return {KEY: messages.accept({"note_id": note_id, "confirm": confirm})}


@dataclass
class Walkthrough:
    """What the checkpoints share: where to print, the deployment with its clock and keys,
    one request id counter, and the form of checkpoint 3 that checkpoint 4 answers."""

    out: TextIO
    width: int
    deployment: Deployment
    clock: FakeClock
    keys: KeyRing
    ids: Callable[[], int] = field(default_factory=lambda: itertools.count(1).__next__)
    results: list[tuple[int, str, bool]] = field(default_factory=list)
    first: list[Pending] = field(default_factory=list)

    @property
    def notes(self) -> MemoryNoteStore:
        return self.deployment.notes

    def host(
        self,
        server: Server | None = None,
        *,
        capabilities: Mapping[str, Any] | None = None,
        protocol_version: str = PROTOCOL_VERSION,
        ids: Callable[[], int] | None = None,
        quiet: bool = False,
    ) -> Host:
        """A host on the demo server (or `server`) as alice, printing what it exchanges."""
        return Host.in_process(
            server or self.deployment.server,
            "alice",
            capabilities=capabilities,
            protocol_version=protocol_version,
            ids=ids or self.ids,
            observer=None if quiet else self.show,
        )

    def show(self, message: Mapping[str, Any], prefix: str = "") -> None:
        print(f"   {prefix}{render_message(message, self.width)}", file=self.out)

    def note(self, text: str) -> None:
        print(f"   .. {text}", file=self.out)

    def expect_refusal(self, action: Callable[[], object]) -> McpError:
        """The error `action` raises; a FAIL (AssertionError) when it does not raise one."""
        try:
            action()
        except McpError as error:
            return error
        raise AssertionError("the server accepted what it should refuse")

    def checkpoint(self, number: int, title: str, step: CheckpointStep) -> None:
        print(f"\n[{number:2d}] {title}", file=self.out)
        try:
            ok = bool(step(self))
        except Exception as exc:  # a crash in a checkpoint is a FAIL, reported, not raised
            self.note(f"raised {exc!r}")
            ok = False
        print(f"     {'PASS' if ok else 'FAIL'}", file=self.out)
        self.results.append((number, title, ok))


def _pending(outcome: Pending | dict[str, Any]) -> Pending:
    assert isinstance(outcome, Pending), outcome
    return outcome


def _complete(outcome: Pending | dict[str, Any]) -> dict[str, Any]:
    assert not isinstance(outcome, Pending), outcome
    return outcome


# -- the checkpoints (docs/LESSON.md section 10), one small step each ------------------------------


def discovery(w: Walkthrough) -> bool:
    r = w.host(ids=lambda: 0).discover()
    return (
        r["resultType"] == "complete"
        and "tools" in r["capabilities"]
        and "roots" not in r["capabilities"]
        and PROTOCOL_VERSION in r["supportedVersions"]
    )


def tools_list(w: Walkthrough) -> bool:
    r = w.host(ids=lambda: 0).request("tools/list")
    tool = next(t for t in r["tools"] if t["name"] == TOOL)
    return (
        r["resultType"] == "complete"
        and r["cacheScope"] == "public"
        and isinstance(r["ttlMs"], int)
        and r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "labkit"
        and set(tool["inputSchema"]["required"]) == {"workspaceUri", "title"}
        and tool["annotations"]["destructiveHint"] is True
    )


def form(w: Walkthrough) -> bool:
    host = w.host()
    pending = _pending(host.begin(TOOL, TPS))
    w.first.append(pending)
    ask = pending.input_requests[KEY]
    offered = [
        c["const"] for c in ask["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    ]
    return (
        host.transcript[0]["id"] == 1
        and ask["method"] == "elicitation/create"
        and ask["params"]["mode"] == "form"
        and offered == ["note-3", "note-7", "note-14"]
        and isinstance(pending.request_state, str)
    )


def delete(w: Walkthrough) -> bool:
    host = w.host()
    r = _complete(host.resume(w.first[0], accept("note-14")))
    w.note(f"notes now: {w.notes.ids()}")
    retry = host.transcript[0]
    return (
        retry["id"] == 2
        and retry["params"]["requestState"] == w.first[0].request_state
        and r["structuredContent"] == {"deleted": True, "status": "deleted", "noteId": "note-14"}
        and w.notes.get("note-14") is None
    )


def containment(w: Walkthrough) -> bool:
    host = w.host()
    prefix = w.expect_refusal(
        lambda: host.begin(TOOL, {"workspaceUri": "file:///work/notes-evil", "title": "TPS"})
    )
    traversal = w.expect_refusal(
        lambda: host.begin(
            TOOL, {"workspaceUri": "file:///work/notes/%2e%2e/private", "title": "outside"}
        )
    )
    return prefix.code == traversal.code == -32602 and prefix.message == traversal.message


def changed_title(w: Walkthrough) -> bool:
    host = w.host()
    pending = _pending(host.begin(TOOL, TPS))
    changed = {"workspaceUri": "file:///work/notes", "title": "shopping"}
    # The attack: the same state and answer, sent with other arguments.
    e = w.expect_refusal(
        lambda: host.resume(dataclasses.replace(pending, arguments=changed), accept("note-7"))
    )
    w.note(f"notes now: {w.notes.ids()}")
    return e.code == -32602 and w.notes.get("note-7") is not None


def decline(w: Walkthrough) -> bool:
    host = w.host()
    pending = _pending(host.begin(TOOL, TPS))
    d = _complete(host.resume(pending, {KEY: messages.decline()}))
    again = w.expect_refusal(lambda: host.resume(pending, accept("note-7")))
    w.note(f"notes now: {w.notes.ids()}")
    return (
        d["structuredContent"]["deleted"] is False
        and "isError" not in d
        and again.code == -32602
        and w.notes.get("note-7") is not None
    )


def two_servers(w: Walkthrough) -> bool:
    shared_notes, shared_replay = demo_notes(), MemoryReplayStore(clock=w.clock)
    a, b = (
        demo_deployment(clock=w.clock, keys=w.keys, notes=shared_notes, replay=shared_replay).server
        for _ in range(2)
    )
    pending = _pending(w.host(a).begin(TOOL, TPS))
    retry_id = w.ids()
    hosts = {
        "A": w.host(a, ids=lambda: retry_id, quiet=True),
        "B": w.host(b, ids=lambda: retry_id, quiet=True),
    }
    outcomes: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def retry(name: str, note_id: str) -> None:
        barrier.wait()
        try:
            outcomes[name] = hosts[name].resume(pending, accept(note_id))
        except McpError as error:
            outcomes[name] = error

    threads = [
        threading.Thread(target=retry, args=("A", "note-3")),
        threading.Thread(target=retry, args=("B", "note-7")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, host in hosts.items():
        for message in host.transcript:
            w.show(message, prefix=name)
    deleted = [n for n in ("note-3", "note-7") if shared_notes.get(n) is None]
    winners = [
        n
        for n, outcome in outcomes.items()
        if isinstance(outcome, dict) and outcome["structuredContent"]["deleted"]
    ]
    w.note(f"deleted: {deleted}; winners: {winners}")
    return len(deleted) == 1 and len(winners) == 1


def capabilities(w: Walkthrough) -> bool:
    declarations: list[dict[str, Any]] = [{"elicitation": {}}, {"elicitation": {"form": {}}}]
    ok = all(
        isinstance(w.host(capabilities=caps).begin(TOOL, TPS), Pending) for caps in declarations
    )
    url_only = w.host(capabilities={"elicitation": {"url": {}}})
    e = w.expect_refusal(lambda: url_only.begin(TOOL, TPS))
    return (
        ok
        and e.code == -32021
        and e.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    )


def version(w: Walkthrough) -> bool:
    e = w.expect_refusal(lambda: w.host(protocol_version="2025-11-25").list_tools())
    expected = {"supported": [PROTOCOL_VERSION], "requested": "2025-11-25"}
    return bool(e.code == -32022 and e.data == expected)


def notification(w: Walkthrough) -> bool:
    host = w.host()
    pending = _pending(host.begin(TOOL, TPS))
    # The accepted retry, minus its id: a notification, which must never delete anything.
    sneaky = messages.tools_call(
        0,
        TOOL,
        pending.arguments,
        input_responses=accept("note-7"),
        request_state=pending.request_state,
    )
    response = host.send(messages.as_notification(sneaky))
    w.note(f"no response; notes now: {w.notes.ids()}")
    return response is None and w.notes.get("note-7") is not None


CheckpointStep = Callable[[Walkthrough], bool]
CHECKPOINTS: list[tuple[int, str, CheckpointStep]] = [
    (1, "Discovery advertises tools and no Roots", discovery),
    (
        2,
        "tools/list returns notes_delete with resultType, server identity, cache hints",
        tools_list,
    ),
    (3, "Request id 1 returns the form in inputRequests.delete_choice", form),
    (4, "Request id 2 carries the signed state and completes the deletion", delete),
    (5, "A prefix path and an encoded traversal both fail containment, alike", containment),
    (6, "A changed title cannot reuse the original confirmation state", changed_title),
    (7, "A decline leaves the note unchanged (and is terminal)", decline),
    (8, "Two servers sharing notes and replay store: one confirmation, one deletion", two_servers),
    (9, "Empty and explicit form declarations work; URL-only gets the exact -32021", capabilities),
    (10, "An unsupported version fails with the exact -32022 data", version),
    (11, "A notification gets no response and deletes nothing", notification),
]


def run_walkthrough(*, width: int = 200, out: TextIO | None = None) -> int:
    stream = out if out is not None else sys.stdout
    clock = FakeClock()
    keys = KeyRing.ephemeral()
    w = Walkthrough(stream, width, demo_deployment(clock=clock, keys=keys), clock, keys)
    print(
        f"labkit walkthrough: MCP {PROTOCOL_VERSION}, principal alice, workspace file:///work/notes",
        file=stream,
    )
    for number, title, step in CHECKPOINTS:
        w.checkpoint(number, title, step)
    passed = sum(ok for _, _, ok in w.results)
    print(f"\n{passed}/{len(w.results)} checkpoints passed", file=stream)
    return 0 if passed == len(w.results) else 1
