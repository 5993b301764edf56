# mistake: autocommit statements, undoing the claim by hand when the note is missing; a failing delete leaves the nonce used | outcome: incorrect | next: one transaction
CLAIM_SQL = (
    "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
    "ON CONFLICT (principal, nonce) DO NOTHING"
)
DELETE_SQL = "DELETE FROM notes WHERE id = ?"


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    if conn.execute(CLAIM_SQL, (principal, nonce, expires_at)).rowcount != 1:
        return False
    if conn.execute(DELETE_SQL, (note_id,)).rowcount != 1:
        conn.execute("DELETE FROM claims WHERE principal = ? AND nonce = ?", (principal, nonce))
        return False
    return True
