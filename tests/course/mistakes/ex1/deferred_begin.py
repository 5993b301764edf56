# mistake: plain BEGIN (deferred) and a SELECT before the claim: both racers read "not claimed", then the loser cannot upgrade its lock and gets "database is locked" | outcome: error in your code | next: after BEGIN IMMEDIATE
DELETE_SQL = "DELETE FROM notes WHERE id = ?"


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN")
    try:
        taken = conn.execute(
            "SELECT 1 FROM claims WHERE principal = ? AND nonce = ?", (principal, nonce)
        ).fetchone()
        if taken:
            conn.execute("ROLLBACK")
            return False
        if conn.execute(DELETE_SQL, (note_id,)).rowcount != 1:
            conn.execute("ROLLBACK")
            return False
        conn.execute(
            "INSERT OR REPLACE INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            (principal, nonce, expires_at),
        )
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise
