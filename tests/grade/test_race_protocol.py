"""One racing protocol for both runners: the notebook's racing child (`python -m
labkit.course.exercises.racer`, given a carried function) and the grader's check worker (given
answer cells) answer the same message sequence (ready, define, a racing "call" with "wait",
ready, "go", the answer), and the one decoder reads the same racer from either. The kernel's
`race` and `WorkerRunner.race` run one race procedure: the same race gives the same racers,
the learner's frames only where the racer was asked for them (the kernel's)."""

from __future__ import annotations

import dataclasses
import json
import linecache
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from grade.grade_helpers import WORKER_ARGV
from labkit.course.exercises.calls import Frame
from labkit.course.exercises.channel import MAX_LINE, MAX_QUEUED
from labkit.course.exercises.fixtures import add_notes, connect, create_ex1_schema
from labkit.course.exercises.race import (
    GO,
    BySource,
    Racer,
    RaceResult,
    RaceSpec,
    call_message,
    carrier_from_json,
    define_message,
    race,
    racer_from_answer,
    racer_key,
)
from labkit.grade.worker import WorkerRunner

# One answer cell, run by the worker as `<answer cell 1>` and carried to the racing child by
# source under that same file name, so both report the same frames.
CELL = """\
def claim(conn, note_id):
    conn.execute("BEGIN IMMEDIATE")
    gone = conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount
    conn.execute("COMMIT")
    return gone == 1


def broken(conn, note_id):
    conn.execute("BEGIN IMMEDIATE")
    return 1 / 0


def dies(conn, note_id):
    import os

    os._exit(3)
"""
FILENAME = "<answer cell 1>"


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    tmp_path.chmod(0o777)
    yield tmp_path


def database(folder: Path) -> Path:
    """Exercise 1's tables and one note, writable by the worker's user (the launcher's)."""
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    path = folder / "race.sqlite3"
    with connect(path) as conn:
        create_ex1_schema(conn)
        add_notes(conn, [("note-7", "file:///work/notes/a.md", "a")])
    conn.close()
    path.chmod(0o666)
    return path


def spec(name: str, path: Path) -> RaceSpec:
    return RaceSpec(name, path, (("note-7",),), 60, lock_timeout=5, delay=0, reset=lambda: None)


def carried(name: str) -> BySource:
    return BySource(name, CELL, FILENAME, 1, (), (), ())


def converse(argv: Sequence[str], define: dict[str, Any], racing: RaceSpec) -> list[Any]:
    """Speak the racing protocol to one process, as the race procedure does, and return every
    reply: the start, "define", the racing "call", then (after "go") the answer. The process
    runs in the database's folder (a worker's launcher hands its folder to the worker's user)."""
    proc = subprocess.Popen(
        argv,
        cwd=racing.database.parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        replies = [json.loads(proc.stdout.readline())]
        for message in (define, call_message(racing, 0, frames=True), GO):
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            replies.append(json.loads(proc.stdout.readline()))
        return replies
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdin.close()
        proc.stdout.close()


RACER_CHILD = [sys.executable, "-m", "labkit.course.exercises.racer"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("claim", Racer("returned", "True", value_is_true=True)),
        (
            "broken",
            Racer(
                "raised",
                exception="ZeroDivisionError: division by zero",
                frames=(Frame(FILENAME, 10, "broken", "return 1 / 0"),),
                in_transaction=True,
            ),
        ),
    ],
)
def test_a_racing_child_and_a_check_worker_answer_one_message_sequence(
    name: str, expected: Racer, scratch: Path
) -> None:
    child = converse(
        RACER_CHILD,
        define_message(name, carried(name)),
        spec(name, database(scratch / "child")),
    )
    worker = converse(
        WORKER_ARGV,
        {"op": "define", "sources": [CELL]},
        spec(name, database(scratch / "worker")),
    )
    for replies in (child, worker):
        assert replies[0] == {"ready": True}  # started
        assert name in replies[1]["defined"] and replies[1]["errors"] == []
        assert replies[2] == {"ready": True}  # connected, waiting for "go"
        assert racer_from_answer(replies[3], racer_key(0)) == expected


def test_a_function_the_racing_child_cannot_rebuild_is_the_define_replys_error(
    scratch: Path,
) -> None:
    unknown = BySource("nowhere", "x = 1\n", FILENAME, 1, (), (), ())
    replies = converse(
        RACER_CHILD,
        define_message("nowhere", unknown),
        spec("nowhere", database(scratch / "child")),
    )
    assert replies[1] == {
        "defined": [],
        "errors": ["labkit.course.exercises.race.NotPortable: its source did not define 'nowhere'"],
    }


def test_a_carrier_travels_as_json_and_comes_back_whole() -> None:
    inner = BySource("helper", "def helper():\n    return 1\n", "cell", 3, (("os", "os"),), (), ())
    carrier = BySource(
        "f", "def f():\n    return helper()\n", "cell", 7, (), (("N", b"\x80"),), (inner,)
    )
    assert carrier_from_json(json.loads(json.dumps(carrier.to_json()))) == carrier


