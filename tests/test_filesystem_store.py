"""labkit.stores.filesystem: titles, ids, find/get/delete, the intent journal and recovery,
and the notes_delete tool end to end over real files."""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from labkit.deployment import create_server
from labkit.scope import AllowlistAuthorizer, ScopeError
from labkit.scope import Path as ScopePath
from labkit.server import RequestContext
from labkit.state import KeyRing
from labkit.stores import (
    AtomicDeleter,
    Claim,
    Confirmation,
    Deletion,
    Note,
    NoteStore,
    commit_deletion,
)
from labkit.stores.filesystem import FilesystemNoteStore, Intent, parse_title
from labkit.stores.memory import MemoryReplayStore
from labkit.stores.open import open_stores
from labkit.wire import META_CAPABILITIES, META_VERSION, PROTOCOL_VERSION

EXPIRES = 4_000_000_000.0


def confirm(note_id: str, nonce: str = "n1") -> Confirmation:
    """A confirmation by alice that passes any re-check (the store's own checks still run)."""
    return Confirmation(
        principal="alice", nonce=nonce, expires_at=EXPIRES, note_id=note_id, recheck=lambda _: True
    )


def scope(path: Path) -> ScopePath:
    return tuple(p for p in str(path).split("/") if p)


def uri(path: Path) -> str:
    return "file://" + str(path)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    notes = tmp_path / "notes"
    (notes / "2024").mkdir(parents=True)
    (notes / "tps-report-2023.md").write_text("# TPS report 2023\n\nbody\n")
    (notes / "2024" / "tps-report-2024.md").write_text("# TPS Report 2024\n")
    (notes / "shopping-list.md").write_text("milk\n")
    (tmp_path / "state").mkdir()
    return notes


@pytest.fixture
def store(ws: Path) -> Iterator[FilesystemNoteStore]:
    with FilesystemNoteStore([uri(ws)], journal_path=ws.parent / "state" / "journal.db") as s:
        yield s


def by_name(store: FilesystemNoteStore, ws: Path, *parts: str) -> Note:
    note = store.locate(scope(ws.joinpath(*parts)))
    assert note is not None
    return note


# -- titles ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "title"),
    [
        ("# Weekly report\nbody", "w.md", "Weekly report"),
        ("   # Indented up to three\n", "w.md", "Indented up to three"),
        ("    # four spaces is code\n", "plain-name.md", "plain-name"),
        ("# Closed heading ##\n", "w.md", "Closed heading"),
        ("## Second level only\n", "level.md", "level"),
        ("intro\n\n# Later heading\n", "w.md", "Later heading"),
        ("---\ntitle: 'From front matter'\n---\n# Heading\n", "w.md", "From front matter"),
        ('---\ntitle: "Quoted"\ntags: [a]\n---\n', "w.md", "Quoted"),
        ("---\ntags: [a]\n---\n# After front matter\n", "w.md", "After front matter"),
        ("```\n# a shell comment\n```\n# Real\n", "w.md", "Real"),
        ("no heading at all\n", "my-note.md", "my-note"),
        ("", "empty.md", "empty"),
        ("# Tab\there\x1b[31m red\n", "w.md", "Tab here [31m red"),
        ("# Evil \u202egnp.exe\n", "w.md", "Evil gnp.exe"),
        ("# " + "x" * 500 + "\n", "w.md", "x" * 200),
        ("# caf\xe9\n", "w.md", "caf\ufffd"),
    ],
)
def test_titles(text: str, name: str, title: str) -> None:
    head = text.encode("latin-1") if "\xe9" in text else text.encode("utf-8")
    assert parse_title(head, name) == title


# -- construction ----------------------------------------------------------------------------


def test_store_implements_both_protocols(store: FilesystemNoteStore) -> None:
    assert isinstance(store, NoteStore)
    assert isinstance(store, AtomicDeleter)
    assert store.resolver == "openat2"


