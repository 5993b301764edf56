"""Grading many submissions: workers, progress, the files written and the exit code.

Owns: collecting submissions (a folder's `*.ipynb`, or files as given), running `--jobs`
kernels at once (threads in one process: nbval, nbformat and jupyter_client are imported once
per batch, each submission pays only its kernel start and its cells), the files written (the
batch's own `batch.json` and `class.html` in the output folder, each submission's JSON and
feedback in its `submissions/` folder, so no submission's name can overwrite a batch file), the
summary table (with the solution each submission was graded against, and a flag when the file
name disagrees) and the exit code (0 when every submission was graded and none fell under
`fail_under`).

A batch always finishes and always has a report: whatever goes wrong while one submission is
graded (any exception, `RecursionError` and `MemoryError` included) is that submission's
entry, "not graded" with the reason, and the batch goes on. Only the grader itself can end a
run early (an interrupt, SIGTERM from a CI runner or a platform's time limit): then the
batch's report holds what was graded so far, every other submission says it did not run,
and the report says why the run stopped (`BatchReport.stopped`).

The clock, the runner factory and the progress sink are injected.
Must not import the command line.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Final, TextIO

from labkit.grade import classview, report
from labkit.grade.containment import Jobs, Mode
from labkit.grade.grader import Course, Runner, grade
from labkit.grade.kernel import KernelRunner, Limits, jobs_for, sandbox_mode, write_kernelspec
from labkit.grade.report import BatchReport, SubmissionReport

log = logging.getLogger("labkit.grade")


class Stopped(BaseException):
    """The grader was told to stop (a signal): the batch ends with what it graded so far."""


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM (a CI runner's or a platform's time limit) raises `Stopped` in the main thread,
    so the batch can still write its reports; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        raise Stopped(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def collect(paths: Sequence[Path]) -> list[Path]:
    """Folders give their `*.ipynb` files (sorted); files are taken as given, whatever they are."""
    found: list[Path] = []
    for path in paths:
        found.extend(sorted(path.glob("*.ipynb")) if path.is_dir() else [path])
    return found


@dataclass
class Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    total: int
    # Looked up when the bar is made, not when this module is imported (a stream swapped in
    # then, such as a test's captured stderr, may be closed by the time a bar is made).
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    done: int = 0

    def step(self, name: str) -> None:
        self.done += 1
        if not self.stream.isatty():
            return
        width = 30
        filled = width * self.done // max(self.total, 1)
        bar = "#" * filled + "-" * (width - filled)
        end = "\n" if self.done == self.total else ""
        shown = report.clean_line(name)[:40]  # a file name can hold terminal escapes
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} {shown:<40}{end}")
        self.stream.flush()


def run(
    paths: Sequence[Path],
    course: Course,
    *,
    limits: Limits,
    jobs: int = 1,
    runner: Runner | None = None,
    progress: Progress | None = None,
    graded_as: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    containment: Mode = Mode.FULL,
    prepared: Jobs | None = None,
) -> BatchReport:
    """Jobs in `containment` mode (or the `prepared` ones); raises `ContainmentUnavailable`
    when this machine cannot give that mode."""
    started = clock()
    files = collect(paths)
    work = Path(tempfile.mkdtemp(prefix="labkit-grade-"))
    # Traversable by the kernel's unprivileged user and the processes it starts (a learner's
    # racers lose the kernel's read-search capability); still not listable by anyone else.
    work.chmod(0o711)
    try:
        mode = sandbox_mode()
        if runner is None:
            spec = write_kernelspec(work / "spec", limits, sandbox=mode)
            contained = prepared or jobs_for(limits, containment)
            runner = KernelRunner(spec, limits, clock=clock, jobs=contained)
        sandbox = runner.jobs.description if isinstance(runner, KernelRunner) else ""
        held: Mode | None = runner.jobs.mode if isinstance(runner, KernelRunner) else None
        bound: Runner = runner

        def one(path: Path) -> SubmissionReport:
            begun = clock()
            try:
                if not path.exists():
                    result = SubmissionReport.not_graded(path.name, f"{path}: no such file")
                else:
                    result = grade(
                        path,
                        course,
                        bound,
                        scratch_root=work,
                        sandbox=sandbox,
                        graded_as=graded_as,
                        clock=clock,
                    )
            except Exception as error:  # this submission's failure, never the batch's
                log.exception("%s: grading stopped", path.name)
                result = SubmissionReport.not_graded(
                    path.name,
                    f"did not run: grading this submission stopped ({type(error).__name__})",
                    clock() - begun,
                )
            finally:
                if progress is not None:
                    progress.step(path.name)
            return result if held is None else result.model_copy(update={"containment": held})

        reports, stopped = _each(one, files, jobs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report.batch(reports, clock() - started, stopped=stopped)


def _each(
    one: Callable[[Path], SubmissionReport], files: Sequence[Path], jobs: int
) -> tuple[list[SubmissionReport], str]:
    """`one` for each file, `jobs` at once; on an interrupt or SIGTERM, what was graded, every
    other file "did not run", and why the run stopped."""
    done: dict[int, SubmissionReport] = {}
    futures: dict[Future[SubmissionReport], int] = {}
    stopped = ""
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        with _stop_on_sigterm():
            for n, path in enumerate(files):
                futures[pool.submit(one, path)] = n
            for future in as_completed(futures):
                done[futures[future]] = future.result()
    except (KeyboardInterrupt, SystemExit, Stopped) as interrupt:
        stopped = f"grading was stopped ({type(interrupt).__name__}{_said(interrupt)})"
    finally:
        # Stopped: submissions still running finish in the background (each job ends with
        # the grader's process); the report does not wait for them.
        pool.shutdown(wait=not stopped, cancel_futures=True)
    for future, n in futures.items():  # graded before the stop, not yet collected
        finished = future.done() and not future.cancelled() and future.exception() is None
        if n not in done and finished:
            done[n] = future.result()
    reports = [
        done.get(n) or SubmissionReport.not_graded(path.name, f"did not run: {stopped}")
        for n, path in enumerate(files)
    ]
    return reports, stopped


def _said(error: BaseException) -> str:
    return f": {error}" if str(error) else ""


SUBMISSIONS: Final = "submissions"


def report_names(result: BatchReport) -> list[str]:
    """Each submission's report name (its file's stem; `-2`, `-3` when stems repeat)."""
    used: set[str] = set()
    names = []
    for sub in result.submissions:
        stem = Path(sub.file).stem or "submission"
        name, n = stem, 1
        while name in used:
            n += 1
            name = f"{stem}-{n}"
        used.add(name)
        names.append(name)
    return names


def write(result: BatchReport, out: Path, junit: Path | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    folder = out / SUBMISSIONS
    folder.mkdir(exist_ok=True)
    for sub, name in zip(result.submissions, report_names(result), strict=True):
        (folder / f"{name}.json").write_text(sub.model_dump_json(indent=2) + "\n", encoding="utf-8")
        (folder / f"{name}.feedback.txt").write_text(report.feedback(sub), encoding="utf-8")
    (out / "batch.json").write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / "class.html").write_text(classview.render(result), encoding="utf-8")
    if junit is not None:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_text(report.junit(result.submissions), encoding="utf-8")


def summary(result: BatchReport) -> str:
    rows = [("submission", "score", "%", "graded as")]
    for sub in result.submissions:
        if sub.status == "graded":
            said = f"{sub.solution}" + (f"  MISMATCH: {sub.mismatch}" if sub.mismatch else "")
            rows.append((sub.file, f"{sub.points:g}/{sub.max_points:g}", f"{sub.percent:g}", said))
        else:
            error = report.clean_line(sub.error)
            rows.append((sub.file, "-", "-", f"not graded: {error}"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}" for r in rows]
    lines.append(
        f"{result.graded} graded, {result.errors} not graded, mean {result.mean_percent:g}%, "
        f"{result.seconds:.1f} s"
    )
    lines += sorted(
        {f"sandbox: {s.sandbox}" for s in result.submissions if report.sandbox_warning(s)}
    )
    if result.stopped:
        lines.append(f"STOPPED: {result.stopped}; the submissions it did not reach did not run")
    return "\n".join(lines)


# Exit codes: 1 is about the submissions (one could not be read or matched, or scored under
# --fail-under); 3 is about grading itself (a submission could not be graded through no fault
# of its own, or the run was stopped before it reached every submission), which a platform must
# show as a failed run, never as a learner's 0.
LOW: Final = 1
GRADER_FAILED: Final = 3


def exit_code(result: BatchReport, fail_under: float | None = None) -> int:
    if result.stopped or any(s.infrastructure for s in result.submissions):
        return GRADER_FAILED
    if result.errors:
        return LOW
    if fail_under is not None and any(s.percent < fail_under for s in result.submissions):
        return LOW
    return 0
