"""Signed `requestState`: a key ring, sealing and unsealing, and request binding.

Owns: the token format, key rotation, expiry, the binding of a state to the request that
minted it, and what a signing key is: at least `MIN_KEY_BYTES` bytes, and how a key file's
content becomes one (`parse_key_file`). Pure module: the clock and the keys are injected; it
reads no file (configuration reads the key files once at start).

Token: `lk1.<key id>.<payload>.<mac>` where payload is base64url of the claims as JSON
(orjson, not canonical: the MAC covers the token text as sent, so no canonical form is needed)
and mac is base64url(HMAC-SHA256(key, "lk1.<key id>.<payload>")). Every changed byte of the
token is rejected, including the spare bits of a base64 character.
Must not import a transport, the course toolkit or the grader.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple

import orjson
import rfc8785

from labkit.clock import Clock

log = logging.getLogger("labkit.state")

TOKEN_VERSION = "lk1"
MIN_KEY_BYTES = 32
MAX_TOKEN_CHARS = 16384
DEFAULT_TTL_SECONDS = 300.0
CLOCK_SKEW_SECONDS = 60.0


class InvalidState(Exception):
    """A requestState failed verification. The message is a log-only reason."""


_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")


def _b64encode(data: bytes) -> str:
    # base64url without padding (RFC 4648 section 5); binascii directly, on the hot path.
    return binascii.b2a_base64(data, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode()


def _b64decode(text: str) -> bytes:
    raw = text.encode("ascii").translate(_FROM_URLSAFE)
    return binascii.a2b_base64(raw + b"=" * (-len(raw) % 4))


def key_id(secret: bytes) -> str:
    """A public, stable name for a key that reveals nothing usable about it."""
    return hashlib.sha256(b"labkit key id\x00" + secret).hexdigest()[:12]


def key_problem(secret: bytes) -> str | None:
    """Why `secret` cannot be a signing key, or None. The one place the length rule lives."""
    if len(secret) < MIN_KEY_BYTES:
        return (
            f"holds {len(secret)} bytes; a signing key needs at least {MIN_KEY_BYTES} random bytes"
        )
    return None


class KeyFile(NamedTuple):
    """A key file's key, and which form the file had (`text`: base64; `raw`: bytes as is)."""

    secret: bytes
    form: Literal["text", "raw"]


# Base64 text, standard or URL-safe alphabet, padding optional (`head -c 48 /dev/urandom |
# base64`, `openssl rand -base64 48`, `secrets.token_urlsafe(48)`).
_BASE64_TEXT: Final = re.compile(rb"[A-Za-z0-9+/]+={0,2}|[A-Za-z0-9_-]+={0,2}")
_TEXT_WHITESPACE: Final = b" \t\r\n"


def parse_key_file(content: bytes) -> KeyFile:
    """The signing key a key file holds, decided from its content alone:

    - **text**: the content, less surrounding whitespace (spaces, tabs, line ends), is base64
      (standard or URL-safe alphabet, `=` padding optional): the key is the decoded bytes;
    - **raw**: anything else: the key is every byte of the file, as it is; nothing is stripped.

    Random raw bytes pass for base64 text only if every byte is one of the 64 letters (and the
    length decodes): below 4**-32, about 1e-19, for 32 bytes. Stripping raw bytes, as earlier
    versions did, refused about 1 in 15 keys made with `head -c 32 /dev/urandom`.
    """
    text = content.strip(_TEXT_WHITESPACE)
    if _BASE64_TEXT.fullmatch(text):
        standard = text.rstrip(b"=").translate(_FROM_URLSAFE)
        try:
            return KeyFile(binascii.a2b_base64(standard + b"=" * (-len(standard) % 4)), "text")
        except binascii.Error:
            pass  # letters only, but a length no base64 text has: raw bytes
    return KeyFile(content, "raw")


class KeyRing:
    """`keys[0]` seals; every key verifies. Rotation: [old,new] -> [new,old] -> [new]."""

    def __init__(self, secrets_: Sequence[bytes]) -> None:
        if not secrets_:
            raise ValueError("a key ring needs at least one key")
        for index, secret in enumerate(secrets_):
            problem = key_problem(secret)
            if problem is not None:
                raise ValueError(f"signing key {index} {problem}")
        self._keys = [(key_id(s), bytes(s)) for s in secrets_]
        self._by_id = dict(self._keys)
        # HMAC with each key already absorbed; every token copies one (cheaper than re-keying).
        # Held by the ring, so a key dropped from the ring is dropped from memory with it.
        self._macs = {kid: hmac.new(secret, digestmod=hashlib.sha256) for kid, secret in self._keys}

    @classmethod
    def ephemeral(cls) -> KeyRing:
        """A random key held by this process only (the demo): states die with the process."""
        log.warning("signing requestState with a random per-process key (demo only)")
        return cls([secrets.token_bytes(32)])

    @property
    def sealing(self) -> tuple[str, bytes]:
        return self._keys[0]

    def get(self, kid: str) -> bytes | None:
        return self._by_id.get(kid)

    def mac(self, kid: str, body: str) -> str | None:
        """base64url(HMAC-SHA256(key `kid`, body)), or None for a key not in the ring."""
        template = self._macs.get(kid)
        if template is None:
            return None
        mac = template.copy()
        mac.update(body.encode("ascii"))
        return _b64encode(mac.digest())


_SAFE_INTEGER = 2**53 - 1


def canonical_json(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of `value`.

    Values made only of ASCII-keyed dicts, lists, strings, safe integers, booleans and null go
    through orjson with sorted keys: its strings are escaped with exactly RFC 8785's table
    (`"`, `\\`, the control characters, nothing else; tests/test_state.py compares every code
    point), and for ASCII keys byte order is UTF-16 order, so the bytes are identical and
    several times cheaper (a digest is taken on every round of a call). Everything else
    (floats, non-ASCII keys, lone surrogates, nesting past orjson's depth) goes through
    `rfc8785` itself, which also raises its own errors. The usual value, tool arguments that
    are all strings under ASCII names, is recognised without the general walk.
    """
    if _flat_strings(value) or _plain(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson.JSONEncodeError: lone surrogates, nesting too deep
            pass
    result: bytes = rfc8785.dumps(value)
    return result


def _flat_strings(value: Any) -> bool:
    if type(value) is not dict:
        return False
    for key, item in value.items():
        if type(key) is not str or type(item) is not str or not key.isascii():
            return False
    return True


def _plain(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -_SAFE_INTEGER <= item <= _SAFE_INTEGER:
                continue
            return False
        if kind is dict:
            if not all(type(key) is str and key.isascii() for key in item):
                return False
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        else:
            return False
    return True


def digest(value: Any) -> str:
    """SHA-256 of the RFC 8785 canonical JSON of `value` (the argument digest)."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


class Binding(NamedTuple):
    """What a state is bound to: who asked, for what, with which arguments."""

    principal: str
    method: str
    name: str
    arguments_digest: str


class Verified(NamedTuple):
    payload: dict[str, Any]
    issued_at: float
    expires_at: float


# The claims a state must share with the request, in `(audience, *Binding)` order.
_BOUND_CLAIMS: Final = ("aud", "sub", "method", "name", "args")
_BOUND_NAMES: Final = ("audience", "principal", "method", "tool or prompt name", "arguments digest")


class StateSigner:
    """Mints and verifies states bound to an audience and a request `Binding`."""

    def __init__(
        self,
        keys: KeyRing,
        *,
        audience: str,
        clock: Clock,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        skew_seconds: float = CLOCK_SKEW_SECONDS,
    ) -> None:
        if not ttl_seconds > 0:
            raise ValueError("state ttl must be positive")
        self.keys = keys
        self.audience = audience
        self.clock = clock
        self.ttl_seconds = ttl_seconds
        self.skew_seconds = skew_seconds

    def mint(self, binding: Binding, payload: Mapping[str, Any]) -> str:
        now = self.clock()
        claims: dict[str, Any] = {
            "aud": self.audience,
            "sub": binding.principal,
            "method": binding.method,
            "name": binding.name,
            "args": binding.arguments_digest,
            "iat": int(now),
            "exp": int(now + self.ttl_seconds),
            "data": dict(payload),
        }
        kid = self.keys.sealing[0]
        # The payload needs no canonical form: the MAC covers the token text as sent.
        body = f"{TOKEN_VERSION}.{kid}.{_b64encode(orjson.dumps(claims))}"
        return f"{body}.{self.keys.mac(kid, body)}"

    def verify(self, token: object, binding: Binding) -> Verified:
        """The payload of a state this server minted for exactly this request, or raise."""
        claims = self._unseal(token)
        bound = tuple(claims.get(claim) for claim in _BOUND_CLAIMS)
        expected = (self.audience, *binding)
        if bound != expected:
            pairs = zip(_BOUND_NAMES, bound, expected, strict=True)
            what = next(name for name, got, want in pairs if got != want)
            raise InvalidState(f"{what} does not match the request")
        iat, exp, data = claims.get("iat"), claims.get("exp"), claims.get("data")
        if not isinstance(iat, int) or not isinstance(exp, int) or not isinstance(data, dict):
            raise InvalidState("malformed claims")
        now = self.clock()
        if now >= exp:
            raise InvalidState(f"expired {now - exp:.0f}s ago")
        if iat > now + self.skew_seconds:
            raise InvalidState("issued in the future")
        return Verified(payload=data, issued_at=float(iat), expires_at=float(exp))

    def _unseal(self, token: object) -> dict[str, Any]:
        if not isinstance(token, str):
            raise InvalidState("not a string")
        if len(token) > MAX_TOKEN_CHARS or not token.isascii():
            raise InvalidState("oversized or non-ASCII token")
        parts = token.split(".")
        if len(parts) != 4 or parts[0] != TOKEN_VERSION:
            raise InvalidState("not a labkit state token")
        body = token[: token.rindex(".")]
        expected = self.keys.mac(parts[1], body)
        if expected is None:
            raise InvalidState("unknown key id")
        if not hmac.compare_digest(expected, parts[3]):
            raise InvalidState("bad signature")
        try:
            claims = orjson.loads(_b64decode(parts[2]))
        except (binascii.Error, ValueError):
            raise InvalidState("undecodable payload") from None
        if not isinstance(claims, dict):
            raise InvalidState("malformed claims")
        return claims
