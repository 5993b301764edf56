"""Where labkit's HTTP server spends its CPU: py-spy on the bench launcher under wrk.

    .venv/bin/pip install py-spy        # a measuring tool only: not a labkit dependency
    .venv/bin/python bench/profile_http.py [--mode list|flow] [--seconds 10]

Starts `bench/labkit_http_server.py` under `py-spy record` (pinned to CPU 1), drives it with
wrk and `bench/mcp.lua` (pinned to CPU 0, 8 connections), and prints the share of samples per
module group (inclusive: a frame anywhere on the stack) and the top functions by own time.
Not part of `make bench`: sampling slows the server, so its figures are not the table's.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
GROUPS = [
    ("labkit endpoint (transports/http.py)", "labkit/transports/http.py"),
    ("labkit connection layer", "labkit/transports/connections.py"),
    ("labkit auth.py", "labkit/auth.py"),
    ("labkit core (server.py)", "labkit/server.py"),
    ("labkit tool (notes_delete.py)", "labkit/notes_delete.py"),
    ("labkit state.py", "labkit/state.py"),
    ("labkit wire.py", "labkit/wire.py"),
    ("uvicorn / httptools", "uvicorn/"),
    ("starlette", "starlette/"),
    ("asyncio", "asyncio/"),
    ("anyio", "anyio/"),
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="list", choices=("list", "flow"))
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args(argv)
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    sys.path.insert(0, str(BENCH))
    from bench_http import ensure_wrk, free_port

    wrk = ensure_wrk()
    port = free_port()
    out = Path(tempfile.mkdtemp()) / "stacks.txt"
    server = subprocess.Popen(
        [
            "taskset",
            "-c",
            "1",
            sys.executable,
            str(BENCH / "labkit_http_server.py"),
            "--port",
            str(port),
        ],
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(4)  # imports and start-up are not what is measured
        record = [py_spy, "record", "--rate", "500", "--format", "raw", "--nonblocking"]
        spy = subprocess.Popen(
            [
                *record,
                "--output",
                str(out),
                "--pid",
                str(server.pid),
                "--duration",
                str(args.seconds),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}/mcp"
        load = ["taskset", "-c", "0", wrk, "-t1", "-c8", f"-d{args.seconds + 2}s"]
        subprocess.run(
            [*load, "-s", str(BENCH / "mcp.lua"), url, "--", args.mode],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        spy.wait(timeout=60)
    finally:
        server.terminate()
        server.wait(timeout=10)
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in out.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = stack.split(";")
        if any("select" in f or "epoll" in f or "run_forever" in f for f in frames[-1:]):
            continue  # idle in the event loop's poll
        total += count
        # The leaf and the nearest labkit frame above it: which of labkit's calls paid for it.
        caller = next((f for f in reversed(frames[:-1]) if "labkit/" in f), "")
        own[frames[-1] + (f"  <- {caller.split(' ')[0]}" if caller else "")] += count
        for label, needle in GROUPS:
            if any(needle in frame for frame in frames):
                inclusive[label] += count
    print(f"{total} busy samples ({args.mode}, 8 connections)")
    print("\ninclusive share by module group:")
    for label, count in inclusive.most_common():
        print(f"  {count / total:6.1%}  {label}")
    print("\ntop functions by own time:")
    for frame, count in own.most_common(15):
        print(f"  {count / total:6.1%}  {frame}")


if __name__ == "__main__":
    main()
