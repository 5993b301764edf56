"""How strong the checks are, measured by mutation testing (`labkit course mutants`).

Each exercise's reference answer (the answer cells of its solution notebook) is changed one
small edit at a time with mutmut's mutation operators (a comparison flipped, a constant
changed, `and` for `or`, a keyword argument dropped, ...), and every such mutant is graded by
the exercise's public and hidden checks, in check workers as grading runs them (unconfined
jobs: the code is the course's own). A mutant that loses a point is caught. Some mutants
change nothing a caller can observe (a string no one reads, a bound never reached): the
exercise declares those in its unit (`Exercise.equivalent_mutants`), each with the reason, and
they are left out of the share. The share of the other mutants caught is the checks' strength.

mutmut (the `test` extra) is imported only when mutants are made. Must not import a widget
toolkit.
"""

from __future__ import annotations

import difflib
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from nbformat import NotebookNode

from labkit.course.exercises.trial import Equivalent, Outcome
from labkit.grade import notebooks
from labkit.grade.containment import Mode
from labkit.grade.deadline import Deadline
from labkit.grade.graded_exercises import GradedExercise
from labkit.grade.grader import Course, JobWorkers, Workers, check_exercise
from labkit.grade.kernel import Limits, jobs_for, sandbox_mode

# The share the course holds its checks to, in every exercise.
GOAL: Final = 95.0
# One mutant's checks, in all (a mutant that loops forever is stopped by each call's bound).
MUTANT_SECONDS: Final = 300.0


class MutmutMissing(RuntimeError):
    """mutmut is not installed (it comes with labkit's `test` extra)."""


@dataclass(frozen=True)
class Mutant:
    """The reference answer with one edit: in answer cell `cell` (0-based), line `line`
    (1-based) reads `becomes` instead of `was`; `sources` are the worker's sources (the
    setup imports, then the answer cells, this one mutated)."""

    exercise: str
    cell: int
    line: int
    was: str
    becomes: str
    sources: tuple[str, ...]

    @property
    def change(self) -> str:
        where = f"cell {self.cell + 1} line {self.line}"
        return f"{where}: {self.was.strip()} -> {self.becomes.strip()}"

    def matches(self, equivalent: Equivalent) -> bool:
        return (self.was.strip(), self.becomes.strip()) == (
            equivalent.was.strip(),
            equivalent.becomes.strip(),
        )


@dataclass(frozen=True)
class Verdict:
    """What the checks made of one mutant: the checks it did not pass (`lost`, by name, with
    the first one's message), and the declared equivalence it matches, if any."""

    mutant: Mutant
    lost: tuple[str, ...]
    message: str
    equivalent: Equivalent | None

    @property
    def caught(self) -> bool:
        return bool(self.lost)


@dataclass(frozen=True)
class Strength:
    """One exercise's mutants and what the checks made of them. `stale` are declared
    equivalents no mutant matches any more, or that a check now catches (either way the
    declaration is wrong and must go)."""

    exercise: str
    verdicts: tuple[Verdict, ...]
    stale: tuple[Equivalent, ...]

    @property
    def counted(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.equivalent is None]

    @property
    def survivors(self) -> list[Verdict]:
        return [v for v in self.counted if not v.caught]

    @property
    def equivalent(self) -> int:
        return len(self.verdicts) - len(self.counted)

    @property
    def caught(self) -> int:
        return sum(1 for v in self.counted if v.caught)

    @property
    def percent(self) -> float:
        counted = len(self.counted)
        return 100.0 * self.caught / counted if counted else 100.0

    @property
    def holds(self) -> bool:
        return self.percent >= GOAL and not self.stale


def edits(source: str) -> list[tuple[int, str, str, str]]:
    """Every single-edit mutant of `source` that mutmut's operators make, as (line, the line
    before, the line after, the whole mutated source); edits that change no text are left
    out, and each distinct mutated source comes once."""
    try:
        import libcst as cst
        from libcst.metadata import MetadataWrapper
        from mutmut.mutation.file_mutation import MutationVisitor
        from mutmut.mutation.mutators import mutation_operators
        from mutmut.mutation.pragma_handling import IgnoredCode
    except ImportError as error:
        raise MutmutMissing(
            f"mutation testing needs mutmut ({error}); install labkit with the `test` extra"
        ) from None
    visitor = MutationVisitor(mutation_operators, IgnoredCode(set(), set(), set()))
    module = MetadataWrapper(cst.parse_module(source)).visit(visitor)
    before = source.splitlines()
    seen = {source}
    made = []
    for mutation in visitor.mutations:
        mutated = module.deep_replace(mutation.original_node, mutation.mutated_node)
        if not isinstance(mutated, cst.Module) or mutated.code in seen:
            continue
        seen.add(mutated.code)
        after = mutated.code.splitlines()
        line, was, becomes = _changed_line(before, after)
        made.append((line, was, becomes, mutated.code))
    return made