def test_workspaces_are_strict_file_uris_of_real_directories(ws: Path, tmp_path: Path) -> None:
    journal = tmp_path / "state" / "j.db"
    with FilesystemNoteStore(["file://localhost" + str(ws) + "/"], journal_path=journal) as s:
        assert len(s.find(scope(ws), "tps", 10)) == 2
    with pytest.raises(ScopeError):
        FilesystemNoteStore([uri(ws) + "/%2e%2e"], journal_path=journal)
    with pytest.raises(ValueError):
        FilesystemNoteStore(["file:///"], journal_path=journal)
    with pytest.raises(ValueError):
        FilesystemNoteStore([], journal_path=journal)
    with pytest.raises(ValueError):
        FilesystemNoteStore([uri(ws)], journal_path=journal, symlinks="follow")  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        FilesystemNoteStore([uri(tmp_path / "missing")], journal_path=journal)
    with pytest.raises(NotADirectoryError):
        FilesystemNoteStore([uri(ws / "shopping-list.md")], journal_path=journal)
    (tmp_path / "alias").symlink_to(ws)
    with pytest.raises(OSError):  # the configured root itself is opened with O_NOFOLLOW
        FilesystemNoteStore([uri(tmp_path / "alias")], journal_path=journal)


def test_resolver_can_be_forced_to_the_walk(ws: Path) -> None:
    with FilesystemNoteStore(
        [uri(ws)], journal_path=ws.parent / "state" / "j.db", resolver="walk"
    ) as s:
        assert s.resolver == "walk"
        assert [n.title for n in s.find(scope(ws), "tps", 10)] == [
            "TPS report 2023",
            "TPS Report 2024",
        ]


# -- find, get, ids --------------------------------------------------------------------------


def test_find_matches_titles_case_insensitively_in_order(
    store: FilesystemNoteStore, ws: Path
) -> None:
    found = store.find(scope(ws), "tps REPORT", 10)
    assert [(n.title, n.path[-1]) for n in found] == [
        ("TPS report 2023", "tps-report-2023.md"),
        ("TPS Report 2024", "tps-report-2024.md"),
    ]
    assert found[1].path == scope(ws / "2024" / "tps-report-2024.md")
    assert [n.title for n in store.find(scope(ws), "", 10)] == [
        "shopping-list",
        "TPS report 2023",
        "TPS Report 2024",
    ]
    assert len(store.find(scope(ws), "tps", 1)) == 1
    assert store.find(scope(ws), "tps", 0) == []


def test_find_stays_strictly_inside_the_workspace(store: FilesystemNoteStore, ws: Path) -> None:
    assert [n.title for n in store.find(scope(ws / "2024"), "tps", 10)] == ["TPS Report 2024"]
    assert store.find(scope(ws / "tps-report-2023.md"), "tps", 10) == []  # a file
    assert store.find(scope(ws / "missing"), "tps", 10) == []
    assert store.find(scope(ws.parent), "tps", 10) == []  # above the root
    assert store.find(scope(ws.parent / "notes-evil"), "tps", 10) == []


def test_find_scans_a_bounded_number_of_entries(ws: Path, caplog: pytest.LogCaptureFixture) -> None:
    for i in range(30):
        (ws / f"bulk-{i:02}.md").write_text(f"# bulk {i}\n")
    with (
        FilesystemNoteStore([uri(ws)], journal_path=ws.parent / "state" / "j.db", max_scan=10) as s,
        caplog.at_level(logging.WARNING, "labkit.stores.filesystem"),
    ):
        found = s.find(scope(ws), "bulk", 100)
    assert 0 < len(found) < 10
    assert "max_scan" in caplog.text


def test_ids_are_opaque_stable_and_keyed(ws: Path, store: FilesystemNoteStore) -> None:
    journal = ws.parent / "state" / "j.db"
    note = by_name(store, ws, "tps-report-2023.md")
    assert re.fullmatch(r"fs-[0-9a-f]{24}", note.id)
    assert "tps" not in note.id
    with FilesystemNoteStore([uri(ws)], journal_path=journal) as other:
        assert by_name(other, ws, "tps-report-2023.md") == note
    with FilesystemNoteStore([uri(ws)], journal_path=journal, id_key=b"k" * 32) as keyed:
        assert by_name(keyed, ws, "tps-report-2023.md").id != note.id


def test_get_follows_a_rename_and_forgets_deleted_files(
    store: FilesystemNoteStore, ws: Path
) -> None:
    note = by_name(store, ws, "tps-report-2023.md")
    assert store.get(note.id) == note
    (ws / "tps-report-2023.md").rename(ws / "2024" / "moved.md")
    moved = store.get(note.id)
    assert moved is not None
    assert moved.path == scope(ws / "2024" / "moved.md")
    assert moved.identity == note.identity  # a rename keeps device, inode and mtime
    (ws / "2024" / "moved.md").unlink()
    assert store.get(note.id) is None
    assert store.get("fs-000000000000000000000000") is None
    assert store.get("note-3") is None
    assert store.get(3) is None  # type: ignore[arg-type]


