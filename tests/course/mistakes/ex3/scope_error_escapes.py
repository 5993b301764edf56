# mistake: a stored uri that does not parse lets ScopeError escape instead of refusing with False | outcome: error in your code | next: does not parse
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        workspace = parse_file_uri(workspace_uri)
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        if (
            row is None
            or authorize(authorizer, principal, workspace) is None
            or not contains(workspace, parse_file_uri(row[0]))
        ):
            conn.execute("ROLLBACK")
            return False
        conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise
