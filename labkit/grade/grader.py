"""Grading one submission: load, match, run in a confined scratch kernel, check, score.

Owns: the `Course` (the solutions, and beside each its released learner copy, made by the
course build's own `learner_copy`), the order of work for one submission, the output rules,
the check workers' sources, and the rule that a check that could not run is failed "did not
run", never passed.

Two kinds of confined job, and only one decides a check:

- The kernel runs the restored notebook (`notebooks.restore`: every released code cell in the
  release's order, the learner's code only in the answer cells and in cells the learner
  added), with one grader cell first (the learner's own functions print nothing into the
  compared outputs: `QUIET_SOURCE`) and one after each learner cell naming the functions it
  defined. Its outputs are compared with the solution's (the output rules below) and nothing
  else: no check runs there, and nothing the kernel shows can score a check.
- Per exercise, a fresh check worker (`labkit.grade.worker.WorkerRunner`, as a process of a
  job of the kernel's own `Jobs`: the same container, uid, limits and Landlock) holds only the
  answer cells' sources (the cells the release names) and the setup cell's imports. The
  course's public checks (`labkit.course.exercises.registry`) and the hidden checks
  (`labkit.grade.hidden.exN.CHECKS`) run here, in the grader's process
  (`labkit.course.exercises.checks.run_checks`), and call the learner's functions through the
  worker's JSON channel: data in, data out. The scores are those `CheckResult`s. A check the
  worker could not run (it did not start, died, or sent what cannot be read) is "did not run",
  0 points; whatever one check meets stays that check's outcome (`check_exercise`).

One deadline (`Deadline`: the total time limit) covers a submission's kernel and every check,
worker start and race.

Output rules (a mistake costs once): a cell's saved output is compared (nbval) when the
solution opts it in and the release keeps that mark, except in an answer cell (its own output
is the learner's) and in a check cell whose exercise is graded here (`check("ex1")`: scored by
its checks). A compared cell that shows a graded exercise's functions at work earns its point
only when the checks that exercise what it shows passed (`held_back`), so a stub, or any
answer those checks do not accept, gains nothing from outputs printed on its behalf. What
the learner's own functions print is left out of every compared output (a debug print costs
nothing); what the released cells print about them is compared.

The scratch copy is laid out as the course is: `notebooks/` (the kernel's working directory)
and `outputs/` beside it, so `Path("../outputs")` is inside the scratch area.

Collaborators are injected: the kernel runner (anything with `run(scratch, sources, deadline)`),
the check workers (`Workers`), the clock and the scratch root.

Must not print or parse command-line arguments (the batch and the CLI do).
Must not import the command line.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import nbformat
from nbformat import NotebookNode

from labkit.course import build
from labkit.course.exercises.checks import (
    CheckResult,
    InProcessRunner,
    run_check,
    run_checks,
    safety_result,
)
from labkit.course.exercises.folder import Tampered
from labkit.course.exercises.race import RaceResult, RaceSpec
from labkit.course.exercises.registry import EXERCISES as COURSE_EXERCISES
from labkit.course.exercises.trial import (
    Check,
    CheckRunner,
    CheckSettings,
    Exercise,
    Fail,
    Outcome,
    Pass,
    Stop,
    Trial,
    exception_line,
)
from labkit.grade import answer_view, launcher, notebooks, outputs, quota, syntax
from labkit.grade import graded_exercises as ex
from labkit.grade.containment import KEEP_PLACEHOLDER, UID_PLACEHOLDER, Jobs
from labkit.grade.deadline import Deadline, unlimited
from labkit.grade.kernel import CellRun, CellStatus, Execution, KernelRunner, sandbox_mode
from labkit.grade.report import (
    OUTPUTS_SECTION,
    CheckScore,
    SubmissionReport,
    clean_line,
    exercise_score,
)
from labkit.grade.worker import (
    WorkerGone,
    WorkerNotStarted,
    WorkerRunner,
    plain_spawn,
    worker_argv,
)

log = logging.getLogger("labkit.grade")
_B: Final = "__labkit_builtins__"
_Q: Final = "__labkit_quiet__"
# Installed first in the kernel: in each cell (IPython's `pre_execute` event, after the
# runner's output cap, so above it), writes to stdout/stderr made from inside a function the
# learner's code defined (its code object's file is one the grader marked) are dropped. The
# frames are walked at each write: a function object is never wrapped or replaced, so a
# learner's function stays what it is for the checks and for the races that carry it by source.
QUIET_SOURCE: Final = f"""
import builtins as {_B}
def {_Q}():
    import sys
    from IPython import get_ipython
    files = set()
    def quiet(write):
        def write_unless_learner(text):
            frame = sys._getframe(1)
            while frame is not None:
                if frame.f_code.co_filename in files:
                    return len(text) if isinstance(text, str) else 0
                frame = frame.f_back
            return write(text)
        write_unless_learner._labkit_inner = write
        write_unless_learner._labkit_layer = "quiet"
        return write_unless_learner
    def each_cell():
        for stream in (sys.stdout, sys.stderr):
            write = stream.write
            while getattr(write, "_labkit_layer", None) == "quiet":
                write = write._labkit_inner
            stream.write = quiet(write)
    get_ipython().events.register("pre_execute", each_cell)
    def mark(namespace, names):
        for name in names:
            found = namespace.get(name)
            for item in [found, *vars(found).values()] if isinstance(found, type) else [found]:
                code = getattr(item, "__code__", None)
                if code is not None:
                    files.add(code.co_filename)
    return mark
{_Q} = {_Q}()
"""
_NOT_RUN: Final = {
    CellStatus.TIMEOUT: "did not run to the end: the time limit per cell was reached",
    CellStatus.DEAD: "did not run: the kernel died (os._exit, a crash or a resource limit)",
    CellStatus.CUT: "did not run to the end: the notebook's output passed the grader's bound",
    CellStatus.ERROR: "did not run: the cell raised",
}


# A locked setup cell that fails to import: the grading environment lacks what the course
# imports (a package of the `grade` extra), which no submission can cause.
_MISSING_PACKAGE: Final = ("ModuleNotFoundError", "ImportError")


class GradingFailed(Exception):
    """Grading itself failed for this submission (not the learner's doing): "not graded"."""


class Runner(Protocol):
    def run(self, scratch: Path, sources: Sequence[str], deadline: Deadline) -> Execution: ...


class CheckWorker(CheckRunner, Protocol):
    """The learner's side of one exercise's checks (`WorkerRunner`)."""

    problem: str

    def start(self) -> frozenset[str]:
        """Start; the names the answer cells define. `WorkerGone` when it cannot start."""
        ...


class Workers(Protocol):
    """Where an exercise's checks find the learner's functions: a fresh worker per exercise,
    in `scratch`, holding `sources`, whose every wait stays within `deadline`; every process
    of it ends on leaving."""

    call_timeout: float

    def runner(
        self, scratch: Path, sources: Sequence[str], deadline: Deadline
    ) -> AbstractContextManager[CheckWorker]: ...


@dataclass
class JobWorkers:
    """Check workers in jobs of `jobs` (the kernel runner's own `Containment`, or `Unconfined`
    when grading was asked to be): one job per exercise, so its own uid from the pool and its
    own cgroup with the kernel's memory and task limits; each worker process (a restart after
    a hung call, each racer of a race) is started with `Job.command`, so inside its own
    bubblewrap container (no network, its own PID namespace, the same mount view as the
    kernel's) and through `launcher.prepare` (the same rlimits, drop to the job's uid and
    Landlock in `sandbox` mode). What differs from the kernel: the worker runs
    `labkit.course.exercises.answers`, not ipykernel, on a view of labkit that holds the
    building blocks and none of labkit's implementations of the graded contracts
    (`answer_view`); and it has no total deadline of its own, only a bound per call
    (`call_timeout`), per start (`start_timeout`) and per race, each also bounded by what is
    left of the submission's total time (`Deadline`)."""

    jobs: Jobs
    sandbox: str = "required"
    python: str = sys.executable
    start_timeout: float = 30.0
    call_timeout: float = 10.0

    @classmethod
    def of(cls, runner: KernelRunner, sandbox: str | None = None) -> JobWorkers:
        limits = runner.limits
        return cls(
            runner.jobs,
            sandbox=sandbox_mode() if sandbox is None else sandbox,
            # A start runs the answer cells' definitions: a cell's time, never under what a
            # confined interpreter needs to start on a busy machine.
            start_timeout=float(min(limits.startup_timeout, max(limits.cell_timeout, 10))),
            call_timeout=float(limits.cell_timeout),
        )

    @contextmanager
    def runner(
        self, scratch: Path, sources: Sequence[str], deadline: Deadline
    ) -> Iterator[CheckWorker]:
        limits = self.jobs.limits
        argv = worker_argv(
            memory=limits.memory,
            cpu=limits.cpu,
            nproc=limits.nproc,
            fsize=limits.fsize,
            sandbox=self.sandbox,
            python=self.python,
            user=UID_PLACEHOLDER,
            keep=KEEP_PLACEHOLDER,
            hide=answer_view.REAL,
        )
        # The worker's labkit: the building blocks, never a graded contract's implementation.
        view = answer_view.build(scratch.with_name(scratch.name + ".labkit"))
        try:
            with self.jobs.job(scratch) as job:

                def spawn(command: Sequence[str], where: Path) -> Any:
                    full = answer_view.command(job, view, command)
                    return plain_spawn(full, where, answer_view.env(view))

                runner = WorkerRunner(
                    sources,
                    argv=argv,
                    scratch=scratch,
                    spawn=spawn,
                    start_timeout=self.start_timeout,
                    deadline=deadline,
                )
                try:
                    yield runner
                finally:
                    runner.close()
        finally:
            shutil.rmtree(view, ignore_errors=True)  # the job has ended: nothing reads it now


@dataclass(frozen=True)
class Course:
    solutions: Mapping[str, NotebookNode]
    registry: Mapping[str, ex.GradedExercise] = field(default_factory=lambda: dict(ex.GRADED))
    patterns: Sequence[tuple[str, str]] = field(default_factory=outputs.sanitizers)
    # The course's exercises (public checks), by id (`labkit.course.exercises.registry`).
    exercises: Mapping[str, Exercise] = field(default_factory=lambda: dict(COURSE_EXERCISES))
    # The learner copies as released (`labkit course build`), by stem; made on demand.
    releases: dict[str, NotebookNode] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path, **kw: Any) -> Course:
        if not directory.is_dir():
            raise notebooks.Unreadable(f"{directory}: no such directory of solution notebooks")
        solutions = {p.stem: notebooks.load(p) for p in sorted(directory.glob("*.ipynb"))}
        if not solutions:
            raise notebooks.Unreadable(f"{directory}: holds no .ipynb solution notebooks")
        course = cls(solutions, **kw)
        for stem in solutions:
            course.learner_copy(stem)  # an authoring mistake is found before any grading
        return course

    def learner_copy(self, stem: str) -> NotebookNode:
        """The learner copy `labkit course build` makes of a solution (notebooks/<stem>)."""
        if stem not in self.releases:
            try:
                self.releases[stem] = build.learner_copy(self.solutions[stem], stem)
            except build.BuildError as error:
                raise notebooks.Unreadable(f"solution {stem}: {error}") from None
        return self.releases[stem]

    def exercise(self, graded: ex.GradedExercise) -> Exercise:
        return self.exercises.get(graded.id, graded.unit)


