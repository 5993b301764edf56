# mistake: deletes the note first and commits even when the claim turns out to be a replay | outcome: incorrect | next: undo anything done before
DELETE_SQL = "DELETE FROM notes WHERE id = ?"


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")  # the write lock first: a rival process waits here
    try:
        deleted = conn.execute(DELETE_SQL, (note_id,)).rowcount == 1
        if not deleted:
            conn.execute("ROLLBACK")
            return False
        claimed = conn.execute(
            "INSERT OR IGNORE INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            (principal, nonce, expires_at),
        ).rowcount == 1
        conn.execute("COMMIT")
        return claimed
    except BaseException:
        conn.execute("ROLLBACK")  # an error never leaves half a claim behind
        raise
