"""stdio at 2026-07-28: newline-delimited JSON-RPC on a pair of byte streams.

Owns: line framing, the line size limit, `-32700` with `id: null` for a line that is not JSON,
silence for notifications, and stopping cleanly on EOF or on request (a signal). Reads one line,
calls `Server.respond`, writes one line: requests are answered in order, one at a time. Logs go
to the logging system (stderr); the output stream carries protocol messages only.

With `legacy=True`, an `initialize` makes the connection a 2025-11-25 session (the connection
is the session): later requests without 2026-07-28 `_meta` go through `labkit.legacy`, and a
`tools/call` that needs input writes live server-to-client requests and reads the client's
answers before its result. A request carrying 2026-07-28 `_meta` is always served statelessly.
Calls are never nested: one loop reads every line and hands a client's answer to the call that
asked, so several calls may wait on the client at once (at most `max_calls`; past that a new
call is refused with -32001) and each completes. While a call polls for a URL consent, the
loop pauses between polls and reads nothing else, as before.

Must not import the endpoint, the course toolkit or the grader.
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
from collections.abc import Callable
from typing import Any, BinaryIO, Final

from labkit import legacy as legacy_adapter
from labkit.errors import INVALID_REQUEST, SERVER_BUSY, ProtocolError
from labkit.legacy import LegacyCall, LegacyLimits, LegacySession, Step, is_response
from labkit.server import RequestContext, Server
from labkit.transports.limits import DEFAULT_MAX_LINE_BYTES
from labkit.wire import META_VERSION, decode, encode, error_response, parse_error_response

log = logging.getLogger("labkit.transports.stdio")


# Requests answered into a batch: they read what the deployment lists and change nothing.
_BATCHED: Final = frozenset({"tools/list", "server/discover"})
# How much one read takes at most (what has arrived, up to this).
_READ_BYTES: Final = 64 * 1024
_BLANK: Final = object()


class _Stopped(Exception):
    """Raised by `StdioTransport.stop` into a blocked read, never anywhere else."""


class StdioTransport:
    """Serves one principal (the one configured for stdio) over a pair of byte streams."""

    def __init__(
        self,
        server: Server,
        principal: str,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        legacy: bool = False,
        sleep: Callable[[float], None] = time.sleep,
        limits: LegacyLimits | None = None,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.limits = limits if limits is not None else LegacyLimits()
        # Legacy calls in progress on this connection (the connection is the session), and
        # those of them that poll for a URL consent.
        self._calls: list[LegacyCall] = []
        self._polling: list[LegacyCall] = []
        self.server = server
        self.context = RequestContext(principal=principal, transport="stdio")
        self.max_line_bytes = max_line_bytes
        self.legacy = legacy
        self.session: LegacySession | None = None
        self._sleep = sleep
        self._reading = False
        self._stop = False

    def stop(self) -> None:
        """Ask the loop to end; safe to call from a signal handler.

        While the loop is blocked reading, this interrupts the read (Python runs the handler in
        the main thread, and the exception leaves the read). While a request is being answered,
        the answer is finished and written first.
        """
        self._stop = True
        if self._reading:
            raise _Stopped

    def serve(self, stdin: BinaryIO, stdout: BinaryIO) -> None:
        """Answer lines until EOF, a closed output, or `stop`."""
        if type(stdin) is io.BufferedReader:  # a pipe or a file: read and write in batches
            self._serve_batched(stdin, stdout)
            return
        try:
            while not self._stop:
                if self._polling:
                    if not self._poll(stdout):
                        log.info("stdout closed; stopping")
                        return
                    continue
                line = self._read_line(stdin)
                if line is None:
                    log.info("stop requested" if self._stop else "stdin closed; stopping")
                    return
                if not self._process(line, stdout):
                    log.info("stdout closed; stopping")
                    return
        except _Stopped:
            log.info("stop requested; stopping")

    def _process(self, line: bytes, stdout: BinaryIO) -> bool:
        """Answer one line; False when the output is gone."""
        owner, answer = self._owner(line)
        if owner is not None:
            return self._carry(owner, owner.receive(answer), stdout)
        call = self._legacy_call(line)
        if call is not None:
            if len(self._calls) >= self.limits.calls_per_session:
                busy = ProtocolError(
                    SERVER_BUSY,
                    f"Too many calls in progress on this connection (at most "
                    f"{self.limits.calls_per_session}): answer the pending requests first",
                )
                return _write(stdout, encode(error_response(call.request_id, busy)) + b"\n")
            self._calls.append(call)
            return self._carry(call, call.start(), stdout)
        response = self.answer(line)
        return response is None or _write(stdout, response)

    def _owner(self, line: bytes) -> tuple[LegacyCall | None, Any]:
        """The call in progress that a client's answer belongs to, with the answer."""
        if not self._calls or len(line) > self.max_line_bytes:
            return None, None
        answer: Any = None
        with contextlib.suppress(ProtocolError):
            answer = decode(line)
        if not is_response(answer):
            return None, None
        for call in self._calls:
            if call.owns(answer["id"]):
                return call, answer
        return None, None

    def _carry(self, call: LegacyCall, step: Step, stdout: BinaryIO) -> bool:
        """Write what `step` sends; then the call is over, polls, or waits for answers."""
        for message in step.send:
            if not _write(stdout, encode(message) + b"\n"):
                return False
        if step.result is not None:
            self._calls.remove(call)
            return _write(stdout, encode(step.result) + b"\n")
        if step.wait is not None and call not in self._polling:
            self._polling.append(call)
        return True

    def _poll(self, stdout: BinaryIO) -> bool:
        """Pause once, then ask the handler again for every call polling for a consent."""
        self._sleep(legacy_adapter.POLL_SECONDS)
        polling, self._polling = self._polling, []
        return all(self._carry(call, call.poll(), stdout) for call in polling)

    def _legacy_call(self, line: bytes) -> LegacyCall | None:
        """A legacy `tools/call` needs the streams (it talks to the client before its result)."""
        if self.session is None or len(line) > self.max_line_bytes:
            return None
        try:
            message = decode(line)
        except ProtocolError:
            return None
        if (
            _legacy_era(message, self.session)
            and message.get("method") == "tools/call"
            and "id" in message
        ):
            return self.session.call(message)
        return None

    def answer(self, line: bytes) -> bytes | None:
        """The output line (with its newline) for one input line, or None for no output."""
        message = self._decoded(line)
        if type(message) is bytes:
            return message
        return self._answer_message(message)

    def _decoded(self, line: bytes) -> Any:
        """The message of a line, or the output line that refuses it (bytes: too long, not
        JSON), or `_BLANK` for a blank line (no output)."""
        if len(line) > self.max_line_bytes:
            too_long = ProtocolError(
                INVALID_REQUEST,
                f"Invalid Request: a message is limited to {self.max_line_bytes} bytes",
            )
            return encode(error_response(None, too_long)) + b"\n"
        try:
            return decode(line)
        except ProtocolError:
            # A blank line is no JSON text either: it separates nothing and is not a message.
            return _BLANK if not line.strip() else encode(parse_error_response()) + b"\n"

    def _answer_message(self, message: Any) -> bytes | None:
        if message is _BLANK:
            return None
        if self.legacy and _legacy_era(message, self.session):
            response = self._answer_legacy(message)
            return None if response is None else encode(response) + b"\n"
        # The core tells a notification (None: no output) from an invalid id-less object.
        encoded = self.server.respond(message, self.context)
        return None if encoded is None else encoded + b"\n"

    # -- batches: a pipe or a file ---------------------------------------------------------------

    def _serve_batched(self, stdin: io.BufferedReader, stdout: BinaryIO) -> None:
        """The loop of `serve` over a buffered pipe: each read takes whatever has arrived
        (`read1`), and the answers to the lines it held are written together, flushed before
        the loop could block (the next read, a consent poll) and before any request that may
        change something is dispatched. So a closed output stops the loop before a call runs,
        as it does line by line, and the client always has every answer it waits for."""
        pending: list[bytes] = []
        buffer = b""
        start = 0
        limit = self.max_line_bytes
        respond, context = self.server.respond, self.context
        try:
            while not self._stop:
                if self._polling:
                    if not _flush(stdout, pending) or not self._poll(stdout):
                        log.info("stdout closed; stopping")
                        return
                    continue
                end = buffer.find(b"\n", start)
                if end < 0:
                    if not _flush(stdout, pending):
                        log.info("stdout closed; stopping")
                        return
                    buffer, start, more = self._read_more(stdin, buffer[start:])
                    if more:
                        continue
                    if not buffer:
                        log.info("stop requested" if self._stop else "stdin closed; stopping")
                        return
                    line = buffer  # the last line, without a newline before EOF
                    buffer, start = b"", 0
                else:
                    line = buffer[start:end]
                    start = end + 1
                    if len(line) <= limit and not self._calls and self.session is None:
                        try:
                            message = decode(line)
                        except ProtocolError:
                            message = None  # answered below, as any line
                        # The usual listing: no session, nothing to flush first, nothing
                        # that could make it legacy (only an `initialize` starts one).
                        if type(message) is dict and message.get("method") in _BATCHED:
                            response = respond(message, context)
                            if response is not None:
                                pending += (response, b"\n")  # joined in one copy
                            continue
                        if not self._batch_line(line, stdout, pending, message):
                            log.info("stdout closed; stopping")
                            return
                        continue
                if not self._batch_line(line, stdout, pending):
                    log.info("stdout closed; stopping")
                    return
        except _Stopped:
            log.info("stop requested; stopping")
        finally:
            _flush(stdout, pending)

    def _read_more(self, stdin: io.BufferedReader, rest: bytes) -> tuple[bytes, int, bool]:
        """`rest` (an unfinished line) and what has arrived since; False at EOF or on stop. A
        line past the limit keeps only `max_line_bytes + 1` bytes (enough to be refused); the
        rest of it is read and dropped up to its newline, so memory stays flat."""
        limit = self.max_line_bytes
        self._reading = True
        try:
            if self._stop:
                return rest, 0, False
            chunk = stdin.read1(_READ_BYTES)
            if len(rest) <= limit:
                if not chunk:
                    return rest, 0, False
                return rest + chunk, 0, True
            # An oversize line: drop its tail, up to the newline or EOF.
            while chunk:
                end = chunk.find(b"\n")
                if end >= 0:
                    return rest[: limit + 1] + b"\n" + chunk[end + 1 :], 0, True
                chunk = stdin.read1(_READ_BYTES)
            return rest[: limit + 1], 0, False
        finally:
            self._reading = False

    def _batch_line(
        self, line: bytes, stdout: BinaryIO, pending: list[bytes], message: Any = None
    ) -> bool:
        """Answer one line into `pending`, or write what is pending first and answer it as
        `_process` does; False when the output is gone. `message` is the line's, when the
        caller has decoded it already (None: not yet, or not JSON)."""
        if self._calls or self.session is not None:
            # A legacy session on this connection: its calls write as they go.
            return _flush(stdout, pending) and self._process(line, stdout)
        if message is None:
            message = self._decoded(line)
        if type(message) is bytes:
            pending.append(message)
            return True
        # A call may change something: what is owed goes out first, and a closed output
        # stops the loop before it runs.
        if (
            type(message) is dict
            and "id" in message
            and message.get("method") not in _BATCHED
            and not _flush(stdout, pending)
        ):
            return False
        if message is _BLANK:
            return True
        if self.legacy and _legacy_era(message, self.session):
            response = self._answer_legacy(message)
            if response is not None:
                pending.append(encode(response) + b"\n")
            return True
        encoded = self.server.respond(message, self.context)
        if encoded is not None:
            pending += (encoded, b"\n")  # joined with the others in one copy
        return True

    def _answer_legacy(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if is_response(message):
            log.debug("an answer for no pending request was dropped")
            return None
        if self.session is None:  # `_legacy_era` let only an initialize through
            self.session, response = legacy_adapter.initialize(
                self.server, self.context, message, limits=self.limits
            )
            if self.session is not None:
                log.info("legacy %s session started on stdio", self.session.version)
            return response
        if "id" in message and message.get("method") == "tools/call":
            return None  # unreachable: `_process` drives calls; kept total for the type
        return self.session.answer(message)

    def _read_line(self, stdin: BinaryIO) -> bytes | None:
        """One line without its newline; an oversize line comes back longer than the limit
        (its tail is skipped, not buffered). None at EOF."""
        self._reading = True
        try:
            if self._stop:
                return None
            line = stdin.readline(self.max_line_bytes + 1)
            if not line:
                return None
            if line.endswith(b"\n"):
                return line[:-1]
            if len(line) <= self.max_line_bytes:
                return line  # the last line, without a newline before EOF
            tail = line
            while tail and not tail.endswith(b"\n"):
                tail = stdin.readline(self.max_line_bytes + 1)
            return line
        finally:
            self._reading = False


def _legacy_era(message: Any, session: LegacySession | None) -> bool:
    """Whether a message belongs to the legacy session: never a request with 2026-07-28
    `_meta` (served statelessly, as always); otherwise an `initialize`, or anything once the
    connection is a session."""
    if not isinstance(message, dict) or not isinstance(message.get("params", {}), dict):
        return False
    meta = message.get("params", {}).get("_meta")
    if isinstance(meta, dict) and META_VERSION in meta:
        return False
    return session is not None or message.get("method") == "initialize"


def _flush(stdout: BinaryIO, pending: list[bytes]) -> bool:
    """Write the answers owed, in one write; False when the output is gone."""
    if not pending:
        return True
    data = pending[0] if len(pending) == 1 else b"".join(pending)
    pending.clear()
    return _write(stdout, data)


def _write(stdout: BinaryIO, data: bytes) -> bool:
    try:
        stdout.write(data)
        stdout.flush()
    except (BrokenPipeError, ValueError):
        # The reading end went away (or the stream was closed): nobody is listening.
        return False
    return True
