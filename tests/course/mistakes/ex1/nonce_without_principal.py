# mistake: looks the nonce up without the principal, so bob cannot use a nonce alice used | outcome: incorrect | next: keyed by principal and nonce
DELETE_SQL = "DELETE FROM notes WHERE id = ?"


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")  # the write lock first: a rival process waits here
    try:
        if conn.execute("SELECT 1 FROM claims WHERE nonce = ?", (nonce,)).fetchone():
            conn.execute("ROLLBACK")
            return False
        conn.execute(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            (principal, nonce, expires_at),
        )
        if conn.execute(DELETE_SQL, (note_id,)).rowcount != 1:
            conn.execute("ROLLBACK")
            return False
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")  # an error never leaves half a claim behind
        raise
