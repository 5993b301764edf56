# mistake: authorizes the principal but never checks where the note is | outcome: incorrect | next: path components
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    conn.execute("BEGIN IMMEDIATE")
    try:
        if authorize(authorizer, principal, parse_file_uri(workspace_uri)) is None:
            conn.execute("ROLLBACK")
            return False
        deleted = conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount == 1
        conn.execute("COMMIT" if deleted else "ROLLBACK")
        return deleted
    except BaseException:
        conn.execute("ROLLBACK")
        raise
