"""The protocol eras served beside the core's 2026-07-28: one table, one entry per era.

Owns: `ERAS`, the eras `labkit serve` serves on both transports, in the order they are asked
to claim a message (the first that claims it takes it), and their entries: `LEGACY` is
2025-11-25 (handshakes at 2025-06-18 too), served by `labkit.legacy` through its adapters
`labkit.transports.legacy_stdio.LegacyStdio` and `labkit.transports.legacy_http.LegacyHttp`.
An era is declared as a `labkit.transports.era.Era`; a new one is its adapters' module and one
entry here (before `LEGACY`, which claims every `initialize` outside a session).

Must not import the endpoint, the course toolkit or the grader.
"""

from __future__ import annotations

from typing import Final

from labkit.legacy import LEGACY_VERSIONS, SESSION_MESSAGES, LegacyLimits
from labkit.server import Server
from labkit.transports.era import Era, HttpEra
from labkit.transports.legacy_stdio import LegacyStdio


def _legacy_http(server: Server, limits: LegacyLimits, blocking: bool) -> HttpEra:
    # Imported when an endpoint is built: serving stdio loads no HTTP machinery.
    from labkit.transports.legacy_http import LegacyHttp

    return LegacyHttp(server, limits=limits, blocking=blocking)


LEGACY: Final = Era(
    versions=LEGACY_VERSIONS,
    methods=SESSION_MESSAGES,
    stdio=LegacyStdio,
    http=_legacy_http,
)

ERAS: Final[tuple[Era, ...]] = (LEGACY,)
