"""Instructions per `tools/list` request, counted by valgrind's callgrind: the figure that does
not move between runs when CPU-seconds do (a shared or noisy machine), for comparing two
commits.

    .venv/bin/python bench/bench_instructions.py                         # this checkout
    .venv/bin/python bench/bench_instructions.py --against ../labkit-old  # beside another one

Five paths, each run under callgrind (`PYTHONHASHSEED=0`) twice, with 200 and
with 1,200 requests; the difference over 1,000 is the count per request, start-up, imports and
warm-up cancelled out:

- `decode`: `labkit.wire.decode` of the request's bytes;
- `respond`: `Server.respond` for an already decoded request (a checkout without it shows –);
- `stdio`: `StdioTransport.serve` reading request lines from a file and writing the replies;
- `http`: the Streamable HTTP endpoint (`create_app`) driven in process with ASGI calls, no
  socket;
- `server`: a whole uvicorn server (`bench/labkit_http_server.py` of the checkout counted, what
  `labkit serve` runs) answering this process over one keep-alive connection; only the
  server is counted.

Every child checks every reply it gets (the listing's tools, the request's id), so a path that
answers something else fails the run instead of being counted. `--against DIR` runs the same
children with DIR first on `PYTHONPATH` (a checkout of another commit, e.g. from
`git worktree add`), with this checkout's `.venv`. valgrind is Debian's (`make bench` installs
it when missing). A run takes a few minutes per checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PATHS = ("decode", "respond", "stdio", "http", "server")
FEW, MANY = 200, 1200
# Written out rather than built with labkit: the parent imports nothing from labkit, and every
# checkout counted gets the same bytes.
REQUEST = (
    b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{'
    b'"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    b'"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},'
    b'"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1.0"}}}}'
)
_EXPECTED = b'{"jsonrpc":"2.0","id":7,"result":{'


# -- the children: one path, N requests, every reply checked --------------------------------------


def _check(reply: bytes | None) -> None:
    if reply is None or not reply.startswith(_EXPECTED) or b'"notes_delete"' not in reply:
        raise SystemExit(f"unexpected reply: {reply!r:.200}")


def _server() -> Any:
    from labkit.deployment import demo_deployment

    return demo_deployment().server


def child_decode(n: int) -> None:
    from labkit.wire import decode

    for _ in range(n):
        message = decode(REQUEST)
    assert message["id"] == 7, message


def child_respond(n: int) -> None:
    from labkit.server import RequestContext
    from labkit.wire import decode

    server = _server()
    if not hasattr(server, "respond"):
        raise SystemExit(3)  # this commit has no single entry: nothing to count
    context = RequestContext(principal="alice", transport="stdio")
    message = decode(REQUEST)  # once: the count is respond's alone (it changes no message)
    respond = server.respond
    for _ in range(n):
        reply = respond(message, context)
    _check(reply)


def child_stdio(n: int) -> None:
    from labkit.transports.stdio import StdioTransport

    with tempfile.TemporaryDirectory() as folder:
        lines, replies = Path(folder, "in"), Path(folder, "out")
        lines.write_bytes((REQUEST + b"\n") * n)
        with lines.open("rb") as stdin, replies.open("wb") as stdout:
            StdioTransport(_server(), "alice").serve(stdin, stdout)
        with replies.open("rb") as written:
            first = written.readline()
        size = replies.stat().st_size
    _check(first)
    if size != n * len(first):  # every reply is the first one's bytes
        raise SystemExit(f"{size} bytes of replies to {n} lines, {len(first)} each")


def child_http(n: int) -> None:
    from labkit.auth import demo_authenticator
    from labkit.transports.http import create_app

    app = create_app(_server(), demo_authenticator(), blocking_methods=frozenset())
    headers = [
        (b"host", b"127.0.0.1:8765"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"authorization", b"Bearer demo-alice"),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", b"tools/list"),
        (b"content-length", str(len(REQUEST)).encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }
    body = {"type": "http.request", "body": REQUEST, "more_body": False}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return body

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def run() -> None:
        for _ in range(n):
            sent.clear()
            await app(dict(scope), receive, send)
            if sent[0].get("status") != 200:
                raise SystemExit(f"status {sent[0].get('status')}")

    asyncio.run(run())
    _check(b"".join(m.get("body", b"") for m in sent[1:]))


CHILDREN = {
    "decode": child_decode,
    "respond": child_respond,
    "stdio": child_stdio,
    "http": child_http,
}


# -- the parent: callgrind around the children ----------------------------------------------------


def _valgrind(folder: str, *argv: str) -> list[str]:
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/callgrind.out", *argv]


def _collected(path: str, n: int, root: Path) -> int | None:
    """Instructions callgrind counted for one child run; None when the checkout lacks the
    path."""
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(root))
    with tempfile.TemporaryDirectory() as folder:
        if path == "server":
            returncode, stderr = _serve_counted(folder, n, root, env)
        else:
            argv = _valgrind(folder, sys.executable, str(Path(__file__).resolve()))
            done = subprocess.run(
                [*argv, "--child", path, str(n)],
                env=env,
                cwd=folder,
                capture_output=True,
                text=True,
                check=False,
            )
            returncode, stderr = done.returncode, done.stderr
    if returncode == 3:
        return None
    found = re.search(r"Collected : (\d+)", stderr)
    if returncode != 0 or found is None:
        raise SystemExit(f"{path} ({n} requests, {root}) failed:\n{stderr[-2000:]}")
    return int(found.group(1))


def _serve_counted(folder: str, n: int, root: Path, env: dict[str, str]) -> tuple[int, str]:
    """A uvicorn server of `root`'s under callgrind, sent `n` requests on one connection, then
    stopped as `labkit serve` is (SIGINT): 0 and its stderr, once every reply was checked."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = root / "bench" / "labkit_http_server.py"
    errors = Path(folder, "stderr")
    with errors.open("w") as stderr:
        proc = subprocess.Popen(
            _valgrind(folder, sys.executable, str(server), "--port", str(port)),
            env=env,
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        connection = _connect(port, proc, time.monotonic() + 120)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": "Bearer demo-alice",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/list",
        }
        for _ in range(n):
            connection.request("POST", "/mcp", REQUEST, headers)
            response = connection.getresponse()
            reply = response.read()
            if response.status != 200:
                raise SystemExit(f"status {response.status}: {reply!r:.200}")
        _check(reply)
        connection.close()
        proc.send_signal(signal.SIGINT)  # uvicorn shuts down, then re-raises the signal
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return 0, errors.read_text()  # every request was answered: the count stands


