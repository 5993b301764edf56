"""Read-only views a lesson prints: a `requestState` taken apart, a transcript whose states are
labelled instead of abbreviated, and the server's log lines of one step.

Owns: `StateParts` and `state_parts` (the four dot-separated parts of a labkit state token,
the claims decoded *without* verifying anything: the payload is only base64url, which is the
point the lesson makes), `transcript` (one line per message as `Host.render` prints them, but
each distinct `requestState` replaced by a stable label, `<state 1>`, `<state 2>`..., so a
printed transcript is the same on every run and shows which state was echoed), and
`server_log` (the `labkit` log records of a block, as text, instead of stderr).

Verification stays with the server (`labkit.state.StateSigner.verify`); nothing here can
mint or accept a state. Must not import ipywidgets.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labkit.client import Host, render_message
from labkit.state import TOKEN_VERSION

STATE_KEY = "requestState"


class NotAState(ValueError):
    """The text is not a labkit state token (`lk1.<key id>.<payload>.<mac>`)."""


@dataclass(frozen=True)
class StateParts:
    """A state token's parts: `version` ("lk1"), `key_id` (which key of the ring sealed it),
    `claims` (the decoded payload, unverified) and `mac` (base64url HMAC-SHA256 over
    `lk1.<key id>.<payload>`)."""

    version: str
    key_id: str
    payload: str
    mac: str
    claims: dict[str, Any]


def state_parts(token: str) -> StateParts:
    """Split and decode `token` for display. Raises NotAState for anything else; a token that
    decodes here is not thereby valid (only the server's key can say that)."""
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != TOKEN_VERSION:
        raise NotAState(f"expected {TOKEN_VERSION}.<key id>.<payload>.<mac>")
    version, kid, payload, mac = parts
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        claims = json.loads(raw)
    except (binascii.Error, ValueError):
        raise NotAState("the payload is not base64url JSON") from None
    if not isinstance(claims, dict):
        raise NotAState("the payload is not a JSON object")
    return StateParts(version, kid, payload, mac, claims)


def encode_claims(claims: Mapping[str, Any]) -> str:
    """The payload part for `claims` (base64url JSON without padding): what a forger would
    write in place of the real payload."""
    raw = json.dumps(dict(claims), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class _Labels:
    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return self.seen.setdefault(value, f"<state {len(self.seen) + 1}>")


def _relabel(obj: Any, label: _Labels) -> Any:
    if isinstance(obj, dict):
        return {k: label(v) if k == STATE_KEY else _relabel(v, label) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_relabel(v, label) for v in obj]
    return obj


def transcript(
    messages: Host | Sequence[Mapping[str, Any]], width: int = 1000, *, fold: int | None = None
) -> str:
    """The messages (a host's last transcript, or a list) one per line, `->` sent and `<-`
    received, `_meta` elided, each distinct `requestState` shown as `<state n>` in order of
    first appearance. Lines are cut to `width` characters.

    With `fold`, each message is laid out to be read instead: an object or list that fits in
    `fold` characters stays on one line, a longer one gets a line per member, indented."""
    sent = messages.transcript if isinstance(messages, Host) else messages
    label = _Labels()
    lines = [render_message(_relabel(dict(m), label), width) for m in sent]
    if fold is None:
        return "\n".join(lines)
    return "\n".join(
        f"{line[:2]} {_layout(json.loads(line[3:]), 3, fold)}"
        for line in lines  # `-> {...}`: the arrow, then the abbreviated message as JSON
    )


def _layout(value: Any, indent: int, fold: int) -> str:
    flat = json.dumps(value, separators=(", ", ": "))
    if len(flat) + indent <= fold or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        members = [f"{json.dumps(k)}: {_layout(v, indent + 2, fold)}" for k, v in value.items()]
        open_, close = "{", "}"
    else:
        members = [_layout(v, indent + 2, fold) for v in value]
        open_, close = "[", "]"
    inner = ",\n".join(pad + member for member in members)
    return f"{open_}\n{inner}\n{' ' * indent}{close}"


class _Collect(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname.lower()}: {record.getMessage()}")


@contextlib.contextmanager
def server_log(level: int = logging.INFO, logger: str = "labkit") -> Iterator[list[str]]:
    """Collect what `logger` logs at `level` or above inside the block (and keep it off
    stderr): `with server_log() as lines: ...`, then print `lines`."""
    lines: list[str] = []
    handler = _Collect(lines)
    target = logging.getLogger(logger)
    old_level, old_propagate = target.level, target.propagate
    target.addHandler(handler)
    target.setLevel(level)
    target.propagate = False
    try:
        yield lines
    finally:
        target.removeHandler(handler)
        target.setLevel(old_level)
        target.propagate = old_propagate
