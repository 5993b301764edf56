# correct: BEGIN IMMEDIATE, then the connection as a context manager (commit on leaving, rollback on an exception) and an explicit rollback for a refusal
def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")
    with conn:
        inserted = conn.execute(
            "INSERT OR IGNORE INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            (principal, nonce, expires_at),
        ).rowcount
        deleted = inserted and conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount
        if inserted == 1 and deleted == 1:
            return True
        conn.rollback()
        return False
