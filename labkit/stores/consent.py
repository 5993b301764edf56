"""The consent record of URL-mode elicitation: one-time links and the credentials they grant.

Owns: `ConsentLink` (a pending one-time link, bound to a principal and to the request that
asked), `Grant` (the outcome of using a link), the `ConsentStore` contract, and its memory and
SQLite backends. A credential is granted for exactly one (principal, workspace): the workspace
the consent page showed. It can be listed (workspace and expiry, never the secret) and revoked.
The credential is a server-side secret: it goes in, comes back out only from `credential()`,
and is never part of a `repr`, an exception or a log line here. A SQLite database that stays
locked (or cannot be opened) is `StoreBusy`, never a raw `sqlite3` error.
Must not import the server or a transport.
"""

from __future__ import annotations

import enum
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Final, Protocol, runtime_checkable

from labkit.stores import StoreBusy

# One principal cannot pile up pending links without bound (each first round mints one).
DEFAULT_PENDING_PER_PRINCIPAL: Final = 32
EXPIRED_KEPT_SECONDS: Final = 3600.0


@dataclass(frozen=True)
class ConsentLink:
    """A one-time link: `id` is the unguessable last path segment of the consent URL.

    `request_digest` binds the link to the pending request that asked (method, tool, argument
    digest); `tool`, `workspace_uri` and `service` are what the consent page shows.
    """

    id: str
    principal: str
    request_digest: str
    tool: str
    workspace_uri: str
    service: str
    created_at: float
    expires_at: float
    used: bool = False


class Grant(enum.Enum):
    GRANTED = "granted"
    UNKNOWN = "unknown"
    USED = "used"
    EXPIRED = "expired"
    WRONG_PRINCIPAL = "wrong_principal"


@runtime_checkable
class ConsentStore(Protocol):
    def add_link(self, link: ConsentLink) -> None:
        """Record a pending link (dropping the oldest of this principal's past the bound)."""
        ...

    def link(self, link_id: str) -> ConsentLink | None:
        """The link as recorded (used or not, expired or not), or None."""
        ...

    def grant(
        self, link_id: str, principal: str, credential: str, now: float, valid_until: float
    ) -> Grant:
        """Atomically: the link exists, is unused, unexpired and bound to `principal`; mark it
        used and store `credential` for `principal` and the link's workspace (nothing wider)
        until `valid_until`. GRANTED exactly once; any other outcome stores nothing."""
        ...

    def revoke_link(self, link_id: str) -> None:
        """Make a pending link unusable (the user declined in the MCP client)."""
        ...

    def credential(self, principal: str, workspace_uri: str, now: float) -> str | None:
        """The principal's live report-service credential for that workspace, or None."""
        ...

    def grants(self, principal: str, now: float) -> Sequence[tuple[str, float]]:
        """The principal's live grants as (workspace, valid until), by workspace."""
        ...

    def revoke_grant(self, principal: str, workspace_uri: str) -> bool:
        """Delete the principal's grant for that workspace; whether there was one."""
        ...


def decide_grant(link: ConsentLink | None, principal: str, now: float) -> Grant:
    """Why a link can or cannot be used now by `principal`: one rule for every backend."""
    if link is None:
        return Grant.UNKNOWN
    if link.principal != principal:
        return Grant.WRONG_PRINCIPAL
    if link.used:
        return Grant.USED
    if now >= link.expires_at:
        return Grant.EXPIRED
    return Grant.GRANTED


@dataclass
class MemoryConsentStore:
    """Thread-safe within one process; consent dies with it."""

    pending_per_principal: int = DEFAULT_PENDING_PER_PRINCIPAL
    _links: dict[str, ConsentLink] = field(default_factory=dict)
    _credentials: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_link(self, link: ConsentLink) -> None:
        with self._lock:
            self._links[link.id] = link
            mine = [x for x in self._links.values() if x.principal == link.principal]
            mine.sort(key=lambda x: (x.created_at, x.id == link.id))
            for old in mine[: max(len(mine) - self.pending_per_principal, 0)]:
                del self._links[old.id]

    def link(self, link_id: str) -> ConsentLink | None:
        with self._lock:
            return self._links.get(link_id)

    def grant(
        self, link_id: str, principal: str, credential: str, now: float, valid_until: float
    ) -> Grant:
        with self._lock:
            link = self._links.get(link_id)
            outcome = decide_grant(link, principal, now)
            if outcome is Grant.GRANTED:
                assert link is not None
                self._links[link_id] = replace(link, used=True)
                self._credentials[principal, link.workspace_uri] = (credential, valid_until)
            return outcome

    def revoke_link(self, link_id: str) -> None:
        with self._lock:
            link = self._links.get(link_id)
            if link is not None:
                self._links[link_id] = replace(link, used=True)

    def credential(self, principal: str, workspace_uri: str, now: float) -> str | None:
        with self._lock:
            held = self._credentials.get((principal, workspace_uri))
        if held is None or now >= held[1]:
            return None
        return held[0]

    def grants(self, principal: str, now: float) -> Sequence[tuple[str, float]]:
        with self._lock:
            return sorted(
                (workspace, until)
                for (who, workspace), (_, until) in self._credentials.items()
                if who == principal and now < until
            )

    def revoke_grant(self, principal: str, workspace_uri: str) -> bool:
        with self._lock:
            return self._credentials.pop((principal, workspace_uri), None) is not None


_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS consent_links ("
    " id TEXT PRIMARY KEY, principal TEXT NOT NULL, request_digest TEXT NOT NULL,"
    " tool TEXT NOT NULL, workspace_uri TEXT NOT NULL, service TEXT NOT NULL,"
    " created_at REAL NOT NULL, expires_at REAL NOT NULL, used INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS consent_links_principal ON consent_links (principal, created_at)",
    # Grants of earlier versions covered every workspace of a principal: wider than any page
    # said, so they are dropped (the user is asked again) rather than carried over.
    "DROP TABLE IF EXISTS consent_credentials",
    "CREATE TABLE IF NOT EXISTS consent_grants ("
    " principal TEXT NOT NULL, workspace_uri TEXT NOT NULL, credential TEXT NOT NULL,"
    " valid_until REAL NOT NULL, PRIMARY KEY (principal, workspace_uri))",
)
_LINK_COLUMNS: Final = (
    "id, principal, request_digest, tool, workspace_uri, service, created_at, expires_at, used"
)


class SqliteConsentStore:
    """The consent record in one SQLite file (stdlib sqlite3): consent survives a restart.

    Each operation opens a short connection and runs in one `BEGIN IMMEDIATE` transaction, so
    two processes sharing the file can never both use one link (docs/security.md, "Exactly-once").
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        pending_per_principal: int = DEFAULT_PENDING_PER_PRINCIPAL,
        busy_timeout: float = 5.0,
    ) -> None:
        self.path = os.fspath(path)
        if self.path in ("", ":memory:") or self.path.startswith("file:"):
            raise ValueError(f"SqliteConsentStore needs a database file path, not {self.path!r}")
        self.pending_per_principal = pending_per_principal
        self._busy_timeout = busy_timeout
        with self._transaction() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)

    def __repr__(self) -> str:
        return f"SqliteConsentStore({self.path!r})"

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            with self._connected() as conn:
                yield conn
        except sqlite3.OperationalError as exc:
            # Locked by another process past the busy timeout, or not openable right now
            # (descriptors spent, the disk gone): nothing was changed, try again later.
            raise StoreBusy(f"consent store {self.path!r}: {exc}") from exc

    @contextmanager
    def _connected(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    def add_link(self, link: ConsentLink) -> None:
        with self._transaction() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO consent_links ({_LINK_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    link.id,
                    link.principal,
                    link.request_digest,
                    link.tool,
                    link.workspace_uri,
                    link.service,
                    link.created_at,
                    link.expires_at,
                    int(link.used),
                ),
            )
            conn.execute(
                "DELETE FROM consent_links WHERE principal = ? AND id NOT IN"
                " (SELECT id FROM consent_links WHERE principal = ?"
                "  ORDER BY created_at DESC, id = ? DESC LIMIT ?)",
                (link.principal, link.principal, link.id, self.pending_per_principal),
            )
            # Expired links are never usable again: purge them while the lock is held anyway,
            # an hour late, so a page opened just after expiry still says "expired".
            conn.execute(
                "DELETE FROM consent_links WHERE expires_at <= ?",
                (link.created_at - EXPIRED_KEPT_SECONDS,),
            )

    def link(self, link_id: str) -> ConsentLink | None:
        with self._transaction() as conn:
            row = conn.execute(
                f"SELECT {_LINK_COLUMNS} FROM consent_links WHERE id = ?", (link_id,)
            ).fetchone()
        return None if row is None else _link_from_row(row)

    def grant(
        self, link_id: str, principal: str, credential: str, now: float, valid_until: float
    ) -> Grant:
        with self._transaction() as conn:
            row = conn.execute(
                f"SELECT {_LINK_COLUMNS} FROM consent_links WHERE id = ?", (link_id,)
            ).fetchone()
            outcome = decide_grant(None if row is None else _link_from_row(row), principal, now)
            if outcome is Grant.GRANTED:
                conn.execute("UPDATE consent_links SET used = 1 WHERE id = ?", (link_id,))
                conn.execute(
                    "INSERT INTO consent_grants (principal, workspace_uri, credential,"
                    " valid_until) VALUES (?, ?, ?, ?) ON CONFLICT (principal, workspace_uri)"
                    " DO UPDATE SET credential = excluded.credential,"
                    " valid_until = excluded.valid_until",
                    (principal, row[4], credential, valid_until),
                )
            return outcome

    def revoke_link(self, link_id: str) -> None:
        with self._transaction() as conn:
            conn.execute("UPDATE consent_links SET used = 1 WHERE id = ?", (link_id,))

    def credential(self, principal: str, workspace_uri: str, now: float) -> str | None:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT credential FROM consent_grants"
                " WHERE principal = ? AND workspace_uri = ? AND valid_until > ?",
                (principal, workspace_uri, now),
            ).fetchone()
        return None if row is None else str(row[0])

    def grants(self, principal: str, now: float) -> Sequence[tuple[str, float]]:
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT workspace_uri, valid_until FROM consent_grants"
                " WHERE principal = ? AND valid_until > ? ORDER BY workspace_uri",
                (principal, now),
            ).fetchall()
        return [(str(ws), float(until)) for ws, until in rows]

    def revoke_grant(self, principal: str, workspace_uri: str) -> bool:
        with self._transaction() as conn:
            gone = conn.execute(
                "DELETE FROM consent_grants WHERE principal = ? AND workspace_uri = ?",
                (principal, workspace_uri),
            ).rowcount
        return bool(gone)


def _link_from_row(row: tuple[object, ...]) -> ConsentLink:
    (link_id, principal, request_digest, tool, workspace_uri, service, created, expires, used) = row
    return ConsentLink(
        id=str(link_id),
        principal=str(principal),
        request_digest=str(request_digest),
        tool=str(tool),
        workspace_uri=str(workspace_uri),
        service=str(service),
        created_at=float(created),  # type: ignore[arg-type]
        expires_at=float(expires),  # type: ignore[arg-type]
        used=bool(used),
    )
