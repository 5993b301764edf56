"""What a protocol era is: the declaration the transports serve an era beyond the core's by.

Owns: `Era` (an era's protocol version strings, its message set and the factories of its two
transport adapters), the adapter interfaces the transports drive (`StdioEra`, one per stdio
connection; `HttpEra`, one per HTTP endpoint), `Streamed` (a response that writes itself) and
`SESSION_HEADER`, the header that names an era's HTTP session.

The core (`Server.respond`) speaks 2026-07-28. An era is everything else a client may speak:
its adapters claim the messages that are its own (`StdioEra.claims`; `HttpEra.route` returning
a response instead of None) and answer them, usually by translating them into core requests.
Whatever no era claims takes the core's path, unchanged. The table of served eras is
`labkit.transports.eras.ERAS`.

Must not import the endpoint, the course toolkit or the grader.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from starlette.types import Send

from labkit.legacy import LegacyLimits
from labkit.server import RequestContext, Server

SESSION_HEADER: Final = "mcp-session-id"

Streamed = Callable[[Send], Awaitable[None]]
"""A response that writes itself (headers, then one body or a stream of events)."""

Write = Callable[[dict[str, Any]], bool]
"""Write one message on a stdio connection; False when the output is gone."""


class StdioEra(Protocol):
    """One era's state on one stdio connection. The transport asks `claims` for every message
    it decoded (while `holds`, this era alone); a claimed message goes to `take`, which writes
    whatever it owes as it goes. While `wait` is not None the transport reads nothing: it
    pauses that long, then calls `poll_again`. Until an era holds the connection, the core's
    listings (`tools/list`, `server/discover`) are answered without asking: an era claims only
    what opens its session until it holds one."""

    @property
    def holds(self) -> bool:
        """Whether the connection is a session of this era (it has state to keep)."""
        ...

    @property
    def wait(self) -> float | None:
        """Seconds to pause before `poll_again`, or None when nothing polls."""
        ...

    def claims(self, message: Any) -> bool: ...

    def take(self, message: Any, write: Write) -> bool:
        """Answer a claimed message; False when the output is gone."""
        ...

    def poll_again(self, write: Write) -> bool:
        """Ask again for what waits (after the pause of `wait`); False when the output is gone."""
        ...


class HttpEra(Protocol):
    """One era on one HTTP endpoint: its sessions, shared by every request."""

    def route(self, fields: dict[str, str], message: Any, principal: str) -> Streamed | None:
        """The response to a request this era claims, or None: not this era's."""
        ...

    def end_session(self, fields: Mapping[str, str], principal: str) -> Streamed | None:
        """DELETE: end the session the request names, or None: no session of this era's."""
        ...


@dataclass(frozen=True)
class Era:
    """A protocol era served beside the core's: one entry of `labkit.transports.eras.ERAS`.

    `versions` are the protocol versions its handshake negotiates, newest last; `methods` its
    message set (the methods its sessions answer themselves; any other request of the era is
    translated to the core's). `stdio` makes the adapter of one stdio connection (the server,
    the connection's context, the session bounds of config `[legacy]`); `http` makes the
    adapter of one HTTP endpoint (the server, the same bounds, and whether calls run in a
    worker thread).
    """

    versions: tuple[str, ...]
    methods: frozenset[str]
    stdio: Callable[[Server, RequestContext, LegacyLimits], StdioEra]
    http: Callable[[Server, LegacyLimits, bool], HttpEra]

    def __post_init__(self) -> None:
        if not self.versions:
            raise ValueError("an era speaks at least one protocol version")

    @property
    def version(self) -> str:
        """The newest version of the era: what a handshake answers when asked for another."""
        return self.versions[-1]
