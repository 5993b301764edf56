"""What every bench module shares: the requests both servers answer, the bench stores, CPU
accounting and table printing.

Both servers get the same application collaborators (labkit's memory note store, replay store,
allowlist and form validation), so the figures compare the MCP servers and their
`requestState` protection, not two note stores.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from labkit import messages
from labkit.deployment import DEMO_ALLOWLIST, DEMO_NOTES
from labkit.scope import AllowlistAuthorizer
from labkit.stores import Note, Ticket
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore

PROTOCOL_VERSION = "2026-07-28"
PRINCIPAL = "alice"
BEARER = "demo-alice"
WORKSPACE = "file:///work/notes"
TOOL = "notes_delete"
INPUT_KEY = "delete_choice"
DEMO_TITLE = "tps"
# HTTP delete cells: each wrk thread owns its own notes ("bench-t<thread>-..."), so concurrent
# flows never race for one note and every accepted retry is a real deletion.
BENCH_NOTES_PER_THREAD = 16
BENCH_THREADS = 4

CLIENT_INFO: dict[str, str] = messages.client_info("labkit-bench", "0")
META: dict[str, Any] = messages.meta(
    messages.form_capabilities(), version=PROTOCOL_VERSION, client_info=CLIENT_INFO
)


# Thin aliases over `labkit.messages`, the one set of builders (the same dicts as ever).


def tools_list(request_id: int) -> dict[str, Any]:
    return messages.request(request_id, "tools/list", client_info=CLIENT_INFO)


def delete_params(title: str = DEMO_TITLE) -> dict[str, Any]:
    params: dict[str, Any] = delete_round1(0, title)["params"]
    return params


def delete_round1(request_id: int, title: str = DEMO_TITLE) -> dict[str, Any]:
    return messages.tools_call(
        request_id,
        TOOL,
        {"workspaceUri": WORKSPACE, "title": title},
        client_info=CLIENT_INFO,
    )


def delete_retry(
    request_id: int, state: str, note_id: str, title: str = DEMO_TITLE
) -> dict[str, Any]:
    answer = messages.accept({"note_id": note_id, "confirm": True})
    return messages.retry(delete_round1(request_id, title), request_id, {INPUT_KEY: answer}, state)


class RefillingNoteStore(MemoryNoteStore):
    """A memory note store where a deleted note comes back at once under a new identity.

    A timed loop can then delete "the same" note forever while every deletion is real: the
    record is removed through the normal compare-and-delete, and the replacement has a fresh
    identity, exactly like a user re-creating the note. Both servers use it, so the refill
    costs them the same.
    """

    def delete(self, note: Note) -> bool:
        deleted = super().delete(note)
        if deleted:
            self._refill(note)
        return deleted

    def delete_for(self, note: Note, ticket: Ticket) -> bool | None:
        # The deletion a confirmed call makes (the two-step protocol's receipt beside it).
        deleted = super().delete_for(note, ticket)
        if deleted:
            self._refill(note)
        return deleted

    def _refill(self, note: Note) -> None:
        # What `add` does, without re-parsing the URI: the refill is not what is measured.
        with self._lock:
            self._put(Note(note.id, note.path, note.title, f"gen-{next(self._generation)}"))


def bench_notes(*, refill: bool = True, per_thread: bool = False) -> MemoryNoteStore:
    """The demo notes; with `per_thread`, also `BENCH_NOTES_PER_THREAD` notes for each HTTP
    load thread."""
    notes: MemoryNoteStore = RefillingNoteStore() if refill else MemoryNoteStore()
    for note_id, uri, title in DEMO_NOTES:
        notes.add(note_id, uri, title)
    for thread in range(BENCH_THREADS if per_thread else 0):
        for k in range(BENCH_NOTES_PER_THREAD):
            notes.add(
                f"bench-{thread}-{k}",
                f"{WORKSPACE}/bench/t{thread}-{k}.md",
                f"bench-t{thread}-note {k:02d}",
            )
    return notes


def bench_replay() -> MemoryReplayStore:
    """A replay store big enough that a bench run never fills alice's share."""
    return MemoryReplayStore(capacity=50_000_000, per_principal=50_000_000)


def bench_authorizer() -> AllowlistAuthorizer:
    return AllowlistAuthorizer(DEMO_ALLOWLIST)


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of one process, from /proc/PID/stat (fields 14 and 15, in clock ticks)."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        text = stat.read().decode()
    # The command name (field 2) may contain spaces: split after its closing parenthesis.
    fields = text[text.rindex(")") + 2 :].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(
            "  ".join(
                str(c).rjust(w) if i else str(c).ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(lines)


def rate(value: float) -> str:
    return f"{value:,.0f}"


def ratio(mine: float, theirs: float) -> str:
    return f"{mine / theirs:.1f}x" if theirs > 0 else "n/a"


def flow_cancel(request_id: int, state: str, title: str = DEMO_TITLE) -> dict[str, Any]:
    """The flow's second round: the retry of `delete_round1` that cancels (deletes nothing)."""
    return messages.retry(
        delete_round1(request_id, title), request_id, {INPUT_KEY: {"action": "cancel"}}, state
    )
