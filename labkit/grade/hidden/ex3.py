"""Hidden checks for ex3,
`delete_note(conn, authorizer, principal, workspace_uri, note_id) -> bool`.

Owns: the grading-only checks of exercise 3 (`CHECKS`). The notes live in SQLite with the
course's table (`labkit.course.exercises.fixtures`): `notes(id, uri, title)`; the connection is
in autocommit mode, and `authorizer.roots(principal)` names the directories a principal may
touch. A note whose stored uri is not inside the *requested* workspace (not merely inside the
principal's authorized root), or a principal whose authorization is gone, must get False and
keep the note (a PermissionError counts as a refusal too), with the transaction closed.

Written like the public checks (`labkit.course.exercises.ex3_notes`): each check builds its
SQLite file in the check's temporary folder, passes a `SqliteConnection` and a
`RootsAuthorizer` marker, and reads the table through a connection of its own.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from labkit.course.exercises.calls import RootsAuthorizer, SqliteConnection
from labkit.course.exercises.fixtures import add_notes, connect, create_ex3_schema
from labkit.course.exercises.trial import Check, Fail, Raised, Trial

CONTRACT = "delete_note"
NOTES = "file:///work/notes"
ALICE_ROOT = RootsAuthorizer(roots=("/work/notes",))
REVOKED = RootsAuthorizer(roots=())
OPEN_NEXT = "end every path through your function with COMMIT or ROLLBACK"
PARSE_NEXT = (
    "parse the stored uri (labkit.scope.parse_file_uri) and compare path components; a stored "
    "uri that does not parse is outside"
)


def _world(t: Trial, uri: str) -> tuple[Path, SqliteConnection]:
    """One note, n1, stored at `uri`."""
    path = t.tempdir() / "notes.sqlite3"
    with closing(connect(path)) as conn:
        create_ex3_schema(conn)
        add_notes(conn, [("n1", uri, "TPS report")])
    path.chmod(0o666)  # the learner's side may run as another user
    return path, SqliteConnection(str(path), lock_timeout=t.settings.lock_timeout)


def _kept(t: Trial, path: Path) -> bool:
    with closing(sqlite3.connect(path, timeout=t.settings.lock_timeout)) as conn:
        return conn.execute("SELECT 1 FROM notes WHERE id = 'n1'").fetchone() is not None


def _refused(
    t: Trial,
    uri: str,
    authorizer: RootsAuthorizer,
    what: str,
    next_step: str,
    workspace: str = NOTES,
) -> Fail | None:
    path, conn = _world(t, uri)
    expected = f"for {what}, alice's request to delete n1 should get False and keep the note"
    outcome = t.attempt(CONTRACT, conn, authorizer, "alice", workspace, "n1")
    if isinstance(outcome, Raised):
        if not outcome.error.is_a("PermissionError"):
            t.crashed(outcome)
        result: Any = False  # refusing with PermissionError is a refusal too
    else:
        result = outcome.value
    if t.in_transaction(conn.key):
        return Fail(
            expected,
            f"it returned {result!r} with its transaction still open (BEGIN without COMMIT or "
            "ROLLBACK)",
            OPEN_NEXT,
        )
    kept = _kept(t, path)
    if result is False and kept:
        return None
    got = f"it returned {result!r}" + ("" if kept else " and the note is gone")
    return Fail(expected, got, next_step)


def encoded_traversal(t: Trial) -> Fail | None:
    return _refused(
        t,
        "file:///work/notes/%2e%2e/private",
        ALICE_ROOT,
        "a note stored at file:///work/notes/%2e%2e/private (an encoded '..')",
        PARSE_NEXT,
    )


def nul_in_table(t: Trial) -> Fail | None:
    return _refused(
        t,
        "file:///work/notes/a%00b",
        ALICE_ROOT,
        "a note stored at file:///work/notes/a%00b (an encoded NUL byte)",
        PARSE_NEXT,
    )


def revoked_authorization(t: Trial) -> Fail | None:
    return _refused(
        t,
        "file:///work/notes/q3",
        REVOKED,
        "a principal whose authorization was revoked (the authorizer now grants no root)",
        "authorize the principal again inside the transaction, with the authorizer you are given",
    )


def outside_requested_workspace(t: Trial) -> Fail | None:
    return _refused(
        t,
        "file:///work/notes/2024/tps.md",
        ALICE_ROOT,
        "a note in file:///work/notes/2024 when the request names the workspace "
        "file:///work/notes/2025 (alice's root is file:///work/notes)",
        "check containment against the requested workspace, not the authorized root: the user "
        "chose that workspace, and nothing outside it",
        workspace="file:///work/notes/2025",
    )


def own_note_deleted(t: Trial) -> Fail | None:
    path, conn = _world(t, "file:///work/notes/q3")
    result = t.call(CONTRACT, conn, ALICE_ROOT, "alice", NOTES, "n1")
    expected = (
        "alice deleting n1 (file:///work/notes/q3) in file:///work/notes, her root, should get "
        "True, with the note gone and the transaction closed"
    )
    if t.in_transaction(conn.key):
        return Fail(expected, f"it returned {result!r} with its transaction still open", OPEN_NEXT)
    kept = _kept(t, path)
    if result is True and not kept:
        return None
    got = f"it returned {result!r}" + (" and the note is still there" if kept else "")
    return Fail(expected, got, "when every check holds, delete the note, COMMIT and return True")


REFUSAL_ERROR = (
    "a refusal is an expected case: return False (after ROLLBACK) instead of letting the "
    "exception escape"
)

CHECKS: tuple[Check, ...] = (
    Check(
        "encoded traversal in the table",
        encoded_traversal,
        "a note stored at an encoded traversal should be kept (False)",
        points=2,
        hidden=True,
        on_error=REFUSAL_ERROR,
    ),
    Check(
        "nul byte in the table",
        nul_in_table,
        "a note stored at a %00 uri should be kept (False)",
        hidden=True,
        on_error=REFUSAL_ERROR,
    ),
    Check(
        "revoked authorization",
        revoked_authorization,
        "a principal whose authorization was revoked should delete nothing (False)",
        points=2,
        hidden=True,
        on_error=REFUSAL_ERROR,
    ),
    Check(
        "outside the requested workspace",
        outside_requested_workspace,
        "a note outside the requested workspace, though inside the root, should be kept (False)",
        hidden=True,
        on_error=REFUSAL_ERROR,
    ),
    Check(
        "own note deleted",
        own_note_deleted,
        "an authorized note inside the workspace should be deleted (True) in one transaction",
        hidden=True,
    ),
)
