# correct: one decision variable and a finally that commits or rolls back
def _inside(workspace_uri, uri):
    try:
        return contains(parse_file_uri(workspace_uri), parse_file_uri(uri))
    except ScopeError:
        return False


def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    deleted = False
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        if row is not None and _inside(workspace_uri, row[0]):
            if authorize(authorizer, principal, parse_file_uri(workspace_uri)) is not None:
                cursor = conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
                deleted = cursor.rowcount == 1
    finally:
        conn.execute("COMMIT" if deleted else "ROLLBACK")
    return deleted
