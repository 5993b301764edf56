"""Notes as real `.md` files in real workspace directories: the filesystem `NoteStore`.

Owns: mapping workspace `file:` URIs to `labkit.fsroot.Root`s, titles read from the files,
stable opaque note ids, the symlink policy, and the intent journal that makes a file deletion
happen at most once: this store's side of the two-step deletion protocol of `labkit.stores`
(`delete_for`, `fence`). Descriptors, memory or the disk failing (`fsroot.Unavailable`, a
journal that cannot be written) is `StoreUnavailable`, never an empty listing.

Titles. The front matter `title:` if the file starts with a `---` block, else the first
`# ` heading (outside code fences), else the file name without `.md`; control and
bidirectional-format characters are removed and the result is capped at 200 characters.
A title is display text only: no path is ever built from it.

Ids. `fs-` and 24 hex digits of HMAC-SHA256(id_key, "device:inode"): stable while the file
exists (a rename keeps it), the same in every server instance given the same key, and not a
path a client can steer. An id maps to (workspace, relative name, device, inode) through an
index the listing fills; an unknown id triggers one bounded rescan. `Note.identity` is
"device:inode:mtime_ns": the delete re-checks it with `os.stat(name, dir_fd=parent,
follow_symlinks=False)`, so an inode reused by a new file, or a note edited after the form
was shown, is never deleted in its place.

Symlink policy (chosen per deployment; docs/symlink-policy.md has the whole table):

- `symlinks="refuse"` (default): no operation ever follows a symbolic link beneath a
  workspace root. A workspace path or note path that passes through one finds nothing and
  deletes nothing; a link is never listed as a note and never deleted.
- `symlinks="within_root"`: a workspace path or note path may pass through links whose
  targets stay inside the same root (`current -> 2024`). They are resolved in user space one
  component at a time (Go's `os.Root` algorithm): absolute targets, `..` above the root,
  loops and mount crossings are refused, and the resulting symlink-free path is then used
  with the same descriptor-relative, no-symlink operations as "refuse". Notes are reported
  under the path that was asked for. Links are still never listed as notes and never deleted.

Both: hard-linked files (`st_nlink > 1`), FIFOs, devices and sockets are never listed, read
or deleted; hidden names and other mounted filesystems are not searched.

Intent journal. A small SQLite database at `journal_path` (WAL, `synchronous=FULL`), kept
next to the server state rather than in the replay store: the replay store may be memory or
PostgreSQL and shared by every instance, while the files and their journal belong to this
host. Order: the replay claim commits as pending, the intent row commits (durably), the
descriptor-relative unlink runs and the directory is fsynced, then the row becomes "done"
(the receipt of the protocol) and the claim is settled. A crash in between leaves a
"pending" row: `fence` (the next retry of that state, start-up) finishes it, and
`pending_intents()` / `recover()` list and finish or abandon them by hand. Recovery deletes
only the file with the recorded identity, so it can never delete twice. A row is keyed by
(principal, nonce, attempt); a "done" row for a nonce also refuses any other attempt, so a
nonce the replay store may have forgotten never deletes twice.
Must not import a transport, the course toolkit or the grader.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import os
import re
import sqlite3
import threading
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, Literal

from labkit.clock import Clock, system_clock
from labkit.fsroot import Identity, Parts, Refused, Resolver, ResolverName, Root, Unavailable
from labkit.scope import Path, contains, format_file_uri, parse_file_uri, strictly_contains
from labkit.stores import (
    FAULTS,
    HOLDER,
    ClaimHolder,
    Confirmation,
    Deletion,
    Note,
    ReplayStore,
    StoreBusy,
    StoreUnavailable,
    Ticket,
    claim_then_delete,
)
from labkit.stores.sqlite import fault

log = logging.getLogger("labkit.stores.filesystem")

SymlinkPolicy = Literal["refuse", "within_root"]
SYMLINK_POLICIES: Final = ("refuse", "within_root")
NOTE_SUFFIX: Final = ".md"
ID_PREFIX: Final = "fs-"
DEFAULT_MAX_SCAN: Final = 10_000
TITLE_READ_BYTES: Final = 8192
MAX_TITLE_CHARS: Final = 200
_INDEX_LIMIT: Final = 100_000
_DEFAULT_ID_KEY: Final = b"labkit filesystem note id"
# Finished rows outlive their confirmation by this much (see sqlite.RECEIPT_GRACE_SECONDS).
_FINISHED_GRACE_SECONDS: Final = 7 * 86_400
_JOURNAL_VERSION: Final = 2

AuditEvent = Literal["intent", "unlinked", "done", "stale"]


@dataclass(frozen=True)
class Intent:
    """One journaled deletion. `state`: pending, done, stale or abandoned."""

    id: int
    principal: str
    nonce: str
    attempt: str
    note_id: str
    root: str
    rel: Parts
    identity: str
    state: str
    resolution: str
    created_at: float
    expires_at: float


@dataclass(frozen=True)
class _Workspace:
    path: Path
    uri: str
    root: Root


# -- titles ------------------------------------------------------------------------------------

_HEADING = re.compile(r"^ {0,3}# +(.*?)(?: +#+)? *$")
_FRONT_TITLE = re.compile(r"^title:\s*(.*?)\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def parse_title(head: bytes, file_name: str) -> str:
    """The note's title from the first bytes of its file (see the module docstring)."""
    lines = head.decode("utf-8", errors="replace").splitlines()
    body_start = 0
    if lines and lines[0].strip() == "---":
        for index, line in enumerate(lines[1:], start=1):
            if line.strip() in ("---", "..."):
                body_start = index + 1
                break
            match = _FRONT_TITLE.match(line)
            if match:
                title = _clean(match.group(1).strip("\"'"))
                if title:
                    return title
    in_fence = False
    for line in lines[body_start:]:
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else _HEADING.match(line)
        if match:
            title = _clean(match.group(1))
            if title:
                return title
    stem = file_name[: -len(NOTE_SUFFIX)] if file_name.endswith(NOTE_SUFFIX) else file_name
    return _clean(stem) or file_name


