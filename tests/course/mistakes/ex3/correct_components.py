# correct: whole components compared by slicing the parsed paths, the connection as a context manager after BEGIN IMMEDIATE
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    with conn:
        try:
            workspace = parse_file_uri(workspace_uri)
            granted = authorize(authorizer, principal, workspace) is not None
            row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
            note = parse_file_uri(row[0]) if row is not None else None
        except ScopeError:
            granted, note = False, None
        if granted and note is not None and note[: len(workspace)] == workspace:
            conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
            return True
        conn.rollback()
        return False