def grade(
    path: Path,
    course: Course,
    runner: Runner,
    *,
    scratch_root: Path,
    workers: Workers | None = None,
    sandbox: str = "",
    graded_as: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    deadline: Deadline | None = None,
) -> SubmissionReport:
    """`workers` defaults to the kernel runner's own jobs (`JobWorkers.of`); a runner that
    has none and no `workers` leaves every check "did not run". `deadline` (default: the
    kernel runner's total time limit from now) bounds the kernel and every check together."""
    started = clock()
    try:
        learner = notebooks.load(path)
    except notebooks.Unreadable as error:
        return SubmissionReport.not_graded(path.name, str(error))
    try:
        found = _match(path, learner, course, graded_as)
    except _NotGraded as error:
        return SubmissionReport.not_graded(path.name, error.why)
    if workers is None and isinstance(runner, KernelRunner):
        workers = JobWorkers.of(runner)
    if deadline is None:
        total = runner.limits.total_timeout if isinstance(runner, KernelRunner) else math.inf
        deadline = Deadline(total, clock)
    plan = _restore(path, learner, course, found)
    try:
        graded = _run(path, course, plan, runner, workers, deadline, scratch_root)
    except _RunFailed as error:
        return SubmissionReport.not_graded(
            path.name, f"{path.name}: {error}", clock() - started, infrastructure=True
        )
    return _report(path, course, plan, graded, sandbox, lambda: round(clock() - started, 2))


class _NotGraded(Exception):
    """The submission is not graded: it matches no solution, or not the one asked for."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _RunFailed(Exception):
    """Grading could not run the submission (its kernel did not start, a check worker could
    not): a failure of the grading environment, said in the report as such."""


def _match(
    path: Path, learner: NotebookNode, course: Course, graded_as: str | None
) -> notebooks.Match:
    """The solution the submission is graded as (`graded_as`, else by file name or metadata)."""
    if graded_as is not None:
        if graded_as not in course.solutions:
            raise _NotGraded(f"--as {graded_as}: no solution notebook has that name")
        return notebooks.Match(graded_as, "as")
    found = notebooks.match(path, learner, course.solutions)
    if found is None:
        raise _NotGraded(
            f"{path.name}: matches no solution notebook (by file name or by the notebook's "
            "labkit metadata)"
        )
    return found


@dataclass(frozen=True)
class _Plan:
    """What grading one submission runs: the restored cells, the kernel's sources (`at`: the
    kernel cell index of each restored cell), the worker's sources, the exercises and the
    checked outputs."""

    found: notebooks.Match
    solution: NotebookNode
    restored: notebooks.Restored
    notices: list[str]
    mismatch: str
    exercises: list[ex.GradedExercise]
    checked: list[outputs.Checked]
    sources: list[str]
    at: list[int]
    worker_sources: list[str]


def _restore(path: Path, learner: NotebookNode, course: Course, found: notebooks.Match) -> _Plan:
    solution = course.solutions[found.stem]
    release = course.learner_copy(found.stem)
    restored = notebooks.restore(learner, release)
    notices = restored.notices
    if found.how == "metadata":
        notices.insert(0, f"renamed: graded as {found.stem}.ipynb (matched by its metadata)")
    exercises = ex.exercises_in(solution, course.registry)
    cells = restored.cells
    sources = [QUIET_SOURCE]
    at: list[int] = []  # kernel cell index of each restored cell
    for restored_cell, kind in zip(cells, restored.kinds, strict=True):
        at.append(len(sources))
        sources.append(restored_cell.source)
        if kind != "locked":
            sources.append(_mark_cell(restored_cell))
    answers = [c.source for c, kind in zip(cells, restored.kinds, strict=True) if kind == "answer"]
    return _Plan(
        found=found,
        solution=solution,
        restored=restored,
        notices=notices,
        mismatch=notebooks.mismatch(path, learner, found.stem),
        exercises=exercises,
        checked=checked_outputs(solution, release, {e.id for e in exercises}),
        sources=sources,
        at=at,
        worker_sources=[notebooks.setup_imports(release), *answers],
    )


@dataclass(frozen=True)
class _Graded:
    """What the kernel ran (`mine`: the run of each restored cell) and what the checks found."""

    execution: Execution
    mine: list[CellRun]
    results: dict[str, list[CheckResult]]
    notices: list[str]


def _run(
    path: Path,
    course: Course,
    plan: _Plan,
    runner: Runner,
    workers: Workers | None,
    deadline: Deadline,
    scratch_root: Path,
) -> _Graded:
    """Run the kernel, then the checks, each job writing in a space of its own, bounded in all
    by the per-file limit (`quota`); `_RunFailed` when grading could not run them."""
    disk = runner.limits.fsize if isinstance(runner, KernelRunner) else None
    area = Path(tempfile.mkdtemp(prefix="sub-", dir=scratch_root))
    try:
        execution, notices = _run_kernel(path, plan, runner, deadline, area, disk)
        mine = [execution.cells[i] for i in plan.at]
        try:
            _setup_imported(plan.restored.cells, plan.restored.kinds, mine)
            results, full = _check(course, plan, workers, deadline, area, disk)
        except GradingFailed as error:
            raise _RunFailed(str(error)) from None
    finally:
        # Every job of the submission has ended (each runner stops its job's processes before
        # it returns), so nothing of the learner's is still writing here.
        shutil.rmtree(area, onerror=_unremovable)
    return _Graded(execution, mine, results, notices + full)


def _run_kernel(
    path: Path, plan: _Plan, runner: Runner, deadline: Deadline, area: Path, disk: int | None
) -> tuple[Execution, list[str]]:
    """The notebook run in its kernel, and what its space says; `_RunFailed` when the kernel
    did not start."""
    scratch = _lay_out(area)
    with _bounded(scratch, disk) as space:
        (scratch / ".outputs").mkdir()
        shutil.copyfile(path, scratch / "submission.ipynb")
        execution = runner.run(scratch, plan.sources, deadline)
    notices = _full(space, "the notebook")
    if not execution.started:
        raise _RunFailed(execution.problem)
    return execution, notices


def _check(
    course: Course,
    plan: _Plan,
    workers: Workers | None,
    deadline: Deadline,
    area: Path,
    disk: int | None,
) -> tuple[dict[str, list[CheckResult]], list[str]]:
    """Each exercise's checks, in a folder of its own, and what their spaces say."""
    results: dict[str, list[CheckResult]] = {}
    notices: list[str] = []
    for exercise in plan.exercises:
        checks = area / f"checks-{exercise.id}"
        checks.mkdir(mode=0o711)
        with _bounded(checks, disk) as space:
            results[exercise.id] = check_exercise(
                course, exercise, plan.worker_sources, workers, checks, deadline, plan.solution
            )
        notices += _full(space, f"the answer cells (in the checks of {exercise.id})")
    return results, notices


