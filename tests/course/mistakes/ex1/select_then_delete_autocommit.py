# mistake: no transaction at all: SELECT the claim, DELETE the note, then INSERT OR IGNORE the claim as three autocommit statements | outcome: incorrect | next: after BEGIN IMMEDIATE
def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    taken = conn.execute(
        "SELECT 1 FROM claims WHERE principal = ? AND nonce = ?", (principal, nonce)
    ).fetchone()
    if taken is not None:
        return False
    if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount != 1:
        return False
    conn.execute(
        "INSERT OR IGNORE INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
        (principal, nonce, expires_at),
    )
    return True
