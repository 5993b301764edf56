# mistake: catches every exception and returns False without ROLLBACK (a missing note's row[0] TypeError included), leaving the write lock held | outcome: incorrect | next: COMMIT or ROLLBACK
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        workspace = parse_file_uri(workspace_uri)
        if authorize(authorizer, principal, workspace) is None:
            conn.execute("ROLLBACK")
            return False
        uri = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()[0]
        if not contains(workspace, parse_file_uri(uri)):
            conn.execute("ROLLBACK")
            return False
        conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        conn.execute("COMMIT")
        return True
    except Exception:
        return False
