# mistake: refuses a replay by raising ValueError instead of returning False | outcome: incorrect | next: return False
CLAIM_SQL = (
    "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
    "ON CONFLICT (principal, nonce) DO NOTHING"
)
DELETE_SQL = "DELETE FROM notes WHERE id = ?"


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")  # the write lock first: a rival process waits here
    try:
        if conn.execute(CLAIM_SQL, (principal, nonce, expires_at)).rowcount != 1:
            raise ValueError(f"nonce {nonce!r} was already used")
        if conn.execute(DELETE_SQL, (note_id,)).rowcount != 1:
            conn.execute("ROLLBACK")
            return False
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")  # an error never leaves half a claim behind
        raise
