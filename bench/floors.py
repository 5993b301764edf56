"""The floors: servers that do the least any MCP server must do with the same stack.

    python bench/floors.py http --port P --replies FILE            # floor-1: bare ASGI
    python bench/floors.py http --port P --replies FILE --starlette # floor-2: a Starlette route
    python bench/floors.py stdio --replies FILE                     # the stdio floor

`FILE` holds labkit's own replies (JSON: `list`, `round1`, `cancel`, each the exact bytes labkit
answered, as text), so a floor writes a reply of the same size. A floor reads the request,
parses it with orjson, and answers with the fixed reply for its kind: `tools/list`, a
`tools/call` without `requestState` (round one) or with one (the cancel retry). It checks,
authenticates and signs nothing: it is the cost of the stack (uvicorn + httptools + uvloop,
Starlette, a line loop) plus orjson, below which no server on that stack can go.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

JSON_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]


def load_replies(path: str) -> dict[str, bytes]:
    replies: dict[str, str] = orjson.loads(Path(path).read_bytes())
    return {kind: text.encode() for kind, text in replies.items()}


def picker(replies: dict[str, bytes]) -> Any:
    listing, round1, cancel = replies["list"], replies["round1"], replies["cancel"]

    def pick(message: Any) -> bytes:
        if message["method"] == "tools/list":
            return listing
        return cancel if "requestState" in message["params"] else round1

    return pick


def bare_app(replies: dict[str, bytes]) -> Any:
    """floor-1: a plain ASGI callable."""
    pick = picker(replies)
    heads = {
        body: {
            "type": "http.response.start",
            "status": 200,
            "headers": [*JSON_HEADERS, (b"content-length", str(len(body)).encode())],
        }
        for body in replies.values()
    }

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        reply = pick(orjson.loads(body))
        await send(heads[reply])
        await send({"type": "http.response.body", "body": reply})

    return app


def starlette_app(replies: dict[str, bytes]) -> Any:
    """floor-2: the same behind a Starlette route."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    pick = picker(replies)

    async def endpoint(request: Request) -> Response:
        reply = pick(orjson.loads(await request.body()))
        return Response(reply, media_type="application/json", headers={"cache-control": "no-store"})

    return Starlette(routes=[Route("/mcp", endpoint, methods=["POST"])])


def serve_http(args: argparse.Namespace) -> None:
    import uvicorn

    replies = load_replies(args.replies)
    app = starlette_app(replies) if args.starlette else bare_app(replies)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        http="httptools",
        loop="uvloop",
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
    )


def serve_stdio(args: argparse.Namespace) -> None:
    pick = picker(load_replies(args.replies))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while line := stdin.readline():
        stdout.write(pick(orjson.loads(line)) + b"\n")
        stdout.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the bench's floor servers")
    parser.add_argument("transport", choices=("http", "stdio"))
    parser.add_argument("--replies", required=True)
    parser.add_argument("--port", type=int)
    parser.add_argument("--starlette", action="store_true")
    args = parser.parse_args(argv)
    serve_http(args) if args.transport == "http" else serve_stdio(args)


if __name__ == "__main__":
    main()
