# mistake: never authorizes the principal, trusting whoever asked | outcome: incorrect | next: authorize the principal
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        try:
            inside = row is not None and contains(
                parse_file_uri(workspace_uri), parse_file_uri(row[0])
            )
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
