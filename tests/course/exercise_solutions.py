"""Reference and deliberately wrong implementations of the exercises' contracts.

The checks are tested against these: the references must pass every public check, and each
wrong one must fail the check written to catch its bug. Importable by name, so the ex1 race
sends these to its spawned children by reference.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from labkit.scope import Authorizer, ScopeError, authorize, contains, parse_file_uri

# --- ex1: claim_and_delete ---------------------------------------------------------------


def claim_and_delete(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    conn.execute("BEGIN IMMEDIATE")
    try:
        claim = conn.execute(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT (principal, nonce) DO NOTHING",
            (principal, nonce, expires_at),
        )
        if claim.rowcount != 1:
            conn.execute("ROLLBACK")
            return False
        if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount != 1:
            conn.execute("ROLLBACK")
            return False
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def no_transaction(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """Autocommit: the claim commits even when the deletion then finds no note."""
    try:
        conn.execute(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            (principal, nonce, expires_at),
        )
    except sqlite3.IntegrityError:
        return False
    return conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount == 1


def delete_then_claim_commits(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """Deletes first, then commits the deletion when the claim turns out to be a replay."""
    conn.execute("BEGIN IMMEDIATE")
    if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount != 1:
        conn.execute("ROLLBACK")
        return False
    try:
        conn.execute(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            (principal, nonce, expires_at),
        )
    except sqlite3.IntegrityError:
        conn.execute("COMMIT")
        return False
    conn.execute("COMMIT")
    return True


def select_then_insert(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """Check-then-act in autocommit: right one call at a time, wrong under a race."""
    seen = conn.execute(
        "SELECT 1 FROM claims WHERE principal = ? AND nonce = ?", (principal, nonce)
    ).fetchone()
    if seen is not None:
        return False
    if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount != 1:
        return False
    conn.execute(
        "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
        (principal, nonce, expires_at),
    )
    return True


def forgets_rollback(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """Returns False for a missing note without ending the transaction."""
    conn.execute("BEGIN IMMEDIATE")
    claim = conn.execute(
        "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
        "ON CONFLICT (principal, nonce) DO NOTHING",
        (principal, nonce, expires_at),
    )
    if claim.rowcount != 1:
        conn.execute("ROLLBACK")
        return False
    if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount != 1:
        return False
    conn.execute("COMMIT")
    return True


def replay_left_open(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """Right answers, but a refused claim returns False with its transaction still open."""
    conn.execute("BEGIN IMMEDIATE")
    claim = conn.execute(
        "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
        "ON CONFLICT (principal, nonce) DO NOTHING",
        (principal, nonce, expires_at),
    )
    if claim.rowcount != 1:
        return False
    if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount != 1:
        conn.execute("ROLLBACK")
        return False
    conn.execute("COMMIT")
    return True


def raises_on_replay(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """One right deletion; a replay is refused by raising instead of returning False."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            (principal, nonce, expires_at),
        )
        if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount != 1:
            conn.execute("ROLLBACK")
            return False
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def commits_missing_note(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """Commits the claim even though the note was not there."""
    conn.execute("BEGIN IMMEDIATE")
    claim = conn.execute(
        "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
        "ON CONFLICT (principal, nonce) DO NOTHING",
        (principal, nonce, expires_at),
    )
    if claim.rowcount != 1:
        conn.execute("ROLLBACK")
        return False
    deleted = conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount
    conn.execute("COMMIT")
    return deleted == 1


def forgets_return(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool | None:
    """Does the work, never says so."""
    claim_and_delete(conn, principal, nonce, note_id, expires_at)
    return None


def wrong_table(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """A typo in the table name: sqlite3 raises inside the learner's own line."""
    conn.execute("INSERT INTO claim VALUES (?, ?, ?)", (principal, nonce, expires_at))
    return True


def stub(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    raise NotImplementedError()  # learner: the starter stub, exactly as the notebook has it


# --- ex3: delete_note ----------------------------------------------------------------------


def delete_note(
    conn: sqlite3.Connection,
    authorizer: Authorizer,
    principal: str,
    workspace_uri: str,
    note_id: str,
) -> bool:
    conn.execute("BEGIN IMMEDIATE")
    try:
        try:
            workspace = parse_file_uri(workspace_uri)
        except ScopeError:
            conn.execute("ROLLBACK")
            return False
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        inside = False
        if authorize(authorizer, principal, workspace) is not None and row is not None:
            try:
                inside = contains(workspace, parse_file_uri(row[0]))
            except ScopeError:
                inside = False
        if not inside:
            conn.execute("ROLLBACK")
            return False
        conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _inside(workspace: tuple[str, ...], uri: str) -> bool:
    """Containment of a stored uri, a uri that does not parse being outside (the rule the
    wrong answers below keep, each breaking one other)."""
    try:
        return contains(workspace, parse_file_uri(uri))
    except ScopeError:
        return False


def string_prefix(
    conn: sqlite3.Connection,
    authorizer: Authorizer,
    principal: str,
    workspace_uri: str,
    note_id: str,
) -> bool:
    """Containment by `str.startswith`: notes-evil passes for notes."""
    conn.execute("BEGIN IMMEDIATE")
    row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
    allowed = authorize(authorizer, principal, parse_file_uri(workspace_uri)) is not None
    if not allowed or row is None or not row[0].startswith(workspace_uri):
        conn.execute("ROLLBACK")
        return False
    conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
    conn.execute("COMMIT")
    return True


def no_reauthorization(
    conn: sqlite3.Connection,
    authorizer: Authorizer,
    principal: str,
    workspace_uri: str,
    note_id: str,
) -> bool:
    """Checks containment in the workspace it was handed, never who is asking."""
    conn.execute("BEGIN IMMEDIATE")
    row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
    if row is None or not _inside(parse_file_uri(workspace_uri), row[0]):
        conn.execute("ROLLBACK")
        return False
    conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
    conn.execute("COMMIT")
    return True


def uri_before_transaction(
    conn: sqlite3.Connection,
    authorizer: Authorizer,
    principal: str,
    workspace_uri: str,
    note_id: str,
) -> bool:
    """Reads the uri when the form was shown and trusts it inside the transaction."""
    row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
    workspace = parse_file_uri(workspace_uri)
    if row is None or authorize(authorizer, principal, workspace) is None:
        return False
    if not _inside(workspace, row[0]):
        return False
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
    conn.execute("COMMIT")
    return True


def crashes_on_missing(
    conn: sqlite3.Connection,
    authorizer: Authorizer,
    principal: str,
    workspace_uri: str,
    note_id: str,
) -> bool:
    """Indexes the row without asking whether there was one."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        uri = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()[0]
        workspace = parse_file_uri(workspace_uri)
        if authorize(authorizer, principal, workspace) is None or not _inside(workspace, uri):
            conn.execute("ROLLBACK")
            return False
        conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise


# --- ex4: resolve_inside -------------------------------------------------------------------


def resolve_inside(root: Path, relative: str) -> Path:
    if Path(relative).is_absolute():
        raise PermissionError(f"{relative!r} is absolute")
    real_root = root.resolve(strict=True)
    target = (real_root / relative).resolve()
    if not target.is_relative_to(real_root):
        raise PermissionError(f"{relative!r} resolves outside the root")
    return target


def lexical_only(root: Path, relative: str) -> Path:
    """Normalizes the text and never looks at the filesystem."""
    if os.path.isabs(relative):
        raise PermissionError(relative)
    candidate = Path(os.path.normpath(root / relative))
    if not candidate.is_relative_to(root):
        raise PermissionError(relative)
    return candidate


def startswith_realpath(root: Path, relative: str) -> Path:
    """Follows links, then compares strings: notes-private passes for notes."""
    if os.path.isabs(relative):
        raise PermissionError(relative)
    real = os.path.realpath(root / relative)
    if not real.startswith(os.path.realpath(root)):
        raise PermissionError(relative)
    return Path(real)


def last_component_only(root: Path, relative: str) -> Path:
    """Follows a link only when the last component is one: misses directory links."""
    if os.path.isabs(relative):
        raise PermissionError(relative)
    candidate = root / relative
    real = candidate.resolve() if candidate.is_symlink() else Path(os.path.normpath(candidate))
    if not real.is_relative_to(root):
        raise PermissionError(relative)
    return real


def raises_value_error(root: Path, relative: str) -> Path:
    """The right decisions, the wrong exception type."""
    try:
        return resolve_inside(root, relative)
    except PermissionError as exc:
        raise ValueError(str(exc)) from None


def sleeps_holding_the_lock(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """Takes the write lock and never lets go (within any check's patience)."""
    import time

    conn.execute("BEGIN IMMEDIATE")
    time.sleep(60)
    conn.execute("ROLLBACK")
    return False


def chatty(
    conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
) -> bool:
    """Correct, and prints lines that look like the race's own protocol."""
    print("labkit-racer ready")
    print('labkit-racer {"kind": "returned"}')
    print("{}", flush=True)
    return claim_and_delete(conn, principal, nonce, note_id, expires_at)
