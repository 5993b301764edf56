"""What the transports bound, and the defaults: one place for the transports themselves, the
configuration file's `[http]` section and `labkit serve`.

Owns: `ConnectionLimits` and every transport default (address, body size, per-request time,
the request head, connections, the stdio line). Imports nothing: the configuration reads these
without loading a server stack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

DEFAULT_HOST: Final = "127.0.0.1"  # loopback unless told otherwise (DNS rebinding)
DEFAULT_PORT: Final = 8000
DEFAULT_MAX_BODY_BYTES: Final = 1024 * 1024
DEFAULT_TIMEOUT_SECONDS: Final = 30.0
DEFAULT_HEAD_TIMEOUT_SECONDS: Final = 10.0
DEFAULT_MAX_HEAD_BYTES: Final = 64 * 1024
DEFAULT_MAX_CONNECTIONS: Final = 1000
DEFAULT_MAX_LINE_BYTES: Final = 4 * 1024 * 1024


@dataclass(frozen=True)
class ConnectionLimits:
    """`head_timeout_seconds`: from the moment a connection opens (or its previous response is
    sent) until the end of the request head. `max_head_bytes`: request line plus headers.
    `max_connections`: open connections at once (further bounded by the descriptor limit)."""

    head_timeout_seconds: float = DEFAULT_HEAD_TIMEOUT_SECONDS
    max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __post_init__(self) -> None:
        timeout = self.head_timeout_seconds
        if not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError("head_timeout_seconds must be a positive number")
        if self.max_head_bytes < 1 or self.max_connections < 1:
            raise ValueError("max_head_bytes and max_connections must be positive")