def _report(
    path: Path,
    course: Course,
    plan: _Plan,
    graded: _Graded,
    sandbox: str,
    seconds: Callable[[], float],
) -> SubmissionReport:
    """The scores of the checks and the checked outputs, and the graded report (`seconds`:
    the time it took, read last)."""
    results, execution = graded.results, graded.execution
    scores = {e: [_score(e, r) for r in found_results] for e, found_results in results.items()}
    notices = plan.notices + graded.notices
    notices += _cell_notices(plan.restored.cells, graded.mine, execution.problem)
    output_scores = _output_scores(
        plan.checked, plan.restored.cells, graded.mine, course, execution, plan.exercises, results
    )
    if output_scores:
        scores[OUTPUTS_SECTION] = output_scores
    sections = [exercise_score(name, items) for name, items in scores.items()]
    points = sum(s.points for s in sections)
    most = sum(s.max_points for s in sections)
    return SubmissionReport(
        file=path.name,
        status="graded",
        solution=plan.found.stem,
        mismatch=plan.mismatch,
        points=points,
        max_points=most,
        percent=round(100.0 * points / most, 1) if most else 0.0,
        exercises=sections,
        notices=notices,
        sandbox=sandbox,
        seconds=seconds(),
    )


def _bounded(folder: Path, disk: int | None) -> AbstractContextManager[quota.Space | None]:
    return nullcontext() if disk is None else quota.bounded(folder, disk)


def _full(space: quota.Space | None, who: str) -> list[str]:
    return [space.notice(who)] if space is not None and space.full else []


def _unremovable(function: Any, path: str, error: Any) -> None:
    log.warning("a scratch file could not be removed: %s (%s)", path, error[1])


def check_exercise(
    course: Course,
    graded: ex.GradedExercise,
    sources: Sequence[str],
    workers: Workers | None,
    scratch: Path,
    deadline: Deadline | None = None,
    solution: NotebookNode | None = None,
) -> list[CheckResult]:
    """The exercise's public then hidden checks, in this process, against a fresh worker in
    `scratch` (the worker's folder, where each check's own folder is made too); the
    differential ones also call the reference answer (`solution`'s answer cells) here.

    Whatever one check meets (its worker dies or sends what cannot be read, its cleanup fails,
    the submission's time runs out) ends that check with an outcome ("did not run" with the
    reason when it could not judge), never with an exception out of here: a submission can
    only lose its own points. Only a worker that could not start before any learner code ran
    in it raises (`GradingFailed`: grading's failure, not the submission's)."""
    deadline = deadline or unlimited()
    exercise = course.exercise(graded)
    checks: list[Check] = [*exercise.checks, *graded.checks()]
    if workers is None:
        return [_not_run(exercise, c, "no check worker was given to the grader") for c in checks]
    reference = None if solution is None else InProcessRunner(graded.reference(solution))
    # The launcher leaves a folder of this mode (and the check folders in it) the grader's,
    # so the learner's side has no writable place but the files a check gives it.
    scratch.chmod(launcher.KEPT_MODE)
    settings = CheckSettings(call_timeout=workers.call_timeout, tmp_parent=scratch)
    results: list[CheckResult] = []
    shared: dict[str, Any] = {}
    why = ""
    try:
        with workers.runner(scratch, sources, deadline) as worker:
            try:
                defined = worker.start()
            except WorkerNotStarted as error:
                raise GradingFailed(str(error)) from None
            guarded = _Guarded(worker, deadline)
            if not set(exercise.contracts) <= defined:  # every check "not attempted", none runs
                report = run_checks(
                    exercise, checks, guarded, defined.__contains__, settings, reference
                )
                return list(report.results)
            for check in checks:
                results.append(
                    _run_one(exercise, check, guarded, settings, shared, deadline, reference)
                )
    except GradingFailed:
        raise
    except WorkerGone as error:
        why = str(error)
    except Exception as error:
        log.exception("%s: the checks stopped", exercise.id)
        why = f"the grader could not run it ({type(error).__name__})"
    results += [_not_run(exercise, c, why) for c in checks[len(results) :]]
    return results + safety_result(exercise, results, shared)


def _run_one(
    exercise: Exercise,
    check: Check,
    guarded: _Guarded,
    settings: CheckSettings,
    shared: dict[str, Any],
    deadline: Deadline,
    reference: CheckRunner | None,
) -> CheckResult:
    if deadline.passed():
        return _not_run(exercise, check, deadline.notice)
    try:
        return run_check(
            exercise, _attributed(check, guarded), guarded, settings, shared, reference=reference
        )
    except Exception as error:  # past the check itself: its cleanup, the engine
        log.exception("%s · %s: could not finish", exercise.id, check.name)
        return _not_run(exercise, check, f"the check could not finish ({type(error).__name__})")


def _attributed(check: Check, guarded: _Guarded) -> Check:
    """`check` with one rule added: an exception the check raises once the learner's code has
    answered came from that answer (a shape the check did not expect), so the answer is
    incorrect and its text is quoted as the submission's own; before any answer, the
    exception is the check's own failure, which `run_check` reports as such. A check's files
    found tampered with (`Tampered`) are left to `run_check`, which counts a safety fault."""

    def run(trial: Trial) -> Fail | Pass | None:
        guarded.answered = False
        try:
            return check.run(trial)
        except (Stop, Tampered):
            raise
        except Exception as error:
            if not guarded.answered:
                raise
            log.info("%s: an answer the check could not read", check.name, exc_info=True)
            raise Stop(Outcome.INCORRECT, _unreadable_answer(check, error)) from None

    return dataclasses.replace(check, run=run)


def _unreadable_answer(check: Check, error: BaseException) -> str:
    """What a check that stopped on the learner's answer says: the exception's text is the
    learner's data, quoted on one line, never the grader's own words."""
    said = clean_line(exception_line(error))
    if len(said) > 200:
        said = said[:197] + "..."
    return (
        f"{check.expects}, but what your code returned is not what the contract describes, so "
        f"the check could not read it. Quoted from your answer: «{said}». Next: return exactly "
        "the types and keys the contract names."
    )


class _Guarded:
    """The worker as the checks see it, with rules added: a call or a race the worker could
    not run (it did not start again, died or sent what cannot be read) ends the check as "did
    not run"; every wait is bounded by what is left of the submission's time, and once that
    is gone the check ends as "did not run" with that notice; `answered` says whether the
    learner's code answered since the check began."""

    def __init__(self, worker: CheckWorker, deadline: Deadline) -> None:
        self._worker = worker
        self._deadline = deadline
        self.answered = False

    def _in_time(self) -> None:
        if self._deadline.passed():
            raise Stop(Outcome.DID_NOT_RUN, f"did not run: {self._deadline.notice}")

    def call(self, name: str, args: Sequence[Any], timeout: float) -> Any:
        self._in_time()
        self._worker.problem = ""
        try:
            answer = self._worker.call(name, args, self._deadline.bound(timeout))
        except WorkerGone as error:
            raise Stop(Outcome.DID_NOT_RUN, f"did not run: {error}") from None
        if answer is None:
            self._in_time()
            if self._worker.problem:
                raise Stop(Outcome.DID_NOT_RUN, f"did not run: {self._worker.problem}")
            return None
        self.answered = True
        return answer

    def race(self, spec: RaceSpec) -> RaceResult:
        self._in_time()
        result = self._worker.race(
            dataclasses.replace(spec, timeout=self._deadline.bound(spec.timeout))
        )
        if any(r.kind == "no_start" for r in result.racers):
            self._in_time()
            raise Stop(Outcome.DID_NOT_RUN, "did not run: a racer's worker did not start")
        self.answered = True
        return result

    def end_check(self) -> None:
        try:
            self._worker.end_check()
        except Exception:  # it runs while the check closes: never into grading
            log.warning("closing a check failed", exc_info=True)


