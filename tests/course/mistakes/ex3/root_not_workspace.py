# mistake: checks containment against the authorized root instead of the requested workspace, so a note in a sibling folder of the workspace is deleted | outcome: incorrect | next: requested workspace
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        root = authorize(authorizer, principal, parse_file_uri(workspace_uri))
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        try:
            inside = root is not None and row is not None and contains(root, parse_file_uri(row[0]))
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
