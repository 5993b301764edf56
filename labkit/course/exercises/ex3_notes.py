"""Exercise 3, SQLite notes with re-checks inside the transaction: public checks and hints for
`delete_note`.

Contract: `delete_note(conn, authorizer, principal, workspace_uri, note_id) -> bool`. Inside
one `BEGIN IMMEDIATE` transaction: re-authorize the principal for the workspace, read the
note's current uri, check containment by whole path components, delete only when all hold
(docs/LESSON.md sections 3 and 9: re-check immediately before the deletion).

"Moved after the form was shown" is staged for real: a trace callback on the learner's
connection moves the note out of the workspace, through a second connection, just before the
learner's first `BEGIN` (or first write, if it starts no transaction), so an implementation
that trusts a uri read earlier deletes a note that is no longer inside. Must not import
ipywidgets.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from labkit.course.exercises.calls import RootsAuthorizer, SqliteConnection
from labkit.course.exercises.fixtures import (
    WORKSPACE_URI,
    add_notes,
    create_ex3_schema,
    note_ids,
)
from labkit.course.exercises.trial import (
    Check,
    Contract,
    Equivalent,
    Exercise,
    Fail,
    Raised,
    Rule,
    Safety,
    Trial,
    not_a_bool_next,
    sql_in_any_case,
)

CONTRACT = "delete_note"
NOTES = (
    ("note-1", "file:///work/notes/2025/tps.md", "TPS report 2025"),
    ("note-2", "file:///work/notes/2024/tps.md", "TPS report 2024"),
    ("note-evil", "file:///work/notes-evil/tps.md", "TPS report (look-alike folder)"),
)
ALL_IDS = frozenset(n for n, _, _ in NOTES)
MOVED_TO = "file:///work/private/tps.md"
# The course's example authorizer (`fixtures.example_authorizer`), as a marker.
AUTHORIZER = RootsAuthorizer(grants=(("alice", (WORKSPACE_URI,)), ("bob", ("file:///work/other",))))


def _world(
    t: Trial, before_first_work: tuple[str, tuple[str, ...]] | None = None
) -> tuple[Path, SqliteConnection]:
    path = t.folder().place_db(DB, build_notes(NOTES))
    learner = SqliteConnection(
        str(path), lock_timeout=t.settings.lock_timeout, before_first_work=before_first_work
    )
    return path, learner


DB = "notes.sqlite3"


def build_notes(notes: Iterable[tuple[str, str, str]]) -> Callable[[sqlite3.Connection], None]:
    """What `Folder.place_db` runs to build exercise 3's table holding `notes`."""

    def build(conn: sqlite3.Connection) -> None:
        create_ex3_schema(conn)
        add_notes(conn, notes)

    return build


def _ids(t: Trial, path: Path) -> frozenset[str]:
    with t.folder().read_db(path.name) as conn:
        return frozenset(note_ids(conn))


def _delete(
    t: Trial,
    conn: SqliteConnection,
    principal: str,
    note_id: str,
    *,
    want: bool = False,
    workspace: str = WORKSPACE_URI,
) -> Any:
    """The learner's answer, or a `Fail` when it raised on purpose: the contract refuses with
    False, never an exception; any other exception ends the check as an error in the code."""
    outcome = t.attempt(CONTRACT, conn, AUTHORIZER, principal, workspace, note_id)
    if isinstance(outcome, Raised):
        refuse_next = (
            "return False (after ROLLBACK) to refuse: the contract's refusal is the value False, "
            "not an exception"
            if not want
            else "nothing here calls for a refusal: delete the note, COMMIT and return True"
        )
        return t.raised_instead(outcome, t.check.expects, repr(want), refuse_next)
    return outcome.value


def _verdict(
    t: Trial,
    conn: SqliteConnection,
    path: Path,
    result: Any,
    expected: str,
    *,
    want: bool,
    left: frozenset[str],
    next_step: str,
) -> Fail | None:
    if isinstance(result, Fail):
        return result
    if t.in_transaction(conn.key):
        return Fail(
            expected,
            f"it returned {result!r} with its transaction still open (BEGIN without COMMIT or "
            "ROLLBACK)",
            "end every path through your function with COMMIT or ROLLBACK",
        )
    ids = _ids(t, path)
    problems = []
    if result is not want:
        problems.append(f"it returned {result!r}")
    lost, kept = sorted(left - ids), sorted(ids - left)
    if lost:
        problems.append(f"{', '.join(lost)} {'is' if len(lost) == 1 else 'are'} gone")
    if kept:
        problems.append(f"{', '.join(kept)} {'is' if len(kept) == 1 else 'are'} still there")
    if not problems:
        return None if want else _acceptance(t)
    return Fail(expected, " and ".join(problems), not_a_bool_next(result) or next_step)


def _acceptance(t: Trial) -> Fail | None:
    """A refusal counts only with the matching acceptance: the same world, a note inside."""
    path, conn = _world(t)
    conn = SqliteConnection(conn.path, key="control", lock_timeout=conn.lock_timeout)
    outcome = t.attempt(CONTRACT, conn, AUTHORIZER, "alice", WORKSPACE_URI, "note-1")
    expected = (
        "a refusal counts together with the matching acceptance: alice deleting note-1 "
        "(file:///work/notes/2025/tps.md) in file:///work/notes should then get True"
    )
    if isinstance(outcome, Raised):
        return t.raised_instead(
            outcome, expected, "True", "nothing here calls for a refusal: delete, COMMIT, True"
        )
    if outcome.value is not True or "note-1" in _ids(t, path):
        return Fail(
            expected,
            f"it returned {outcome.value!r}",
            not_a_bool_next(outcome.value)
            or "refuse only when a check fails: when the principal is authorized and the note "
            "is inside the workspace, delete it, COMMIT and return True",
        )
    return None


def bad_uri(t: Trial) -> Fail | None:
    path = t.folder().place_db(
        DB, build_notes((*NOTES, ("note-bad", "file:///work/notes/%2e%2e/private/x.md", "x")))
    )
    conn = SqliteConnection(str(path), key="bad", lock_timeout=t.settings.lock_timeout)
    result = _delete(t, conn, "alice", "note-bad")
    return _verdict(
        t,
        conn,
        path,
        result,
        "note-bad is stored at file:///work/notes/%2e%2e/private/x.md, an encoded '..' that "
        "parse_file_uri refuses: deleting it should get False and keep it",
        want=False,
        left=ALL_IDS | {"note-bad"},
        next_step="parse the stored uri too (labkit.scope.parse_file_uri): a ScopeError from "
        "either URI means not inside, so ROLLBACK and return False",
    )


def requested_workspace(t: Trial) -> Fail | None:
    path, conn = _world(t)
    result = _delete(t, conn, "alice", "note-2", workspace="file:///work/notes/2025")
    return _verdict(
        t,
        conn,
        path,
        result,
        "note-2 is in file:///work/notes/2024; a request for the workspace "
        "file:///work/notes/2025 (alice's root is file:///work/notes) should get False and keep it",
        want=False,
        left=ALL_IDS,
        next_step="check containment against the requested workspace "
        "(parse_file_uri(workspace_uri)), not the root authorize returned",
    )


def inside_deleted(t: Trial) -> Fail | None:
    path, conn = _world(t)
    result = _delete(t, conn, "alice", "note-1", want=True)
    return _verdict(
        t,
        conn,
        path,
        result,
        "alice deleting note-1 (file:///work/notes/2025/tps.md) in file:///work/notes should "
        "get True and note-1 should be gone",
        want=True,
        left=ALL_IDS - {"note-1"},
        next_step="when the principal is authorized and the note's uri is inside the "
        "workspace, delete it, COMMIT and return True",
    )


def moved_after_form(t: Trial) -> Fail | None:
    # Another writer moves note-2 out just before the learner's first statement that starts
    # work (the marker's connection stages it), as a concurrent request would.
    path, conn = _world(
        t, before_first_work=("UPDATE notes SET uri = ? WHERE id = ?", (MOVED_TO, "note-2"))
    )
    result = _delete(t, conn, "alice", "note-2")
    with t.folder().read_db(path.name) as look:
        now = look.execute("SELECT uri FROM notes WHERE id = 'note-2'").fetchone()
    where = (
        f"moved to {MOVED_TO} just before your function began its transaction"
        if now is not None and now[0] == MOVED_TO
        else "meant to be moved out just before your transaction"
    )
    return _verdict(
        t,
        conn,
        path,
        result,
        f"note-2 was shown inside file:///work/notes, then {where}: deleting it should get "
        "False and keep it",
        want=False,
        left=ALL_IDS,
        next_step="read the note's uri again inside the transaction (after BEGIN IMMEDIATE) "
        "and check that value, not one read earlier",
    )


def prefix_sibling(t: Trial) -> Fail | None:
    path, conn = _world(t)
    result = _delete(t, conn, "alice", "note-evil")
    return _verdict(
        t,
        conn,
        path,
        result,
        "note-evil lives in file:///work/notes-evil, a sibling that only shares the name "
        "prefix: deleting it through file:///work/notes should get False and keep it",
        want=False,
        left=ALL_IDS,
        next_step="compare parsed path components (labkit.scope.parse_file_uri and "
        "labkit.scope.contains), never string prefixes",
    )


def unauthorized(t: Trial) -> Fail | None:
    path, conn = _world(t)
    result = _delete(t, conn, "bob", "note-1")
    return _verdict(
        t,
        conn,
        path,
        result,
        "bob may use only file:///work/other: his request to delete note-1 through "
        "file:///work/notes should get False and delete nothing",
        want=False,
        left=ALL_IDS,
        next_step="authorize the principal for the workspace again inside the transaction "
        "(labkit.scope.authorize with the authorizer you are given)",
    )


def missing_note(t: Trial) -> Fail | None:
    path, conn = _world(t)
    result = _delete(t, conn, "alice", "note-404")
    return _verdict(
        t,
        conn,
        path,
        result,
        "deleting note-404, which does not exist, should get False and change nothing",
        want=False,
        left=ALL_IDS,
        next_step="when the note is not found, ROLLBACK and return False",
    )


# A note inside the workspace whose DELETE the database refuses (a trigger raises): the error
# comes in the middle of the learner's transaction, after BEGIN and the checks.
HELD = ("note-held", "file:///work/notes/held.md", "A note the database keeps")
HOLD = (
    "CREATE TRIGGER hold_note BEFORE DELETE ON notes WHEN old.id = 'note-held' "
    "BEGIN SELECT RAISE(ABORT, 'note-held cannot be deleted now'); END"
)


def _held(conn: sqlite3.Connection) -> None:
    build_notes((*NOTES, HELD))(conn)
    conn.execute(HOLD)


def error_mid_way(t: Trial) -> Fail | None:
    path = t.folder().place_db(DB, _held)
    conn = SqliteConnection(str(path), key="held", lock_timeout=t.settings.lock_timeout)
    expected = (
        "alice deleting note-held, whose DELETE the database refuses with an error, should "
        "end the transaction (ROLLBACK) and keep every note, whether the error is raised on "
        "or False is returned"
    )
    outcome = t.attempt(CONTRACT, conn, AUTHORIZER, "alice", WORKSPACE_URI, "note-held")
    if t.in_transaction(conn.key):
        return Fail(
            expected,
            "its transaction was left open after the database's error",
            "every path ends the transaction, an exception's too: ROLLBACK in an except "
            "clause (then raise again), or open the transaction with a context manager that "
            "rolls back on an error",
        )
    if not isinstance(outcome, Raised) and outcome.value is not False:
        return Fail(
            expected,
            f"it returned {outcome.value!r}",
            not_a_bool_next(outcome.value)
            or "a DELETE that fails deleted nothing: ROLLBACK, then raise the error again "
            "(or return False)",
        )
    lost = sorted((ALL_IDS | {"note-held"}) - _ids(t, path))
    if lost:
        return Fail(expected, f"{', '.join(lost)} went missing", "ROLLBACK undoes the claim")
    return _acceptance(t)


HINTS = (
    "Treat everything you were told before the transaction as a claim to verify: who is asking, "
    "which workspace, and where the note is now. Verify all of it after BEGIN IMMEDIATE.",
    "Inside the transaction: authorize(authorizer, principal, parse_file_uri(workspace_uri)) must "
    "return a root; SELECT the note's uri now (not earlier); parse it (a ScopeError means "
    "outside) and require labkit.scope.contains(workspace_path, note_path). Tuples of path "
    "segments cannot be fooled by a look-alike prefix such as notes-evil.",
    "The idea is re-check, then act, inside one transaction: after BEGIN IMMEDIATE, "
    "labkit.scope.authorize, a fresh SELECT, labkit.scope.parse_file_uri and "
    "labkit.scope.contains decide; every refusal ends the transaction (ROLLBACK) and returns "
    "False (docs/LESSON.md sections 3 and 9).",
)

CONTRACT_TEXT = Contract(
    "delete_note(conn, authorizer, principal, workspace_uri, note_id) -> bool",
    rules=(
        Rule("authorization", "must\n   return a root"),
        Rule(
            "note-now",
            "read its uri with `SELECT uri FROM notes WHERE id = ?` *inside* the\n"
            "   transaction; no row means `False`",
        ),
        Rule("requested-workspace", "where\n   `workspace` is the **requested** workspace"),
        Rule("scope-error", 'A `ScopeError` from either URI means "not\n   inside"'),
        Rule("delete", "only then `DELETE`, `COMMIT` and return `True`"),
        Rule("every-path-ends", "Every other path ends with `ROLLBACK` and returns `False`"),
    ),
)

EXERCISE = Exercise(
    id="ex3",
    title="SQLite notes: re-check inside the transaction",
    contract=CONTRACT_TEXT,
    notebook="05-ex3-sqlite-notes",
    hidden_checks="labkit.grade.hidden.ex3",
    safety=Safety(
        4,
        "no note outside the requested workspace, or of an unauthorized principal, "
        "should be deleted",
    ),
    equivalent_mutants=(
        *sql_in_any_case(
            'conn.execute("BEGIN IMMEDIATE")  '
            "# from here on, nobody else can move or delete the note",
            "BEGIN IMMEDIATE",
        ),
        *sql_in_any_case(
            'row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()',
            "SELECT uri FROM notes WHERE id = ?",
        ),
        *sql_in_any_case('conn.execute("ROLLBACK")', "ROLLBACK"),
        *sql_in_any_case(
            'conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))',
            "DELETE FROM notes WHERE id = ?",
        ),
        *sql_in_any_case('conn.execute("COMMIT")', "COMMIT"),
        Equivalent(
            "inside = False  # a URI that does not parse is never inside",
            "inside = None  # a URI that does not parse is never inside",
            "`inside` is only read by `if not inside`, where None and False both refuse",
        ),
    ),
    outputs={
        "ex3-try": (
            "inside deleted",
            "moved after the form",
            "prefix sibling kept",
            "unauthorized principal",
            "missing note",
        ),
    },
    checks=(
        Check(
            "inside deleted",
            inside_deleted,
            "an authorized delete of a note inside the workspace should return True",
            rules=("delete", "authorization", "note-now"),
        ),
        Check(
            "moved after the form",
            moved_after_form,
            "a note moved out of the workspace before the transaction should be kept (False)",
            rules=("note-now",),
        ),
        Check(
            "prefix sibling kept",
            prefix_sibling,
            "a note in the look-alike folder file:///work/notes-evil should be kept (False)",
            rules=("requested-workspace",),
        ),
        Check(
            "unauthorized principal",
            unauthorized,
            "a principal not authorized for the workspace should delete nothing (False)",
            rules=("authorization",),
        ),
        Check(
            "a uri that does not parse",
            bad_uri,
            "a note whose stored uri does not parse should be kept (False)",
            on_error="parse_file_uri reports a uri that does not parse with ScopeError: that "
            "means not inside, so ROLLBACK and return False",
            rules=("scope-error", "every-path-ends"),
        ),
        Check(
            "the requested workspace",
            requested_workspace,
            "a note outside the requested workspace, though inside the root, should be kept",
            rules=("requested-workspace",),
        ),
        Check(
            "an error rolls back",
            error_mid_way,
            "a DELETE the database refuses with an error should leave no transaction open",
            rules=("every-path-ends",),
        ),
        Check(
            "missing note",
            missing_note,
            "deleting a note that does not exist should return False",
            on_error="when the SELECT finds no row, ROLLBACK and return False before using the row",
            rules=("note-now", "every-path-ends"),
        ),
    ),
    hints=HINTS,
)
