"""Hidden checks for ex3,
`delete_note(conn, authorizer, principal, workspace_uri, note_id) -> bool`.

The notes live in SQLite with the course's table (`labkit.course.exercises.fixtures`):
`notes(id, uri, title)`; the connection is in autocommit mode, and
`authorizer.roots(principal)` names the directories a principal may touch. A note whose
stored uri is not inside the *requested* workspace (not merely inside the principal's
authorized root), or a principal whose authorization is gone, must get False and keep the
note (or a PermissionError), with the transaction closed.
Imports nothing from labkit (the kernel runs this source from a string).
"""

import sqlite3
from typing import Any

NOTES = "file:///work/notes"


class FixedRootsAuthorizer:
    """labkit's authorizer contract: roots as tuples of decoded path segments."""

    def __init__(self, roots: Any) -> None:
        self._roots = tuple(tuple(s for s in root.split("/") if s) for root in roots)

    def roots(self, principal: Any) -> Any:
        return self._roots


def _database(*rows: Any) -> Any:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, uri TEXT, title TEXT)")
    conn.executemany("INSERT INTO notes VALUES (?, ?, ?)", rows)
    return conn


def _refused(
    delete_note: Any,
    conn: Any,
    authorizer: Any,
    note_id: Any,
    what: Any,
    next_step: Any,
    workspace: Any = NOTES,
) -> Any:
    try:
        result = delete_note(conn, authorizer, "alice", workspace, note_id)
    except PermissionError:
        result = False
    assert result is False, f"expected False for {what}, got {result!r} ({next_step})"
    kept = conn.execute("SELECT 1 FROM notes WHERE id = ?", (note_id,)).fetchone()
    assert kept is not None, f"expected the note kept for {what}, got it deleted ({next_step})"
    assert not conn.in_transaction, (
        f"expected the transaction closed after refusing {what}, got it left open (ROLLBACK "
        "on every path that does not delete)"
    )


PARSE = (
    "parse the stored uri with parse_file_uri and compare path components; a ScopeError "
    "means outside"
)


def encoded_traversal_in_table(delete_note: Any) -> Any:
    conn = _database(("n1", "file:///work/notes/%2e%2e/private", "salaries"))
    _refused(
        delete_note,
        conn,
        FixedRootsAuthorizer(["/work/notes"]),
        "n1",
        "a note stored at .../%2e%2e/private",
        PARSE,
    )


def nul_in_table(delete_note: Any) -> Any:
    conn = _database(("n1", "file:///work/notes/a%00b", "odd"))
    _refused(
        delete_note,
        conn,
        FixedRootsAuthorizer(["/work/notes"]),
        "n1",
        "a note stored at a %00 uri",
        PARSE,
    )


def revoked_authorization(delete_note: Any) -> Any:
    conn = _database(("n1", "file:///work/notes/q3", "TPS report"))
    _refused(
        delete_note,
        conn,
        FixedRootsAuthorizer([]),
        "n1",
        "a principal whose authorization was revoked",
        "authorize the principal again inside the transaction",
    )


def sibling_of_the_workspace(delete_note: Any) -> Any:
    conn = _database(("n1", "file:///work/notes/2024/tps.md", "TPS report 2024"))
    _refused(
        delete_note,
        conn,
        FixedRootsAuthorizer(["/work/notes"]),
        "n1",
        "a note in file:///work/notes/2024 when the request names the workspace "
        "file:///work/notes/2025 (alice's root is file:///work/notes)",
        "check containment against the requested workspace, not the authorized root: the "
        "user chose that workspace, and nothing outside it",
        workspace="file:///work/notes/2025",
    )


def own_note_deleted(delete_note: Any) -> Any:
    conn = _database(("n1", "file:///work/notes/q3", "TPS report"))
    result = delete_note(conn, FixedRootsAuthorizer(["/work/notes"]), "alice", NOTES, "n1")
    assert result is True, (
        f"expected True for an authorized note inside the workspace, got {result!r}"
    )
    gone = conn.execute("SELECT 1 FROM notes WHERE id = 'n1'").fetchone() is None
    assert gone, "expected the note deleted, got it still there"
    assert not conn.in_transaction, "expected the transaction closed, got it left open"


CHECKS = (
    (encoded_traversal_in_table, 2, "an encoded traversal stored in the table is refused"),
    (nul_in_table, 1, "a %00 workspace stored in the table is refused"),
    (revoked_authorization, 2, "a revoked authorization is re-checked and refused"),
    (
        sibling_of_the_workspace,
        1,
        "a note outside the requested workspace, inside the root, is kept",
    ),
    (own_note_deleted, 1, "an authorized note is deleted in one transaction"),
)
