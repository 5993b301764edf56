"""The instruction counter's children (`bench/bench_instructions.py`) answer what they count and
check every reply: a path that answered something else would fail its run, not be counted.
Run here without valgrind, a few requests each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "bench_instructions.py"
sys.path.insert(0, str(SCRIPT.parent))

import bench_instructions  # noqa: E402


@pytest.mark.parametrize("path", sorted(bench_instructions.CHILDREN))
def test_each_path_answers_the_listing_to_every_request(path: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--child", path, "7"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "reply",
    [
        None,
        b'{"jsonrpc":"2.0","id":8,"result":{"tools":[{"name":"notes_delete"}]}}',
        b'{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"notes_delete"}}',
        b'{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}',
    ],
)
def test_a_reply_that_is_not_the_listing_stops_the_count(reply: bytes | None) -> None:
    with pytest.raises(SystemExit):
        bench_instructions._check(reply)


def test_two_checkouts_are_compared_path_by_path() -> None:
    counts: dict[str, dict[str, int | None]] = {
        "this": {"decode": 90, "respond": 10, "stdio": 200, "http": 400, "server": 900},
        "before": {"decode": 100, "respond": None, "stdio": 200, "http": 500, "server": 1000},
    }
    lines = bench_instructions.table(counts, ["this", "before"]).splitlines()
    assert lines[0] == "| instructions per request | this | before | change |"
    assert lines[2:] == [
        "| decode | 90 | 100 | -10.0% |",
        "| respond | 10 | – | – |",
        "| stdio | 200 | 200 | +0.0% |",
        "| http | 400 | 500 | -20.0% |",
        "| server | 900 | 1,000 | -10.0% |",
    ]
