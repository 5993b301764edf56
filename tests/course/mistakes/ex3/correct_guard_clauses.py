# correct: guard clauses, each ending the transaction, with ScopeError caught where a uri is parsed
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        try:
            workspace = parse_file_uri(workspace_uri)
        except ScopeError:
            conn.execute("ROLLBACK")
            return False
        if authorize(authorizer, principal, workspace) is None:
            conn.execute("ROLLBACK")
            return False
        row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
        if row is None:
            conn.execute("ROLLBACK")
            return False
        try:
            note = parse_file_uri(row[0])
        except ScopeError:
            conn.execute("ROLLBACK")
            return False
        if not contains(workspace, note):
            conn.execute("ROLLBACK")
            return False
        conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise
