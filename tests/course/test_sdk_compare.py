"""The SDK version of notes_delete and the comparison notebook 08 prints."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from labkit import forms
from labkit.course import sdk_compare
from labkit.course.lessons.sdk_compare import (
    CASES,
    KINDS,
    TPS,
    Connection,
    Row,
    Scripted,
    build_sdk_server,
    choice_model,
    code_lines,
    compare,
    make_lab,
    question_key,
    render_table,
    sizes,
    time_round_trips,
)
from labkit.deployment import DEMO_ALLOWLIST, demo_notes
from labkit.scope import AllowlistAuthorizer

CANDIDATES = [("note-3", "TPS report 2023"), ("note-14", "TPS report 2025")]


def test_the_choice_form_is_flat_titled_and_needs_both_answers() -> None:
    schema = sdk_compare.render_elicitation_schema(choice_model(CANDIDATES))
    forms.check_schema(schema)
    note = schema["properties"]["note_id"]
    assert note["oneOf"] == [{"const": i, "title": t} for i, t in CANDIDATES]
    assert "enum" not in note, "titles, not bare ids"
    assert schema["properties"]["confirm"]["default"] is False
    assert sorted(schema["required"]) == ["confirm", "note_id"]


def test_the_choice_model_refuses_a_note_that_was_not_offered() -> None:
    model = choice_model(CANDIDATES)
    assert model.model_validate({"note_id": "note-14", "confirm": True}).model_dump() == {
        "note_id": "note-14",
        "confirm": True,
    }
    with pytest.raises(ValueError):
        model.model_validate({"note_id": "note-7", "confirm": True})


async def _call(principal: str, workspace: str, actions: list[str]) -> tuple[str, list[str]]:
    notes = demo_notes()
    server = build_sdk_server(notes, AllowlistAuthorizer(DEMO_ALLOWLIST), principal)
    async with Client(
        server, mode="2026-07-28", elicitation_callback=Scripted(actions), cache=None
    ) as client:
        try:
            result = await client.call_tool("notes_delete", {**TPS, "workspaceUri": workspace})
        except sdk_compare.MCPError as exc:
            return f"error {exc.code}", notes.ids()
    assert result.structured_content is not None
    return str(result.structured_content["status"]), notes.ids()


@pytest.mark.parametrize(
    ("principal", "workspace", "actions", "status", "gone"),
    [
        ("alice", "file:///work/notes", ["accept"], "deleted", "note-14"),
        ("alice", "file:///work/notes", ["decline"], "declined", None),
        ("alice", "file:///work/notes", ["cancel"], "cancelled", None),
        ("alice", "file:///work/notes/", ["accept"], "deleted", "note-14"),
        ("mallory", "file:///work/notes", ["accept"], "error -32602", None),
        ("alice", "file:///work/notes-evil", ["accept"], "error -32602", None),
        ("alice", "file:///work/notes/%2e%2e/private", ["accept"], "error -32602", None),
    ],
)
def test_the_sdk_tool_in_process(
    principal: str, workspace: str, actions: list[str], status: str, gone: str | None
) -> None:
    answer, left = anyio.run(_call, principal, workspace, actions)
    assert answer == status
    everything = sorted(["note-3", "note-7", "note-14", "note-99", "note-100"])
    assert left == sorted(n for n in everything if n != gone)


def test_the_sdk_tool_re_checks_the_live_note_before_deleting() -> None:
    notes = demo_notes()
    server = build_sdk_server(notes, AllowlistAuthorizer(DEMO_ALLOWLIST), "alice")

    async def move_then_accept(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        notes.move("note-14", "file:///work/private/moved.md")  # out of the workspace meanwhile
        return types.ElicitResult(action="accept", content={"note_id": "note-14", "confirm": True})

    async def run() -> object:
        async with Client(
            server, mode="2026-07-28", elicitation_callback=move_then_accept, cache=None
        ) as client:
            result = await client.call_tool("notes_delete", dict(TPS))
            return result.structured_content

    # The moved note is no longer a candidate: the question changed, so it is asked again
    # until the round cap, or (answer outside the offered ids) refused; never deleted.
    try:
        outcome = anyio.run(run)
    except sdk_compare.MCPError:
        outcome = None
    assert outcome is None or outcome["deleted"] is False
    assert "note-14" in notes.ids()


def test_connections_end_their_server_thread() -> None:
    for kind in KINDS:
        connection = Connection(make_lab(kind))
        with connection:
            pass
        assert not connection._thread.is_alive(), kind


def test_the_comparison_table() -> None:
    rows = {row.case: row for row in compare()}
    assert [case.name for case in CASES] == list(rows)
    for same in (
        "accept (SDK client, 2026-07-28)",
        "accept (SDK client, 2025-11-25 live)",
    ):
        assert rows[same].labkit == rows[same].sdk == "deleted note-14"
    assert rows["decline"].labkit == rows["decline"].sdk == "declined (kept)"
    assert rows["cancel"].labkit == rows["cancel"].sdk == "cancelled (kept)"
    # Decline is terminal in labkit (the nonce is consumed); the SDK keeps no nonce.
    assert rows["accept after decline, same state"].labkit == "error -32602 (kept)"
    assert rows["accept after decline, same state"].sdk == "deleted note-14"
    for replay in ("replay the accepted retry", "replay the state for note-7"):
        assert rows[replay].labkit == "error -32602 (kept)"
        assert rows[replay].sdk == "asked again (kept)"
    for both in ("no elicitation capability", "URL-only elicitation capability"):
        assert rows[both].labkit == rows[both].sdk == "error -32021 (kept)"
    assert rows["accepted retry sent without id"].sdk == "no response (kept)"
    assert rows["retry on 2nd instance, own key"].sdk == "error -32602 (kept)"
    assert rows["retry on 2nd instance, shared keys"].sdk == "deleted note-14"
    # The lesson's checkpoint 8: one confirmation, two instances, two notes, at the same instant.
    assert rows["one state, 2 instances, 2 notes at once"].labkit == "1 of 2 deleted"
    assert rows["one state, 2 instances, 2 notes at once"].sdk == "2 of 2 deleted"
    assert rows["note ids in requestState"].labkit == "readable (kept)"
    assert rows["note ids in requestState"].sdk == "opaque (kept)"


def test_render_table_marks_the_differences() -> None:
    text = render_table([Row("same", "a", "a"), Row("differs", "a", "b")])
    lines = text.splitlines()
    assert lines[0].startswith("  case")
    assert lines[2].startswith("  same")
    assert lines[3].startswith("* differs")


def test_each_server_names_its_question() -> None:
    assert question_key("labkit") == "delete_choice"
    assert question_key("sdk").endswith("build_sdk_server.<locals>.choose_note")


def test_code_lines_skip_docstrings_comments_and_blanks() -> None:
    source = 'def f():\n    """Doc\n    more."""\n\n    # why\n    return 1\n'
    assert code_lines(source) == 2


def test_sizes_count_both_tools() -> None:
    tool, machinery = sizes()
    assert 0 < tool.sdk < tool.labkit
    assert machinery.labkit > 0 and machinery.sdk > 0


def test_timing_measures_both_servers_on_both_paths() -> None:
    timings = time_round_trips(seconds=0.2, batch=2)
    assert {(t.path, t.kind) for t in timings} == {
        ("SDK client over pipes", "labkit"),
        ("SDK client over pipes", "sdk"),
        ("each library in process", "labkit"),
        ("each library in process", "sdk"),
    }
    assert all(t.round_trips >= 2 and t.ms_per_round_trip > 0 for t in timings)
