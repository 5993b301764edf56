"""The `labkit` command line: `labkit demo`, `labkit serve`."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from labkit import serve as serve_command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="labkit",
        description="labkit: explicit scope and stateless elicitation for MCP 2026-07-28.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="walk the lesson's 11 checkpoints against the real core",
        description="Run the reference walkthrough: each checkpoint sends real requests to "
        "the labkit core, prints them compactly and reports PASS or FAIL from what happened. "
        "Exits non-zero if any checkpoint fails.",
    )
    demo.add_argument(
        "--width", type=int, default=200, help="truncate printed JSON lines to this many characters"
    )
    demo.set_defaults(run=_run_demo)

    serve = commands.add_parser("serve", help="serve MCP over stdio (default) or Streamable HTTP")
    serve_command.add_arguments(serve)
    return parser


def _run_demo(args: argparse.Namespace) -> int:
    from labkit.demo import run_walkthrough

    return run_walkthrough(width=args.width)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
