# mistake: refuses an unauthorized principal by raising PermissionError instead of returning False | outcome: incorrect | next: return False
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        workspace = parse_file_uri(workspace_uri)
        if authorize(authorizer, principal, workspace) is None:
            raise PermissionError(f"{principal} may not use {workspace_uri}")
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        try:
            inside = row is not None and contains(workspace, parse_file_uri(row[0]))
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
