"""stdio at 2026-07-28: newline-delimited JSON-RPC on a pair of byte streams.

Owns: line framing, the line size limit, `-32700` with `id: null` for a line that is not JSON,
silence for notifications, and stopping cleanly on EOF or on request (a signal). Reads one line,
calls `Server.handle`, writes one line: requests are answered in order, one at a time. Logs go
to the logging system (stderr); the output stream carries protocol messages only.
"""

from __future__ import annotations

import logging
from typing import BinaryIO, Final

from labkit.errors import INVALID_REQUEST, ProtocolError
from labkit.server import RequestContext, Server
from labkit.wire import decode, encode, error_response, parse_error_response

log = logging.getLogger("labkit.transports.stdio")

DEFAULT_MAX_LINE_BYTES: Final = 4 * 1024 * 1024


class _Stopped(Exception):
    """Raised by `StdioTransport.stop` into a blocked read, never anywhere else."""


class StdioTransport:
    """Serves one principal (the one configured for stdio) over a pair of byte streams."""

    def __init__(
        self, server: Server, principal: str, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.server = server
        self.context = RequestContext(principal=principal, transport="stdio")
        self.max_line_bytes = max_line_bytes
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
        try:
            while not self._stop:
                line = self._read_line(stdin)
                if line is None:
                    log.info("stop requested" if self._stop else "stdin closed; stopping")
                    return
                response = self.answer(line)
                if response is not None and not _write(stdout, response):
                    log.info("stdout closed; stopping")
                    return
        except _Stopped:
            log.info("stop requested; stopping")

    def answer(self, line: bytes) -> bytes | None:
        """The output line (with its newline) for one input line, or None for no output."""
        if len(line) > self.max_line_bytes:
            too_long = ProtocolError(
                INVALID_REQUEST,
                f"Invalid Request: a message is limited to {self.max_line_bytes} bytes",
            )
            return encode(error_response(None, too_long)) + b"\n"
        if not line.strip():
            return None  # blank lines separate nothing; they are not messages
        try:
            message = decode(line)
        except ProtocolError:
            return encode(parse_error_response()) + b"\n"
        # The core tells a notification (None: no output) from an invalid id-less object.
        response = self.server.handle(message, self.context)
        return None if response is None else encode(response) + b"\n"

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


def _write(stdout: BinaryIO, data: bytes) -> bool:
    try:
        stdout.write(data)
        stdout.flush()
    except (BrokenPipeError, ValueError):
        # The reading end went away (or the stream was closed): nobody is listening.
        return False
    return True
