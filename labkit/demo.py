"""The reference walkthrough: the lesson's 11 checkpoints, run against the real core.

Each checkpoint sends real JSON-RPC objects to `Server.handle`, prints them compactly and
computes PASS or FAIL from what actually came back and what actually happened to the notes.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from labkit import messages
from labkit.clock import FakeClock
from labkit.deployment import Deployment, demo_deployment, demo_notes
from labkit.server import RequestContext, Server
from labkit.state import KeyRing
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.wire import PROTOCOL_VERSION

TPS = {"workspaceUri": "file:///work/notes", "title": "TPS report"}
CLIENT_INFO = messages.client_info("labkit-demo", "1")


def request(request_id: int, method: str, *, version: str = PROTOCOL_VERSION) -> dict[str, Any]:
    return messages.request(request_id, method, version=version, client_info=CLIENT_INFO)


def tools_call(
    request_id: int,
    arguments: dict[str, Any],
    *,
    capabilities: dict[str, Any] | None = None,
    state: str | None = None,
    answer: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return messages.tools_call(
        request_id,
        "notes_delete",
        arguments,
        capabilities=capabilities,
        client_info=CLIENT_INFO,
        input_responses=None if answer is None else {"delete_choice": answer},
        request_state=state,
    )


def accept(note_id: str, confirm: bool = True) -> dict[str, Any]:
    return messages.accept({"note_id": note_id, "confirm": confirm})


@dataclass
class Walkthrough:
    """What the checkpoints share: where to print, the deployment and its clock and keys, and
    the form of checkpoint 3 that checkpoint 4 answers."""

    out: TextIO
    width: int
    deployment: Deployment
    clock: FakeClock
    keys: KeyRing
    results: list[tuple[int, str, bool]] = field(default_factory=list)
    first: dict[str, Any] = field(default_factory=dict)

    @property
    def notes(self) -> MemoryNoteStore:
        return self.deployment.notes

    def send(
        self, message: dict[str, Any], principal: str = "alice", server: Server | None = None
    ) -> dict[str, Any] | None:
        self._show("->", message)
        response = (server or self.deployment.server).handle(message, RequestContext(principal))
        self._show("<-", response)
        return response

    def _show(self, arrow: str, obj: Any) -> None:
        text = json.dumps(_abbreviate(obj), separators=(",", ":"))
        if len(text) > self.width:
            text = text[: self.width - 3] + "..."
        print(f"   {arrow} {text}", file=self.out)

    def note(self, text: str) -> None:
        print(f"   .. {text}", file=self.out)

    def checkpoint(self, number: int, title: str, step: Callable[[Walkthrough], bool]) -> None:
        print(f"\n[{number:2d}] {title}", file=self.out)
        try:
            ok = bool(step(self))
        except Exception as exc:  # a crash in a checkpoint is a FAIL, reported, not raised
            self.note(f"raised {exc!r}")
            ok = False
        print(f"     {'PASS' if ok else 'FAIL'}", file=self.out)
        self.results.append((number, title, ok))


def _abbreviate(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _ELIDE.get(k, _abbreviate)(v) for k, v in obj.items() if k != "jsonrpc"}
    if isinstance(obj, list):
        return [_abbreviate(v) for v in obj]
    return obj


def _short_state(value: Any) -> Any:
    return value[:18] + "..." if isinstance(value, str) and len(value) > 24 else value


# Printed compactly: the state is long and `_meta` is the same on every message.
_ELIDE: dict[str, Callable[[Any], Any]] = {"requestState": _short_state, "_meta": lambda v: "{...}"}


def _result(response: dict[str, Any] | None) -> dict[str, Any]:
    assert response is not None and "result" in response, response
    result: dict[str, Any] = response["result"]
    return result


def _error(response: dict[str, Any] | None) -> dict[str, Any]:
    assert response is not None and "error" in response, response
    error: dict[str, Any] = response["error"]
    return error


# -- the checkpoints (LESSON.md section 10), one small step each ------------------------------


def discovery(w: Walkthrough) -> bool:
    r = _result(w.send(request(0, "server/discover")))
    return (
        r["resultType"] == "complete"
        and "tools" in r["capabilities"]
        and "roots" not in r["capabilities"]
        and PROTOCOL_VERSION in r["supportedVersions"]
    )


def tools_list(w: Walkthrough) -> bool:
    r = _result(w.send(request(0, "tools/list")))
    tool = next(t for t in r["tools"] if t["name"] == "notes_delete")
    return (
        r["resultType"] == "complete"
        and r["cacheScope"] == "public"
        and isinstance(r["ttlMs"], int)
        and r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "labkit"
        and set(tool["inputSchema"]["required"]) == {"workspaceUri", "title"}
        and tool["annotations"]["destructiveHint"] is True
    )


def form(w: Walkthrough) -> bool:
    r = _result(w.send(tools_call(1, TPS)))
    w.first.update(r)
    ask = r["inputRequests"]["delete_choice"]
    offered = [
        c["const"] for c in ask["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    ]
    return (
        r["resultType"] == "input_required"
        and ask["method"] == "elicitation/create"
        and ask["params"]["mode"] == "form"
        and offered == ["note-3", "note-7", "note-14"]
        and isinstance(r.get("requestState"), str)
    )


def delete(w: Walkthrough) -> bool:
    r = _result(w.send(tools_call(2, TPS, state=w.first["requestState"], answer=accept("note-14"))))
    w.note(f"notes now: {w.notes.ids()}")
    return r["structuredContent"] == {
        "deleted": True,
        "status": "deleted",
        "noteId": "note-14",
    } and (w.notes.get("note-14") is None)


def containment(w: Walkthrough) -> bool:
    prefix = _error(
        w.send(tools_call(3, {"workspaceUri": "file:///work/notes-evil", "title": "TPS"}))
    )
    traversal = _error(
        w.send(
            tools_call(4, {"workspaceUri": "file:///work/notes/%2e%2e/private", "title": "outside"})
        )
    )
    return bool(
        prefix["code"] == traversal["code"] == -32602 and prefix["message"] == traversal["message"]
    )


def changed_title(w: Walkthrough) -> bool:
    r = _result(w.send(tools_call(5, TPS)))
    changed = {"workspaceUri": "file:///work/notes", "title": "shopping"}
    e = _error(w.send(tools_call(6, changed, state=r["requestState"], answer=accept("note-7"))))
    w.note(f"notes now: {w.notes.ids()}")
    return e["code"] == -32602 and w.notes.get("note-7") is not None


def decline(w: Walkthrough) -> bool:
    r = _result(w.send(tools_call(7, TPS)))
    d = _result(w.send(tools_call(8, TPS, state=r["requestState"], answer=messages.decline())))
    again = _error(w.send(tools_call(9, TPS, state=r["requestState"], answer=accept("note-7"))))
    w.note(f"notes now: {w.notes.ids()}")
    return (
        d["structuredContent"]["deleted"] is False
        and "isError" not in d
        and again["code"] == -32602
        and w.notes.get("note-7") is not None
    )


def two_servers(w: Walkthrough) -> bool:
    shared_notes, shared_replay = demo_notes(), MemoryReplayStore(clock=w.clock)
    a, b = (
        demo_deployment(clock=w.clock, keys=w.keys, notes=shared_notes, replay=shared_replay).server
        for _ in range(2)
    )
    state = _result(w.send(tools_call(10, TPS), server=a))["requestState"]
    responses: dict[str, dict[str, Any] | None] = {}
    barrier = threading.Barrier(2)

    def retry(name: str, server: Server, note_id: str) -> None:
        barrier.wait()
        responses[name] = server.handle(
            tools_call(11, TPS, state=state, answer=accept(note_id)), RequestContext("alice")
        )

    threads = [
        threading.Thread(target=retry, args=("A", a, "note-3")),
        threading.Thread(target=retry, args=("B", b, "note-7")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("A", "B"):
        w._show(f"{name}<", responses[name])
    deleted = [n for n in ("note-3", "note-7") if shared_notes.get(n) is None]
    winners = [
        n
        for n, r in responses.items()
        if r and r.get("result", {}).get("structuredContent", {}).get("deleted")
    ]
    w.note(f"deleted: {deleted}; winners: {winners}")
    return len(deleted) == 1 and len(winners) == 1


def capabilities(w: Walkthrough) -> bool:
    ok = True
    declarations: list[dict[str, Any]] = [{"elicitation": {}}, {"elicitation": {"form": {}}}]
    for caps in declarations:
        r = _result(w.send(tools_call(12, TPS, capabilities=caps)))
        ok = ok and r["resultType"] == "input_required"
    e = _error(w.send(tools_call(13, TPS, capabilities={"elicitation": {"url": {}}})))
    return (
        ok
        and e["code"] == -32021
        and e["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    )


def version(w: Walkthrough) -> bool:
    e = _error(w.send(request(14, "tools/list", version="2025-11-25")))
    expected = {"supported": [PROTOCOL_VERSION], "requested": "2025-11-25"}
    return bool(e["code"] == -32022 and e["data"] == expected)


def notification(w: Walkthrough) -> bool:
    r = _result(w.send(tools_call(15, TPS)))
    sneaky = tools_call(0, TPS, state=r["requestState"], answer=accept("note-7"))
    response = w.send(messages.as_notification(sneaky))
    w.note(f"notes now: {w.notes.ids()}")
    return response is None and w.notes.get("note-7") is not None


Step = Callable[[Walkthrough], bool]
CHECKPOINTS: list[tuple[int, str, Step]] = [
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
