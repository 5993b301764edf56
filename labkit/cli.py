"""The `labkit` command line: `labkit demo`, `labkit serve`."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

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

    course = commands.add_parser(
        "course",
        help="course authoring: make the learner notebooks from the solutions",
        description="Course authoring commands.",
    )
    course_commands = course.add_subparsers(dest="course_command", metavar="ACTION", required=True)
    build = course_commands.add_parser(
        "build",
        help="write notebooks/ from solutions/ (solution regions stubbed, outputs stripped)",
        description="Make the learner copies: every '# BEGIN SOLUTION' ... '# END SOLUTION' "
        "region of a solution notebook becomes one 'raise NotImplementedError()' stub line, "
        "outputs are stripped and the notebook is stamped with the metadata the grader "
        "matches on. Markdown pages are copied. Refuses regions over 25 lines, more than 3 "
        "per notebook, unbalanced markers, or a stub outside a function.",
    )
    build.add_argument(
        "--solutions", type=Path, default=Path("solutions"), help="authored notebooks (solutions/)"
    )
    build.add_argument(
        "--out", type=Path, default=Path("notebooks"), help="learner copies (notebooks/)"
    )
    build.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and list the files when the learner copies are stale",
    )
    build.set_defaults(run=_run_course_build)

    export_skill = commands.add_parser(
        "export-skill",
        help="write the elicitation form designer skill file",
        description="Write skill-elicitation-form-designer.md, the reusable design skill the "
        "course ships (a one-page design of a 2026-07-28 user-input step, its hard rejects and "
        "refusal rules), into DIR. An identical existing file is left as it is; a different one "
        "is only replaced with --force. Exits non-zero, naming the file, when it refuses.",
    )
    export_skill.add_argument(
        "--out",
        metavar="DIR",
        default="outputs",
        help="existing directory to write into (default: outputs)",
    )
    export_skill.add_argument(
        "--force", action="store_true", help="overwrite an existing file that differs"
    )
    export_skill.set_defaults(run=_run_export_skill)
    return parser


def _run_course_build(args: argparse.Namespace) -> int:
    from labkit.course import build

    try:
        built = build.build(args.solutions)
        if args.check:
            problems = build.stale(built, args.out)
            for problem in problems:
                print(f"stale: {args.out / problem}", file=sys.stderr)
            if problems:
                print("run `labkit course build` and commit the result", file=sys.stderr)
                return 1
            print(f"{args.out}: up to date ({len(built)} files)")
            return 0
        changed = build.write(built, args.out)
    except build.BuildError as error:
        print(f"labkit course build: {error}", file=sys.stderr)
        return 1
    print(f"{args.out}: {len(changed)} of {len(built)} files written or removed")
    for name in changed:
        print(f"  {name}")
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from labkit.demo import run_walkthrough

    return run_walkthrough(width=args.width)


def _run_export_skill(args: argparse.Namespace) -> int:
    from labkit.course.skill import ExportError, export_skill

    try:
        path, written = export_skill(Path(args.out), force=args.force)
    except ExportError as exc:
        print(f"labkit export-skill: {exc}", file=sys.stderr)
        return 1
    print(f"{'wrote' if written else 'unchanged:'} {path}")
    return 0


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
