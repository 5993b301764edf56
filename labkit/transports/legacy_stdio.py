"""2025-11-25 sessions on stdio: the 2025-11-25 era's adapter for one stdio connection.

Owns: the claim (an `initialize` makes the connection a 2025-11-25 session, the connection is
the session; later messages without 2026-07-28 `_meta` are the session's, and a request carrying
2026-07-28 `_meta` is never claimed: the core serves it statelessly), and the calls in progress
on the connection. A `tools/call` that needs input writes live server-to-client requests and
the client's answers, read by the transport's one loop, go to the call that asked; several calls
may wait on the client at once (at most `calls_per_session`; past that a new call is refused
with -32001) and each completes. A call polling for a URL consent makes the transport pause
between polls (`wait`). The session logic itself is `labkit.legacy`, which is sans-IO.

Must not import the endpoint, the course toolkit or the grader.
"""

from __future__ import annotations

import logging
from typing import Any

from labkit import legacy
from labkit.errors import SERVER_BUSY, ProtocolError
from labkit.legacy import LegacyCall, LegacyLimits, LegacySession, Step, is_response
from labkit.server import RequestContext, Server
from labkit.transports.era import Write
from labkit.wire import META_VERSION, error_response

log = logging.getLogger("labkit.transports.stdio")


class LegacyStdio:
    """The 2025-11-25 era on one stdio connection (`labkit.transports.era.StdioEra`)."""

    def __init__(
        self, server: Server, context: RequestContext, limits: LegacyLimits | None = None
    ) -> None:
        self.server = server
        self.context = context
        self.limits = limits if limits is not None else LegacyLimits()
        self.session: LegacySession | None = None
        # Calls in progress on this connection, and those of them that poll for a URL consent.
        self._calls: list[LegacyCall] = []
        self._polling: list[LegacyCall] = []

    @property
    def holds(self) -> bool:
        return self.session is not None

    @property
    def wait(self) -> float | None:
        return legacy.POLL_SECONDS if self._polling else None

    def claims(self, message: Any) -> bool:
        """A client's answer to a call in progress; else never a request with 2026-07-28
        `_meta`; otherwise an `initialize`, or anything once the connection is a session."""
        if self._calls and self._owner(message) is not None:
            return True
        if not isinstance(message, dict) or not isinstance(message.get("params", {}), dict):
            return False
        meta = message.get("params", {}).get("_meta")
        if isinstance(meta, dict) and META_VERSION in meta:
            return False
        return self.session is not None or message.get("method") == "initialize"

    def take(self, message: Any, write: Write) -> bool:
        owner = self._owner(message) if self._calls else None
        if owner is not None:
            return self._carry(owner, owner.receive(message), write)
        if is_response(message):
            log.debug("an answer for no pending request was dropped")
            return True
        if self.session is None:  # `claims` let only an initialize through
            self.session, response = legacy.initialize(
                self.server, self.context, message, limits=self.limits
            )
            if self.session is not None:
                log.info("legacy %s session started on stdio", self.session.version)
            return write(response)
        if "id" in message and message.get("method") == "tools/call":
            return self._start(self.session.call(message), write)
        answered = self.session.answer(message)
        return answered is None or write(answered)

    def poll_again(self, write: Write) -> bool:
        """Ask the handler again for every call polling for a consent."""
        polling, self._polling = self._polling, []
        return all(self._carry(call, call.poll(), write) for call in polling)

    def _owner(self, message: Any) -> LegacyCall | None:
        """The call in progress that a client's answer belongs to."""
        if not is_response(message):
            return None
        for call in self._calls:
            if call.owns(message["id"]):
                return call
        return None

    def _start(self, call: LegacyCall, write: Write) -> bool:
        """A legacy `tools/call` talks to the client before its result: it stays in progress
        until its result is written."""
        if len(self._calls) >= self.limits.calls_per_session:
            busy = ProtocolError(
                SERVER_BUSY,
                f"Too many calls in progress on this connection (at most "
                f"{self.limits.calls_per_session}): answer the pending requests first",
            )
            return write(error_response(call.request_id, busy))
        self._calls.append(call)
        return self._carry(call, call.start(), write)

    def _carry(self, call: LegacyCall, step: Step, write: Write) -> bool:
        """Write what `step` sends; then the call is over, polls, or waits for answers."""
        for message in step.send:
            if not write(message):
                return False
        if step.result is not None:
            self._calls.remove(call)
            return write(step.result)
        if step.wait is not None and call not in self._polling:
            self._polling.append(call)
        return True
