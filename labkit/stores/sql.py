"""What the SQL backends (SQLite, PostgreSQL) share: how a note is stored as a row, how a
workspace becomes an index range, and the replay store's bounds.

Owns: the row encoding of `Note.path` and `Note.identity`, the final (Python) decision of
`find`, and the validation of the replay bounds. Pure module: no I/O, no database driver.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence

from labkit.scope import Path, strictly_contains
from labkit.stores import Note

Row = tuple[str, str, str, int]
"""`(id, path text, title, generation)` as every note query selects it."""

NOTE_COLUMNS = "id, path, title, generation"


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


def note_from_row(epoch: str, row: Row) -> Note:
    note_id, text, title, generation = row
    return Note(note_id, parse_path_text(text), title, identity(epoch, generation))


def decide_found(
    epoch: str, rows: Iterable[Row], workspace: Path, title: str, limit: int
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


def replay_bounds(capacity: int, per_principal: int) -> tuple[int, int]:
    """`(capacity, per-principal share)` exactly as `MemoryReplayStore` takes them."""
    if capacity < 1 or per_principal < 1:
        raise ValueError("replay store capacity and per-principal share must be positive")
    return capacity, min(per_principal, capacity)
