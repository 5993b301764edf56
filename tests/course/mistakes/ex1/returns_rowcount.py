# mistake: returns the DELETE's rowcount (1 or 0) instead of True or False | outcome: incorrect | next: a real bool
CLAIM_SQL = (
    "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
    "ON CONFLICT (principal, nonce) DO NOTHING"
)
DELETE_SQL = "DELETE FROM notes WHERE id = ?"


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")  # the write lock first: a rival process waits here
    try:
        if conn.execute(CLAIM_SQL, (principal, nonce, expires_at)).rowcount != 1:
            conn.execute("ROLLBACK")
            return 0
        deleted = conn.execute(DELETE_SQL, (note_id,)).rowcount
        conn.execute("COMMIT" if deleted else "ROLLBACK")
        return deleted
    except BaseException:
        conn.execute("ROLLBACK")  # an error never leaves half a claim behind
        raise
