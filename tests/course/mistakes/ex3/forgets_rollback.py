# mistake: a refusal returns False without ROLLBACK, leaving the transaction open and the write lock held | outcome: incorrect | next: COMMIT or ROLLBACK
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    workspace = parse_file_uri(workspace_uri)
    if authorize(authorizer, principal, workspace) is None:
        return False
    row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
    if row is None:
        return False
    try:
        inside = contains(workspace, parse_file_uri(row[0]))
    except ScopeError:
        inside = False
    if not inside:
        return False
    conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
    conn.execute("COMMIT")
    return True
