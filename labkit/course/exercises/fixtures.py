"""Fixtures shared by the exercise notebooks and their checks: SQLite schemas, example notes,
an example authorizer and a symlink tree.

Owns: the exact tables the exercises' contracts name, so a notebook's examples and the checks
build the same world (one module, imported by both). Notebooks reach these through
`labkit.course`. Must not import ipywidgets or the checks.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from labkit.scope import AllowlistAuthorizer

EX1_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS claims ("
    "principal TEXT NOT NULL, nonce TEXT NOT NULL, expires_at REAL NOT NULL, "
    "PRIMARY KEY (principal, nonce))",
    "CREATE TABLE IF NOT EXISTS notes (id TEXT PRIMARY KEY, uri TEXT, title TEXT)",
)
EX3_SCHEMA = ("CREATE TABLE IF NOT EXISTS notes (id TEXT PRIMARY KEY, uri TEXT, title TEXT)",)

WORKSPACE_URI = "file:///work/notes"
EXAMPLE_NOTES: tuple[tuple[str, str, str], ...] = (
    ("note-3", "file:///work/notes/2023/tps.md", "TPS report 2023"),
    ("note-7", "file:///work/notes/2024/tps.md", "TPS report 2024"),
    ("note-14", "file:///work/notes/2025/tps.md", "TPS report 2025"),
    ("note-99", "file:///work/notes-evil/tps.md", "TPS report (look-alike folder)"),
)


def connect(path: str | os.PathLike[str], *, timeout: float = 5.0) -> sqlite3.Connection:
    """A connection the way the exercises want it: autocommit (`isolation_level=None`, so
    `BEGIN IMMEDIATE`/`COMMIT`/`ROLLBACK` are yours to issue), WAL, and a bounded wait
    for the write lock instead of an immediate "database is locked"."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=timeout)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def create_ex1_schema(conn: sqlite3.Connection) -> None:
    """Exercise 1's tables: `claims(principal, nonce, expires_at)` keyed by (principal, nonce),
    and `notes(id, uri, title)`."""
    for statement in EX1_SCHEMA:
        conn.execute(statement)


def create_ex3_schema(conn: sqlite3.Connection) -> None:
    """Exercise 3's table: `notes(id, uri, title)`."""
    for statement in EX3_SCHEMA:
        conn.execute(statement)


def add_notes(
    conn: sqlite3.Connection, notes: Iterable[tuple[str, str, str]] = EXAMPLE_NOTES
) -> None:
    """Insert (id, uri, title) rows into `notes` (autocommit: each row commits)."""
    conn.executemany("INSERT INTO notes (id, uri, title) VALUES (?, ?, ?)", list(notes))


def note_ids(conn: sqlite3.Connection) -> list[str]:
    return [row[0] for row in conn.execute("SELECT id FROM notes ORDER BY id")]


def note_uri(conn: sqlite3.Connection, note_id: str) -> str | None:
    row = conn.execute("SELECT uri FROM notes WHERE id = ?", (note_id,)).fetchone()
    return None if row is None else str(row[0])


def claimed(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """The recorded (principal, nonce) claims."""
    return [
        (str(p), str(n))
        for p, n in conn.execute("SELECT principal, nonce FROM claims ORDER BY principal, nonce")
    ]


def example_authorizer() -> AllowlistAuthorizer:
    """alice may use file:///work/notes; bob only file:///work/other; nobody else anything."""
    return AllowlistAuthorizer({"alice": [WORKSPACE_URI], "bob": ["file:///work/other"]})


@dataclass(frozen=True)
class SymlinkTree:
    """The exercise 4 layout, built on a real filesystem under `base`:

    base/notes/2024/tps.md          a plain file inside the root
    base/notes/latest.md            -> 2024/tps.md            (inside to inside)
    base/notes/escape.md            -> ../secret.md           (inside to outside)
    base/notes/shared               -> ../notes-private       (a directory, outside)
    base/notes-private/salary.md    outside: shares only the name prefix "notes"
    base/secret.md                  outside
    """

    base: Path
    root: Path


def make_symlink_tree(base: str | os.PathLike[str]) -> SymlinkTree:
    base_path = Path(base).resolve()
    root = base_path / "notes"
    (root / "2024").mkdir(parents=True)
    (base_path / "notes-private").mkdir()
    (root / "2024" / "tps.md").write_text("TPS report 2024\n")
    (base_path / "secret.md").write_text("outside the root\n")
    (base_path / "notes-private" / "salary.md").write_text("outside the root, look-alike name\n")
    os.symlink(Path("2024") / "tps.md", root / "latest.md")
    os.symlink(Path("..") / "secret.md", root / "escape.md")
    os.symlink(Path("..") / "notes-private", root / "shared", target_is_directory=True)
    return SymlinkTree(base_path, root)
