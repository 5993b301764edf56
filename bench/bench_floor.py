"""labkit against its floors and the SDK, per server CPU-second, in one interleaved run.

    .venv/bin/python bench/bench_floor.py [--repeats 5] [--seconds 2]
    .venv/bin/python bench/bench_floor.py --server-floors   # the core's `tools/list` rows only

`--server-floors` runs the rows that measure the server entry and the HTTP endpoint against
their floors: HTTP `tools/list` at 8 connections, stdio `tools/list` and in-process
`tools/list`, with floor-1 (or the stdio and in-process floor) and labkit only.

The floors do the least any server must do with the same stack (`bench/floors.py`): floor-1 a
bare uvicorn + httptools + uvloop ASGI app that reads the body, parses it with orjson and
writes labkit's own reply bytes (so the same size); floor-2 the same behind a Starlette route;
the stdio floor an orjson line loop answering each line with a fixed reply; the in-process
floor orjson loads of the request bytes and dumps of the reply, plus one HMAC-SHA256 per flow
request (what signing or checking a `requestState` costs at the least).

Cells (every figure counts requests: a flow is two, round one and its cancel retry):

* HTTP `tools/list` at 1 and 8 connections, HTTP flow at 8: `wrk` with `bench/mcp.lua`, which
  checks every reply and fails the run on any wrong status or body. Servers: the floors, labkit
  (`bench/labkit_http_server.py`, the app `labkit serve` runs) and the SDK
  (`bench/sdk_notes_server.py`).
* stdio `tools/list` and delete+cancel (the flow): this process writes windows of 8 lines to
  the server's stdin and checks each reply line. Servers: the stdio floor, labkit's
  `StdioTransport`, the SDK's `stdio_server` + `Server.run`.
* in-process `tools/list` and flow: bytes in, bytes out in this process. labkit: the work of
  its stdio transport per line without the pipe (`decode`, then `Server.respond`);
  the SDK: the steps of its Streamable HTTP entry between body and reply (see
  `bench_inprocess.sdk_jsonrpc_entry`) with orjson around them.

Server processes are pinned to CPU 1 and the load generator (wrk, or this process for stdio and
in-process) to CPU 0 with `taskset`/`sched_setaffinity`. Server CPU is utime+stime from
/proc/PID/stat before and after each run; in-process it is this process's CPU time. Each
repetition runs every cell for every server in turn (floor-1, floor-2, labkit, SDK), and the
table gives the medians of the repetitions.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import logging
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import orjson
from common import delete_round1, flow_cancel, process_cpu_seconds, tools_list

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
SERVER_CPU = "1"
LOAD_CPU = "0"
PIN_SERVER = ["taskset", "-c", SERVER_CPU]
PIN_LOAD = ["taskset", "-c", LOAD_CPU]
WINDOW = 8  # stdio lines in flight
IN_PROCESS_CPU_SECONDS = 0.3
STATE_KEY = b'"requestState":"'
HMAC_KEY = b"k" * 32

SERVERS = ("floor-1", "floor-2", "labkit", "SDK")


# -- the requests, and labkit's replies the floors answer with ------------------------------------


def requests() -> dict[str, bytes]:
    return {
        "list": orjson.dumps(tools_list(1)),
        "round1": orjson.dumps(delete_round1(2)),
    }


def cancel_bytes(state: bytes) -> bytes:
    """The cancel retry for a `requestState` (a splice: the same cost for every server)."""
    head, tail = _CANCEL_PARTS
    return head + state + tail


def _cancel_parts() -> tuple[bytes, bytes]:
    marker = "STATE-MARKER"
    whole = orjson.dumps(flow_cancel(3, marker))
    head, tail = whole.split(marker.encode())
    return head, tail


_CANCEL_PARTS = _cancel_parts()


def state_of(reply: bytes) -> bytes:
    start = reply.index(STATE_KEY) + len(STATE_KEY)
    return reply[start : reply.index(b'"', start)]


def labkit_server() -> Any:
    from common import bench_notes, bench_replay

    from labkit.deployment import demo_deployment

    return demo_deployment(notes=bench_notes(per_thread=True), replay=bench_replay()).server


def labkit_replies() -> dict[str, bytes]:
    """The bytes labkit answers to the bench's three kinds of request."""
    answer = labkit_answer(labkit_server())
    sent = requests()
    round1 = answer(sent["round1"])
    replies = {"list": answer(sent["list"]), "round1": round1}
    replies["cancel"] = answer(cancel_bytes(state_of(round1)))
    assert b'"cancelled"' in replies["cancel"], replies["cancel"]
    return replies


