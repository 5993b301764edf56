# mistake: reads the note's uri before BEGIN IMMEDIATE and trusts it inside the transaction (check-then-act) | outcome: incorrect | next: read the note's uri again inside the transaction
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
    if row is None:
        return False
    workspace = parse_file_uri(workspace_uri)
    try:
        inside = contains(workspace, parse_file_uri(row[0]))
    except ScopeError:
        inside = False
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not inside or authorize(authorizer, principal, workspace) is None:
            conn.execute("ROLLBACK")
            return False
        conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise
