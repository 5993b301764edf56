"""The `labkit` command line: `labkit demo`, `labkit serve`, `labkit course`, `labkit grade`,
`labkit check` (a learner's practice score).
Must not be imported by another labkit module.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from labkit import serve as serve_command

# The sub-command table a parser's `add_subparsers` returns: each `_add_*` adds one command.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="labkit",
        description="labkit: explicit scope and stateless elicitation for MCP 2026-07-28.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    _add_demo(commands)
    _add_serve(commands)
    _add_course(commands)
    _add_grade(commands)
    _add_practice(commands)
    _add_export_skill(commands)
    return parser


def _add_demo(commands: Commands) -> None:
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


def _add_serve(commands: Commands) -> None:
    serve = commands.add_parser("serve", help="serve MCP over stdio (default) or Streamable HTTP")
    serve_command.add_arguments(serve)


def _add_course(commands: Commands) -> None:
    course = commands.add_parser(
        "course",
        help="course authoring: run the solution notebooks, make the learner copies",
        description="Course authoring commands.",
    )
    course_commands = course.add_subparsers(dest="course_command", metavar="ACTION", required=True)
    _add_course_build(course_commands)
    _add_course_execute(course_commands)
    _add_course_table(course_commands)
    _add_course_mutants(course_commands)
    _add_course_package(course_commands)


def _add_course_build(course_commands: Commands) -> None:
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


def _add_course_execute(course_commands: Commands) -> None:
    execute = course_commands.add_parser(
        "execute",
        help="Restart & Run All of solution notebooks, saving their outputs in place",
        description="Run each solution notebook top to bottom in a fresh kernel of this "
        "environment (working directory: the notebook's folder), store the widget state so "
        "saved forms still render, record cell timings, and save it in place. A notebook "
        "whose run raises, times out or kills its kernel is left unchanged and the command "
        "exits 1. Then run `labkit course build` to refresh the learner copies.",
    )
    execute.add_argument(
        "notebooks",
        nargs="*",
        type=Path,
        metavar="NOTEBOOK",
        help="solution notebooks to run (default: solutions/*.ipynb)",
    )
    execute.add_argument(
        "--cell-timeout",
        type=int,
        default=10,
        metavar="S",
        help="fail a notebook whose cell runs longer than this (default: 10)",
    )
    execute.set_defaults(run=_run_course_execute)


def _add_course_table(course_commands: Commands) -> None:
    table = course_commands.add_parser(
        "table",
        help="write the exercise table into README.md from the exercises' declarations",
        description="Replace the text between the README's exercise-table markers with the "
        "table the exercises declare (id, notebook, what the learner writes, checks, points).",
    )
    table.add_argument("readme", nargs="?", type=Path, default=Path("README.md"))
    table.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when the table is stale"
    )
    table.set_defaults(run=_run_course_table)


def _add_course_mutants(course_commands: Commands) -> None:
    mutants = course_commands.add_parser(
        "mutants",
        help="measure the checks' strength by mutation testing of the reference answers",
        description="Change each exercise's reference answer (the answer cells of its "
        "solution notebook) one small edit at a time with mutmut's mutation operators, grade "
        "every mutant with the exercise's public and hidden checks in check workers, and "
        "print, per exercise, the share of mutants that lose points (mutants the exercise "
        "declares equivalent, each with its reason, are left out), then each survivor. Exit "
        "0 when every exercise reaches 95% and no declared equivalent is stale, 1 otherwise, "
        "2 on bad input. Needs mutmut (labkit's `test` extra).",
    )
    mutants.add_argument(
        "exercises", nargs="*", metavar="EXERCISE", help="exercise ids (default: every one)"
    )
    mutants.add_argument(
        "--solutions", type=Path, default=Path("solutions"), metavar="DIR", help="(solutions/)"
    )
    mutants.add_argument(
        "--jobs", type=int, default=2, metavar="N", help="mutants graded at once (default: 2)"
    )
    mutants.add_argument(
        "--markdown", type=Path, metavar="FILE", help="also write the table to FILE"
    )
    mutants.set_defaults(run=_run_course_mutants)


def _add_course_package(course_commands: Commands) -> None:
    package = course_commands.add_parser(
        "package",
        help="package the course for Gradescope or a GitHub Classroom template",
        description="gradescope: write DIR/autograder.zip (setup.sh, run_autograder, labkit's "
        "wheel built from this checkout, the solutions and the learner copies). "
        "github-classroom: write a template repository into DIR (.github/workflows/"
        "classroom.yml, the learner copies, a README) and, outside it, the private course "
        "bundle the workflow downloads (--bundle).",
    )
    package.add_argument("platform", choices=("gradescope", "github-classroom"))
    package.add_argument("--out", type=Path, required=True, metavar="DIR", help="where to write")
    package.add_argument(
        "--solutions", type=Path, default=Path("solutions"), metavar="DIR", help="(solutions/)"
    )
    package.add_argument(
        "--notebooks", type=Path, default=Path("notebooks"), metavar="DIR", help="(notebooks/)"
    )
    package.add_argument(
        "--source", type=Path, default=Path("."), metavar="DIR", help="labkit checkout (.)"
    )
    package.add_argument(
        "--bundle",
        type=Path,
        metavar="FILE",
        help="github-classroom: the private bundle (default: DIR-course.tar.gz beside DIR)",
    )
    package.add_argument(
        "--fail-under",
        type=float,
        metavar="PCT",
        help="github-classroom: the job also fails under this score (by default a low score "
        "is a score: the job fails only when grading itself failed)",
    )
    package.set_defaults(run=_run_course_package)


def _add_grade(commands: Commands) -> None:
    grade = commands.add_parser(
        "grade",
        help="grade learner notebooks against the solutions (hidden checks, nbval outputs)",
        description="Grade each submitted notebook against its solution: the learner's cells "
        "run in a scratch copy with its own confined kernel (Landlock where available, memory, "
        "CPU and process limits, per-cell and total timeouts), then the exercise's public and "
        "hidden checks run, and the solution's checked outputs are compared with nbval (lax "
        "mode, sanitized). Writes per submission a JSON report and a plain feedback file, plus "
        "batch.json and class.html (an offline class view) in --out. Each job is contained "
        "in the --containment mode, which is tried on this machine first and refused, naming "
        "what is missing, when it cannot be had. Exit code 0 when every submission was graded "
        "(and none scored under --fail-under); 1 when a submission could not be read or "
        "matched, or scored under --fail-under; 2 when grading refused to start (bad "
        "arguments, a containment mode this machine cannot give); 3 when grading itself "
        "failed for a submission (no job could start, the course's own imports failed): "
        "nothing is scored for it.",
    )
    grade.add_argument(
        "submissions", nargs="*", type=Path, metavar="SUBMISSION", help="a .ipynb file or a folder"
    )
    grade.add_argument(
        "--solutions",
        type=Path,
        default=Path("solutions"),
        metavar="DIR",
        help="solution notebooks (solutions/)",
    )
    grade.add_argument(
        "--out", type=Path, default=Path("grades"), metavar="DIR", help="reports (grades/)"
    )
    grade.add_argument(
        "--junit",
        type=Path,
        metavar="FILE",
        help="also write JUnit XML here (one testcase per check)",
    )
    grade.add_argument(
        "--jobs", type=int, default=1, metavar="N", help="kernels at once (default 1)"
    )
    grade.add_argument(
        "--timeout",
        type=int,
        default=30,
        metavar="S",
        help="seconds per cell before it is interrupted (30)",
    )
    grade.add_argument(
        "--total-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds per submission in all (300)",
    )
    grade.add_argument(
        "--fail-under", type=float, metavar="PCT", help="exit 1 if any score is below PCT percent"
    )
    grade.add_argument(
        "--sanitize-with", type=Path, metavar="FILE", help="nbval sanitizer file (regex/replace)"
    )
    grade.add_argument(
        "--containment",
        choices=("full", "container", "unconfined"),
        default="full",
        help="full (default): bubblewrap namespaces, a cgroup and a uid per job, rlimits, "
        "Landlock; container: inside a platform's own container per submission or per job "
        "(Gradescope, a Kubernetes pod, a CI VM): a uid per job via setuid, rlimits, "
        "Landlock, no namespaces; unconfined: the launcher's rlimits and Landlock only. "
        "Every report names the mode",
    )
    grade.add_argument(
        "--unconfined",
        action="store_const",
        const="unconfined",
        dest="containment",
        help="the same as --containment unconfined",
    )
    grade.add_argument(
        "--check-containment",
        action="store_true",
        help="try what each containment mode needs on this machine (a real bubblewrap start, a "
        "job cgroup, setuid to a job uid, the launcher's capabilities, Landlock), print the "
        "survey and exit: 0 when the --containment mode is available, 1 when it is not",
    )
    grade.add_argument(
        "--as",
        dest="graded_as",
        metavar="NAME",
        help="grade every submission as this solution notebook (its stem, e.g. "
        "03-ex1-sqlite-replay-store), whatever its file name or metadata says",
    )
    grade.add_argument(
        "--shard",
        metavar="I/N",
        help="grade only shard I of N (I from 0): the files whose name's sha256 is I mod N; "
        "merge the shards' --out folders with `labkit grade merge DIR... --out DIR`",
    )
    grade.add_argument(
        "--learner-copies",
        type=Path,
        metavar="DIR",
        help="released learner copies, part of the course version every report carries "
        "(default: notebooks/ beside --solutions)",
    )
    grade.add_argument(
        "--gradescope-results",
        type=Path,
        metavar="FILE",
        help="also write Gradescope's results.json here (used by the packaged run_autograder)",
    )
    grade.add_argument(
        "--classroom-output",
        type=Path,
        metavar="FILE",
        help="also append GitHub Classroom's autograding result (`result=` base64 JSON, as "
        "education/autograding-grading-reporter reads it) here ($GITHUB_OUTPUT)",
    )
    grade.add_argument(
        "--summary-md",
        type=Path,
        metavar="FILE",
        help="also append the scores and feedback as Markdown here ($GITHUB_STEP_SUMMARY)",
    )
    grade.set_defaults(run=_run_grade)


def _add_practice(commands: Commands) -> None:
    practice = commands.add_parser(
        "check",
        help="your practice score for one saved notebook (public checks and outputs; no root)",
        description="Run your saved notebook top to bottom in a fresh kernel on this machine, "
        "then each exercise's public checks and the output comparison that grading uses, and "
        "print a practice score, not a grade: the hidden checks run only at grading. Needs no "
        "root and writes nothing unless --out is given. Exit code 0 when the notebook was "
        "checked, 1 when it could not be, 2 for bad usage.",
    )
    practice.add_argument("notebook", type=Path, metavar="NOTEBOOK", help="a saved .ipynb file")
    practice.add_argument(
        "--solutions",
        type=Path,
        metavar="DIR",
        help="solution notebooks (default: solutions/ beside the notebook's folder)",
    )
    practice.add_argument(
        "--out", type=Path, metavar="DIR", help="also keep the JSON report and the feedback here"
    )
    practice.add_argument(
        "--timeout", type=int, default=30, metavar="S", help="seconds per cell (30)"
    )
    practice.set_defaults(run=_run_practice)


def _add_export_skill(commands: Commands) -> None:
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


def _without_slow_format_checker() -> None:
    """nbformat validates with jsonschema, which imports `rfc3987_syntax` when it is installed
    (JupyterLab's dependencies bring it) and that compiles a grammar for about 1.6 s at import.
    No notebook schema uses the IRI formats it checks; marking the module absent makes
    jsonschema skip that optional checker (it imports it under `suppress(ImportError)`), so a
    one-notebook `labkit grade` or `course` command does not pay for it."""
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


def _run_grade(args: argparse.Namespace) -> int:
    _without_slow_format_checker()
    from labkit.grade import batch, notebooks, outputs
    from labkit.grade.containment import ContainmentUnavailable, Mode, survey
    from labkit.grade.grader import Course
    from labkit.grade.kernel import Limits, jobs_for

    mode = Mode(args.containment)
    if args.check_containment:
        host = survey()
        print(host.render(), end="")
        return 0 if not host.missing(mode) else 1
    if not args.submissions:
        print("labkit grade: give the submissions to grade (files or folders)", file=sys.stderr)
        return 2
    if args.jobs < 1 or args.timeout < 1 or args.total_timeout <= 0:
        print(
            "labkit grade: --jobs, --timeout and --total-timeout must be positive", file=sys.stderr
        )
        return 2
    try:
        patterns = outputs.sanitizers()
        if args.sanitize_with is not None:
            patterns = outputs.sanitizers(args.sanitize_with.read_text(encoding="utf-8"))
        course = Course.load(args.solutions, patterns=patterns)
    except (notebooks.Unreadable, OSError) as error:
        print(f"labkit grade: {error}", file=sys.stderr)
        return 2
    if args.graded_as is not None and args.graded_as not in course.solutions:
        known = ", ".join(sorted(course.solutions))
        print(
            f"labkit grade: --as {args.graded_as}: no such solution notebook in "
            f"{args.solutions} (known: {known})",
            file=sys.stderr,
        )
        return 2
    limits = Limits(cell_timeout=args.timeout, total_timeout=args.total_timeout)
    files = batch.collect(args.submissions)
    from labkit.grade import classroom, gradescope, shards, version

    shard = None
    if args.shard is not None:
        try:
            shard = shards.Shard.parse(args.shard)
        except ValueError as error:
            print(f"labkit grade: {error}", file=sys.stderr)
            return 2
        absent = [str(p) for p in args.submissions if not p.exists()]
        if absent:  # a volume not mounted, not a class's hand-ins
            print(f"labkit grade: no such file or folder: {', '.join(absent)}", file=sys.stderr)
            return 2
        files = shard.select(files)
    elif not files:
        print("labkit grade: no .ipynb submissions found", file=sys.stderr)
        if args.gradescope_results is not None:
            gradescope.write(gradescope.problem(gradescope.NO_NOTEBOOK), args.gradescope_results)
        return 2
    learner_copies = args.learner_copies or args.solutions.parent / "notebooks"
    course_version = version.course_version(args.solutions, learner_copies, course.registry)
    try:
        version.check_reports_folder(args.out, course_version)
        jobs = jobs_for(limits, mode)
    except (version.VersionMismatch, ContainmentUnavailable) as error:
        print(f"labkit grade: {error}", file=sys.stderr)
        return 2
    problem = _reports_folder_problem(args.out) or _outputs_problem(
        args, ("junit", "summary_md", "gradescope_results", "classroom_output")
    )
    if problem:
        print(f"labkit grade: {problem}", file=sys.stderr)
        return 2
    print(f"containment: {mode}: {jobs.description}")
    result = batch.run(
        files,
        course,
        limits=limits,
        jobs=args.jobs,
        progress=batch.Progress(len(files)),
        containment=mode,
        graded_as=args.graded_as,
        prepared=jobs,
    )
    result = version.stamp(result, course_version)
    code = batch.exit_code(result, args.fail_under)
    if args.gradescope_results is not None:
        if code == batch.GRADER_FAILED:
            # No results.json: Gradescope shows staff "The autograder failed to execute
            # correctly" (and they can rerun it), instead of a score of 0 for the learner.
            args.gradescope_results.unlink(missing_ok=True)
        else:
            gradescope.write(gradescope.results(result), args.gradescope_results)
    if args.classroom_output is not None:
        under = code == batch.LOW and args.fail_under is not None
        status = "error" if code == batch.GRADER_FAILED else "fail" if under else "pass"
        classroom.append_output(result, status, args.classroom_output)
    if args.summary_md is not None:
        classroom.append_summary(result, args.summary_md)
    batch.write(result, args.out, args.junit)
    if shard is not None:
        shards.write_marker(shard, args.out)
    print(batch.summary(result))
    print(
        f"reports: {args.out}/{batch.SUBMISSIONS}/ (one per submission), {args.out}/batch.json "
        f"(class view: {args.out / 'class.html'})"
    )
    if code == batch.GRADER_FAILED:
        failed = [s for s in result.submissions if s.infrastructure or s.status != "graded"]
        print(
            f"labkit grade: grading itself failed for {len(failed)} submission(s); nothing was "
            "scored for them (see each report's error)",
            file=sys.stderr,
        )
    return code


def _run_practice(args: argparse.Namespace) -> int:
    _without_slow_format_checker()
    from labkit.grade import notebooks, practice
    from labkit.grade.kernel import Limits

    if args.timeout < 1:
        print("labkit check: --timeout must be positive", file=sys.stderr)
        return 2
    if not args.notebook.is_file():
        print(f"labkit check: {args.notebook}: no such notebook file", file=sys.stderr)
        return 2
    solutions = practice.solutions_for(args.notebook, args.solutions)
    try:
        found = practice.run(args.notebook, solutions, limits=Limits(cell_timeout=args.timeout))
    except (notebooks.Unreadable, OSError) as error:
        print(f"labkit check: {error}", file=sys.stderr)
        return 2
    print(practice.text(found), end="")
    if args.out is not None:
        for path in practice.write(found, args.out):
            print(f"wrote {path}")
    return 0 if found.status == "graded" else 1


def build_merge_parser() -> argparse.ArgumentParser:
    merge = argparse.ArgumentParser(
        prog="labkit grade merge",
        description="Merge the --out folders of sharded `labkit grade --shard I/N` runs into one "
        "batch.json, one class view, the per-submission reports and (with --junit) one JUnit "
        "file. Refuses a submission graded in two shards and reports of different course "
        "versions (exit 2, nothing written).",
    )
    merge.add_argument("reports", nargs="+", type=Path, metavar="REPORT_DIR")
    merge.add_argument("--out", type=Path, required=True, metavar="DIR", help="merged reports")
    merge.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML here")
    merge.add_argument(
        "--fail-under", type=float, metavar="PCT", help="exit 1 if any score is below PCT percent"
    )
    return merge


def _run_grade_merge(argv: Sequence[str]) -> int:
    from labkit.grade import batch, shards, version

    args = build_merge_parser().parse_args(list(argv))
    try:
        shards.complete([(str(d), shards.marker(d)) for d in args.reports])
        merged = shards.merge([(str(d), shards.load(d)) for d in args.reports])
        assert merged.course is not None  # merge refuses reports without one
        version.check_reports_folder(args.out, merged.course)
    except (shards.MergeError, version.VersionMismatch) as error:
        print(f"labkit grade merge: {error}", file=sys.stderr)
        return 2
    problem = _reports_folder_problem(args.out) or _outputs_problem(args, ("junit",))
    if problem:
        print(f"labkit grade merge: {problem}", file=sys.stderr)
        return 2
    batch.write(merged, args.out, args.junit)
    print(batch.summary(merged))
    print(f"merged {len(args.reports)} shards: {args.out}/ (class view: {args.out / 'class.html'})")
    return batch.exit_code(merged, args.fail_under)


def _run_course_package(args: argparse.Namespace) -> int:
    _without_slow_format_checker()
    from labkit.grade import classroom, gradescope, version
    from labkit.grade.graded_exercises import GRADED
    from labkit.grade.wheel import WheelError

    try:
        if args.platform == "gradescope":
            course_version = version.course_version(args.solutions, args.notebooks, GRADED)
            path = gradescope.package(
                args.source, args.solutions, args.notebooks, course_version, args.out
            )
            print(f"wrote {path} ({version.describe(course_version)})")
            return 0
        bundle = args.bundle or args.out.parent / f"{args.out.name}-course.tar.gz"
        written = classroom.package(
            args.source, args.solutions, args.notebooks, args.out, bundle, args.fail_under
        )
    except (ValueError, WheelError, OSError) as error:
        print(f"labkit course package: {error}", file=sys.stderr)
        return 1
    print(f"template repository: {args.out}/ ({len(written) - 1} files)")
    print(f"private course bundle (never in the template): {bundle}")
    return 0


def _run_course_table(args: argparse.Namespace) -> int:
    from labkit.course.exercises import registry

    try:
        text = args.readme.read_text(encoding="utf-8")
        current = registry.with_exercise_table(text)
    except (OSError, registry.NoTable) as error:
        print(f"labkit course table: {args.readme}: {error}", file=sys.stderr)
        return 1
    if current == text:
        print(f"{args.readme}: the exercise table is up to date")
        return 0
    if args.check:
        print(
            f"{args.readme}: the exercise table is stale; run `labkit course table`",
            file=sys.stderr,
        )
        return 1
    args.readme.write_text(current, encoding="utf-8")
    print(f"{args.readme}: exercise table written")
    return 0


def _reports_folder_problem(out: Path) -> str:
    """Why the reports could not be written to `out`, or "": checked before any grading (and
    without making anything), so a run never ends without its reports."""
    return _output_problem("--out", out, folder=True)


def _output_problem(option: str, path: Path, *, folder: bool) -> str:
    """Why `option`'s `path` (a folder to make or fill, or a file to write or append to) could
    not be written, or "": looked at before any work, making nothing."""
    if path.exists():
        if folder != path.is_dir():
            return f"{option} {path}: exists and is {'not ' if folder else ''}a folder"
        if not os.access(path, os.W_OK | (os.X_OK if folder else 0)):
            return f"{option} {path}: is not writable"
        return ""
    where = next(p for p in path.absolute().parents if p.exists())
    if not where.is_dir():
        return f"{option} {path}: {where} is not a folder"
    if not os.access(where, os.W_OK | os.X_OK):
        return f"{option} {path}: {where} is not writable"
    return ""


def _outputs_problem(args: argparse.Namespace, files: Sequence[str]) -> str:
    """The first of the output files named by `files` (attributes of `args`: None when not
    asked for) that could not be written, or ""."""
    for name in files:
        path = getattr(args, name)
        if path is not None:
            option = "--" + name.replace("_", "-")
            problem = _output_problem(option, path, folder=False)
            if problem:
                return problem
    return ""


def _run_course_mutants(args: argparse.Namespace) -> int:
    from labkit.grade import mutants
    from labkit.grade.graded_exercises import GRADED
    from labkit.grade.grader import Course

    unknown = [e for e in args.exercises if e not in GRADED]
    if unknown:
        print(
            f"labkit course mutants: no such exercise: {', '.join(unknown)} "
            f"(the exercises: {', '.join(GRADED)})",
            file=sys.stderr,
        )
        return 2
    if args.jobs < 1:
        print("labkit course mutants: --jobs must be positive", file=sys.stderr)
        return 2
    if not args.solutions.is_dir():
        print(f"labkit course mutants: {args.solutions}: no such folder", file=sys.stderr)
        return 2
    problem = _outputs_problem(args, ("markdown",))
    if problem:
        print(f"labkit course mutants: {problem}", file=sys.stderr)
        return 2
    chosen = [GRADED[e] for e in args.exercises or GRADED]
    course = Course.load(args.solutions)
    missing = [g.id for g in chosen if course.exercise(g).notebook not in course.solutions]
    if missing:
        print(
            f"labkit course mutants: {args.solutions} lacks the solution notebook of "
            f"{', '.join(missing)}",
            file=sys.stderr,
        )
        return 2

    def step(verdict: mutants.Verdict, done: int, total: int) -> None:
        if sys.stderr.isatty():
            print(f"\r{done}/{total} mutants graded", end="", file=sys.stderr, flush=True)

    try:
        strengths = mutants.measure(course, chosen, jobs=args.jobs, progress=step)
    except mutants.MutmutMissing as error:
        print(f"labkit course mutants: {error}", file=sys.stderr)
        return 2
    if sys.stderr.isatty():
        print(file=sys.stderr)
    text = mutants.table(strengths)
    print(text, end="")
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text, encoding="utf-8")
    return 0 if all(s.holds for s in strengths) else 1


def _run_course_build(args: argparse.Namespace) -> int:
    _without_slow_format_checker()
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


def _run_course_execute(args: argparse.Namespace) -> int:
    _without_slow_format_checker()
    from labkit.grade.execute import ExecuteError, execute

    if args.cell_timeout < 1:
        print("labkit course execute: --cell-timeout must be at least 1 second", file=sys.stderr)
        return 2
    paths = args.notebooks or sorted(Path("solutions").glob("*.ipynb"))
    if not paths:
        print("labkit course execute: no notebooks given and none in solutions/", file=sys.stderr)
        return 1
    failed = 0
    for path in paths:
        try:
            done = execute(path, cell_timeout=args.cell_timeout)
        except ExecuteError as error:
            print(f"labkit course execute: {error}", file=sys.stderr)
            failed += 1
            continue
        slowest = (
            f"; slowest cell #{done.slowest.index} {done.slowest.seconds:.1f} s"
            if done.slowest
            else ""
        )
        print(f"{path}: ran clean in {done.seconds:.1f} s{slowest}", flush=True)
    return 1 if failed else 0


def _run_demo(args: argparse.Namespace) -> int:
    from labkit.walkthrough import run_walkthrough

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
    tokens = list(sys.argv[1:] if argv is None else argv)
    # `labkit grade merge DIR...`: `grade` takes submissions as positionals, so its one
    # subcommand is dispatched here (a folder named "merge" is graded as `./merge`).
    command = next((i for i, t in enumerate(tokens) if not t.startswith("-")), None)
    if command is not None and tokens[command : command + 2] == ["grade", "merge"]:
        verbose = any(t in ("-v", "--verbose") for t in tokens[:command])
        logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr)
        return _run_grade_merge(tokens[command + 2 :])
    args = build_parser().parse_args(tokens)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