def test_get_from_another_instance_rescans(ws: Path, store: FilesystemNoteStore) -> None:
    note = by_name(store, ws, "2024", "tps-report-2024.md")
    with FilesystemNoteStore([uri(ws)], journal_path=ws.parent / "state" / "j2.db") as fresh:
        assert fresh.get(note.id) == note


# -- delete ----------------------------------------------------------------------------------


def test_delete_requires_the_live_identity(store: FilesystemNoteStore, ws: Path) -> None:
    path = ws / "tps-report-2023.md"
    note = by_name(store, ws, "tps-report-2023.md")
    path.write_text("# TPS report 2023\n\nedited after the form was shown\n")
    assert store.delete(note) is False
    assert path.exists()
    live = store.get(note.id)
    assert live is not None and live.identity != note.identity
    assert store.delete(live) is True
    assert not path.exists()
    assert store.delete(live) is False


def test_delete_refuses_records_it_did_not_make(store: FilesystemNoteStore, ws: Path) -> None:
    note = by_name(store, ws, "tps-report-2023.md")
    other = by_name(store, ws, "shopping-list.md")
    outside = Note(note.id, scope(ws.parent / "elsewhere.md"), note.title, note.identity)
    swapped_id = Note(other.id, note.path, note.title, note.identity)
    dotdot = Note(note.id, (*scope(ws), "2024", "..", "tps-report-2023.md"), "", note.identity)
    garbage = Note(note.id, note.path, note.title, "not-an-identity")
    for forged in (outside, swapped_id, dotdot, garbage):
        assert store.delete(forged) is False
    assert (ws / "tps-report-2023.md").exists()


# -- claim_and_delete ------------------------------------------------------------------------


def test_claim_and_delete_deletes_once(store: FilesystemNoteStore, ws: Path) -> None:
    replay = MemoryReplayStore()
    note = by_name(store, ws, "tps-report-2023.md")
    outcome = commit_deletion(
        store,
        replay,
        Confirmation(
            principal="alice",
            nonce="n1",
            expires_at=EXPIRES,
            note_id=note.id,
            recheck=lambda live: live == note,
        ),
    )
    assert outcome == (Deletion.DELETED, note)
    assert not (ws / "tps-report-2023.md").exists()
    assert store.pending_intents() == []
    again = commit_deletion(
        store,
        replay,
        confirm(note.id, "n1"),
    )
    assert again == (Deletion.USED, None)


def test_failed_recheck_releases_the_claim(store: FilesystemNoteStore, ws: Path) -> None:
    replay = MemoryReplayStore()
    note = by_name(store, ws, "tps-report-2023.md")
    outcome = store.claim_and_delete(
        replay,
        Confirmation(
            principal="alice",
            nonce="n1",
            expires_at=EXPIRES,
            note_id=note.id,
            recheck=lambda live: False,
        ),
    )
    assert outcome == (Deletion.STALE, note)
    assert (ws / "tps-report-2023.md").exists()
    assert replay.claim("alice", "n1", EXPIRES) is Claim.CLAIMED


def test_a_full_replay_store_deletes_nothing(store: FilesystemNoteStore, ws: Path) -> None:
    replay = MemoryReplayStore(per_principal=1)
    assert replay.claim("alice", "other", EXPIRES) is Claim.CLAIMED
    note = by_name(store, ws, "tps-report-2023.md")
    outcome = store.claim_and_delete(
        replay,
        confirm(note.id, "n1"),
    )
    assert outcome == (Deletion.FULL, None)
    assert (ws / "tps-report-2023.md").exists()


def test_a_change_between_journal_and_unlink_is_stale(ws: Path) -> None:
    path = ws / "tps-report-2023.md"
    events: list[str] = []

    def audit(event: str, intent: Intent) -> None:
        events.append(event)
        if event == "intent":
            path.write_text("# TPS report 2023\nrewritten in the window\n")

    replay = MemoryReplayStore()
    with FilesystemNoteStore(
        [uri(ws)], journal_path=ws.parent / "state" / "j.db", audit=audit
    ) as s:
        note = by_name(s, ws, "tps-report-2023.md")
        outcome = s.claim_and_delete(
            replay,
            confirm(note.id, "n1"),
        )
        assert outcome == (Deletion.STALE, note)
        assert s.pending_intents() == []
    assert events == ["intent", "stale"]
    assert path.read_text().endswith("rewritten in the window\n")
    assert replay.claim("alice", "n1", EXPIRES) is Claim.CLAIMED  # released


def test_the_journal_refuses_a_nonce_the_replay_store_forgot(
    store: FilesystemNoteStore, ws: Path
) -> None:
    first = by_name(store, ws, "tps-report-2023.md")
    assert (
        store.claim_and_delete(
            MemoryReplayStore(),
            confirm(first.id, "n1"),
        )[0]
        is Deletion.DELETED
    )
    second = by_name(store, ws, "shopping-list.md")
    outcome = store.claim_and_delete(
        MemoryReplayStore(),  # a restarted in-memory replay store remembers nothing
        confirm(second.id, "n1"),
    )
    assert outcome == (Deletion.USED, None)
    assert (ws / "shopping-list.md").exists()


# -- crashes and recovery --------------------------------------------------------------------


class Crash(Exception):
    pass


def crashing_store(ws: Path, at: str) -> FilesystemNoteStore:
    def audit(event: str, intent: Intent) -> None:
        if event == at:
            raise Crash(event)

    return FilesystemNoteStore([uri(ws)], journal_path=ws.parent / "state" / "j.db", audit=audit)


def crash_once(ws: Path, at: str, name: str) -> Note:
    with crashing_store(ws, at) as s:
        note = by_name(s, ws, name)
        with pytest.raises(Crash):
            s.claim_and_delete(
                MemoryReplayStore(),
                confirm(note.id, "n1"),
            )
    return note


def test_crash_before_unlink_is_visible_and_completes_once(ws: Path) -> None:
    note = crash_once(ws, "intent", "tps-report-2023.md")
    assert (ws / "tps-report-2023.md").exists()
    with FilesystemNoteStore([uri(ws)], journal_path=ws.parent / "state" / "j.db") as s:
        [pending] = s.pending_intents()
        assert (pending.state, pending.note_id, pending.rel, pending.identity) == (
            "pending",
            note.id,
            ("tps-report-2023.md",),
            note.identity,
        )
        [done] = s.recover()
        assert (done.id, done.state, done.resolution) == (
            pending.id,
            "done",
            "deleted during recovery",
        )
        assert not (ws / "tps-report-2023.md").exists()
        assert s.pending_intents() == []
        assert s.recover() == []


def test_crash_before_unlink_can_be_abandoned(ws: Path) -> None:
    crash_once(ws, "intent", "tps-report-2023.md")
    with FilesystemNoteStore([uri(ws)], journal_path=ws.parent / "state" / "j.db") as s:
        [abandoned] = s.recover(complete=False)
        assert (abandoned.state, abandoned.resolution) == ("abandoned", "file kept")
        assert s.pending_intents() == []
    assert (ws / "tps-report-2023.md").exists()


def test_crash_after_unlink_never_deletes_twice(ws: Path) -> None:
    crash_once(ws, "unlinked", "tps-report-2023.md")
    assert not (ws / "tps-report-2023.md").exists()
    # a new file takes the name before recovery runs: it must survive
    (ws / "tps-report-2023.md").write_text("# A new note with the old name\n")
    with FilesystemNoteStore([uri(ws)], journal_path=ws.parent / "state" / "j.db") as s:
        [resolved] = s.recover()
        assert resolved.state == "stale"
        assert resolved.resolution.startswith("nothing deleted")
    assert (ws / "tps-report-2023.md").read_text() == "# A new note with the old name\n"


def test_crash_after_unlink_recovers_as_done(ws: Path) -> None:
    crash_once(ws, "unlinked", "tps-report-2023.md")
    with FilesystemNoteStore([uri(ws)], journal_path=ws.parent / "state" / "j.db") as s:
        [resolved] = s.recover()
        assert (resolved.state, resolved.resolution) == (
            "done",
            "already gone: the unlink had happened",
        )
    assert sorted(p.name for p in ws.rglob("*.md")) == ["shopping-list.md", "tps-report-2024.md"]


