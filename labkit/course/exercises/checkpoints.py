"""`check("checkpoints")`: the lesson's 11 checkpoints (docs/LESSON.md section 10), run against the
real core through the reference walkthrough, one check result each.

Owns: reading the walkthrough's printed report. It calls only
`labkit.walkthrough.run_walkthrough` (its public entry, a floor below the course) with a
private stream and reads the `[ n] title` / `PASS` / `FAIL` lines, so the walkthrough can
change inside without this module following. The walkthrough runs once per `check()` call
and its 11 results are shared. Must not import ipywidgets.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from labkit.course.exercises.trial import Check, Exercise, Fail, Outcome, Trial, call_bounded

_HEADER = re.compile(r"^\[\s*(\d+)\]\s+(.*\S)\s*$")
_VERDICT = re.compile(r"^\s+(PASS|FAIL)\s*$")
_NOTE = re.compile(r"^\s+\.\.\s(.*)$")

TITLES = (
    "discovery advertises tools and no Roots",
    "tools/list returns notes_delete with its metadata",
    "request 1 returns the form",
    "request 2 carries the signed state and deletes",
    "prefix and encoded traversal both fail containment",
    "a changed title cannot reuse the state",
    "a decline leaves the note unchanged",
    "two servers: one confirmation, one deletion",
    "form declarations work; URL-only gets -32021",
    "an unsupported version gets the exact -32022",
    "a notification gets no response",
)


@dataclass
class Checkpoint:
    title: str
    passed: bool | None = None
    notes: list[str] = field(default_factory=list)


def read_walkthrough(text: str) -> dict[int, Checkpoint]:
    found: dict[int, Checkpoint] = {}
    current: Checkpoint | None = None
    for line in text.splitlines():
        if header := _HEADER.match(line):
            current = found.setdefault(int(header[1]), Checkpoint(header[2]))
        elif current is not None and (verdict := _VERDICT.match(line)):
            current.passed = verdict[1] == "PASS"
        elif current is not None and (note := _NOTE.match(line)):
            current.notes.append(note[1])
    return found


def _run(timeout: float) -> dict[int, Checkpoint]:
    from labkit.walkthrough import run_walkthrough  # loads only when checkpoints run

    out = io.StringIO()
    # Bounded like learner code: a hung walkthrough reports its checkpoints as missing.
    call_bounded(lambda: run_walkthrough(out=out), (), timeout)
    return read_walkthrough(out.getvalue())


def _checkpoint(number: int) -> Callable[[Trial], Fail | None]:
    def run(t: Trial) -> Fail | None:
        found = t.once("walkthrough", lambda: _run(t.settings.race_timeout)).get(number)
        expected = f"checkpoint {number} of the reference walkthrough should pass"
        if found is None or found.passed is None:
            t.stop(
                Outcome.ERROR,
                f"{expected}, but the walkthrough did not report it (it crashed or took longer "
                f"than {t.settings.race_timeout:g} s). Next: run `labkit demo` and read its "
                "output.",
            )
        if found.passed:
            return None
        notes = "; ".join(found.notes) or "no detail printed"
        return Fail(
            f"{expected} ({found.title})",
            f"it failed ({notes})",
            f"run `labkit demo` and read checkpoint {number}'s requests and responses",
        )

    return run


EXERCISE = Exercise(
    id="checkpoints",
    title="The lesson's 11 checkpoints against the real core",
    checks=tuple(
        Check(
            f"checkpoint {n}: {title}",
            _checkpoint(n),
            f"checkpoint {n} of the reference walkthrough should pass",
        )
        for n, title in enumerate(TITLES, start=1)
    ),
)
