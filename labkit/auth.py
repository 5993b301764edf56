"""Bearer-token authentication: an `Authorization` header in, a principal name (or None) out.

Owns: the `Authenticator` contract, token hashing, the constant-time lookup, and the demo
credentials. Tokens live in configuration only as SHA-256 hashes, so a leaked config file does
not hand out working credentials. Pure module: no I/O; the HTTP transport calls it once per
request, before reading the body. `clientInfo` never reaches this module: it is self-declared
and identifies nobody (docs/LESSON.md section 3).
Imports nothing from labkit.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import Mapping
from typing import Final, Protocol

log = logging.getLogger("labkit.auth")

# Tokens longer than this are refused before hashing: a bounded header costs bounded CPU.
MAX_TOKEN_CHARS: Final = 4096

DEMO_TOKENS: Final = {"alice": "demo-alice", "mallory": "demo-mallory"}

# RFC 6750 section 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
_B64TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# The shape nearly every client sends, `Bearer <b64token>`, taken in one match: the general
# parse below gives the same token for it, in several more steps.
_PLAIN_BEARER: Final = re.compile(r"Bearer ([A-Za-z0-9\-._~+/]+=*)")
_PLAIN_MAX_CHARS: Final = len("Bearer ") + MAX_TOKEN_CHARS


_sha256: Final = hashlib.sha256
_compare: Final = hmac.compare_digest


class Authenticator(Protocol):
    def authenticate(self, authorization: str | None) -> str | None:
        """The principal an `Authorization` header value proves, or None."""
        ...


def hash_token(token: str) -> str:
    """The hex SHA-256 of a bearer token, as written in `token_sha256` in the config file."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None for any other shape.

    The scheme is case-insensitive (RFC 7235); the token is RFC 6750's b64token.
    """
    if authorization is None:
        return None
    if len(authorization) <= _PLAIN_MAX_CHARS:
        plain = _PLAIN_BEARER.fullmatch(authorization)
        if plain is not None:
            return plain[1]
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or len(token) > MAX_TOKEN_CHARS:
        return None
    return token if _B64TOKEN.fullmatch(token) else None


class TokenAuthenticator:
    """Maps bearer tokens to principals through their SHA-256 hashes.

    The table of hashes is prepared once. Every lookup compares the presented hash with every
    configured hash using `hmac.compare_digest` and never stops early, so the time taken says
    nothing about which principal, or whether any principal, came close.
    """

    def __init__(self, token_hashes: Mapping[str, str]) -> None:
        """`token_hashes` maps principal name -> hex SHA-256 of that principal's token."""
        entries: list[tuple[bytes, str]] = []
        seen: set[bytes] = set()
        for principal, hex_digest in token_hashes.items():
            try:
                digest = bytes.fromhex(hex_digest)
            except ValueError:
                raise ValueError(f"token hash of {principal!r} is not hexadecimal") from None
            if len(digest) != hashlib.sha256().digest_size:
                raise ValueError(f"token hash of {principal!r} is not a SHA-256 digest")
            if digest in seen:
                raise ValueError(f"token hash of {principal!r} is shared with another principal")
            seen.add(digest)
            entries.append((digest, principal))
        self._entries = tuple(entries)

    @property
    def principals(self) -> tuple[str, ...]:
        return tuple(principal for _, principal in self._entries)

    def authenticate(self, authorization: str | None) -> str | None:
        token = bearer_token(authorization)
        if token is None:
            return None
        presented = _sha256(token.encode("ascii")).digest()
        found: str | None = None
        for digest, principal in self._entries:
            # No early exit: every entry is compared whatever happened before.
            if _compare(presented, digest):
                found = principal
        return found


def demo_authenticator() -> TokenAuthenticator:
    """`Bearer demo-alice` and `Bearer demo-mallory`: public, well-known, loopback only."""
    log.warning(
        "demo credentials are on: 'Bearer demo-alice' and 'Bearer demo-mallory' are accepted"
    )
    return TokenAuthenticator(
        {principal: hash_token(token) for principal, token in DEMO_TOKENS.items()}
    )
