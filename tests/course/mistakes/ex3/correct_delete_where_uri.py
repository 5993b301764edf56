# correct: the DELETE names the uri it checked, and its rowcount decides
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        try:
            workspace = parse_file_uri(workspace_uri)
            allowed = authorize(authorizer, principal, workspace) is not None
            ok = allowed and row is not None and contains(workspace, parse_file_uri(row[0]))
        except ScopeError:
            ok = False
        gone = ok and conn.execute(
            "DELETE FROM notes WHERE id = ? AND uri = ?", (note_id, row[0])
        ).rowcount == 1
        conn.execute("COMMIT" if gone else "ROLLBACK")
        return gone
    except BaseException:
        conn.execute("ROLLBACK")
        raise
