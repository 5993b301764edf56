"""The hidden checks (labkit/grade/hidden/exN.py), written like the public ones and judged the
same way: through a `CheckRunner`, with markers for arguments and data for answers.

The course's reference answers pass every hidden check in this process and through the check
worker; every catalogued wrong answer (tests/course/mistakes/exN) loses points on the public
and hidden checks together, and every correct one passes them all; the race mistakes fail the
six-racer race through real worker processes; a stub is not attempted; objects that forge
equality and a function that reads its caller's frame fail.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from grade.grade_helpers import (
    MISTAKES,
    judge_in_process,
    judge_in_worker,
    reference_answers,
    reference_runner,
)
from labkit.course.exercises.checks import (
    SAFETY_CHECK,
    Checker,
    CheckReport,
    HintState,
    InProcessRunner,
    run_checks,
)
from labkit.course.exercises.race import RaceResult, RaceSpec
from labkit.course.exercises.registry import EXERCISES as COURSE
from labkit.course.exercises.registry import graded
from labkit.course.exercises.trial import Check, CheckSettings, Outcome
from labkit.grade.graded_exercises import GRADED
from labkit.legacy import to_legacy_requests
from labkit.url_mode import url_elicitation

IDS = [e.id for e in graded()]
# Each hidden check's points, from the exercises' declarations (the grade's weight of each).
POINTS = {e: {c.name: c.points for c in GRADED[e].checks()} for e in IDS}
# ex1's race mistakes: the six-racer race exists to catch them.
RACE_MISTAKES = ("check_then_act", "deferred_begin", "select_then_delete_autocommit")
SWALLOW = re.compile(r"\b(except|catch|swallow|suppress|ignore|pass)\b", re.IGNORECASE)
CONTRACTS = {e: COURSE[e].contracts[0] for e in IDS}


def hidden(exercise_id: str) -> tuple[Check, ...]:
    return GRADED[exercise_id].checks()


def every_check(exercise_id: str) -> tuple[Check, ...]:
    return COURSE[exercise_id].checks + hidden(exercise_id)


def answer_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


CATALOGUE = sorted(MISTAKES.glob("ex*/*.py"))
IN_PROCESS = list(CATALOGUE)
THROUGH_WORKER = [
    p
    for p in IN_PROCESS
    if p.parent.name != "ex1" or p.stem.startswith("correct") or p.stem in RACE_MISTAKES
]


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    tmp_path.chmod(0o777)
    yield tmp_path


def outcomes(report: CheckReport) -> dict[str, Outcome]:
    return {r.name: r.outcome for r in report.results}


def hidden_outcomes(report: CheckReport) -> dict[str, Outcome]:
    return {r.name: r.outcome for r in report.results if r.hidden}


def assert_well_said(report: CheckReport) -> None:
    """Every failed hidden check says expected, got and one next step, without the check's
    code and without advising to swallow an exception."""
    for r in report.results:
        if r.passed or not r.hidden or r.outcome is Outcome.NOT_ATTEMPTED:
            continue
        assert r.message.startswith(f"{report.exercise_id} · {r.name}: "), r.message
        assert "Next: " in r.message, r.message
        next_step = r.message.rsplit("Next: ", 1)[1]
        assert not SWALLOW.search(next_step), r.message
        for code in ("def ", "assert ", "CHECKS", "Trial", "t.call"):
            assert code not in r.message, r.message


# --- the tables ----------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise_id", IDS)
def test_every_hidden_check_is_a_hidden_trial_check_with_its_points(exercise_id: str) -> None:
    checks = hidden(exercise_id)
    assert all(isinstance(c, Check) and c.hidden for c in checks)
    assert all(c.points > 0 and c.rules for c in checks)
    assert all(c.expects and c.on_error for c in checks)
    public = {c.name for c in COURSE[exercise_id].checks}
    assert not public & {c.name for c in checks}  # one report, distinct names


# --- the reference -------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise_id", IDS)
def test_the_reference_passes_every_hidden_check_in_this_process(
    exercise_id: str, scratch: Path
) -> None:
    report = judge_in_process(
        exercise_id, hidden(exercise_id), reference_answers(exercise_id), scratch
    )
    assert set(outcomes(report).values()) == {Outcome.PASSED}, str(report)
    assert report.score == report.possible


@pytest.mark.parametrize("exercise_id", IDS)
def test_the_hidden_checks_leave_no_descriptor_open(exercise_id: str, scratch: Path) -> None:
    """Each check closes what it opened, the reference answer's folder of a differential check
    included (a batch, or `labkit course mutants`, runs thousands of checks in one process)."""
    judge_in_process(exercise_id, hidden(exercise_id), reference_answers(exercise_id), scratch)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        judge_in_process(exercise_id, hidden(exercise_id), reference_answers(exercise_id), scratch)
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize("exercise_id", IDS)
def test_the_reference_passes_every_hidden_check_through_the_worker(
    exercise_id: str, scratch: Path
) -> None:
    report = judge_in_worker(
        exercise_id, hidden(exercise_id), reference_answers(exercise_id), scratch
    )
    assert set(outcomes(report).values()) == {Outcome.PASSED}, str(report)
    assert len(report.results) == len(POINTS[exercise_id]) + 1  # and the safety points


@pytest.mark.parametrize(
    ("exercise_id", "fn"), [("ex2", url_elicitation), ("ex5", to_legacy_requests)]
)
def test_labkits_own_functions_pass_every_hidden_check(
    exercise_id: str, fn: object, scratch: Path
) -> None:
    report = run_checks(
        COURSE[exercise_id],
        hidden(exercise_id),
        InProcessRunner({CONTRACTS[exercise_id]: fn}),
        lambda name: True,
        CheckSettings(tmp_parent=scratch, examples=12),
        reference_runner(exercise_id),
    )
    assert report.passed, str(report)


# --- the catalogue -------------------------------------------------------------------------------


def judge_catalogued(report: CheckReport, answer: Path) -> None:
    header = answer.read_text().splitlines()[0]
    if answer.stem.startswith("correct"):
        assert header.startswith("# correct: ")
        assert report.passed, str(report)
        return
    assert header.startswith("# mistake: ") and "| outcome: " in header
    assert report.score < report.possible, f"{answer_id(answer)} kept every point:\n{report}"
    assert_well_said(report)


@pytest.mark.parametrize("answer", IN_PROCESS, ids=answer_id)
def test_every_catalogued_answer_is_judged_right_in_this_process(
    answer: Path, scratch: Path
) -> None:
    exercise_id = answer.parent.name
    report = judge_in_process(exercise_id, every_check(exercise_id), [answer.read_text()], scratch)
    judge_catalogued(report, answer)
    if exercise_id == "ex1" and answer.stem in RACE_MISTAKES:
        assert hidden_outcomes(report)["six racing processes"] is not Outcome.PASSED, str(report)


@pytest.mark.parametrize("answer", THROUGH_WORKER, ids=answer_id)
def test_every_catalogued_answer_is_judged_right_through_the_worker(
    answer: Path, scratch: Path
) -> None:
    exercise_id = answer.parent.name
    body = answer.read_text()
    report = judge_in_worker(exercise_id, every_check(exercise_id), [body], scratch)
    judge_catalogued(report, answer)
    if answer.stem in RACE_MISTAKES:
        assert hidden_outcomes(report)["six racing processes"] is not Outcome.PASSED, str(report)
    elif exercise_id != "ex1":  # one engine, two runners, one encoding: the same outcomes
        in_process = judge_in_process(exercise_id, every_check(exercise_id), [body], scratch)
        assert outcomes(report) == outcomes(in_process)


def test_the_hidden_checks_catch_what_the_public_ones_cannot(scratch: Path) -> None:
    """Some catalogued mistakes pass every public check; each of those fails a hidden one."""
    caught_only_by_hidden = []
    for answer in IN_PROCESS:
        exercise_id = answer.parent.name
        if answer.stem.startswith("correct") or exercise_id == "ex1":
            continue
        report = judge_in_process(
            exercise_id, every_check(exercise_id), [answer.read_text()], scratch
        )
        if all(r.passed for r in report.results if not r.hidden):
            assert not report.passed, str(report)
            caught_only_by_hidden.append(answer_id(answer))
    assert {"ex2/tidies_text", "ex4/unresolved_root", "ex5/sorted_keys"} <= set(
        caught_only_by_hidden
    )


def test_one_entry_handed_out_by_every_call_is_seen_by_identity(scratch: Path) -> None:
    # Answers travel as data, so the answer's side says whether a call returned a dict an
    # earlier call of the same check returned: same data, one object.
    (answer,) = [p for p in CATALOGUE if answer_id(p) == "ex2/shared_template"]
    for judge in (judge_in_process, judge_in_worker):
        report = judge("ex2", every_check("ex2"), [answer.read_text()], scratch)
        failed = {n: o for n, o in outcomes(report).items() if o is not Outcome.PASSED}
        assert list(failed) == ["generated requests"], str(report)
        message = next(r.message for r in report.results if r.name == "generated requests")
        assert "build a new entry on every call" in message


# --- stubs and forgeries -------------------------------------------------------------------------

SIGNATURES = {e: f"{COURSE[e].contracts[0]}({', '.join(COURSE[e].contract.params)})" for e in IDS}  # type: ignore[union-attr]


@pytest.mark.parametrize("exercise_id", IDS)
def test_a_stub_is_not_attempted(exercise_id: str, scratch: Path) -> None:
    stub = f"def {SIGNATURES[exercise_id]}:\n    raise NotImplementedError\n"
    for judge in (judge_in_process, judge_in_worker):
        report = judge(exercise_id, hidden(exercise_id), [stub], scratch)
        assert set(outcomes(report).values()) == {Outcome.NOT_ATTEMPTED}, str(report)
        assert all(
            "still raises NotImplementedError" in r.message
            for r in report.results
            if r.name != SAFETY_CHECK
        )
        assert report.score == 0


ALWAYS_EQUAL = """
class Yes({base}):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = None
"""
FORGED = {
    "ex2": ("dict", "def url_elicitation(capabilities, message, url):\n    return Yes()\n"),
    "ex3": (
        "int",
        "def delete_note(conn, authorizer, principal, workspace_uri, note_id):\n"
        "    return Yes(1)\n",
    ),
    "ex4": ("str", "def resolve_inside(root, relative):\n    return Yes(str(root))\n"),
    "ex5": (
        "list",
        "def to_legacy_requests(input_requests, next_id, new_elicitation_id):\n    return Yes()\n",
    ),
}


@pytest.mark.parametrize("exercise_id", sorted(FORGED))
def test_an_always_equal_object_is_opaque_and_fails(exercise_id: str, scratch: Path) -> None:
    base, body = FORGED[exercise_id]
    source = ALWAYS_EQUAL.format(base=base) + body
    for judge in (judge_in_process, judge_in_worker):
        report = judge(exercise_id, hidden(exercise_id), [source], scratch)
        assert Outcome.PASSED not in outcomes(report).values(), str(report)


# Reads every frame above it for a value the judge might compare with, as a learner who
# knows the checks' local names would.
FRAME_READER = """
import sys

