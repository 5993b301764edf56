# correct: deletes first, then claims, both inside one BEGIN IMMEDIATE transaction
def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount == 0:
            conn.execute("ROLLBACK")
            return False
        inserted = conn.execute(
            "INSERT OR IGNORE INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            (principal, nonce, expires_at),
        ).rowcount
        if inserted == 0:
            conn.execute("ROLLBACK")  # a replay: the note comes back too
            return False
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise
