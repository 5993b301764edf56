# mistake: checks the claims table before BEGIN IMMEDIATE, then claims without reading the INSERT's rowcount (check-then-act) | outcome: incorrect | next: after BEGIN IMMEDIATE
DELETE_SQL = "DELETE FROM notes WHERE id = ?"


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    taken = conn.execute(
        "SELECT 1 FROM claims WHERE principal = ? AND nonce = ?", (principal, nonce)
    ).fetchone()
    if taken:
        return False
    conn.execute("BEGIN IMMEDIATE")  # the write lock first: a rival process waits here
    try:
        conn.execute(
            "INSERT OR IGNORE INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
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
