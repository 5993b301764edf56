# mistake: a missing note skips the checks and still returns True | outcome: incorrect | next: not found
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        workspace = parse_file_uri(workspace_uri)
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        refused = authorize(authorizer, principal, workspace) is None
        if row is not None:
            try:
                refused = refused or not contains(workspace, parse_file_uri(row[0]))
            except ScopeError:
                refused = True
        if refused:
            conn.execute("ROLLBACK")
            return False
        conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise
