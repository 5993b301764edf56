"""labkit over Streamable HTTP for the bench's delete cells: what `labkit serve --transport http`
runs for the demo deployment (the same `create_app`, demo bearer tokens, memory stores answered
inline, the same uvicorn settings), with the bench stores in place of the demo ones.

`labkit serve` keeps the lesson's three TPS notes and a replay store with a per-principal share
of 1,000 confirmations: a few seconds of deletions would empty the one and fill the other. The
bench stores re-create a deleted note (`common.RefillingNoteStore`) and hold every nonce of a
run. The `tools/list` cells run against `labkit serve` itself.

    python bench/labkit_http_server.py --port 8765
    python bench/labkit_http_server.py --stdio       # the same deployment over stdio, as alice
"""

from __future__ import annotations

import argparse
import sys

import uvicorn
from common import bench_notes, bench_replay

from labkit.auth import demo_authenticator
from labkit.deployment import demo_deployment
from labkit.transports.connections import ConnectionLimits, server_config
from labkit.transports.http import create_app
from labkit.transports.stdio import StdioTransport


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="labkit over HTTP with the bench stores")
    parser.add_argument("--port", type=int)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--stdio", action="store_true", help="serve stdio as alice instead")
    args = parser.parse_args(argv)
    deployment = demo_deployment(notes=bench_notes(per_thread=True), replay=bench_replay())
    if args.stdio:
        # What `labkit serve` runs for stdio: the transport's own line loop.
        StdioTransport(deployment.server, "alice").serve(sys.stdin.buffer, sys.stdout.buffer)
        return
    if args.port is None:
        parser.error("--port is required for HTTP")
    app = create_app(deployment.server, demo_authenticator(), blocking_methods=frozenset())
    config = server_config(app, ConnectionLimits(), host=args.host, port=args.port)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
