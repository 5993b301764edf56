"""The catalogue of answer cells (tests/course/mistakes/exN/*.py): what each file's first
line says about it, and grading one with the public checks in this process (the setup cell and
the runner of tests/grade/grade_helpers.py, which tests/grade/test_worker.py uses too).

Each file is one answer-cell body. Its first line is either
`# correct: <what>` or
`# mistake: <what> | outcome: <incorrect|error in your code> | next: <phrase>`,
where the phrase is what the failing check's next step must contain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grade.grade_helpers import MISTAKES, judge_in_process

from labkit.course.exercises.checks import CheckReport
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import Check, Outcome

__all__ = ["MISTAKES", "Header", "answers", "grade_in_process", "header"]


@dataclass(frozen=True)
class Header:
    """What an answer's first line says about it."""

    correct: bool
    what: str
    outcome: Outcome | None = None
    next_phrase: str = ""


def header(answer: Path) -> Header:
    first = answer.read_text().splitlines()[0]
    if first.startswith("# correct:"):
        return Header(True, first.removeprefix("# correct:").strip())
    if not first.startswith("# mistake:"):
        raise ValueError(f"{answer}: the first line names neither a mistake nor a correct answer")
    what, outcome, next_phrase = (part.strip() for part in first.split("|"))
    if not outcome.startswith("outcome: ") or not next_phrase.startswith("next: "):
        raise ValueError(f"{answer}: expected '| outcome: ... | next: ...' in {first!r}")
    return Header(
        False,
        what.removeprefix("# mistake:").strip(),
        Outcome(outcome.removeprefix("outcome: ")),
        next_phrase.removeprefix("next: "),
    )


def answers(pattern: str) -> list[Path]:
    return sorted(MISTAKES.glob(pattern))


def grade_in_process(
    exercise_id: str, body: str, scratch: Path, checks: Sequence[Check] | None = None
) -> CheckReport:
    """The public checks of `exercise_id` (or `checks`) against `body`, after the setup cell,
    in this process, as `check("exN")` in a notebook runs them."""
    chosen = EXERCISES[exercise_id].checks if checks is None else checks
    return judge_in_process(exercise_id, chosen, [body], scratch)
