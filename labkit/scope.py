"""Workspace scope: strict `file:` URI parsing, component-wise containment, per-principal
authorization (layers 1 and 2 of the lesson's three-layer rule).

Pure module: no I/O. It never lets `urllib`, `pathlib` or a URL model see the URI first,
because they silently rewrite `%2e%2e`, strip control characters and drop `?query#fragment`
(docs/security.md, "Parse workspace URIs strictly"). A URI is rejected, never repaired.
Imports nothing from labkit.
"""

from __future__ import annotations

import functools
import string
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Literal, Protocol

MAX_URI_LENGTH = 4096

Path = tuple[str, ...]
"""A decoded absolute path as a tuple of segments: `file:///work/notes` -> ("work", "notes")."""

_PREFIXES = ("file:///", "file://localhost/")
_PATH_CHARS = frozenset(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@/%")
_HEX = frozenset(string.hexdigits)
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@")


class ScopeError(ValueError):
    """A URI that labkit refuses.

    `kind` is "outside" for anything that tries to leave a directory (dot segments, encoded or
    not): on the wire it looks exactly like an unauthorized workspace, so prefix confusion and
    encoded traversal cannot be told apart (docs/LESSON.md section 3). `kind` is "invalid" for URIs
    that are simply not the strict form labkit accepts.
    """

    def __init__(self, kind: Literal["outside", "invalid"], reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def parse_file_uri(uri: object) -> Path:
    """Parse a `file:` URI into decoded path segments, or raise `ScopeError`.

    Accepts exactly `file:///...` and `file://localhost/...`; one trailing slash is allowed
    (`file:///work/notes/` is the same directory as `file:///work/notes`).
    """
    if not isinstance(uri, str):
        raise ScopeError("invalid", "must be a string")
    return _parse_cached(uri)


@functools.lru_cache(maxsize=4096)
def _parse_cached(uri: str) -> Path:
    # Pure and hot (every call parses its workspace twice): accepted URIs are remembered.
    # A refused URI raises, and lru_cache does not remember exceptions.
    if len(uri) > MAX_URI_LENGTH:
        raise ScopeError("invalid", f"longer than {MAX_URI_LENGTH} characters")
    for prefix in _PREFIXES:
        if uri.startswith(prefix):
            raw_path = uri[len(prefix) :]
            break
    else:
        raise ScopeError("invalid", "must start with file:/// or file://localhost/")
    bad = next((c for c in raw_path if c not in _PATH_CHARS), None)
    if bad is not None:
        raise ScopeError("invalid", f"character {bad!r} is not allowed in a file URI path")
    if raw_path == "":
        return ()
    raw_segments = raw_path.split("/")
    if raw_segments[-1] == "":
        raw_segments.pop()  # one trailing slash names the same directory
    return tuple(_decode_segment(raw) for raw in raw_segments)


def _decode_segment(raw: str) -> str:
    if "%" not in raw:
        # Already checked to be RFC 3986 path characters: ASCII, so UTF-8 and NFC hold.
        if raw in ("", ".", ".."):
            raise ScopeError("outside", f"empty or dot segment {raw!r}")
        return raw
    data = bytearray()
    i = 0
    while i < len(raw):
        char = raw[i]
        if char == "%":
            pair = raw[i + 1 : i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                raise ScopeError("invalid", "'%' must be followed by two hex digits")
            byte = int(pair, 16)
            if byte < 0x20 or byte == 0x7F:
                raise ScopeError("invalid", "encoded control character")
            if byte in (0x2F, 0x5C):
                raise ScopeError("outside", "encoded path separator")
            data.append(byte)
            i += 3
        else:
            data += char.encode("ascii")
            i += 1
    try:
        segment = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise ScopeError("invalid", "percent-encoded bytes are not valid UTF-8") from None
    if segment in ("", ".", ".."):
        raise ScopeError("outside", f"empty or dot segment {segment!r}")
    if not unicodedata.is_normalized("NFC", segment):
        raise ScopeError("invalid", "path segment is not in Unicode NFC form")
    return segment


@functools.lru_cache(maxsize=4096)
def format_file_uri(path: Path) -> str:
    """The canonical URI of a parsed path (percent-encoding what the strict grammar needs)."""
    return "file:///" + "/".join(_encode_segment(s) for s in path)


def _encode_segment(segment: str) -> str:
    return "".join(
        chr(b) if chr(b) in _UNRESERVED else f"%{b:02X}" for b in segment.encode("utf-8")
    )


def contains(root: Path, path: Path) -> bool:
    """Whole-component containment: `path` is `root` or lies below it."""
    return path[: len(root)] == root


def strictly_contains(root: Path, path: Path) -> bool:
    """`path` lies below `root` (a note is never the workspace directory itself)."""
    return len(path) > len(root) and path[: len(root)] == root


class Authorizer(Protocol):
    def roots(self, principal: str | None) -> tuple[Path, ...]:
        """The workspace roots this authenticated principal may use (never from the request)."""
        ...


class AllowlistAuthorizer:
    """A server-side allowlist per principal, from configuration."""

    def __init__(self, allowlist: Mapping[str, Iterable[str]]) -> None:
        parsed: dict[str, tuple[Path, ...]] = {}
        for principal, uris in allowlist.items():
            roots = []
            for uri in uris:
                try:
                    roots.append(parse_file_uri(uri))
                except ScopeError as exc:
                    raise ValueError(
                        f"workspace {uri!r} of principal {principal!r}: {exc.reason}"
                    ) from None
            parsed[principal] = tuple(roots)
        self._roots = parsed

    def roots(self, principal: str | None) -> tuple[Path, ...]:
        if principal is None:
            return ()
        return self._roots.get(principal, ())


def authorize(authorizer: Authorizer, principal: str | None, workspace: Path) -> Path | None:
    """The authorized root that contains `workspace`, or None (layer 1 then layer 2)."""
    for root in authorizer.roots(principal):
        if contains(root, workspace):
            return root
    return None
