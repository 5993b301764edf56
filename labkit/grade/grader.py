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
  worker could not run (it did not start, or died) is "did not run", 0 points.

Output rules (a mistake costs once): a cell's saved output is compared (nbval) when the
solution opts it in and the release keeps that mark, except in an answer cell (its own output
is the learner's) and in a check cell whose exercise is graded here (`check("ex1")`: scored by
its checks). A compared cell that shows a graded exercise's function at work (it names a
contract name) earns its point only when at least one check of that exercise passed, so a
stub (or any answer no check accepts) gains nothing from outputs printed on its behalf. What
the learner's own functions print is left out of every compared output (a debug print costs
nothing); what the released cells print about them is compared.

The scratch copy is laid out as the course is: `notebooks/` (the kernel's working directory)
and `outputs/` beside it, so `Path("../outputs")` is inside the scratch area.

Collaborators are injected: the kernel runner (anything with `run(scratch, sources)`), the
check workers (`Workers`), the clock and the scratch root.

Must not print or parse command-line arguments (the batch and the CLI do).
"""

from __future__ import annotations

import ast
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import nbformat
from nbformat import NotebookNode

from labkit.course import build
from labkit.course.exercises.checks import CheckResult, InProcessRunner, run_checks
from labkit.course.exercises.race import RaceResult
from labkit.course.exercises.registry import EXERCISES as COURSE_EXERCISES
from labkit.course.exercises.trial import (
    Check,
    CheckRunner,
    CheckSettings,
    Exercise,
    Outcome,
    Stop,
)
from labkit.grade import graded_exercises as ex
from labkit.grade import launcher, notebooks, outputs
from labkit.grade.containment import KEEP_PLACEHOLDER, UID_PLACEHOLDER, Jobs
from labkit.grade.kernel import CellRun, CellStatus, Execution, KernelRunner, sandbox_mode
from labkit.grade.report import (
    OUTPUTS_SECTION,
    CheckScore,
    GradedOutcome,
    SubmissionReport,
    exercise_score,
)
from labkit.grade.worker import (
    WorkerGone,
    WorkerNotStarted,
    WorkerRunner,
    plain_spawn,
    worker_argv,
)

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
    CellStatus.ERROR: "did not run: the cell raised",
}


# A locked setup cell that fails to import: the grading environment lacks what the course
# imports (a package of the `grade` extra), which no submission can cause.
_MISSING_PACKAGE: Final = ("ModuleNotFoundError", "ImportError")


class GradingFailed(Exception):
    """Grading itself failed for this submission (not the learner's doing): "not graded"."""


class Runner(Protocol):
    def run(self, scratch: Path, sources: Sequence[str]) -> Execution: ...


class CheckWorker(CheckRunner, Protocol):
    """The learner's side of one exercise's checks (`WorkerRunner`)."""

    problem: str

    def start(self) -> frozenset[str]:
        """Start; the names the answer cells define. `WorkerGone` when it cannot start."""
        ...


class Workers(Protocol):
    """Where an exercise's checks find the learner's functions: a fresh worker per exercise,
    in `scratch`, holding `sources`; every process of it ends on leaving."""

    call_timeout: float

    def runner(
        self, scratch: Path, sources: Sequence[str]
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
    `labkit.grade.worker`, not ipykernel, so the mount view also shows that one file of
    `labkit/grade/`; and it has no total deadline of its own, only a bound per call
    (`call_timeout`), per start (`start_timeout`) and per race."""

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
            start_timeout=float(max(limits.cell_timeout, min(limits.startup_timeout, 30.0))),
            call_timeout=float(limits.cell_timeout),
        )

    @contextmanager
    def runner(self, scratch: Path, sources: Sequence[str]) -> Iterator[CheckWorker]:
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
        )
        with self.jobs.job(scratch) as job:

            def spawn(command: Sequence[str], where: Path) -> Any:
                return plain_spawn(job.command(command), where)

            runner = WorkerRunner(
                sources, argv=argv, scratch=scratch, spawn=spawn, start_timeout=self.start_timeout
            )
            try:
                yield runner
            finally:
                runner.close()


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
            course.release(stem)  # an authoring mistake is found before any grading
        return course

    def release(self, stem: str) -> NotebookNode:
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
) -> SubmissionReport:
    """`workers` defaults to the kernel runner's own jobs (`JobWorkers.of`); a runner that
    has none and no `workers` leaves every check "did not run"."""
    started = clock()
    try:
        learner = notebooks.load(path)
    except notebooks.Unreadable as error:
        return SubmissionReport.failed(path.name, str(error))
    if graded_as is not None:
        if graded_as not in course.solutions:
            return SubmissionReport.failed(
                path.name, f"--as {graded_as}: no solution notebook has that name"
            )
        found: notebooks.Match | None = notebooks.Match(graded_as, "as")
    else:
        found = notebooks.match(path, learner, course.solutions)
    if found is None:
        return SubmissionReport.failed(
            path.name,
            f"{path.name}: matches no solution notebook (by file name or by the notebook's "
            "labkit metadata)",
        )
    if workers is None and isinstance(runner, KernelRunner):
        workers = JobWorkers.of(runner)
    solution = course.solutions[found.stem]
    release = course.release(found.stem)
    restored = notebooks.restore(learner, release)
    notices = restored.notices
    if found.how == "metadata":
        notices.insert(0, f"renamed: graded as {found.stem}.ipynb (matched by its metadata)")
    mismatch = notebooks.mismatch(path, learner, found.stem)
    exercises = ex.exercises_in(solution, course.registry)
    checked = checked_outputs(solution, release, {e.id for e in exercises})
    cells = restored.cells
    sources = [QUIET_SOURCE]
    at: list[int] = []  # kernel cell index of each restored cell
    for restored_cell, kind in zip(cells, restored.kinds, strict=True):
        at.append(len(sources))
        sources.append(restored_cell.source)
        if kind != "locked":
            sources.append(_mark_cell(restored_cell))
    answers = [c.source for c, kind in zip(cells, restored.kinds, strict=True) if kind == "answer"]
    worker_sources = [notebooks.setup_imports(release), *answers]
    area = Path(tempfile.mkdtemp(prefix="sub-", dir=scratch_root))
    try:
        scratch = _lay_out(area)
        shutil.copyfile(path, scratch / "submission.ipynb")
        execution = runner.run(scratch, sources)
        if not execution.started:
            return SubmissionReport.failed(
                path.name,
                f"{path.name}: {execution.problem}",
                clock() - started,
                infrastructure=True,
            )
        mine = [execution.cells[i] for i in at]
        scores: dict[str, list[CheckScore]] = {}
        passed: dict[str, bool] = {}
        try:
            _setup_imported(cells, restored.kinds, mine)
            for exercise in exercises:
                results = check_exercise(
                    course, exercise, worker_sources, workers, area, solution=solution
                )
                scores[exercise.id] = [_score(exercise.id, r) for r in results]
                passed[exercise.id] = any(r.outcome is Outcome.PASSED for r in results)
        except GradingFailed as error:
            return SubmissionReport.failed(
                path.name, f"{path.name}: {error}", clock() - started, infrastructure=True
            )
    finally:
        shutil.rmtree(area, ignore_errors=True)
    notices += _cell_notices(cells, mine)
    output_scores = _output_scores(checked, cells, mine, course, execution, exercises, passed)
    if output_scores:
        scores[OUTPUTS_SECTION] = output_scores
    sections = [exercise_score(name, items) for name, items in scores.items()]
    points = sum(s.points for s in sections)
    most = sum(s.max_points for s in sections)
    return SubmissionReport(
        file=path.name,
        status="graded",
        solution=found.stem,
        mismatch=mismatch,
        points=points,
        max_points=most,
        percent=round(100.0 * points / most, 1) if most else 0.0,
        exercises=sections,
        notices=notices,
        sandbox=sandbox,
        seconds=round(clock() - started, 2),
    )


def check_exercise(
    course: Course,
    graded: ex.GradedExercise,
    sources: Sequence[str],
    workers: Workers | None,
    area: Path,
    *,
    solution: NotebookNode | None = None,
) -> list[CheckResult]:
    """The exercise's public then hidden checks, in this process, against a fresh worker; the
    differential ones also call the reference answer (the solution's answer cells) here."""
    exercise = course.exercise(graded)
    checks: list[Check] = [*exercise.checks, *graded.checks()]
    if workers is None:
        return [_not_run(exercise, c, "no check worker was given to the grader") for c in checks]
    reference = None if solution is None else InProcessRunner(graded.reference(solution))
    scratch = area / f"checks-{graded.id}"
    scratch.mkdir(mode=0o711)
    # The launcher leaves a folder of this mode (and the check folders in it) the grader's,
    # so the learner's side has no writable place but the files a check gives it.
    scratch.chmod(launcher.KEPT_MODE)
    with workers.runner(scratch, sources) as worker:
        try:
            defined = worker.start()
        except WorkerNotStarted as error:
            raise GradingFailed(str(error)) from None
        except WorkerGone as error:
            return [_not_run(exercise, c, str(error)) for c in checks]
        settings = CheckSettings(call_timeout=workers.call_timeout, tmp_parent=scratch)
        report = run_checks(
            exercise, checks, _Guarded(worker), defined.__contains__, settings, reference
        )
    return list(report.results)


class _Guarded:
    """The worker as the checks see it, with one rule added: a call or a race the worker could
    not run (it did not start again, or died) ends the check as "did not run"."""

    def __init__(self, worker: CheckWorker) -> None:
        self._worker = worker

    def call(self, name: str, args: Sequence[Any], timeout: float) -> Any:
        self._worker.problem = ""
        try:
            answer = self._worker.call(name, args, timeout)
        except WorkerGone as error:
            raise Stop(Outcome.DID_NOT_RUN, f"did not run: {error}") from None
        if answer is None and self._worker.problem:
            raise Stop(Outcome.DID_NOT_RUN, f"did not run: {self._worker.problem}")
        return answer

    def race(
        self,
        name: str,
        database: Path,
        calls: Sequence[tuple[Any, ...]],
        *,
        timeout: float,
        lock_timeout: float,
        delay: float,
        reset: Callable[[], None],
    ) -> RaceResult:
        result = self._worker.race(
            name,
            database,
            calls,
            timeout=timeout,
            lock_timeout=lock_timeout,
            delay=delay,
            reset=reset,
        )
        if any(r.kind == "no_start" for r in result.racers):
            raise Stop(Outcome.DID_NOT_RUN, "did not run: a racer's worker did not start")
        return result

    def end_check(self) -> None:
        self._worker.end_check()


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
    directory, so `outputs` is a link to a folder there."""
    area.chmod(0o711)  # traversable by the kernel's user and the processes it starts
    scratch = area / "notebooks"
    (scratch / ".outputs").mkdir(parents=True)
    (area / "outputs").symlink_to(Path("notebooks", ".outputs"), target_is_directory=True)
    return scratch


def _source_of(nb: NotebookNode, cell_id: str) -> str:
    return next((str(c.source) for c in nb.cells if c.get("id") == cell_id), "")


def checked_exercises(source: str) -> list[str]:
    """The exercises a cell checks: the literal first argument of each `check(...)` call."""
    try:
        tree = ast.parse(source)
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
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _mark_cell(cell: NotebookNode) -> str:
    """After a learner cell: its top-level functions and classes become quiet."""
    one: NotebookNode = nbformat.from_dict({"cells": [cell]})  # type: ignore[no-untyped-call]
    names = sorted(ex.defined_names(one))
    return f"{_Q}({_B}.globals(), {names!r})\n" if names else "pass\n"


def _cell_notices(cells: Sequence[NotebookNode], runs: Sequence[CellRun]) -> list[str]:
    """What happened to the learner's own cells, when it matters for the score."""
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
        elif run.status is CellStatus.ERROR:
            what = "ran out of memory" if run.ename == "MemoryError" else "raised"
            said = " ".join(f"{run.ename}: {run.evalue}".split())  # one line, whatever it holds
            notices.append(outputs.plain(f"{name} {what}: {said}"[:300]))
    return notices


def _cell_not_run(run: CellRun, execution: Execution) -> str:
    if run.status is CellStatus.NOT_RUN:
        return f"did not run: {execution.problem or 'an earlier cell stopped the kernel'}"
    return _NOT_RUN.get(run.status, "did not run")


def _output_scores(
    checked: Sequence[outputs.Checked],
    cells: Sequence[NotebookNode],
    runs: Sequence[CellRun],
    course: Course,
    execution: Execution,
    exercises: Sequence[ex.GradedExercise],
    passed: Mapping[str, bool],
) -> list[CheckScore]:
    # The last learner cell with the id counts (a duplicated cell overrides the first copy).
    by_id = {str(c.get("id")): i for i, c in enumerate(cells) if c.get("id")}
    scores = []
    for ref in checked:
        index = by_id.get(ref.cell_id)
        if index is None:
            outcome = GradedOutcome.NOT_ATTEMPTED
            message = f"cell `{ref.cell_id}` is missing (deleted, or no longer a code cell)"
        elif runs[index].status in (CellStatus.OK, CellStatus.ERROR):
            verdict = outputs.compare(
                ref.cell_id, ref.outputs, runs[index].outputs, course.patterns
            )
            outcome = GradedOutcome.PASSED if verdict is None else GradedOutcome.INCORRECT
            message = verdict or ""
            shown = names_used(cells[index].source)
            ungated = [e.id for e in exercises if shown & set(e.contract) and not passed.get(e.id)]
            if outcome is GradedOutcome.PASSED and ungated:
                outcome = GradedOutcome.NOT_ATTEMPTED
                message = (
                    f"cell `{ref.cell_id}` shows your answer to {ungated[0]} at work: its "
                    f"output counts once a check of {ungated[0]} passes"
                )
        else:
            outcome, message = (
                GradedOutcome.DID_NOT_RUN,
                _cell_not_run(runs[index], execution),
            )
        scores.append(
            CheckScore(
                name=f"{OUTPUTS_SECTION}/{ref.cell_id}",
                title=f"output of cell `{ref.cell_id}`",
                hidden=False,
                outcome=outcome,
                points=1.0 if outcome is GradedOutcome.PASSED else 0.0,
                max_points=1.0,
                message=message,
            )
        )
    return scores
