"""The catalogue of answer cells (tests/course/mistakes/exN/*.py) and how to grade one in this
process with the public checks: shared by tests/course/test_mistakes.py and
tests/grade/test_worker.py.

Each file is one answer-cell body. Its first line is either
`# correct: <what>` or
`# mistake: <what> | outcome: <incorrect|error in your code> | next: <phrase>`,
where the phrase is what the failing check's next step must contain.
"""

from __future__ import annotations

import linecache
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.course.exercises.checks import CheckReport, InProcessRunner, run_checks
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import Check, CheckSettings, Outcome

MISTAKES = Path(__file__).resolve().parent / "mistakes"
# What the notebooks' setup cells give an answer cell.
SETUP = (
    "import copy, itertools, os, sqlite3\n"
    "from pathlib import Path\n"
    "from labkit import ProtocolError, ScopeError, authorize, contains, parse_file_uri\n"
    "from labkit.errors import MISSING_CAPABILITY\n"
)


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
    """The public checks of `exercise_id` (or `checks`) against `body` run after the setup
    cell, in this process, as `check("exN")` in a notebook does."""
    exercise = EXERCISES[exercise_id]
    namespace: dict[str, Any] = {"__name__": "__learner__"}
    text = SETUP + body
    filename = f"<answer {exercise_id}>"
    # As IPython does for a cell: tracebacks can show the answer's lines.
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), namespace)
    runner = InProcessRunner({n: namespace[n] for n in exercise.contracts if n in namespace})
    return run_checks(
        exercise,
        exercise.checks if checks is None else checks,
        runner,
        namespace.__contains__,
        CheckSettings(call_timeout=10, tmp_parent=scratch),
    )
