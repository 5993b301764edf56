"""Grading one submission: load, match, run in a confined scratch kernel, score.

Owns: the `Course` (the solutions, and beside each its released learner copy, made by the
course build's own `learner_copy`), the order of work for one submission, the output rules,
and the rule that a check that could not run is failed "did not run", never passed.

The code sent to the kernel is the restored notebook (`notebooks.restore`: every released code
cell in the release's order, the learner's code only in the answer cells and in cells the
learner added), with one grader cell first (the learner's own functions print nothing into
the compared outputs: `QUIET_SOURCE`) and one after each learner cell naming the functions it
defined; then, per exercise, one cell that loads the hidden checks from a string (their source
never touches the scratch directory), one cell running the course's public checks
(`labkit.course.exercises.checks`, when this labkit has them), then one cell per hidden check, so a
hanging check only fails itself.

Output rules (a mistake costs once): a solution cell's saved output is compared (nbval) when
the solution opts it in, except in an answer cell (its own output is the learner's) and in a
check cell whose exercise is graded here (`check("ex1")`: scored by its checks). What the
learner's own functions print is left out of every compared output (a debug print costs
nothing); what the released cells print about them is compared.

The scratch copy is laid out as the course is: `notebooks/` (the kernel's working directory)
and `outputs/` beside it, so `Path("../outputs")` is inside the scratch area.

Collaborators are injected: the kernel runner (anything with `run(scratch, sources)`), the
clock and the scratch root.

Must not print or parse command-line arguments (the batch and the CLI do).
"""

from __future__ import annotations

import ast
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import nbformat
from nbformat import NotebookNode

from labkit.course import build
from labkit.grade import graded_exercises as ex
from labkit.grade import notebooks, outputs
from labkit.grade.kernel import CellRun, CellStatus, Execution
from labkit.grade.probe import MIME, PUBLIC_MIME
from labkit.grade.report import (
    OUTPUTS_SECTION,
    CheckScore,
    GradedOutcome,
    SubmissionReport,
    exercise_score,
)

PROBE_SOURCE: Final = (Path(__file__).parent / "probe.py").read_text(encoding="utf-8")
_NS: Final = "__labkit_checks__"
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
    CellStatus.ERROR: "did not run: the grader could not load the check",
}


class Runner(Protocol):
    def run(self, scratch: Path, sources: Sequence[str]) -> Execution: ...


@dataclass(frozen=True)
class Course:
    solutions: Mapping[str, NotebookNode]
    registry: Mapping[str, ex.GradedExercise] = field(default_factory=lambda: dict(ex.EXERCISES))
    patterns: Sequence[tuple[str, str]] = field(default_factory=outputs.sanitizers)
    public: Callable[[str], Sequence[ex.PublicCheck]] = ex.course_public_checks
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


def grade(
    path: Path,
    course: Course,
    runner: Runner,
    *,
    scratch_root: Path,
    sandbox: str = "",
    graded_as: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SubmissionReport:
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
    solution = course.solutions[found.stem]
    release = course.release(found.stem)
    restored = notebooks.restore(learner, release)
    notices = restored.notices
    if found.how == "metadata":
        notices.insert(0, f"renamed: graded as {found.stem}.ipynb (matched by its metadata)")
    mismatch = notebooks.mismatch(path, learner, found.stem)
    exercises = ex.exercises_in(solution, course.registry)
    checks = ex.all_checks(exercises)
    graded_ids = {e.id for e in exercises}
    checked = [
        c
        for c in outputs.checked_cells(solution)
        if c.cell_id not in set(notebooks.answer_ids(release))
        and not graded_ids & set(checked_exercises(_source_of(solution, c.cell_id)))
    ]
    cells = restored.cells
    sources = [QUIET_SOURCE]
    at: list[int] = []  # kernel cell index of each restored cell
    for restored_cell, kind in zip(cells, restored.kinds, strict=True):
        at.append(len(sources))
        sources.append(restored_cell.source)
        if kind != "locked":
            sources.append(_mark_cell(restored_cell))
    loaders = {e.id: len(sources) + i for i, e in enumerate(exercises)}
    sources += [_loader(e) for e in exercises]
    publics = {e.id: list(course.public(e.id)) for e in exercises}
    public_cells = {}
    for e in exercises:
        if publics[e.id]:
            public_cells[e.id] = len(sources)
            sources.append(_public_cell(e))
    first_check = len(sources)
    sources += [_check_cell(c) for c in checks]
    area = Path(tempfile.mkdtemp(prefix="sub-", dir=scratch_root))
    try:
        scratch = _lay_out(area)
        shutil.copyfile(path, scratch / "submission.ipynb")
        execution = runner.run(scratch, sources)
    finally:
        shutil.rmtree(area, ignore_errors=True)
    if not execution.started:
        return SubmissionReport.failed(
            path.name, f"{path.name}: {execution.problem}", clock() - started
        )
    runs = execution.cells
    mine = [runs[i] for i in at]
    scores: dict[str, list[CheckScore]] = {}
    for exercise_id, position in public_cells.items():
        loader = runs[loaders[exercise_id]]
        run = runs[position] if loader.status is CellStatus.OK else loader
        scores[exercise_id] = _public_scores(exercise_id, publics[exercise_id], run, execution)
    for index, check in enumerate(checks):
        loader = runs[loaders[check.exercise]]
        run = runs[first_check + index] if loader.status is CellStatus.OK else loader
        scores.setdefault(check.exercise, []).append(_hidden_score(check, run, execution))
    notices += _cell_notices(cells, mine)
    output_scores = _output_scores(checked, cells, mine, course.patterns, execution)
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
                "limit): later cells and the checks did not run"
            )
        elif run.status is CellStatus.ERROR:
            what = "ran out of memory" if run.ename == "MemoryError" else "raised"
            said = " ".join(f"{run.ename}: {run.evalue}".split())  # one line, whatever it holds
            notices.append(outputs.plain(f"{name} {what}: {said}"[:300]))
    return notices


