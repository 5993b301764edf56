"""A learner's practice score for one saved notebook: `labkit check NOTEBOOK`.

Owns: grading one notebook the way `labkit grade` does, less what only grading may do (the
public checks of each exercise, never the hidden ones; the solution's checked outputs compared
as grading compares them), on the learner's own machine: the kernel and the check workers run
in the unconfined containment mode (rlimits and Landlock where the kernel offers them, no
namespaces, cgroup or change of user, so no root is needed), in a temporary folder that is
removed afterwards. Its text says "practice score, not a grade" and nothing is written unless
asked (`out`: the JSON report and the feedback file).

Must not print or parse command-line arguments (the CLI does).
Must not import the command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from labkit.course.exercises.trial import Check, Outcome
from labkit.grade import batch, report
from labkit.grade.containment import Mode
from labkit.grade.graded_exercises import GRADED, GradedExercise
from labkit.grade.grader import Course
from labkit.grade.kernel import Limits
from labkit.grade.report import SubmissionReport

LABEL: Final = "practice score, not a grade"
HIDDEN_NOTE: Final = (
    "The public checks and the outputs grading compares ran on your machine; the hidden "
    "checks run only at grading."
)


@dataclass(frozen=True)
class PublicOnly(GradedExercise):
    """An exercise as the practice run grades it: its hidden checks stay for grading."""

    def checks(self) -> tuple[Check, ...]:
        return ()

    @property
    def outputs(self) -> Mapping[str, tuple[str, ...]]:
        """Each checked cell waits for the public checks of what it shows (the hidden ones
        do not run here: a cell that only they exercise counts on its output alone)."""
        public = {check.name for check in self.unit.checks}
        return {
            cell: tuple(name for name in names if name in public)
            for cell, names in self.unit.outputs.items()
        }


def course(solutions: Path) -> Course:
    """The course from `solutions`, every exercise with its public checks only."""
    public = {key: PublicOnly(e.unit) for key, e in GRADED.items()}
    return Course.load(solutions, registry=public)


def solutions_for(notebook: Path, given: Path | None) -> Path:
    """`given`, else the `solutions/` folder beside the notebook's folder (a learner copy in
    `notebooks/`), else `./solutions`."""
    if given is not None:
        return given
    beside = notebook.resolve().parent.parent / "solutions"
    return beside if beside.is_dir() else Path("solutions")


def run(notebook: Path, solutions: Path, *, limits: Limits) -> SubmissionReport:
    """The practice report of `notebook` (a failed report when it could not be run)."""
    result = batch.run([notebook], course(solutions), limits=limits, containment=Mode.UNCONFINED)
    return result.submissions[0]


def text(found: SubmissionReport) -> str:
    """What `labkit check` prints."""
    lines = [f"labkit check: {report.clean_line(found.file)}"]
    if found.status == "error":
        return "\n".join([*lines, "", f"Not checked: {report.clean(found.error)}", ""])
    lines[0] += f" (solution {found.solution})"
    score = f"{found.points:g}/{found.max_points:g} ({found.percent:g}%)"
    lines += ["", f"{LABEL.capitalize()}: {score}", HIDDEN_NOTE]
    if found.mismatch:
        lines += ["", report.clean(found.mismatch)]
    for notice in found.notices:
        lines.append(f"  - {report.clean(notice)}")
    for exercise in found.exercises:
        lines += ["", f"{exercise.id}: {exercise.points:g}/{exercise.max_points:g}"]
        said = ""
        for check in exercise.checks:
            lines.append(f"  [{check.outcome.value}] {check.title}")
            if check.outcome is Outcome.PASSED or not check.message:
                continue
            # "ex1 · fresh claim: <what happened>": a message the check before gave is not
            # repeated.
            what = check.message.split(": ", 1)[-1]
            if what == said:
                lines.append("      | (the same as above)")
                continue
            said = what
            lines += [f"      | {line}".rstrip() for line in check.message.split("\n")]
    return "\n".join(lines) + "\n"


def write(found: SubmissionReport, out: Path) -> list[Path]:
    """The JSON report and the feedback text in `out` (created); the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(found.file).stem
    json_path, text_path = out / f"{stem}.practice.json", out / f"{stem}.practice.txt"
    json_path.write_text(found.model_dump_json(indent=2) + "\n", encoding="utf-8")
    text_path.write_text(text(found), encoding="utf-8")
    return [json_path, text_path]
