"""What the SQL backends (SQLite, PostgreSQL) share: how a note is stored as a row, how a
workspace becomes an index range, the replay store's bounds, and a connection per thread.

Owns: the row encoding of `Note.path`, `Note.identity` and a pending claim (`pending_ticket`),
the final (Python) decision of `find`, the PostgreSQL schema-name rule and default
(configuration checks the same ones), and the per-thread connection bookkeeping
(`ThreadConnections`). No database driver: a backend says how to open its connections.
Must not import a transport, the course toolkit or the grader.
"""

from __future__ import annotations

import os
import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, Self, TypeVar

from labkit.scope import Path, strictly_contains
from labkit.stores import Note, Ticket

# The PostgreSQL schema holding labkit's tables: 1 to 63 lowercase letters, digits and
# underscores, not starting with a digit (an identifier that never needs quoting rules).
DEFAULT_SCHEMA = "labkit"
SCHEMA_PATTERN = r"^[a-z_][a-z0-9_]{0,62}$"

NoteRow = tuple[str, str, str, int]
"""`(id, path text, title, generation)` as every note query selects it."""

_Conn = TypeVar("_Conn")
_T = TypeVar("_T")
Unit = Callable[[_Conn], tuple[bool, _T]]
"""One transaction's work on a connection: returns (commit?, result). False rolls everything
back."""

NOTE_COLUMNS = "id, path, title, generation"
PENDING_COLUMNS = "principal, nonce, expires_at, note_id, attempt, holder, lease_until"
"""A claim as every claim query selects it (`pending_ticket` reads it)."""


def path_text(path: Path) -> str:
    """`("work", "notes", "a.md")` -> `/work/notes/a.md`.

    Unambiguous because a parsed segment never holds `/` (scope.py rejects `%2F`), so the
    text is an exact encoding of the tuple, and prefix order on the text is tuple order.
    """
    return "/" + "/".join(path)


def parse_path_text(text: str) -> Path:
    return () if text == "/" else tuple(text.split("/")[1:])


def below(workspace: Path) -> tuple[str, str]:
    """The half-open text range `[low, high)` holding every path strictly below `workspace`.

    `low` ends with the separator, so `/work/notes2/x` is never inside `/work/notes` (the
    sibling-prefix bug of CVE-2025-53110); `high` swaps that separator for "0", the next code
    point, so the range is an index scan in both SQLite (BINARY) and PostgreSQL (COLLATE "C").
    """
    low = path_text(workspace).rstrip("/") + "/"
    return low, low[:-1] + "0"


def new_epoch() -> str:
    """A random name for one database, part of every identity it hands out: a note in a
    re-created database never matches a confirmation minted against the old one."""
    return secrets.token_hex(4)


def identity(epoch: str, generation: int) -> str:
    return f"{epoch}-{generation}"


def generation_of(epoch: str, note_identity: str) -> int | None:
    """The generation inside an identity this database handed out, else None."""
    prefix = f"{epoch}-"
    if not note_identity.startswith(prefix) or not note_identity[len(prefix) :].isdigit():
        return None
    return int(note_identity[len(prefix) :])


def pending_ticket(row: tuple[Any, ...]) -> Ticket:
    """A pending claim's row (`PENDING_COLUMNS`) as its ticket. A claim left by a version
    that named no holder has none, so it counts as gone."""
    principal, nonce, expires_at, note_id, attempt, holder, lease_until = row
    return Ticket(principal, nonce, expires_at, note_id, attempt, holder or "", lease_until or 0.0)


def note_from_row(epoch: str, row: NoteRow) -> Note:
    note_id, text, title, generation = row
    return Note(note_id, parse_path_text(text), title, identity(epoch, generation))


def decide_found(
    epoch: str, rows: Iterable[NoteRow], workspace: Path, title: str, limit: int
) -> Sequence[Note]:
    """The notes `find` returns, decided in Python with the same rules as the memory store.

    The SQL query narrows by index; this re-check keeps the answer identical to the memory
    store (casefold, strict containment, order) even for a row some other tool wrote.
    """
    needle = title.casefold()
    notes = [note_from_row(epoch, row) for row in rows]
    matches = [
        n for n in notes if strictly_contains(workspace, n.path) and needle in n.title.casefold()
    ]
    matches.sort(key=lambda n: (n.title.casefold(), n.id))
    return matches[:limit]


class Closable(Protocol):
    def close(self) -> None: ...


_C = TypeVar("_C", bound=Closable)


class ThreadConnections(ABC, Generic[_C]):
    """A connection per thread and per process, for a store used from many threads and
    possibly forked: opened on first use, tracked so `close()` can close them all.

    A backend implements `_open` (and `_usable` if a connection can go bad on its own), calls
    `super().__init__()` before its first `_connection()`, and runs every unit of work on
    `self._connection()`.
    """

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[tuple[int, _C]] = []
        self._closed = False

    @abstractmethod
    def _open(self) -> _C:
        """A new connection, ready for this store's units of work."""

    def _usable(self, conn: _C) -> bool:
        """Whether this thread's existing connection (opened in this process) may be reused."""
        return True

    def _connection(self) -> _C:
        if self._closed:
            raise ValueError(f"{self!r} is closed")
        pid = os.getpid()
        conn: _C | None = getattr(self._local, "conn", None)
        # A connection inherited through fork() is never used: SQLite forbids it, and a
        # network connection's socket would be shared with the parent.
        if conn is not None and self._local.pid == pid and self._usable(conn):
            return conn
        conn = self._open()
        self._local.conn, self._local.pid = conn, pid
        with self._lock:
            self._connections.append((pid, conn))
        return conn

    def _forget(self, conn: _C) -> None:
        """Drop this thread's connection (it broke): no longer used, tracked, or open."""
        self._local.conn = None
        with self._lock:
            self._connections = [(p, c) for p, c in self._connections if c is not conn]
        conn.close()

    def close(self) -> None:
        """Close this process's connections (those inherited through fork stay untouched)."""
        pid = os.getpid()
        with self._lock:
            self._closed = True
            mine = [conn for owner, conn in self._connections if owner == pid]
            self._connections = [(o, c) for o, c in self._connections if o != pid]
        for conn in mine:
            conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
