"""HTTP comparison on loopback: labkit's Streamable HTTP server against the SDK's, both under
uvicorn (one process, one worker each), driven by `wrk` with `bench/mcp.lua`.

Servers:

* `labkit serve --transport http` (the demo deployment) for `tools/list`;
* `bench/labkit_http_server.py` for the two-round delete: the same app and uvicorn settings as
  `labkit serve`, with stores that survive a few seconds of deletions (see that module);
* `bench/sdk_notes_server.py`: the SDK 2.3.0 low-level server's Streamable HTTP app (JSON
  responses, bearer authentication, `RequestStateSecurity`), for both cells.

Figures: requests (or two-round deletes) per server CPU-second, from utime+stime of the server
process in /proc/PID/stat before and after each run; p50 and p99 latency per HTTP request as
wrk measures it; and the CPU wrk itself used, to show the load generator is not what limits
the server. Each cell runs `REPEATS` times, alternating servers, after a warm-up; medians are
reported.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import (
    BEARER,
    INPUT_KEY,
    PROTOCOL_VERSION,
    delete_retry,
    delete_round1,
    format_table,
    process_cpu_seconds,
    rate,
    ratio,
    tools_list,
)

BENCH = Path(__file__).resolve().parent
LUA = BENCH / "mcp.lua"
THREADS = 1
CONNECTIONS = 8  # at most the notes each wrk thread reserves (mcp.lua NOTES_PER_THREAD)
SECONDS = 3
WARMUP_SECONDS = 1
REPEATS = 3
GOAL = 3.0


# -- the load generator ------------------------------------------------------------------------


def ensure_wrk() -> str:
    """The path of `wrk`, installing Debian's package first when it is missing and we are root."""
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() != 0:
        raise SystemExit("bench: wrk is not installed; run `sudo apt-get install -y wrk` first")
    print("bench: wrk is missing; installing it: apt-get install -y wrk", flush=True)
    install = ["apt-get", "install", "-y", "-qq", "wrk"]
    if subprocess.run(install, check=False).returncode != 0:
        print("bench: apt-get update, then install again", flush=True)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(install, check=True)
    found = shutil.which("wrk")
    if not found:
        raise SystemExit("bench: wrk is still missing after apt-get install")
    return found


@dataclass
class Run:
    figures: dict[str, int]
    server_cpu: float
    wrk_cpu: float
    wall: float

    @property
    def requests(self) -> int:
        return self.figures["requests"]

    @property
    def deletes(self) -> int:
        return self.figures["deleted"]


def run_wrk(
    wrk: str,
    url: str,
    mode: str,
    seconds: float,
    server_pid: int,
    *,
    connections: int = CONNECTIONS,
    pin: list[str] | None = None,
) -> Run:
    """One wrk run (`pin`: a command prefix such as `taskset -c 0`). Fails unless every reply
    was the expected one (mcp.lua checks each)."""
    command = [
        *(pin or []),
        wrk,
        f"-t{THREADS}",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(LUA),
        url,
        "--",
        mode,
    ]
    cpu_before = process_cpu_seconds(server_pid)
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    server_cpu = process_cpu_seconds(server_pid) - cpu_before
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    proc.stdout.close()
    proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {err.strip()[:2000]}")
    figures = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            figures[key] = int(value)
    bad = figures["socket_errors"] + figures["bad_status"] + figures["unexpected"]
    if bad or figures["requests"] == 0:
        raise RuntimeError(f"{url} {mode}: {bad} bad answers\n{out}\n{err[:2000]}")
    return Run(figures, server_cpu, usage.ru_utime + usage.ru_stime, wall)


# -- the servers -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Served:
    name: str
    port: int
    pid: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def labkit_command() -> list[str]:
    script = Path(sys.executable).with_name("labkit")
    return [str(script)] if script.exists() else [sys.executable, "-m", "labkit.cli"]


