# mistake: string prefix with a trailing slash: stops notes-evil but lets a stored %2e%2e traversal through | outcome: incorrect | next: parse the stored uri
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        allowed = authorize(authorizer, principal, parse_file_uri(workspace_uri)) is not None
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        if not allowed or row is None or not row[0].startswith(workspace_uri.rstrip("/") + "/"):
            conn.execute("ROLLBACK")
            return False
        conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise
