# mistake: a typo in the DELETE statement (DELET), so every call that gets that far raises sqlite3.OperationalError | outcome: error in your code | next: fix the line shown last
CLAIM_SQL = (
    "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
    "ON CONFLICT (principal, nonce) DO NOTHING"
)
DELETE_SQL = "DELET FROM notes WHERE id = ?"


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")  # the write lock first: a rival process waits here
    try:
        is_new = conn.execute(CLAIM_SQL, (principal, nonce, expires_at)).rowcount == 1
        if is_new and conn.execute(DELETE_SQL, (note_id,)).rowcount == 1:
            conn.execute("COMMIT")
            return True
        conn.execute("ROLLBACK")
        return False
    except BaseException:
        conn.execute("ROLLBACK")  # an error never leaves half a claim behind
        raise
