# correct: a plain INSERT inside the transaction, the replay recognised by its IntegrityError
import sqlite3


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            (principal, nonce, expires_at),
        )
    except sqlite3.IntegrityError:
        conn.execute("ROLLBACK")
        return False
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    try:
        gone = conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount == 1
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT" if gone else "ROLLBACK")
    return gone
