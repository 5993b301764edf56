"""The channel to a child process (`labkit.course.exercises.channel`): each outcome of a read
that is not a message is its own, a line that is not a JSON object leaves the channel going on,
and the end of the channel is said by every later read and by a send."""

from __future__ import annotations

import subprocess
import sys

import pytest

from labkit.course.exercises.channel import ChannelEnded, ChildChannel, NotAnObject

# Writes a line that is not JSON, a JSON list, then echoes one line it reads, then exits.
CHILD = """import sys
sys.stdout.buffer.write(b'{not json\\n[1, 2]\\n')
sys.stdout.flush()
sys.stdout.buffer.write(sys.stdin.buffer.readline())
"""


def test_each_outcome_of_a_read_is_its_own() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    channel = ChildChannel(proc.stdin, proc.stdout, "test-channel")
    try:
        with pytest.raises(NotAnObject, match="JSONDecodeError"):
            channel.receive(30)
        with pytest.raises(NotAnObject, match="TypeError"):
            channel.receive(30)
        channel.send({"echo": [1]})
        assert channel.receive(30) == {"echo": [1]}
        for _ in range(2):
            with pytest.raises(ChannelEnded):
                channel.receive(30)
        proc.wait(30)
        with pytest.raises(ChannelEnded):
            channel.send({"after": "the end"})
    finally:
        proc.kill()
        proc.wait(30)
        channel.close()
