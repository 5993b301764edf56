"""Every catalogued answer (tests/course/mistakes/exN/*.py) graded with the PUBLIC checks in
this process, as `check("exN")` grades it in a notebook.

A `# correct:` answer passes every public check. A `# mistake:` answer either fails at least
one public check with the outcome its header names and a next step containing its `next:`
phrase, or is listed in HIDDEN_ONLY with the reason the public checks cannot see it (the
grader's hidden checks are for those); a listed mistake must pass the public checks, so the
list cannot go stale and no mistake passes silently.

ex1's last check races two callers; a mistake the three quick checks already catch is judged
without the race.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mistake_catalogue import MISTAKES, answers, grade_in_process, header

from labkit.course.exercises.checks import CheckReport
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import Outcome

# Mistakes only the grader's hidden checks catch, with why the public checks cannot.
HIDDEN_ONLY: dict[str, str] = {
    "ex2/shared_template": "the public checks never keep one returned entry across two calls",
    "ex2/tidies_text": "the public message and URL have no spaces to strip or capitals to lower",
    "ex2/top_level_url": "no public check puts url at the top level of the capabilities",
    "ex4/absolute_root_not_real": "the public root is not reached through a symlink",
    "ex4/unresolved_root": "the public root is not reached through a symlink",
    "ex5/counts_up": "the public next_id() hands out consecutive ids, so counting up matches",
    "ex5/drops_other_methods": "the public entries are only elicitation/create and roots/list",
    "ex5/mode_not_form": "no public entry is an elicitation without a mode",
    "ex5/one_elicitation_id": "no public map has two URL-mode entries",
    "ex5/sorted_keys": "the public maps' keys are already in sorted order",
}

# Advice that would lead a learner to swallow an exception.
SWALLOWING = ("instead of letting the exception escape", "catch every", "except Exception")

CORRECT = [a for a in answers("ex[1-5]/*.py") if header(a).correct]
MISTAKEN = [a for a in answers("ex[1-5]/*.py") if not header(a).correct]


def _id(answer: Path) -> str:
    return f"{answer.parent.name}/{answer.stem}"


def _caught(report: CheckReport, outcome: Outcome | None, phrase: str) -> bool:
    return any(r.outcome is outcome and phrase in r.message for r in report.failed)


def _grade_mistake(answer: Path, scratch: Path) -> CheckReport:
    """The public checks for a mistake; for ex1, the race only when the quick checks do not
    already catch it as its header says."""
    exercise_id, body = answer.parent.name, answer.read_text()
    if exercise_id != "ex1" or _id(answer) in HIDDEN_ONLY:
        return grade_in_process(exercise_id, body, scratch)
    said = header(answer)
    quick = grade_in_process("ex1", body, scratch, EXERCISES["ex1"].checks[:-1])
    if _caught(quick, said.outcome, said.next_phrase):
        return quick
    return grade_in_process("ex1", body, scratch)


def test_every_catalogue_file_has_a_header_and_every_listed_mistake_exists() -> None:
    found = answers("ex[1-5]/*.py")
    assert len(found) > 70
    for answer in found:
        said = header(answer)  # raises on a malformed first line
        assert said.correct or (said.outcome in (Outcome.INCORRECT, Outcome.ERROR))
    names = {_id(a) for a in MISTAKEN}
    assert set(HIDDEN_ONLY) <= names, set(HIDDEN_ONLY) - names
    assert (MISTAKES / "ex1" / "sql_typo.py").is_file()


@pytest.mark.parametrize("answer", [a for a in CORRECT if a.parent.name != "ex1"], ids=_id)
def test_a_correct_answer_passes_every_public_check(answer: Path, tmp_path: Path) -> None:
    report = grade_in_process(answer.parent.name, answer.read_text(), tmp_path)
    assert report.passed, str(report)


def test_one_correct_ex1_answer_passes_every_public_check_race_included(tmp_path: Path) -> None:
    # The other correct ex1 answers race in tests/grade/test_worker.py, through both runners.
    answer = MISTAKES / "ex1" / "correct_integrity_error.py"
    report = grade_in_process("ex1", answer.read_text(), tmp_path)
    assert report.passed, str(report)


@pytest.mark.parametrize("answer", MISTAKEN, ids=_id)
def test_a_mistake_fails_a_public_check_as_its_header_says_or_is_hidden_only(
    answer: Path, tmp_path: Path
) -> None:
    said = header(answer)
    report = _grade_mistake(answer, tmp_path)
    for r in report.failed:
        for advice in SWALLOWING:
            assert advice not in r.message.partition("Next:")[2], r.message
    if _id(answer) in HIDDEN_ONLY:
        # Listed as hidden-only: the public checks must really let it through, or the entry
        # is stale and the header's outcome should be checked instead.
        assert report.passed, f"{_id(answer)} is caught publicly now:\n{report}"
        return
    assert not report.passed, f"{_id(answer)} ({said.what}) passes every public check"
    assert _caught(report, said.outcome, said.next_phrase), (
        f"{_id(answer)}: no failing check has outcome {said.outcome} with next step "
        f"containing {said.next_phrase!r}:\n{report}"
    )
