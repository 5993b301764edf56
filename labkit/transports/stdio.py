"""stdio at 2026-07-28: newline-delimited JSON-RPC on a pair of byte streams.

Owns: line framing, the line size limit, `-32700` with `id: null` for a line that is not JSON,
silence for notifications, and stopping cleanly on EOF or on request (a signal). Reads one line,
calls `Server.respond`, writes one line: requests are answered in order, one at a time. Logs go
to the logging system (stderr); the output stream carries protocol messages only.

With `eras` (declarations from `labkit.transports.eras.ERAS`), the connection serves those
eras too: each gets its stdio adapter (`labkit.transports.era.StdioEra`) for this connection,
and a decoded message that an era claims goes to it instead of the core (in the order given;
once an era holds the connection as its session, that era alone is asked). The adapter writes
as it goes, so a 2025-11-25 `tools/call` that needs input writes live server-to-client requests
and the one loop here hands the client's answers back to it; while an era polls (a URL
consent), the loop pauses between polls and reads nothing else. What no era claims is served
statelessly by the core, as always.

Must not import the endpoint, the course toolkit or the grader.
"""

from __future__ import annotations

import functools
import io
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, Final

from labkit.errors import INVALID_REQUEST, ProtocolError
from labkit.legacy import LegacyLimits
from labkit.server import RequestContext, Server
from labkit.transports.era import Era, StdioEra, Write
from labkit.transports.limits import DEFAULT_MAX_LINE_BYTES
from labkit.wire import decode, encode, error_response, parse_error_response

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
        eras: Sequence[Era] = (),
        sleep: Callable[[float], None] = time.sleep,
        limits: LegacyLimits | None = None,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.limits = limits if limits is not None else LegacyLimits()
        self.server = server
        self.context = RequestContext(principal=principal, transport="stdio")
        self.max_line_bytes = max_line_bytes
        # This connection's adapter of each era served beside the core's, and the one that
        # holds the connection as its session (then it alone is asked; None: not yet).
        self.eras: tuple[StdioEra, ...] = tuple(
            era.stdio(server, self.context, self.limits) for era in eras
        )
        self.held: StdioEra | None = None
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
                if self.held is not None and self.held.wait is not None:
                    if not self._poll(self.held, stdout):
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
        return self._line(line, lambda data: _write(stdout, data))

    def answer(self, line: bytes) -> bytes | None:
        """The output (lines, each with its newline) for one input line, or None for none."""
        out: list[bytes] = []
        self._line(line, functools.partial(_collect, out))
        return b"".join(out) if out else None

    def _line(self, line: bytes, write: Callable[[bytes], bool]) -> bool:
        """Answer one line through `write` (an era's adapter writes as it goes); False when
        the output is gone."""
        message = self._decoded(line)
        if type(message) is bytes:
            return write(message)
        if message is _BLANK:
            return True
        era = self._claimant(message)
        if era is not None:
            return self._take(era, message, lambda sent: write(encode(sent) + b"\n"))
        # The core tells a notification (None: no output) from an invalid id-less object.
        encoded = self.server.respond(message, self.context)
        return encoded is None or write(encoded + b"\n")

    def _claimant(self, message: Any) -> StdioEra | None:
        """The era a message belongs to: the one holding the connection, if it claims it;
        else the first that claims it; None for the core's."""
        if self.held is not None:
            return self.held if self.held.claims(message) else None
        for era in self.eras:
            if era.claims(message):
                return era
        return None

    def _take(self, era: StdioEra, message: Any, write: Write) -> bool:
        """Hand a claimed message to its era; once the era holds the connection, it keeps it."""
        written = era.take(message, write)
        if self.held is None and era.holds:
            self.held = era
        return written

    def _poll(self, era: StdioEra, stdout: BinaryIO) -> bool:
        """Pause as the era asks, then let it ask again for what it waits on."""
        wait = era.wait
        if wait is not None:
            self._sleep(wait)
        return era.poll_again(lambda sent: _write(stdout, encode(sent) + b"\n"))

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
                if self.held is not None and self.held.wait is not None:
                    if not _flush(stdout, pending) or not self._poll(self.held, stdout):
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
                    if len(line) <= limit and self.held is None:
                        try:
                            message = decode(line)
                        except ProtocolError:
                            message = None  # answered below, as any line
                        # The usual listing: no session, nothing to flush first, nothing
                        # an era could claim (only an `initialize` starts a session).
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
        if self.held is not None:
            # An era's session on this connection: its calls write as they go.
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
        era = self._claimant(message)
        if era is not None:
            return self._take(era, message, lambda sent: _pending(pending, sent))
        encoded = self.server.respond(message, self.context)
        if encoded is not None:
            pending += (encoded, b"\n")  # joined with the others in one copy
        return True

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


def _pending(pending: list[bytes], message: dict[str, Any]) -> bool:
    """Owe one message, written with the other answers of the batch."""
    return _collect(pending, encode(message) + b"\n")


def _collect(out: list[bytes], data: bytes) -> bool:
    out.append(data)
    return True


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