def labkit_answer(server: Any) -> Callable[[bytes], bytes]:
    """What labkit's stdio transport does with one line, without the pipe."""
    from labkit.server import RequestContext
    from labkit.wire import decode

    context = RequestContext(principal="alice", transport="stdio")

    def answer(raw: bytes) -> bytes:
        encoded: bytes | None = server.respond(decode(raw), context)
        assert encoded is not None
        return encoded

    return answer


# -- HTTP --------------------------------------------------------------------------------------


def http_cells() -> list[tuple[str, str, int]]:
    return [
        ("HTTP tools/list, 1 conn", "list", 1),
        ("HTTP tools/list, 8 conns", "list", 8),
        ("HTTP flow (round 1 + cancel retry), 8 conns", "flow", 8),
    ]


@contextmanager
def http_servers(replies_file: Path, names: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    from bench_http import free_port, serving

    python = sys.executable
    commands = {
        "floor-1": [python, str(BENCH / "floors.py"), "http", "--replies", str(replies_file)],
        "floor-2": [
            python,
            str(BENCH / "floors.py"),
            "http",
            "--starlette",
            "--replies",
            str(replies_file),
        ],
        "labkit": [python, str(BENCH / "labkit_http_server.py")],
        "SDK": [python, str(BENCH / "sdk_notes_server.py")],
    }
    with ExitStack() as stack:
        served = {}
        for name, command in commands.items():
            if name not in names:
                continue
            port = free_port()
            served[name] = stack.enter_context(
                serving(
                    f"floor-bench {name}",
                    [*PIN_SERVER, *command, "--port", str(port)],
                    port,
                    RESULTS,
                )
            )
        yield served


def http_run(wrk: str, served: Any, mode: str, connections: int, seconds: float) -> float:
    from bench_http import run_wrk

    run = run_wrk(wrk, served.url, mode, seconds, served.pid, connections=connections, pin=PIN_LOAD)
    if mode == "flow" and run.figures["cancelled"] == 0:
        raise RuntimeError(f"{served.name}: no flow completed")
    return run.requests / run.server_cpu


# -- stdio -------------------------------------------------------------------------------------


class LineServer:
    """A stdio server process pinned to the server CPU, driven in windows of lines."""

    def __init__(self, name: str, command: list[str]) -> None:
        self.name = name
        with open(RESULTS / f"floor-bench-stdio-{name}.log", "wb") as log:
            self.proc = subprocess.Popen(
                [*PIN_SERVER, *command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=BENCH.parent,
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout

    def exchange(self, lines: list[bytes]) -> list[bytes]:
        self.stdin.write(b"\n".join(lines) + b"\n")
        self.stdin.flush()
        replies = [self.stdout.readline() for _ in lines]
        if not replies[-1]:
            raise RuntimeError(f"stdio {self.name} exited")
        return replies

    def close(self) -> None:
        self.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _check(name: str, reply: bytes, needle: bytes) -> None:
    if needle not in reply or b'"error"' in reply:
        raise RuntimeError(f"stdio {name}: unexpected reply {reply[:300]!r}")


def stdio_run(server: LineServer, mode: str, seconds: float) -> float:
    sent = requests()
    window_list = [sent["list"]] * WINDOW
    window_round1 = [sent["round1"]] * WINDOW
    done = 0
    cpu_before = process_cpu_seconds(server.proc.pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if mode == "list":
            for reply in server.exchange(window_list):
                _check(server.name, reply, b'"notes_delete"')
            done += WINDOW
        else:
            firsts = server.exchange(window_round1)
            for reply in firsts:
                _check(server.name, reply, b'"input_required"')
            cancels = server.exchange([cancel_bytes(state_of(r)) for r in firsts])
            for reply in cancels:
                _check(server.name, reply, b'"cancelled"')
            done += 2 * WINDOW
    return done / (process_cpu_seconds(server.proc.pid) - cpu_before)


# -- in process --------------------------------------------------------------------------------

Answer = Callable[[bytes], Awaitable[bytes]]


def in_process_entries(replies: dict[str, bytes]) -> dict[str, Answer]:
    from bench_inprocess import authenticate_alice, sdk_jsonrpc_entry, sdk_server

    listing, round1, cancel = (orjson.loads(replies[k]) for k in ("list", "round1", "cancel"))

    async def floor(raw: bytes) -> bytes:
        message = orjson.loads(raw)
        if message["method"] == "tools/list":
            return orjson.dumps(listing)
        hmac.digest(HMAC_KEY, raw, hashlib.sha256)  # signing or checking the state
        return orjson.dumps(cancel if "requestState" in message["params"] else round1)

    answer = labkit_answer(labkit_server())

    async def labkit(raw: bytes) -> bytes:
        return answer(raw)

    authenticate_alice()
    sdk_call = sdk_jsonrpc_entry(sdk_server()[0])

    async def sdk(raw: bytes) -> bytes:
        return orjson.dumps(await sdk_call(orjson.loads(raw)))

    return {"floor-1": floor, "labkit": labkit, "SDK": sdk}


async def _in_process_loop(call: Answer, mode: str, n: int) -> int:
    sent = requests()
    if mode == "list":
        raw = sent["list"]
        for _ in range(n):
            if b'"notes_delete"' not in await call(raw):
                raise RuntimeError("in-process tools/list: wrong reply")
        return n
    raw = sent["round1"]
    for _ in range(n):
        first = await call(raw)
        if b'"cancelled"' not in await call(cancel_bytes(state_of(first))):
            raise RuntimeError("in-process flow: wrong reply")
    return 2 * n


async def in_process_run(call: Answer, mode: str) -> float:
    await _in_process_loop(call, mode, 20)
    n = 100
    while True:
        start = time.process_time()
        done = await _in_process_loop(call, mode, n)
        spent = time.process_time() - start
        if spent >= IN_PROCESS_CPU_SECONDS:
            return done / spent
        n = max(n * 2, int(n * IN_PROCESS_CPU_SECONDS * 1.2 / max(spent, 1e-3)))


# -- the run -----------------------------------------------------------------------------------


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=BENCH.parent, capture_output=True, text=True, check=False
        ).stdout.strip()

    dirty = [
        line for line in git("status", "--porcelain").splitlines() if "bench/results" not in line
    ]
    return git("rev-parse", "--short", "HEAD") + (" (uncommitted changes)" if dirty else "")


def load() -> str:
    return " / ".join(f"{value:.1f}" for value in os.getloadavg())


SERVER_FLOOR_SERVERS = ("floor-1", "labkit")
SERVER_FLOOR_CELLS = ("HTTP tools/list, 8 conns", "stdio tools/list", "in-process tools/list")


def run(
    repeats: int, seconds: int, *, skip_http: bool = False, server_floors: bool = False
) -> dict[str, Any]:
    def wanted(cell: str, server: str) -> bool:
        return not server_floors or (cell in SERVER_FLOOR_CELLS and server in SERVER_FLOOR_SERVERS)

    RESULTS.mkdir(exist_ok=True)
    os.sched_setaffinity(0, {int(LOAD_CPU)})
    replies = labkit_replies()
    replies_file = RESULTS / "floor-replies.json"
    replies_file.write_bytes(orjson.dumps({k: v.decode() for k, v in replies.items()}))
    samples: dict[tuple[str, str], list[float]] = {}

    def add(cell: str, server: str, value: float) -> None:
        samples.setdefault((cell, server), []).append(value)

    load_before, started = load(), time.monotonic()
    with ExitStack() as stack:
        http: dict[str, Any] = {}
        wrk = ""
        if not skip_http:
            from bench_http import ensure_wrk

            wrk = ensure_wrk()
            http = stack.enter_context(
                http_servers(replies_file, SERVER_FLOOR_SERVERS if server_floors else SERVERS)
            )
        python = sys.executable
        lines = {
            "floor-1": LineServer(
                "floor", [python, str(BENCH / "floors.py"), "stdio", "--replies", str(replies_file)]
            ),
            "labkit": LineServer(
                "labkit", [python, str(BENCH / "labkit_http_server.py"), "--stdio"]
            ),
        }
        if not server_floors:
            lines["SDK"] = LineServer(
                "SDK", [python, str(BENCH / "sdk_notes_server.py"), "--stdio"]
            )
        if server_floors:
            lines = {name: lines[name] for name in SERVER_FLOOR_SERVERS}
        for server in lines.values():
            stack.callback(server.close)
        entries = in_process_entries(replies)
        # Warm-up: every server answers every kind of request once, checked, before timing.
        for name, served in http.items():
            for cell, mode, connections in http_cells():
                if wanted(cell, name):
                    http_run(wrk, served, mode, connections, 1)
        for name, server in lines.items():
            for cell, mode in (("stdio tools/list", "list"), ("stdio delete+cancel", "flow")):
                if wanted(cell, name):
                    stdio_run(server, mode, 0.5)
        print(
            f"floors: every server answered every cell's requests as expected; "
            f"{repeats} repetitions follow",
            flush=True,
        )
        for repeat in range(repeats):
            for cell, mode, connections in [] if skip_http else http_cells():
                for name, served in http.items():
                    if wanted(cell, name):
                        add(cell, name, http_run(wrk, served, mode, connections, seconds))
            for cell, mode in (("stdio tools/list", "list"), ("stdio delete+cancel", "flow")):
                for name, server in lines.items():
                    if wanted(cell, name):
                        add(cell, name, stdio_run(server, mode, seconds))
            for cell, mode in (
                ("in-process tools/list", "list"),
                ("in-process flow", "flow"),
            ):
                for name, call in entries.items():
                    if wanted(cell, name):
                        add(cell, name, asyncio.run(in_process_run(call, mode)))
            print(f"  repetition {repeat + 1}/{repeats} done ({load()})", flush=True)
    cells = list(dict.fromkeys(cell for cell, _ in samples))
    rows = []
    for cell in cells:
        medians = {
            name: statistics.median(samples[(cell, name)])
            for name in SERVERS
            if (cell, name) in samples
        }
        rows.append({"cell": cell, **medians})
    return {
        "rows": rows,
        "samples": {f"{c} | {s}": v for (c, s), v in samples.items()},
        "load_before": load_before,
        "load_after": load(),
        "seconds": round(time.monotonic() - started),
        "commit": commit(),
        "repeats": repeats,
        "run_seconds": seconds,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def markdown(result: dict[str, Any]) -> str:
    def cell(value: float | None) -> str:
        return "–" if value is None else f"{value:,.0f}"

    lines = [
        "| per server CPU-second (requests) | floor-1 | floor-2 | labkit | SDK "
        "| labkit / floor | labkit / SDK |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for row in result["rows"]:
        floor, labkit, sdk = row.get("floor-1"), row["labkit"], row.get("SDK")
        versus_sdk = "–" if sdk is None else f"{labkit / sdk:.1f}x"
        lines.append(
            f"| {row['cell']} | {cell(floor)} | {cell(row.get('floor-2'))} | {cell(labkit)} "
            f"| {cell(sdk)} | {labkit / floor:.2f} | {versus_sdk} |"
        )
    lines.append("")
    lines.append(
        f"Commit {result['commit']}, {result['when']}, {result['seconds']} s; medians of "
        f"{result['repeats']} interleaved repetitions ({result['run_seconds']} s per HTTP and "
        f"stdio run); load average (1/5/15 min) {result['load_before']} before, "
        f"{result['load_after']} after. For stdio and in-process rows the floor column is the "
        "stdio floor and the in-process floor."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="labkit against its floors and the SDK")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument(
        "--server-floors",
        action="store_true",
        help="only the tools/list rows (HTTP at 8 conns, stdio, in-process), floor and labkit",
    )
    args = parser.parse_args(argv)
    result = run(
        args.repeats, args.seconds, skip_http=args.skip_http, server_floors=args.server_floors
    )
    table = markdown(result)
    print(table, flush=True)
    (RESULTS / "floors.md").write_text(table + "\n")
    (RESULTS / "floors.json").write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return result


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    main()