CHILD = textwrap.dedent(
    """
    import json, os, sys
    from labkit.stores import Confirmation
    from labkit.stores.filesystem import FilesystemNoteStore
    from labkit.stores.memory import MemoryReplayStore
    args = json.loads(sys.argv[1])

    def audit(event, intent):
        if event == args["crash_at"]:
            os._exit(17)  # a real crash: no finally, no rollback, no close

    store = FilesystemNoteStore([args["ws"]], journal_path=args["journal"], audit=audit)
    outcome, _ = store.claim_and_delete(
        MemoryReplayStore(), Confirmation(principal="alice", nonce=args["nonce"], expires_at=4e9,
        note_id=args["note_id"], recheck=lambda live: True),
    )
    print(outcome.value)
    store.close()
    """
)


def run_child(ws: Path, note: Note, *, crash_at: str, nonce: str = "n1") -> subprocess.Popen[str]:
    args = {
        "ws": uri(ws),
        "journal": str(ws.parent / "state" / "journal.db"),  # the `store` fixture's journal
        "crash_at": crash_at,
        "note_id": note.id,
        "nonce": nonce,
    }
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(("crash_at", "file_after_crash"), [("intent", True), ("unlinked", False)])
def test_a_process_killed_mid_deletion_recovers_exactly_once(
    ws: Path, store: FilesystemNoteStore, crash_at: str, file_after_crash: bool
) -> None:
    note = by_name(store, ws, "tps-report-2023.md")
    child = run_child(ws, note, crash_at=crash_at)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 17, err
    assert (ws / "tps-report-2023.md").exists() is file_after_crash
    [pending] = store.pending_intents()
    assert pending.note_id == note.id
    [resolved] = store.recover()
    assert resolved.state == "done"
    assert not (ws / "tps-report-2023.md").exists()
    assert sorted(p.name for p in ws.rglob("*.md")) == ["shopping-list.md", "tps-report-2024.md"]


def test_processes_that_forgot_their_replay_state_still_delete_once(
    ws: Path, store: FilesystemNoteStore
) -> None:
    # Every process has its own empty replay store: only the journal stands between them.
    note = by_name(store, ws, "tps-report-2023.md")
    children = [run_child(ws, note, crash_at="never") for _ in range(6)]
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        results.append(out.strip())
    # one deletion; the others either hit the journaled nonce or find the note gone
    assert results.count("deleted") == 1
    assert set(results) - {"deleted"} <= {"used", "stale"}
    assert not (ws / "tps-report-2023.md").exists()
    assert store.pending_intents() == []


# -- the symlink policies through the store --------------------------------------------------


def test_refuse_policy_finds_nothing_through_an_in_root_alias(
    ws: Path, store: FilesystemNoteStore
) -> None:
    (ws / "current").symlink_to("2024")
    (ws / "alias.md").symlink_to("shopping-list.md")
    assert store.find(scope(ws / "current"), "tps", 10) == []
    assert [n.path[-1] for n in store.find(scope(ws), "", 10)] == [
        "shopping-list.md",
        "tps-report-2023.md",
        "tps-report-2024.md",
    ]
    assert store.locate(scope(ws / "alias.md")) is None


def test_within_root_policy_serves_an_in_root_alias(ws: Path) -> None:
    (ws / "current").symlink_to("2024")
    journal = ws.parent / "state" / "j.db"
    with FilesystemNoteStore([uri(ws)], journal_path=journal, symlinks="within_root") as s:
        [note] = s.find(scope(ws / "current"), "tps", 10)
        assert note.path == scope(ws / "current" / "tps-report-2024.md")  # as asked
        assert s.get(note.id) == note
        with FilesystemNoteStore([uri(ws)], journal_path=journal, symlinks="within_root") as other:
            # another instance that never listed the alias knows the real path only
            fresh = other.get(note.id)
            assert fresh is not None and fresh.path == scope(ws / "2024" / "tps-report-2024.md")
        assert s.delete(note) is True
    assert not (ws / "2024" / "tps-report-2024.md").exists()
    assert (ws / "current").is_symlink()


# -- the tool, end to end over real files ----------------------------------------------------