def _connect(
    port: int, proc: subprocess.Popen[bytes], deadline: float
) -> http.client.HTTPConnection:
    """A connection to the server once it listens (it starts slowly under valgrind)."""
    while True:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            connection.connect()
            return connection
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start (exit code {proc.poll()})") from None
            time.sleep(0.5)


def per_request(path: str, root: Path) -> int | None:
    few = _collected(path, FEW, root)
    many = _collected(path, MANY, root)
    if few is None or many is None:
        return None
    return round((many - few) / (MANY - FEW))


def _cell(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def table(counts: dict[str, dict[str, int | None]], names: list[str]) -> str:
    head = "| instructions per request | " + " | ".join(names)
    rule = "|---|" + "--:|" * len(names)
    if len(names) == 2:
        head += " | change"
        rule += "--:|"
    lines = [head + " |", rule]
    for path in PATHS:
        row = [counts[name][path] for name in names]
        line = f"| {path} | " + " | ".join(_cell(value) for value in row)
        if len(names) == 2:
            this, other = row
            change = "–" if this is None or other is None else f"{(this - other) / other:+.1%}"
            line += f" | {change}"
        lines.append(line + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(
        description="instructions per tools/list request under callgrind, per path"
    )
    parser.add_argument(
        "--against", type=Path, help="another checkout to count beside this one (its root)"
    )
    parser.add_argument(
        "--paths", nargs="+", choices=PATHS, default=list(PATHS), help="which paths to count"
    )
    parser.add_argument("--child", nargs=2, metavar=("PATH", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        path, n = args.child
        CHILDREN[path](int(n))
        return ""
    if subprocess.run(["which", "valgrind"], capture_output=True, check=False).returncode:
        raise SystemExit("valgrind is not installed: `make bench` installs it (apt-get)")
    roots = {"this": ROOT}
    if args.against is not None:
        against = args.against.resolve()
        if not (against / "labkit" / "__init__.py").is_file():
            raise SystemExit(f"--against {args.against}: no labkit package there")
        roots[against.name] = against
    counts: dict[str, dict[str, int | None]] = {name: {} for name in roots}
    for path in PATHS:
        for name, root in roots.items():
            counts[name][path] = per_request(path, root) if path in args.paths else None
            print(f"  {path:8s} {name}: {_cell(counts[name][path])}", flush=True)
    result = table(counts, list(roots))
    print(result)
    return result


if __name__ == "__main__":
    main()
