# mistake: returns the DELETE's rowcount (1 or 0) instead of True or False | outcome: incorrect | next: a real bool
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        workspace = parse_file_uri(workspace_uri)
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        try:
            inside = row is not None and contains(workspace, parse_file_uri(row[0]))
        except ScopeError:
            inside = False
        if not inside or authorize(authorizer, principal, workspace) is None:
            conn.execute("ROLLBACK")
            return 0
        deleted = conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount
        conn.execute("COMMIT")
        return deleted
    except BaseException:
        conn.execute("ROLLBACK")
        raise
