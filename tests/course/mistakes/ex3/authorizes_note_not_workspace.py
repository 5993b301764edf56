# mistake: authorizes the note's own path instead of the requested workspace, so any note under alice's root can go | outcome: incorrect | next: requested workspace
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        try:
            allowed = (
                row is not None
                and authorize(authorizer, principal, parse_file_uri(row[0])) is not None
            )
        except ScopeError:
            allowed = False
        if not allowed:
            conn.execute("ROLLBACK")
            return False
        conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise
