"""The narrow channel between a parent and a child process that holds learner code: JSON
objects, one a line, written on the child's stdin and read from its stdout by a thread of the
parent. The learner's code runs in the child and can write on the channel too, so what the
parent keeps of it is bounded.

Owns: `ChildChannel` (`send` one message, `receive` the next within a timeout, `close` the
writing end), its bounds (`MAX_LINE`, `MAX_QUEUED`) and the three outcomes of a read that are
not a message: `ChannelEnded` (the child closed its end, by exiting), `ChannelBroken` (it broke
a bound and the reader stopped) and `NotAnObject` (a line that is not a JSON object). Its two
users say these outcomes in their own words: the notebook kernel's racing child
(`labkit.course.exercises.race`) and the grader's check worker (`labkit.grade.worker`).

Imports nothing from labkit: the kernel and the grader load it alike.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from dataclasses import dataclass
from typing import IO, Any, Final

# An honest message is far smaller than `MAX_LINE` bytes (values are capped by
# `calls.MAX_ITEMS`, an exception's text by `calls.describe`), and a child answers one request
# at a time, so an honest channel has at most one line nobody has read yet: `MAX_QUEUED` leaves
# room. Past either bound, the reader stops and every later read says so.
MAX_LINE: Final = 2 * 1024**2
MAX_QUEUED: Final = 4
LONG: Final = f"wrote a line longer than {MAX_LINE // 1024**2} MiB on its channel"
FLOOD: Final = f"wrote more than {MAX_QUEUED} lines on its channel that nobody asked for"


class ChannelEnded(Exception):
    """The child closed its end of the channel (it exited), or can no longer read a message."""


class ChannelBroken(Exception):
    """The child broke a bound of the channel (`LONG` or `FLOOD`, its message); the reader
    stopped reading, so nothing after it is read."""


class NotAnObject(Exception):
    """A line that is not a JSON object; `error` says why (a `JSONDecodeError`, a
    `RecursionError` for one nested deep, a `TypeError` for JSON that is not an object). The
    channel goes on with the next line."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"a line that is not a JSON object ({type(error).__name__})")
        self.error = error


@dataclass(frozen=True)
class _End:
    """The reader stopped: at the end of the channel, or because it broke a bound (`broken`)."""

    broken: str = ""


class ChildChannel:
    """A child's pipes: `stdin` written one message a line, `stdout` read by a thread that
    keeps at most `MAX_QUEUED` unread lines of at most `MAX_LINE` bytes each."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes], name: str) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._lines: queue.Queue[bytes | _End] = queue.Queue()
        reader = threading.Thread(target=self._read, name=name, daemon=True)
        reader.start()

    def _read(self) -> None:
        try:
            while raw := self._stdout.readline(MAX_LINE + 1):
                if len(raw) > MAX_LINE:
                    self._lines.put(_End(LONG))
                    return
                if self._lines.qsize() >= MAX_QUEUED:
                    self._lines.put(_End(FLOOD))
                    return
                self._lines.put(raw)
        except (OSError, ValueError):  # a read error is the end of the channel
            pass
        finally:
            # Here, not in `close`: closing it from another thread would wait for this read,
            # which may never end while a process the child started holds the pipe.
            self._stdout.close()
        self._lines.put(_End())

    def send(self, message: dict[str, Any]) -> None:
        """Write one message; `ChannelEnded` (saying why) when the child cannot read it."""
        try:
            self._stdin.write(json.dumps(message).encode() + b"\n")
            self._stdin.flush()
        except (OSError, ValueError) as error:
            raise ChannelEnded(str(error)) from None

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next message, None after `timeout` seconds. `ChannelEnded` once the child
        closed its end and `ChannelBroken` once it broke a bound (every later read says so
        too); `NotAnObject` for a line that is not a JSON object (the next read goes on)."""
        try:
            line = self._lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        if isinstance(line, _End):
            self._lines.put(line)
            if line.broken:
                raise ChannelBroken(line.broken)
            raise ChannelEnded("the channel ended")
        return _object(line)

    def close(self) -> None:
        """Close the writing end (a child waiting for a message then reads its end of file).
        The reading end is the reader's: it closes it at the end of the channel."""
        with contextlib.suppress(OSError, ValueError):
            self._stdin.close()


def _object(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line.decode("utf-8", "replace"))
    except Exception as error:  # ValueError, or RecursionError for a line nested deep
        raise NotAnObject(error) from None
    if not isinstance(message, dict):
        raise NotAnObject(TypeError(f"a JSON {type(message).__name__}, not an object"))
    return message