def _setup_imported(
    cells: Sequence[NotebookNode], kinds: Sequence[str], runs: Sequence[CellRun]
) -> None:
    """`GradingFailed` when the course's setup cell (locked, and run before any cell of the
    learner's) could not import what it imports."""
    for cell, kind, run in zip(cells, kinds, runs, strict=False):
        if kind != "locked":
            return  # the learner's code ran first: whatever follows is the submission's
        if cell.get("id") == notebooks.SETUP_ID:
            if run.status is CellStatus.ERROR and run.ename in _MISSING_PACKAGE:
                raise GradingFailed(
                    f"the course's setup cell could not import what it needs ({run.ename}: "
                    f"{run.evalue}): install labkit with its `grade` extra where grading runs"
                )
            return


def _not_run(exercise: Exercise, check: Check, why: str) -> CheckResult:
    message = f"{exercise.id} · {check.name}: did not run: {why}"
    return CheckResult(check.name, Outcome.DID_NOT_RUN, message, 0, check.points, check.hidden)


def _score(exercise_id: str, result: CheckResult) -> CheckScore:
    where = "" if result.hidden else "public/"
    return CheckScore(
        name=f"{exercise_id}/{where}{result.name}",
        title=result.name,
        hidden=result.hidden,
        outcome=result.outcome,
        points=float(result.possible) if result.outcome is Outcome.PASSED else 0.0,
        max_points=float(result.possible),
        message=outputs.plain(result.message),
    )


def checked_outputs(
    solution: NotebookNode, release: NotebookNode, graded: set[str]
) -> list[outputs.Checked]:
    """The solution's saved outputs to compare: cells the solution and the release both mark
    as checked, but not an answer cell and not a check cell of an exercise graded here."""
    marked = {c.cell_id for c in outputs.checked_cells(release)}
    answers = set(notebooks.answer_ids(release))
    return [
        c
        for c in outputs.checked_cells(solution)
        if c.cell_id in marked
        and c.cell_id not in answers
        and not graded & set(checked_exercises(_source_of(solution, c.cell_id)))
    ]


def _lay_out(area: Path) -> Path:
    """`area/notebooks` (the kernel's working directory) and `area/outputs` beside it, as in
    the course, so `Path("../outputs")` works. The kernel may write only inside its working
    directory, so `outputs` is a link to a folder there (`notebooks/.outputs`, made once the
    working directory has its space)."""
    area.chmod(0o711)  # traversable by the kernel's user and the processes it starts
    scratch = area / "notebooks"
    scratch.mkdir(mode=0o711)
    (area / "outputs").symlink_to(Path("notebooks", ".outputs"), target_is_directory=True)
    return scratch


def _source_of(nb: NotebookNode, cell_id: str) -> str:
    return next((str(c.source) for c in nb.cells if c.get("id") == cell_id), "")


def checked_exercises(source: str) -> list[str]:
    """The exercises a cell checks: the literal first argument of each `check(...)` call."""
    try:
        tree = syntax.parse(source)
    except SyntaxError:
        return []
    return [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "check"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]


def names_used(source: str) -> set[str]:
    """Every name a cell's code reads (IPython lines blanked)."""
    text = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )
    try:
        tree = syntax.parse(text)
    except SyntaxError:
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _mark_cell(cell: NotebookNode) -> str:
    """After a learner cell: its top-level functions and classes become quiet."""
    one: NotebookNode = nbformat.from_dict({"cells": [cell]})  # type: ignore[no-untyped-call]
    names = sorted(ex.defined_names(one))
    return f"{_Q}({_B}.globals(), {names!r})\n" if names else "pass\n"


def _cell_notices(
    cells: Sequence[NotebookNode], runs: Sequence[CellRun], problem: str
) -> list[str]:
    """What happened to the learner's own cells, when it matters for the score (`problem`:
    why the run stopped)."""
    notices = []
    for cell, run in zip(cells, runs, strict=False):
        name = f"cell `{cell.get('id')}`" if cell.get("id") else "a cell you added"
        if run.status is CellStatus.TIMEOUT:
            notices.append(f"{name} did not finish within the time limit and was interrupted")
        elif run.status is CellStatus.DEAD:
            notices.append(
                f"the kernel died while running {name} (os._exit, a crash or a resource "
                "limit): later cells did not run"
            )
        elif run.status is CellStatus.CUT:
            notices.append(f"grading stopped at {name}: {problem}; later cells did not run")
        elif run.status is CellStatus.ERROR:
            what = "ran out of memory" if run.ename == "MemoryError" else "raised"
            said = " ".join(f"{run.ename}: {run.evalue}".split())  # one line, whatever it holds
            notices.append(outputs.plain(f"{name} {what}: {said}"[:300]))
    return notices


def _cell_not_run(run: CellRun, execution: Execution) -> str:
    if run.status is CellStatus.NOT_RUN:
        return f"did not run: {execution.problem or 'an earlier cell stopped the kernel'}"
    return _NOT_RUN.get(run.status, "did not run")


def held_back(
    cell_id: str,
    source: str,
    exercises: Sequence[ex.GradedExercise],
    results: Mapping[str, Sequence[CheckResult]],
) -> str:
    """Why a checked cell's output does not count yet (or ""): it shows an exercise's
    functions at work, and a check that exercises what it shows did not pass. Which checks
    those are, the exercise declares per cell (`GradedExercise.outputs`); a cell it does not
    declare that names a contract function needs every check of the exercise. So an answer
    no check accepts, or one that passes a check the cell does not show, gains nothing from
    outputs printed on its behalf (a hook in the kernel printing the solution's text)."""
    shown = names_used(source)
    for exercise in exercises:
        outcomes = {r.name: r.outcome for r in results.get(exercise.id, ())}
        needed = exercise.outputs.get(cell_id)
        if needed is None:
            needed = tuple(outcomes) if shown & set(exercise.contract) else ()
        failing = [name for name in needed if outcomes.get(name) is not Outcome.PASSED]
        if failing:
            named = ", ".join(f"'{name}'" for name in failing[:3])
            more = f" and {len(failing) - 3} more" if len(failing) > 3 else ""
            return (
                f"cell `{cell_id}` shows your answer to {exercise.id} at work: its output "
                f"counts once the checks of what it shows pass ({named}{more})"
            )
    return ""


def _output_scores(
    checked: Sequence[outputs.Checked],
    cells: Sequence[NotebookNode],
    runs: Sequence[CellRun],
    course: Course,
    execution: Execution,
    exercises: Sequence[ex.GradedExercise],
    results: Mapping[str, Sequence[CheckResult]],
) -> list[CheckScore]:
    # The last learner cell with the id counts (a duplicated cell overrides the first copy).
    by_id = {str(c.get("id")): i for i, c in enumerate(cells) if c.get("id")}
    scores = []
    for ref in checked:
        index = by_id.get(ref.cell_id)
        if index is None:
            outcome = Outcome.NOT_ATTEMPTED
            message = f"cell `{ref.cell_id}` is missing (deleted, or no longer a code cell)"
        elif runs[index].status in (CellStatus.OK, CellStatus.ERROR):
            verdict = outputs.compare(
                ref.cell_id, ref.outputs, runs[index].outputs, course.patterns
            )
            outcome = Outcome.PASSED if verdict is None else Outcome.INCORRECT
            message = verdict or ""
            held = held_back(ref.cell_id, cells[index].source, exercises, results)
            if outcome is Outcome.PASSED and held:
                outcome, message = Outcome.NOT_ATTEMPTED, held
        else:
            outcome, message = (
                Outcome.DID_NOT_RUN,
                _cell_not_run(runs[index], execution),
            )
        scores.append(
            CheckScore(
                name=f"{OUTPUTS_SECTION}/{ref.cell_id}",
                title=f"output of cell `{ref.cell_id}`",
                hidden=False,
                outcome=outcome,
                points=1.0 if outcome is Outcome.PASSED else 0.0,
                max_points=1.0,
                message=message,
            )
        )
    return scores