def _loader(exercise: ex.GradedExercise) -> str:
    code = PROBE_SOURCE + "\n\n" + exercise.source()
    # Builtins through the module: a learner's own `compile`, `exec` or `globals` must not
    # break grading.
    return (
        f"import builtins as {_B}\n"
        f"{_NS} = {_B}.globals().get({_NS!r}) or {{}}\n"
        f"{_NS}[{exercise.id!r}] = {{'__name__': 'labkit_check_{exercise.id}'}}\n"
        f"{_B}.exec({_B}.compile({code!r}, '<labkit check>', 'exec'), {_NS}[{exercise.id!r}])\n"
    )


def _public_cell(exercise: ex.GradedExercise) -> str:
    return f"{_NS}[{exercise.id!r}]['public']({exercise.id!r}, {_B}.globals())\n"


def _public_scores(
    exercise_id: str, expected: Sequence[ex.PublicCheck], run: CellRun, execution: Execution
) -> list[CheckScore]:
    """One score per registered public check; one that did not report is "did not run"."""
    found: dict[str, Any] = next(
        (o["data"][PUBLIC_MIME] for o in run.outputs if PUBLIC_MIME in o.get("data", {})), {}
    )
    reported = {r.get("name"): r for r in found.get("results", []) if isinstance(r, dict)}
    scores = []
    for check in expected:
        result = reported.get(check.name)
        try:
            outcome = GradedOutcome(str(result["outcome"])) if result else GradedOutcome.DID_NOT_RUN
        except ValueError:
            outcome = GradedOutcome.DID_NOT_RUN
        if outcome is GradedOutcome.DID_NOT_RUN:
            message = (
                _not_run(run, execution)
                if run.status is not CellStatus.OK
                else ("did not run: the public checks reported nothing for it")
            )
        else:
            message = str(result.get("message", "")) if result else ""
        scores.append(
            CheckScore(
                name=f"{exercise_id}/public/{check.name}",
                title=check.name,
                hidden=False,
                outcome=outcome,
                points=check.points if outcome is GradedOutcome.PASSED else 0.0,
                max_points=check.points,
                message=outputs.plain(message),
            )
        )
    return scores


def _check_cell(check: ex.HiddenCheck) -> str:
    ns = f"{_NS}[{check.exercise!r}]"
    key = f"{check.exercise}/{check.function}"
    return f"{ns}['run']({ns}[{check.function!r}], {_B}.globals(), {key!r})\n"


def _not_run(run: CellRun, execution: Execution) -> str:
    if run.status is CellStatus.NOT_RUN:
        return f"did not run: {execution.problem or 'an earlier cell stopped the kernel'}"
    return _NOT_RUN.get(run.status, "did not run: the check reported nothing")


def _hidden_score(check: ex.HiddenCheck, run: CellRun, execution: Execution) -> CheckScore:
    result = next((o["data"][MIME] for o in run.outputs if MIME in o.get("data", {})), None)
    if run.status is not CellStatus.OK or not isinstance(result, dict):
        outcome, message = GradedOutcome.DID_NOT_RUN, _not_run(run, execution)
    else:
        try:
            outcome = GradedOutcome(str(result.get("outcome")))
            message = str(result.get("message", ""))
        except ValueError:
            outcome, message = GradedOutcome.DID_NOT_RUN, "did not run: the check reported nothing"
    return CheckScore(
        name=f"{check.exercise}/{check.function}",
        title=check.title,
        hidden=True,
        outcome=outcome,
        points=check.points if outcome is GradedOutcome.PASSED else 0.0,
        max_points=check.points,
        message=outputs.plain(message),
    )


def _output_scores(
    checked: Sequence[outputs.Checked],
    cells: Sequence[NotebookNode],
    runs: Sequence[CellRun],
    patterns: Sequence[tuple[str, str]],
    execution: Execution,
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
            verdict = outputs.compare(ref.cell_id, ref.outputs, runs[index].outputs, patterns)
            outcome = GradedOutcome.PASSED if verdict is None else GradedOutcome.INCORRECT
            message = verdict or ""
        else:
            outcome, message = GradedOutcome.DID_NOT_RUN, _not_run(runs[index], execution)
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
