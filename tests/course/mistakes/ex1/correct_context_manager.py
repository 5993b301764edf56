# correct: a context manager of its own holds BEGIN IMMEDIATE and ends every path (COMMIT, or ROLLBACK on a refusal or an exception)
from contextlib import contextmanager


class Refused(Exception):
    pass


@contextmanager
def immediate(conn):
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    try:
        with immediate(conn):
            claimed = conn.execute(
                "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT (principal, nonce) DO NOTHING",
                (principal, nonce, expires_at),
            ).rowcount
            if claimed != 1:
                raise Refused("a replay")
            if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount != 1:
                raise Refused("no such note")
    except Refused:
        return False
    return True