def _clean(text: str) -> str:
    # Cc: controls (a newline in a form label); Cf: bidi overrides that make a title lie.
    kept = "".join(" " if unicodedata.category(c) in ("Cc", "Cf") else c for c in text)
    return " ".join(kept.split())[:MAX_TITLE_CHARS]


# -- the journal -------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS intents (
    id INTEGER PRIMARY KEY,
    principal TEXT NOT NULL,
    nonce TEXT NOT NULL,
    attempt TEXT NOT NULL DEFAULT '',
    note_id TEXT NOT NULL,
    root TEXT NOT NULL,
    rel TEXT NOT NULL,
    identity TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'stale', 'abandoned')),
    resolution TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    finished_at REAL,
    UNIQUE (principal, nonce, attempt)
);
CREATE INDEX IF NOT EXISTS intents_state ON intents (state, expires_at);
"""
# Version 1 keyed a row by (principal, nonce) alone: rebuilt with the attempt column.
_MIGRATE_V1 = f"""
ALTER TABLE intents RENAME TO intents_v1;
DROP INDEX IF EXISTS intents_state;
{_SCHEMA}
INSERT INTO intents (id, principal, nonce, note_id, root, rel, identity, state, resolution,
    created_at, expires_at, finished_at)
SELECT id, principal, nonce, note_id, root, rel, identity, state, resolution, created_at,
    expires_at, finished_at FROM intents_v1;
