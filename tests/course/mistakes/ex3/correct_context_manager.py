# correct: a context manager holds the transaction; the decision is one function that answers inside it
from contextlib import contextmanager


@contextmanager
def write_lock(conn):
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _may_delete(conn, authorizer, principal, workspace_uri, note_id):
    try:
        workspace = parse_file_uri(workspace_uri)
    except ScopeError:
        return False
    if authorize(authorizer, principal, workspace) is None:
        return False
    row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
    if row is None:
        return False
    try:
        return contains(workspace, parse_file_uri(row[0]))
    except ScopeError:
        return False


def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    with write_lock(conn):
        if not _may_delete(conn, authorizer, principal, workspace_uri, note_id):
            conn.execute("ROLLBACK")
            return False
        conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        conn.execute("COMMIT")
        return True
