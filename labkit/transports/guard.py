"""What every HTTP route of labkit checks before its handler runs: each header the transport
reads appears once, and the Host is one of this server's.

Owns: `SINGLETON_HEADERS` (two copies are refused with 400: a reader of the first copy and a
reader of the last would disagree about the request), `HostRule` (DNS-rebinding protection:
loopback names at the port the request arrived on, plus configured names; 421 otherwise), and
`Guarded`, the ASGI wrapper that applies both to everything under it, so the consent page, a
404 and Starlette's trailing-slash redirect (which builds its target from the Host header) are
reached only by a request whose Host was checked. `/mcp` applies the same two rules in its own
single pass over the headers (`labkit.transports.http`), its Host and Origin through
`TrustedOrigins`.

Pure ASGI. Must not import the core, the course toolkit or the grader.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from labkit.refusals import RefusalLog

log = logging.getLogger("labkit.transports.guard")

LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")
# The request headers a labkit route reads whose second copy would be read differently by
# different readers. (`Accept` is a list: copies are joined. The Streamable HTTP routing
# headers have their own answer on /mcp, -32020.)
SINGLETON_HEADERS: Final = frozenset(
    {b"host", b"origin", b"authorization", b"content-type", b"content-length", b"mcp-session-id"}
)
UNKNOWN_HOST: Final = "Misdirected Request: unknown Host"
# Refused Hosts and Origins: an attacker's page can send them in a loop.
REFUSALS: Final = RefusalLog(log)


def duplicate_header(name: bytes) -> str:
    return f"Bad Request: more than one {name.decode('latin-1')} header"


class HostRule:
    """The `Host` values this server answers: `allowed_hosts` (exact `host:port`, or a bare
    host for any port), and the loopback names at the port a request arrived on (and bare
    at port 80)."""

    def __init__(self, allowed_hosts: Collection[str] = ()) -> None:
        self.allowed = frozenset(h.lower() for h in allowed_hosts)

    def allows(self, host: str, port: int) -> bool:
        """Whether the lower-cased `host` may reach a server listening on `port`."""
        if host in self.allowed or host_part(host) in self.allowed:
            return True
        return host in _loopback_hosts(port) or (port == 80 and host in LOOPBACK_NAMES)

    def refuse_host(self, host: str) -> tuple[int, str]:
        REFUSALS.refused("the Host check", f"Host {host[:200]!r} is not this server's")
        return 421, UNKNOWN_HOST


@functools.lru_cache(maxsize=16)
def _loopback_hosts(port: int) -> frozenset[str]:
    return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES)


def host_part(host: str) -> str:
    """`example.com:8443` -> `example.com`; `[::1]:8000` -> `[::1]`."""
    if host.startswith("["):
        return host[: host.find("]") + 1]
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def port_of(scope: Scope) -> int:
    """The port the request arrived on (the listening socket's, never the Host header's)."""
    return int((scope.get("server") or ("", 0))[1])


def refusal(scope: Scope, hosts: HostRule) -> tuple[int, str] | None:
    """(status, text) for a request that repeats a singleton header or names a foreign
    Host; None for one that may go on."""
    seen: set[bytes] = set()
    host = ""
    for name, value in scope["headers"]:
        if name in SINGLETON_HEADERS:
            if name in seen:
                return 400, duplicate_header(name)
            seen.add(name)
            if name == b"host":
                host = value.decode("latin-1").lower()
    if not host or not hosts.allows(host, port_of(scope)):
        return hosts.refuse_host(host)
    return None


class TrustedOrigins:
    """DNS-rebinding protection for one endpoint, as Starlette's `TrustedHostMiddleware` is for
    an app: a page on evil.example resolved to 127.0.0.1 still sends `Host: evil.example` and
    its own `Origin`. The Host must be this server's (`HostRule`); an Origin, when sent, one of
    `allowed_origins` (exact `scheme://host:port`) or a loopback origin at the port the request
    arrived on. An absent Origin is a non-browser client.

    The (port, Host, Origin) values admitted are kept, up to `_MAX_ADMITTED` of them: a client
    sends the same few on every request, and a kept one is admitted by one set lookup. A
    refused one is never kept, so no request can make another admitted."""

    def __init__(self, hosts: HostRule, allowed_origins: Collection[str] = ()) -> None:
        self.hosts = hosts
        self.allowed_origins = frozenset(o.lower().rstrip("/") for o in allowed_origins)
        self._admitted: set[tuple[int, str | None, str | None]] = set()

    def refusal(self, port: int, host: str | None, origin: str | None) -> tuple[int, str] | None:
        """(status, text) for a request from a Host or Origin not this server's, else None."""
        if (port, host, origin) in self._admitted:
            return None
        refused = self._judge(port, host, origin)
        if refused is None and len(self._admitted) < _MAX_ADMITTED:
            self._admitted.add((port, host, origin))
        return refused

    def _judge(self, port: int, host: str | None, origin: str | None) -> tuple[int, str] | None:
        host = (host or "").lower()
        if not host or not self.hosts.allows(host, port):
            return self.hosts.refuse_host(host)
        if origin is not None and not self._origin_allowed(origin.lower().rstrip("/"), port):
            REFUSALS.refused("the Origin check", f"Origin {origin[:200]!r} is not allowed")
            return 403, "Forbidden: Origin not allowed"
        return None

    def _origin_allowed(self, origin: str, port: int) -> bool:
        return origin in self.allowed_origins or origin in _loopback_origins(port)


_MAX_ADMITTED: Final = 256


@functools.lru_cache(maxsize=16)
def _loopback_origins(port: int) -> frozenset[str]:
    return frozenset(
        f"{scheme}://{name}:{port}" for scheme in ("http", "https") for name in LOOPBACK_NAMES
    )


class Guarded:
    """`app`, reached only by HTTP requests that pass `refusal` (the rest is answered here
    with text/plain); other scopes (the lifespan) go straight through."""

    def __init__(self, app: ASGIApp, hosts: HostRule) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = refusal(scope, self.hosts)
            if refused is not None:
                await send_text(send, *refused)
                return
        await self.app(scope, receive, send)


async def send_text(
    send: Send, status: int, text: str, headers: Collection[tuple[bytes, bytes]] = ()
) -> None:
    """A whole text/plain response."""
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                *headers,
                (b"content-length", b"%d" % len(body)),
                (b"content-type", b"text/plain; charset=utf-8"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