def both_runners(name: str, scratch: Path) -> tuple[RaceResult, RaceResult]:
    """The race of CELL's `name`, by the kernel's runner (a notebook function: it travels by
    source) and by the grader's (a worker holding CELL), each on a database of its own."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    linecache.cache[FILENAME] = (len(CELL), None, CELL.splitlines(keepends=True), FILENAME)
    try:
        exec(compile(CELL, FILENAME, "exec"), namespace)
        kernel = race(namespace[name], spec(name, database(scratch / "kernel")))
    finally:
        linecache.cache.pop(FILENAME, None)
    runner = WorkerRunner([CELL], argv=WORKER_ARGV, scratch=scratch)
    try:
        grader = runner.race(spec(name, database(scratch / "grader")))
    finally:
        runner.close()
    assert kernel.processes and grader.processes
    assert kernel.why_threads == grader.why_threads == ""
    return kernel, grader


def test_both_runners_race_through_one_procedure_and_read_the_same_racers(
    scratch: Path,
) -> None:
    kernel, grader = both_runners("broken", scratch)
    (by_kernel,), (by_grader,) = kernel.racers, grader.racers
    assert by_kernel.frames == (Frame(FILENAME, 10, "broken", "return 1 / 0"),)
    # The grader does not ask for the learner's frames: its racer says the exception line.
    assert by_grader == Racer(
        "raised", exception="ZeroDivisionError: division by zero", in_transaction=True
    )
    assert by_kernel == dataclasses.replace(by_grader, frames=by_kernel.frames)


def test_a_racer_that_dies_crashed_in_both_runners(scratch: Path) -> None:
    kernel, grader = both_runners("dies", scratch)
    assert kernel.racers == (Racer("crashed", exception="exit code 3"),)
    assert grader.racers == (Racer("crashed", exception="the racer's process died"),)


# Raced functions that write on the racing child's channel (the pipe it writes its replies on)
# past its bounds. In `floods`, two racers take turns: the first waits until the second has
# flooded its channel and found it closed, so the race procedure reads the second racer's
# channel only after its reader stopped.
WRITES_ON_THE_CHANNEL = f"""\
import fcntl
import os
import stat
import time


def channel():
    for fd in range(3, 64):
        try:
            fifo = stat.S_ISFIFO(os.fstat(fd).st_mode)
        except OSError:
            continue
        if fifo and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
            return fd
    raise LookupError("no channel")


def long_line(conn, role, done):
    try:
        os.write(channel(), b"x" * {MAX_LINE + 10} + b"\\n")
    except BrokenPipeError:
        pass
    return True


def floods(conn, role, done):
    if role == "waits":
        for _ in range(6000):
            if os.path.exists(done):
                return True
            time.sleep(0.01)
        return False
    fd = channel()
    try:
        for _ in range(100000):
            os.write(fd, b"not a JSON object\\n")
    except BrokenPipeError:
        pass
    finally:
        open(done, "w").close()
    return True
"""
CHANNEL_CELL = "<channel cell>"


def kernel_race(name: str, roles: Sequence[str], scratch: Path) -> RaceResult:
    """The kernel's race of WRITES_ON_THE_CHANNEL's `name`, one racer per role."""
    path = database(scratch / "kernel")
    done = str(scratch / "done")
    calls = tuple((role, done) for role in roles)
    racing = RaceSpec(name, path, calls, 60, lock_timeout=5, delay=0, reset=lambda: None)
    cell = WRITES_ON_THE_CHANNEL
    namespace: dict[str, Any] = {"__name__": "__main__"}
    linecache.cache[CHANNEL_CELL] = (len(cell), None, cell.splitlines(keepends=True), CHANNEL_CELL)
    try:
        exec(compile(cell, CHANNEL_CELL, "exec"), namespace)
        result = race(namespace[name], racing)
    finally:
        linecache.cache.pop(CHANNEL_CELL, None)
    assert result.processes
    return result


def test_a_racer_writing_a_line_past_the_bound_crashed_saying_so(scratch: Path) -> None:
    result = kernel_race("long_line", ["writes"], scratch)
    assert result.racers == (
        Racer(
            "crashed",
            exception="something in the raced function wrote a line longer than 2 MiB on its "
            "channel",
        ),
    )


def test_a_racer_flooding_its_channel_crashed_saying_so(scratch: Path) -> None:
    waits, floods = kernel_race("floods", ["waits", "floods"], scratch).racers
    assert waits == Racer("returned", "True", value_is_true=True)
    assert floods == Racer(
        "crashed",
        exception=f"something in the raced function wrote more than {MAX_QUEUED} lines on its "
        "channel that nobody asked for",
    )