DROP TABLE intents_v1;
"""
_COLUMNS = (
    "id, principal, nonce, attempt, note_id, root, rel, identity, state, resolution,"
    " created_at, expires_at"
)


def _intent(row: Any) -> Intent:
    (
        id_,
        principal,
        nonce,
        attempt,
        note_id,
        root,
        rel,
        identity,
        state,
        resolution,
        created,
        expires,
    ) = row
    return Intent(
        id_,
        principal,
        nonce,
        attempt,
        note_id,
        root,
        tuple(json.loads(rel)),
        identity,
        state,
        resolution,
        created,
        expires,
    )


class _Journal:
    """The intent journal. One connection, serialized by a lock; `BEGIN IMMEDIATE` takes the
    write lock up front, so concurrent processes wait (busy_timeout) instead of failing."""

    def __init__(self, path: str, clock: Clock) -> None:
        self._clock = clock
        self._path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        try:
            self._db.execute("PRAGMA busy_timeout = 30000")
            self._db.execute("PRAGMA journal_mode = WAL")
            # FULL: the intent row is on disk before the unlink that it announces.
            self._db.execute("PRAGMA synchronous = FULL")
            self._db.execute("PRAGMA temp_store = MEMORY")
            # A current journal is only read at start (a full disk still serves).
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version != _JOURNAL_VERSION:
                old = self._db.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'intents'"
                ).fetchone()
                self._db.executescript(
                    "BEGIN IMMEDIATE;"
                    + (_MIGRATE_V1 if old else _SCHEMA)
                    + f"PRAGMA user_version = {_JOURNAL_VERSION}; COMMIT;"
                )
        except BaseException:
            self._db.close()
            raise

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """The journal's own failures as the store errors they are (`FAULTS`, the journal's
        path naming the store)."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                busy = StoreBusy(f"{self._path} stayed locked; nothing was changed")
                raise FAULTS.record(self._path, busy) from exc
            unavailable = fault(self._path, exc)
            if unavailable is None:
                raise
            raise FAULTS.record(self._path, unavailable) from exc

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._guard():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        FAULTS.wrote(self._path)

    @property
    def path(self) -> str:
        return self._path

    def begin_intent(
        self,
        *,
        principal: str,
        nonce: str,
        attempt: str,
        note_id: str,
        root: str,
        rel: Parts,
        identity: str,
        expires_at: float,
    ) -> Intent | None:
        """Commit a pending intent; None if this attempt was fenced, or this nonce already
        deleted (or is deleting, in another attempt)."""
        now = self._clock()
        with self._transaction() as db:
            # Finished rows are only kept while their nonce could still be replayed.
            db.execute(
                "DELETE FROM intents WHERE state != 'pending' AND expires_at < ?",
                (now - _FINISHED_GRACE_SECONDS,),
            )
            seen = db.execute(
                "SELECT 1 FROM intents WHERE principal = ? AND nonce = ?"
                " AND (attempt = ? OR state IN ('pending', 'done'))",
                (principal, nonce, attempt),
            ).fetchone()
            if seen is not None:
                return None
            cursor = db.execute(
                "INSERT INTO intents (principal, nonce, attempt, note_id, root, rel, identity,"
                " state, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
                (
                    principal,
                    nonce,
                    attempt,
                    note_id,
                    root,
                    json.dumps(list(rel)),
                    identity,
                    now,
                    expires_at,
                ),
            )
            row = db.execute(
                f"SELECT {_COLUMNS} FROM intents WHERE id = ?", (cursor.lastrowid,)
            ).fetchone()
        return _intent(row)

    def finish_intent(self, intent_id: int, state: str, resolution: str) -> str:
        """Move a pending intent to `state`; returns the state it ends in (another process,
        a recovery, may have finished it first)."""
        with self._transaction() as db:
            db.execute(
                "UPDATE intents SET state = ?, resolution = ?, finished_at = ?"
                " WHERE id = ? AND state = 'pending'",
                (state, resolution, self._clock(), intent_id),
            )
            row = db.execute("SELECT state FROM intents WHERE id = ?", (intent_id,)).fetchone()
        return str(row[0]) if row else state

    def fence_intent(self, principal: str, nonce: str, attempt: str, expires_at: float) -> Intent:
        """The row of this attempt, recording "abandoned" (it will never delete) if there was
        none."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO intents (principal, nonce, attempt, note_id, root, rel, identity,"
                " state, resolution, created_at, expires_at)"
                " VALUES (?, ?, ?, '', '', '[]', '', 'abandoned', 'fenced before it began', ?, ?)"
                " ON CONFLICT (principal, nonce, attempt) DO NOTHING",
                (principal, nonce, attempt, self._clock(), expires_at),
            )
            row = db.execute(
                f"SELECT {_COLUMNS} FROM intents WHERE principal = ? AND nonce = ? AND attempt = ?",
                (principal, nonce, attempt),
            ).fetchone()
        return _intent(row)

    def has_deleted(self, principal: str, nonce: str) -> bool:
        """Whether an attempt at this nonce deleted its file ("done")."""
        with self._lock, self._guard():
            row = self._db.execute(
                "SELECT 1 FROM intents WHERE principal = ? AND nonce = ? AND state = 'done'",
                (principal, nonce),
            ).fetchone()
        return row is not None

    def pending(self) -> list[Intent]:
        with self._lock, self._guard():
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM intents WHERE state = 'pending' ORDER BY id"
            ).fetchall()
        return [_intent(r) for r in rows]

    def resolve(self, intent_id: int, decide: Callable[[Intent], tuple[str, str]]) -> Intent | None:
        """Run `decide` on a still-pending intent while holding the write lock, and record
        its (state, resolution). Two recoverers never act on one intent at once; a crash
        inside `decide` rolls back and leaves the intent pending."""
        with self._transaction() as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM intents WHERE id = ? AND state = 'pending'",
                (intent_id,),
            ).fetchone()
            if row is None:
                return None
            intent = _intent(row)
            state, resolution = decide(intent)
            db.execute(
                "UPDATE intents SET state = ?, resolution = ?, finished_at = ? WHERE id = ?",
                (state, resolution, self._clock(), intent_id),
            )
        return dataclasses.replace(intent, state=state, resolution=resolution)


# -- the store ---------------------------------------------------------------------------------


class FilesystemNoteStore:
    """Notes in real directories; see the module docstring for titles, ids and policies."""

    def __init__(
        self,
        workspaces: Sequence[str],
        *,
        journal_path: str | os.PathLike[str],
        symlinks: SymlinkPolicy = "refuse",
        resolver: ResolverName | Resolver = "auto",
        max_scan: int = DEFAULT_MAX_SCAN,
        id_key: bytes | None = None,
        clock: Clock = system_clock,
        audit: Callable[[AuditEvent, Intent], None] | None = None,
    ) -> None:
        """`workspaces` are `file:` URIs of existing directories (file:///srv/notes is
        /srv/notes). `id_key`, when given (>= 32 secret bytes), makes ids unguessable; ids
        only ever resolve to files in these workspaces either way. `audit` sees every
        journal step; an exception it raises stops the deletion exactly where a crash
        would, leaving the intent pending."""
        if symlinks not in SYMLINK_POLICIES:
            raise ValueError(f"symlinks must be one of {SYMLINK_POLICIES}, not {symlinks!r}")
        if max_scan < 1:
            raise ValueError("max_scan must be positive")
        self.symlinks: SymlinkPolicy = symlinks
        self.max_scan = max_scan
        self._id_key = id_key if id_key is not None else _DEFAULT_ID_KEY
        self._audit = audit
        self._lock = threading.Lock()
        self._index: dict[str, tuple[_Workspace, Parts]] = {}
        self._workspaces: list[_Workspace] = []
        try:
            for uri in workspaces:
                path = parse_file_uri(uri)
                if not path:
                    raise ValueError("a workspace cannot be the filesystem root")
                if any(ws.path == path for ws in self._workspaces):
                    continue
                root = Root("/" + "/".join(path), resolver=resolver)
                self._workspaces.append(_Workspace(path, format_file_uri(path), root))
            if not self._workspaces:
                raise ValueError("a filesystem note store needs at least one workspace")
            self._journal = _Journal(os.fspath(journal_path), clock)
        except BaseException:
            for ws in self._workspaces:
                ws.root.close()
            raise
        # Deepest first: a note under nested workspaces is resolved from the closest root.
        self._workspaces.sort(key=lambda ws: len(ws.path), reverse=True)

    @property
    def resolver(self) -> str:
        return self._workspaces[0].root.resolver.name

    def close(self) -> None:
        for ws in self._workspaces:
            ws.root.close()
        self._journal.close()

    def __enter__(self) -> FilesystemNoteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- NoteStore -----------------------------------------------------------------------

    def find(self, workspace: Path, title: str, limit: int) -> Sequence[Note]:
        with self._available():
            return self._find(workspace, title, limit)

    def _find(self, workspace: Path, title: str, limit: int) -> Sequence[Note]:
        located = self._locate(workspace, contains)
        if located is None or limit < 1:
            return []
        ws, rel = located
        needle = title.casefold()
        matches: list[Note] = []
        try:
            base = self._resolve(ws, rel)
            scan = ws.root.scan(
                base, max_entries=self.max_scan, read_limit=TITLE_READ_BYTES, suffix=NOTE_SUFFIX
            )
            for entry in scan:
                # Reported under the path that was asked for (an alias under "within_root").
                shown = rel + entry.parts[len(base) :]
                note = self._note(ws, shown, entry.identity, entry.head)
                if needle in note.title.casefold():
                    matches.append(note)
            if scan.truncated:
                log.warning(
                    "listing of %s stopped after %d entries (max_scan)",
                    format_file_uri(workspace),
                    self.max_scan,
                )
        except Refused as exc:
            log.info("workspace %s refused: %s", format_file_uri(workspace), exc.reason)
            return []
        matches.sort(key=lambda n: (n.title.casefold(), n.id))
        return matches[:limit]

    def get(self, note_id: str) -> Note | None:
        if not isinstance(note_id, str) or not note_id.startswith(ID_PREFIX):
            return None
        with self._available():
            return self._get(note_id)

    def _get(self, note_id: str) -> Note | None:
        with self._lock:
            known = self._index.get(note_id)
        if known is not None:
            note = self._live(*known)
            if note is not None and note.id == note_id:
                return note
        # Unknown here (listed by another instance, or renamed): one bounded rescan.
        for ws in self._workspaces:
            try:
                scan = ws.root.scan(
                    (), max_entries=self.max_scan, read_limit=TITLE_READ_BYTES, suffix=NOTE_SUFFIX
                )
                for entry in scan:
                    note = self._note(ws, entry.parts, entry.identity, entry.head)
                    if note.id == note_id:
                        return note
            except Refused as exc:
                log.warning("workspace %s unavailable: %s", ws.uri, exc.reason)
        return None

    def delete(self, note: Note) -> bool:
        try:
            with self._available():
                self._unlink(note)
        except Refused as exc:
            log.info("delete of %s refused: %s", note.id, exc.reason)
            return False
        return True

    def locate(self, path: Path) -> Note | None:
        """The live note at an absolute path, or None (maps a file to its id)."""
        located = self._locate(path, strictly_contains)
        with self._available():
            return self._live(*located) if located is not None else None

    # -- AtomicDeleter and the two-step protocol -----------------------------------------

    def claim_and_delete(
        self, replay: ReplayStore, confirmation: Confirmation, holder: ClaimHolder = HOLDER
    ) -> tuple[Deletion, Note | None]:
        """Claim (pending), journal, unlink, mark done, settle: the two-step protocol of
        `labkit.stores`, the same as for two databases; the file is deleted at most once."""
        return claim_then_delete(self, replay, confirmation, holder)

    def delete_for(self, note: Note, ticket: Ticket) -> bool | None:
        located = self._locate(note.path, strictly_contains)
        if located is None or note.id != ticket.note_id:
            return False
        ws, rel = located
        with self._available():
            intent = self._journal.begin_intent(
                principal=ticket.principal,
                nonce=ticket.nonce,
                attempt=ticket.attempt,
                note_id=note.id,
                root=ws.uri,
                rel=rel,
                identity=note.identity,
                expires_at=ticket.expires_at,
            )
            if intent is None:
                # Fenced, or the journal saw this nonce delete: a replay the replay store no
                # longer remembers.
                log.warning(
                    "nonce of %r already journaled; refusing a second deletion", ticket.principal
                )
                return None
            self._emit("intent", intent)
            try:
                self._unlink(note)
            except Refused as exc:
                final = self._journal.finish_intent(
                    intent.id, "stale", f"refused at unlink: {exc.reason}"
                )
                self._emit("stale", intent)
                return final == "done"  # "done": a concurrent recovery completed it
            self._emit("unlinked", intent)
            self._journal.finish_intent(intent.id, "done", "deleted")
            self._emit("done", intent)
        return True

    def fence(self, ticket: Ticket) -> bool:
        with self._available():
            row = self._journal.fence_intent(
                ticket.principal, ticket.nonce, ticket.attempt, ticket.expires_at
            )
            if row.state == "pending":
                # Journaled but not finished (a crash between the intent and "done"): finish
                # it as start-up recovery would; only the journaled file can go.
                self._journal.resolve(row.id, lambda i: self._decide(i, True))
            return self._journal.has_deleted(ticket.principal, ticket.nonce)

    # -- recovery ------------------------------------------------------------------------

    def pending_intents(self) -> list[Intent]:
        """Deletions that were journaled but not finished (a crash, or one in flight)."""
        return self._journal.pending()

    def recover(self, *, complete: bool = True) -> list[Intent]:
        """Finish (`complete=True`) or abandon every pending intent; returns them resolved.

        Completing deletes the file only if it still has the journaled identity, so an intent
        whose unlink already happened becomes "done" without touching anything, and a new
        file that took the name is left alone ("stale"). Run it at start, before serving, or
        from an operator command; the consumed nonces stay consumed either way.
        """
        resolved = []
        with self._available():
            pending = self._journal.pending()
        for intent in pending:
            with self._available():
                outcome = self._journal.resolve(intent.id, lambda i: self._decide(i, complete))
            if outcome is not None:
                log.warning(
                    "intent %d recovered: %s (%s)", outcome.id, outcome.state, outcome.resolution
                )
                resolved.append(outcome)
        return resolved

    def _decide(self, intent: Intent, complete: bool) -> tuple[str, str]:
        ws = next((w for w in self._workspaces if w.uri == intent.root), None)
        expect = _parse_identity(intent.identity)
        if ws is None or expect is None:
            return "abandoned", "workspace no longer configured"
        try:
            parts = self._resolve(ws, intent.rel)
            if complete:
                ws.root.unlink(parts, expect, durable=True)
                return "done", "deleted during recovery"
            st = ws.root.lstat(parts)
        except Refused as exc:
            if exc.kind == "missing":
                return "done", "already gone: the unlink had happened"
            return "stale", f"nothing deleted: {exc.reason}"
        if expect.matches(st):
            return "abandoned", "file kept"
        return "stale", "nothing deleted: a different file has the name"

    # -- internals -----------------------------------------------------------------------

    def _locate(
        self, path: Path, inside: Callable[[Path, Path], bool]
    ) -> tuple[_Workspace, Parts] | None:
        for ws in self._workspaces:
            if inside(ws.path, path):
                return ws, path[len(ws.path) :]
        return None

    def _resolve(self, ws: _Workspace, rel: Parts) -> Parts:
        return ws.root.canonical(rel) if self.symlinks == "within_root" else rel

    def note_id(self, identity: Identity) -> str:
        """The id of the file with this identity (device and inode; the mtime is ignored)."""
        message = f"{identity.dev}:{identity.ino}".encode()
        return ID_PREFIX + hmac.new(self._id_key, message, hashlib.sha256).hexdigest()[:24]

    def _note(self, ws: _Workspace, rel: Parts, identity: Identity, head: bytes) -> Note:
        note_id = self.note_id(identity)
        note = Note(
            note_id,
            ws.path + rel,
            parse_title(head, rel[-1]),
            f"{identity.dev}:{identity.ino}:{identity.mtime_ns}",
        )
        with self._lock:
            if len(self._index) >= _INDEX_LIMIT:
                self._index.clear()
            self._index[note_id] = (ws, rel)
        return note

    def _live(self, ws: _Workspace, rel: Parts) -> Note | None:
        try:
            head, st = ws.root.read_head(self._resolve(ws, rel), TITLE_READ_BYTES)
        except Refused as exc:
            log.debug("note %s unavailable: %s", "/".join(rel), exc.reason)
            return None
        return self._note(ws, rel, Identity.of(st), head)

    def _unlink(self, note: Note) -> None:
        located = self._locate(note.path, strictly_contains)
        expect = _parse_identity(note.identity)
        if located is None or expect is None:
            raise Refused("invalid", "not a note of this store")
        if note.id != self.note_id(expect):
            raise Refused("invalid", "id and identity do not belong together")
        ws, rel = located
        ws.root.unlink(self._resolve(ws, rel), expect, durable=True)

    @contextmanager
    def _available(self) -> Iterator[None]:
        """Descriptors, memory or the disk failing beneath a workspace is the store failing
        (`StoreUnavailable`, answered -32001), never "no such note"."""
        try:
            yield
        except Unavailable as exc:
            # The condition, not the file it struck: one log line while it lasts (FAULTS).
            cause = f"workspace files: {os.strerror(exc.errno)}"
            raise FAULTS.record(self._journal.path, StoreUnavailable(cause)) from exc

    def _emit(self, event: AuditEvent, intent: Intent) -> None:
        if self._audit is not None:
            self._audit(event, intent)


def _parse_identity(text: str) -> Identity | None:
    fields = text.split(":")
    if len(fields) != 3 or not all(f.isdigit() for f in fields):
        return None
    return Identity(int(fields[0]), int(fields[1]), int(fields[2]))
