"""The check worker's channel is the learner's to write on: whatever comes back, the grader's
side (`WorkerRunner`) keeps a bounded amount of it, and turns what it cannot read into that
call's failure, never into an exception out of a check (`end_check` included) and never into
the grader's memory.

Each worker here is a stand-in process that answers the requests with what a hostile answer
cell could make the real worker send.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from labkit.course.exercises.channel import MAX_LINE, MAX_QUEUED
from labkit.grade.worker import BadReply, WorkerGone, WorkerRunner

# Says it is ready, then reads each request; answers "define" as the worker would, then every
# other request with the reply the test names (a Python expression giving bytes).
STAND_IN = """import sys
reply = eval(sys.argv[1])
sys.stdout.buffer.write(b'{"ready": true}\\n')
sys.stdout.flush()
for line in sys.stdin:
    if '"define"' in line:
        sys.stdout.buffer.write(b'{"defined": ["f"], "errors": []}\\n')
    else:
        sys.stdout.buffer.write(reply)
    sys.stdout.flush()
"""


def runner(reply: str, scratch: Path) -> WorkerRunner:
    def spawn(argv: Sequence[str], where: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-c", STAND_IN, reply],
            cwd=where,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    return WorkerRunner([], argv=[], scratch=scratch, spawn=spawn, start_timeout=30)


REPLIES = {
    "nested 100,000 deep": ("b'[' * 100000 + b']' * 100000 + b'\\n'", "RecursionError"),
    "not JSON": ("b'{not json\\n'", "JSONDecodeError"),
    "JSON, not an object": ("b'[1, 2, 3]\\n'", "TypeError"),
    "an object, not an answer": ("b'{\"value\": 1}\\n'", "KeyError"),
    "an answer of the wrong shape": (
        'b\'{"kind": "returned", "value": 1, "effects": {"drawn": 5}}\\n\'',
        "TypeError",
    ),
    "a value that cannot be decoded": (
        'b\'{"kind": "returned", "value": {"$": "no such tag"}}\\n\'',
        "EncodingError",
    ),
    "a line longer than the bound": (f"b'x' * {MAX_LINE + 10} + b'\\n'", "longer than 2 MiB"),
    "lines nobody asked for": (
        f"b'{{\"ok\": true}}\\n' * {MAX_QUEUED * 4}",
        "that nobody asked for",
    ),
}


@pytest.mark.parametrize("reply", REPLIES)
def test_a_reply_the_grader_cannot_read_fails_that_call_only(reply: str, tmp_path: Path) -> None:
    sent, said = REPLIES[reply]
    worker = runner(sent, tmp_path)
    try:
        assert worker.start() == frozenset({"f"})
        answers = [worker.call("f", [], 10) for _ in range(2)]
        worker.end_check()  # whatever the channel holds, closing a check never raises
    finally:
        worker.close()
    assert answers[0] is None
    assert said in worker.problem or reply == "lines nobody asked for"
    assert "answer cells" in worker.problem


def test_lines_nobody_asked_for_stop_the_reader(tmp_path: Path) -> None:
    flood = f"b'{{\"ok\": true}}\\n' * {MAX_QUEUED * 4}"
    worker = runner(flood, tmp_path)
    try:
        worker.start()
        worker._worker.send({"op": "call", "name": "f", "args": []})  # type: ignore[union-attr]
        replies = []
        with pytest.raises(BadReply, match="nobody asked for"):
            while True:
                replies.append(worker._worker.receive(10))  # type: ignore[union-attr]
    finally:
        worker.close()
    assert len(replies) <= MAX_QUEUED  # what was kept before the reader stopped


def test_a_forged_definition_reply_is_a_worker_that_did_not_start(tmp_path: Path) -> None:
    script = "import sys\nprint('{\"ready\": true}', flush=True)\nsys.stdin.readline()\n"
    script += "print('{\"defined\": 5}', flush=True)\n"

    def spawn(argv: Sequence[str], where: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-c", script], cwd=where, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    worker = WorkerRunner([], argv=[], scratch=tmp_path, spawn=spawn)
    with pytest.raises(WorkerGone, match="did not start: something in the answer cells"):
        worker.start()
