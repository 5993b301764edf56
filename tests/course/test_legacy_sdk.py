"""`labkit.course.lessons.legacy_sdk`: the official SDK client in legacy mode against labkit's stdio
server, in a thread as notebook 07 drives it and as the `labkit serve` process, reported as
plain values."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from labkit.course.lessons.legacy_sdk import CallOutcome, LegacyTranscript, run_legacy_session
from labkit.deployment import demo_deployment
from labkit.state import KeyRing

TPS = {"workspaceUri": "file:///work/notes", "title": "TPS report"}
OUTSIDE = {"workspaceUri": "file:///work/private", "title": "outside"}
ROOTS = ["file:///work/notes", "file:///work/private"]
SERVE = [sys.executable, "-m", "labkit.cli", "serve"]


def choose(note_id: str) -> Any:
    def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"note_id": note_id, "confirm": True}}

    return answer


@pytest.mark.parametrize("command", [None, SERVE], ids=["in-thread", "labkit-serve"])
def test_accept_deletes_and_an_outside_root_stays_refused(command: list[str] | None) -> None:
    run = run_legacy_session(
        [
            ("notes_delete", TPS),
            ("notes_delete", {**TPS, "title": "TPS report 2025"}),
            ("notes_delete", OUTSIDE),
        ],
        choose("note-14"),
        roots=ROOTS,
        command=command,
    )
    assert isinstance(run, LegacyTranscript)
    assert run.protocol_version == "2025-11-25"
    assert run.server_name == "labkit"
    assert run.tools == ("notes_delete", "notes_export")
    (received,) = run.elicitations
    assert received["mode"] == "form"
    choices = received["requestedSchema"]["properties"]["note_id"]["oneOf"]
    assert [c["const"] for c in choices] == ["note-3", "note-7", "note-14"]
    assert "elicitationId" not in received, "form mode carries no elicitationId"
    assert run.answers == (
        {"action": "accept", "content": {"note_id": "note-14", "confirm": True}},
    )
    deleted, again, outside = run.outcomes
    assert deleted == CallOutcome(
        "notes_delete",
        TPS,
        structured={"deleted": True, "status": "deleted", "noteId": "note-14"},
        text="Deleted note-14 ('TPS report 2025') from file:///work/notes.",
    )
    assert again.structured == {"deleted": False, "status": "no_match"}
    assert outside.was_refused and outside.error_code == -32602
    assert outside.structured is None
    assert "not a workspace this principal may use" in outside.error_message
    assert run.roots_asked == 0, "notes_delete decides from the allowlist, never from roots"
    if command is None:
        assert run.notes_left == ("note-100", "note-3", "note-7", "note-99")
        assert run.server_stderr == ""
    else:
        assert run.notes_left is None, "a process's notes are out of reach"
        assert "serving MCP over stdio as principal 'alice'" in run.server_stderr
        assert "Traceback" not in run.server_stderr
    # Plain values a notebook can print and compare: they survive a JSON round trip.
    assert json.loads(json.dumps(run.elicitations)) == list(run.elicitations)


def test_decline_keeps_the_note_and_a_wrong_answer_is_an_error_outcome() -> None:
    def decline(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "decline"}

    deployment = demo_deployment(keys=KeyRing([bytes(range(32))]))
    declined = run_legacy_session([("notes_delete", TPS)], decline, deployment=deployment)
    assert declined.outcomes[0].structured == {"deleted": False, "status": "declined"}
    assert not declined.outcomes[0].was_refused
    assert "note-14" in deployment.notes.ids()

    # A note the form never offered: the server answers -32602 and the session goes on.
    wrong = run_legacy_session([("notes_delete", TPS), ("notes_delete", TPS)], choose("note-99"))
    first, second = wrong.outcomes
    assert first.error_code == second.error_code == -32602
    assert "not one of the offered choices" in first.error_message
    assert len(wrong.elicitations) == 2