def call(server: Any, request_id: int, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    params = {
        "name": "notes_delete",
        "arguments": arguments,
        "_meta": {
            META_VERSION: PROTOCOL_VERSION,
            META_CAPABILITIES: {"elicitation": {"form": {}}},
        },
        **extra,
    }
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    response = server.handle(message, RequestContext(principal="alice"))
    assert response is not None and "result" in response, response
    result: dict[str, Any] = response["result"]
    return result


def test_notes_delete_over_real_files(ws: Path, store: FilesystemNoteStore) -> None:
    (ws / "link.md").symlink_to(ws.parent / "state")  # never offered
    server = create_server(
        keys=KeyRing.ephemeral(),
        notes=store,
        authorizer=AllowlistAuthorizer({"alice": [uri(ws)]}),
    )
    arguments = {"workspaceUri": uri(ws), "title": "TPS report"}
    first = call(server, 1, arguments)
    assert first["resultType"] == "input_required"
    schema = first["inputRequests"]["delete_choice"]["params"]["requestedSchema"]
    offered = schema["properties"]["note_id"]["oneOf"]
    assert [o["title"] for o in offered] == ["TPS report 2023", "TPS Report 2024"]
    chosen = offered[1]["const"]
    answer = {
        "delete_choice": {"action": "accept", "content": {"note_id": chosen, "confirm": True}}
    }
    second = call(server, 2, arguments, requestState=first["requestState"], inputResponses=answer)
    assert second["structuredContent"] == {"deleted": True, "status": "deleted", "noteId": chosen}
    assert not (ws / "2024" / "tps-report-2024.md").exists()
    assert (ws / "tps-report-2023.md").exists()
    replayed = server.handle(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "notes_delete",
                "arguments": arguments,
                "requestState": first["requestState"],
                "inputResponses": answer,
                "_meta": {
                    META_VERSION: PROTOCOL_VERSION,
                    META_CAPABILITIES: {"elicitation": {"form": {}}},
                },
            },
        },
        RequestContext(principal="alice"),
    )
    assert replayed is not None and replayed["error"]["code"] == -32602


# -- open_stores ------------------------------------------------------------------------------


def test_open_stores_builds_a_filesystem_store_over_the_configured_workspaces(ws: Path) -> None:
    journal = ws.parent / "state" / "intents.db"
    notes, replay = open_stores(f"filesystem://{journal}", "memory", workspaces=[uri(ws)])
    assert isinstance(notes, FilesystemNoteStore) and isinstance(replay, MemoryReplayStore)
    try:
        assert [n.title for n in notes.find(scope(ws), "tps", 10)] == [
            "TPS report 2023",
            "TPS Report 2024",
        ]
        assert notes.symlinks == "refuse"
    finally:
        notes.close()
    assert journal.exists()


@pytest.mark.parametrize(
    "spec",
    [
        "filesystem:",
        "filesystem://relative.db",
        "filesystem://host/x.db",
        "filesystem://///x.db",
        "filesystem:///d/",
    ],
)
def test_open_stores_refuses_a_malformed_filesystem_spec(ws: Path, spec: str) -> None:
    with pytest.raises(ValueError, match="filesystem:///ABSOLUTE/JOURNAL.db"):
        open_stores(spec, "memory", workspaces=[uri(ws)])


def test_open_stores_closes_the_filesystem_store_when_the_replay_spec_fails(ws: Path) -> None:
    journal = ws.parent / "state" / "intents.db"
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(ValueError, match="replay store spec"):
        open_stores(f"filesystem://{journal}", "sqlite://relative.db", workspaces=[uri(ws)])
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_journal_of_version_1_is_migrated_keeping_its_pending_intents(ws: Path) -> None:
    journal = ws.parent / "state" / "v1.db"
    journal.parent.mkdir(exist_ok=True)
    with sqlite3.connect(journal) as conn:
        conn.executescript(
            """
            CREATE TABLE intents (id INTEGER PRIMARY KEY, principal TEXT NOT NULL,
                nonce TEXT NOT NULL, note_id TEXT NOT NULL, root TEXT NOT NULL,
                rel TEXT NOT NULL, identity TEXT NOT NULL, state TEXT NOT NULL,
                resolution TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL,
                expires_at REAL NOT NULL, finished_at REAL, UNIQUE (principal, nonce));
            INSERT INTO intents (principal, nonce, note_id, root, rel, identity, state,
                created_at, expires_at)
                VALUES ('alice', 'n1', 'fs-x', 'file:///nowhere', '["a.md"]', '1:2:3',
                'pending', 0, 4e9);
            """
        )
    with FilesystemNoteStore([uri(ws)], journal_path=journal) as s:
        [pending] = s.pending_intents()
        assert (pending.principal, pending.nonce, pending.attempt) == ("alice", "n1", "")
        [resolved] = s.recover()
        assert resolved.state == "abandoned"  # its workspace is no longer configured
