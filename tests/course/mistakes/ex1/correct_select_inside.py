# correct: reads the claim and the note after BEGIN IMMEDIATE, then writes; one exit that ends the transaction
def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")
    done = False
    try:
        used = conn.execute(
            "SELECT count(*) FROM claims WHERE principal = ? AND nonce = ?", (principal, nonce)
        ).fetchone()[0]
        exists = conn.execute("SELECT count(*) FROM notes WHERE id = ?", (note_id,)).fetchone()[0]
        if not used and exists:
            conn.execute(
                "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
                (principal, nonce, expires_at),
            )
            conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
            done = True
    finally:
        conn.execute("COMMIT" if done else "ROLLBACK")
    return done