def _changed_line(before: list[str], after: list[str]) -> tuple[int, str, str]:
    """The first line that differs, as (its number, the text before, the text after); an
    edit spanning lines shows them joined."""
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            return i1 + 1, " ".join(before[i1:i2]), " ".join(after[j1:j2])
    return 0, "", ""


def mutants_of(graded: GradedExercise, solution: NotebookNode) -> list[Mutant]:
    """Every mutant of the exercise's reference answer in `solution`."""
    setup = notebooks.setup_imports(solution)
    answers = notebooks.answer_sources(solution)
    found = []
    for cell, source in enumerate(answers):
        for line, was, becomes, mutated in edits(source):
            sources = (setup, *answers[:cell], mutated, *answers[cell + 1 :])
            found.append(Mutant(graded.id, cell, line, was, becomes, sources))
    return found


def judge(
    course: Course,
    graded: GradedExercise,
    mutant: Mutant,
    workers: Workers,
    solution: NotebookNode,
    work: Path,
) -> Verdict:
    """Grade `mutant` with every check of its exercise, against the reference in `solution`."""
    area = Path(tempfile.mkdtemp(prefix="mutant-", dir=work))
    try:
        area.chmod(0o711)  # traversable by the workers' user
        checks = area / "checks"
        checks.mkdir(mode=0o711)
        results = check_exercise(
            course, graded, mutant.sources, workers, checks, Deadline(MUTANT_SECONDS), solution
        )
    finally:
        shutil.rmtree(area, ignore_errors=True)
    lost = [r for r in results if r.outcome is not Outcome.PASSED]
    equivalent = next(
        (e for e in course.exercise(graded).equivalent_mutants if mutant.matches(e)), None
    )
    return Verdict(mutant, tuple(r.name for r in lost), lost[0].message if lost else "", equivalent)


def measure(
    course: Course,
    exercises: Sequence[GradedExercise],
    *,
    workers: Workers | None = None,
    jobs: int = 2,
    progress: Callable[[Verdict, int, int], None] | None = None,
) -> list[Strength]:
    """The strength of the checks of each of `exercises`, mutants graded `jobs` at a time."""
    workers = workers or unconfined_workers()
    work = Path(tempfile.mkdtemp(prefix="labkit-mutants-"))
    work.chmod(0o711)
    try:
        plans = []
        for graded in exercises:
            solution = course.solutions[course.exercise(graded).notebook]
            plans.append((graded, solution, mutants_of(graded, solution)))
        total = sum(len(found) for _, _, found in plans)
        done = 0
        strengths = []
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for graded, solution, found in plans:
                verdicts = []
                judging = [
                    pool.submit(judge, course, graded, m, workers, solution, work) for m in found
                ]
                for verdict in (future.result() for future in judging):
                    done += 1
                    if progress is not None:
                        progress(verdict, done, total)
                    verdicts.append(verdict)
                strengths.append(_strength(course, graded, verdicts))
        return strengths
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _strength(course: Course, graded: GradedExercise, verdicts: Iterable[Verdict]) -> Strength:
    verdicts = tuple(verdicts)
    declared = course.exercise(graded).equivalent_mutants
    matched = {v.equivalent for v in verdicts if v.equivalent is not None and not v.caught}
    stale = tuple(e for e in declared if e not in matched)
    return Strength(graded.id, verdicts, stale)


def unconfined_workers(limits: Limits | None = None) -> JobWorkers:
    """Check workers as `labkit check` runs them: unconfined jobs (the course's own code)."""
    limits = limits or Limits()
    return JobWorkers(
        jobs_for(limits, Mode.UNCONFINED),
        sandbox=sandbox_mode(),
        call_timeout=float(limits.cell_timeout),
    )


def table(strengths: Sequence[Strength]) -> str:
    """The strength table, then each survivor and each stale declaration (Markdown)."""
    lines = [
        "| exercise | mutants | declared equivalent | caught | survived | strength |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s in strengths:
        lines.append(
            f"| {s.exercise} | {len(s.verdicts)} | {s.equivalent} | {s.caught} | "
            f"{len(s.survivors)} | {s.percent:.1f}% |"
        )
    for s in strengths:
        for v in s.survivors:
            lines.append(f"\n{s.exercise} survivor: {v.mutant.change}")
        for e in s.stale:
            lines.append(
                f"\n{s.exercise}: the declared equivalent {e.was.strip()} -> "
                f"{e.becomes.strip()} matches no surviving mutant: remove it"
            )
    return "\n".join(lines) + "\n"