@contextmanager
def serving(name: str, command: list[str], port: int, logs: Path) -> Iterator[Served]:
    log = logs / f"{name.replace(' ', '-')}.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, cwd=BENCH.parent)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited: {log.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{name} did not listen: {log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)
        yield Served(name, port, proc.pid, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the sanity check over HTTP ------------------------------------------------------------------


def post(port: int, message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {BEARER}",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": message["method"],
    }
    if message["method"] == "tools/call":
        headers["Mcp-Name"] = message["params"]["name"]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/mcp", json.dumps(message), headers)
        response = connection.getresponse()
        body = response.read()
        return response.status, json.loads(body) if body else {}
    finally:
        connection.close()


def sanity_check(served: Served, *, delete: bool) -> None:
    """Both servers answer the bench's requests with the expected shapes, delete the note, and
    refuse the same retry twice."""
    status, listed = post(served.port, tools_list(1))
    assert status == 200 and listed["result"]["tools"][0]["name"] == "notes_delete", listed
    if not delete:
        return
    title = "bench-t3-note 15"
    status, first = post(served.port, delete_round1(2, title))
    assert status == 200 and first["result"]["resultType"] == "input_required", first
    schema = first["result"]["inputRequests"][INPUT_KEY]["params"]["requestedSchema"]
    assert [o["const"] for o in schema["properties"]["note_id"]["oneOf"]] == ["bench-3-15"]
    retry = delete_retry(3, first["result"]["requestState"], "bench-3-15", title)
    status, done = post(served.port, retry)
    assert status == 200, done
    assert done["result"]["structuredContent"] == {
        "deleted": True,
        "status": "deleted",
        "noteId": "bench-3-15",
    }, done
    status, again = post(served.port, {**retry, "id": 4})
    assert status == 400 and again["error"]["code"] == -32602, (served.name, again)


# -- the cells ---------------------------------------------------------------------------------


@dataclass
class Sample:
    per_cpu: float
    p50_ms: float
    p99_ms: float
    wall_rate: float
    server_util: float
    wrk_util: float


def sample(run: Run, mode: str) -> Sample:
    done = run.deletes if mode == "delete" else run.requests
    return Sample(
        per_cpu=done / run.server_cpu,
        p50_ms=run.figures["p50_us"] / 1000,
        p99_ms=run.figures["p99_us"] / 1000,
        wall_rate=run.requests / run.wall,
        server_util=run.server_cpu / run.wall,
        wrk_util=run.wrk_cpu / run.wall,
    )


def median(samples: list[Sample]) -> Sample:
    fields = Sample.__dataclass_fields__
    return Sample(**{f: statistics.median(getattr(s, f) for s in samples) for f in fields})


def measure(wrk: str, cells: list[tuple[str, str, Served, Served]]) -> list[dict[str, Any]]:
    rows = []
    for cell, mode, labkit, sdk in cells:
        results: dict[str, list[Sample]] = {"labkit": [], "sdk": []}
        for served in (labkit, sdk):
            run_wrk(wrk, served.url, mode, WARMUP_SECONDS, served.pid)
        for _ in range(REPEATS):
            for key, served in (("labkit", labkit), ("sdk", sdk)):
                results[key].append(
                    sample(run_wrk(wrk, served.url, mode, SECONDS, served.pid), mode)
                )
        mine, theirs = median(results["labkit"]), median(results["sdk"])
        rows.append(
            {
                "cell": cell,
                "labkit_server": labkit.name,
                "labkit": mine,
                "sdk": theirs,
                "ratio": mine.per_cpu / theirs.per_cpu,
                "goal": GOAL,
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    return format_table(
        [
            "cell (per server CPU-second)",
            "labkit",
            "SDK",
            "labkit/SDK",
            "goal",
            "p50 ms labkit/SDK",
            "p99 ms labkit/SDK",
            "req/s wall labkit/SDK",
            "server CPU",
            "wrk CPU",
        ],
        [
            [
                r["cell"],
                rate(r["labkit"].per_cpu),
                rate(r["sdk"].per_cpu),
                ratio(r["labkit"].per_cpu, r["sdk"].per_cpu),
                f">= {r['goal']:.0f}x " + ("met" if r["ratio"] >= r["goal"] else "MISSED"),
                f"{r['labkit'].p50_ms:.2f} / {r['sdk'].p50_ms:.2f}",
                f"{r['labkit'].p99_ms:.2f} / {r['sdk'].p99_ms:.2f}",
                f"{r['labkit'].wall_rate:,.0f} / {r['sdk'].wall_rate:,.0f}",
                f"{r['labkit'].server_util:.0%} / {r['sdk'].server_util:.0%}",
                f"{r['labkit'].wrk_util:.0%} / {r['sdk'].wrk_util:.0%}",
            ]
            for r in rows
        ],
    )


def main() -> list[dict[str, Any]]:
    wrk = ensure_wrk()
    logs = BENCH / "results"
    logs.mkdir(exist_ok=True)
    python = sys.executable
    with ExitStack() as stack:
        port = free_port()
        labkit_serve = stack.enter_context(
            serving(
                "labkit serve",
                [*labkit_command(), "serve", "--transport", "http", "--port", str(port)],
                port,
                logs,
            )
        )
        port = free_port()
        labkit_bench = stack.enter_context(
            serving(
                "labkit bench stores",
                [python, str(BENCH / "labkit_http_server.py"), "--port", str(port)],
                port,
                logs,
            )
        )
        port = free_port()
        sdk = stack.enter_context(
            serving(
                "sdk",
                [python, str(BENCH / "sdk_notes_server.py"), "--port", str(port)],
                port,
                logs,
            )
        )
        sanity_check(labkit_serve, delete=False)
        for served in (labkit_bench, sdk):
            sanity_check(served, delete=True)
        print(
            "sanity: labkit serve, labkit (bench stores) and the SDK server answer over HTTP; "
            "both delete the note and refuse the replayed retry"
        )
        rows = measure(
            wrk,
            [
                ("HTTP tools/list, labkit serve (requests)", "list", labkit_serve, sdk),
                # The same app on a socket uvicorn binds itself (TCP_NODELAY on): shows what
                # `labkit serve`'s own listening socket costs in latency.
                ("HTTP tools/list, bench launcher (requests)", "list", labkit_bench, sdk),
                ("HTTP delete, bench launcher (two-round deletes)", "delete", labkit_bench, sdk),
            ],
        )
    print(
        f"wrk -t{THREADS} -c{CONNECTIONS} -d{SECONDS}s, median of {REPEATS}; latency per HTTP "
        "request; CPU columns are each process's CPU time over wall time"
    )
    print(table(rows))
    return rows


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)  # expected refusals in the sanity checks
    main()