def _peek():
    frame = sys._getframe(2)
    while frame is not None:
        for name, value in frame.f_locals.items():
            if name in ("want", "expected", "entry", "original", "requests") and type(value) in (
                dict, list
            ):
                return value
        frame = frame.f_back
    return None
"""
READERS = {
    "ex2": "def url_elicitation(capabilities, message, url):\n    return _peek()\n",
    "ex5": (
        "def to_legacy_requests(input_requests, next_id, new_elicitation_id):\n    return _peek()\n"
    ),
}


@pytest.mark.parametrize("exercise_id", sorted(READERS))
def test_a_function_reading_its_callers_frames_finds_nothing_to_copy(
    exercise_id: str, scratch: Path
) -> None:
    source = FRAME_READER + READERS[exercise_id]
    offered = tuple(POINTS[exercise_id])
    for judge in (judge_in_process, judge_in_worker):
        report = judge(exercise_id, hidden(exercise_id), [source], scratch)
        got = outcomes(report)
        assert all(got[name] is not Outcome.PASSED for name in offered), str(report)


def test_the_race_runs_six_racers_in_two_rounds(scratch: Path) -> None:
    seen: list[Sequence[tuple[object, ...]]] = []
    delays: list[float] = []

    class Counting(InProcessRunner):
        def race(self, spec: RaceSpec) -> RaceResult:
            seen.append(spec.calls)
            delays.append(spec.delay)
            return super().race(spec)

    namespace: dict[str, object] = {}
    exec("\n".join(reference_answers("ex1")), namespace)
    race = next(c for c in hidden("ex1") if c.name == "six racing processes")
    report = run_checks(
        COURSE["ex1"],
        (race,),
        Counting({"claim_and_delete": namespace["claim_and_delete"]}),
        lambda name: True,
        CheckSettings(tmp_parent=scratch),
        reference_runner("ex1"),
    )
    assert report.passed, str(report)
    assert [len(calls) for calls in seen] == [6, 6]
    assert delays == [0.02, 0.02]  # its own statement delay, not the settings' 0.1
    for calls in seen:
        assert len({c[1] for c in calls}) == 1  # one nonce
        assert len({c[2] for c in calls}) == 6  # a note each


def test_the_checker_runs_them_after_the_public_checks(scratch: Path) -> None:
    reference = reference_runner("ex2")
    assert reference is not None
    checker = Checker(
        namespace=dict,
        extra_checks={e: GRADED[e].checks() for e in IDS},
        reference={"ex2": {"url_elicitation": url_elicitation}},
        settings=CheckSettings(tmp_parent=scratch, examples=12),
        hints=HintState(),
    )
    report = checker.check("ex2", url_elicitation=url_elicitation)
    public, hidden_ = len(COURSE["ex2"].checks), len(POINTS["ex2"])
    assert [r.hidden for r in report.results] == [False] * public + [True] * (hidden_ + 1)
    assert report.passed, str(report)
