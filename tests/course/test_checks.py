"""Public checks: the four outcomes a learner meets for every implemented exercise, the
messages, the learner-only traceback, repeatability, hints, hidden checks and exercises not
available yet."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

import exercise_solutions as sol
import pytest

import labkit.course
from labkit.course.exercises.calls import is_learner_file
from labkit.course.exercises.checkpoints import read_walkthrough
from labkit.course.exercises.checks import (
    SAFETY_CHECK,
    Checker,
    CheckReport,
    CheckResult,
    HintState,
    UnknownExercise,
)
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import (
    Check,
    CheckSettings,
    Contract,
    Exercise,
    Fail,
    Outcome,
    Trial,
)

REFERENCE = {"ex1": sol.claim_and_delete, "ex3": sol.delete_note, "ex4": sol.resolve_inside}
CONTRACT = {e: EXERCISES[e].contracts[0] for e in REFERENCE}
# Every public check, and the safety points after them.
N_CHECKS = {e: len(EXERCISES[e].checks) + (EXERCISES[e].safety is not None) for e in REFERENCE}


def checker(namespace: dict[str, Any] | None = None, **settings: Any) -> Checker:
    return Checker(
        namespace=lambda: namespace or {},
        settings=CheckSettings(**settings),
        hints=HintState(),
    )


def run(exercise: str, fn: Callable[..., Any], **settings: Any) -> CheckReport:
    return checker(**settings).check(exercise, **{CONTRACT[exercise]: fn})


def by_name(report: CheckReport) -> dict[str, Any]:
    return {r.name: r for r in report.results}


@pytest.mark.parametrize("exercise", ["ex1", "ex3", "ex4"])
def test_reference_passes_every_public_check_with_an_honest_pass_line(exercise: str) -> None:
    report = run(exercise, REFERENCE[exercise])
    n = N_CHECKS[exercise]
    assert [r.outcome for r in report.results] == [Outcome.PASSED] * n, str(report)
    assert report.passed and report.outcome is Outcome.PASSED
    assert report.headline == (
        f"{exercise}: public checks passed ({n}/{n}); hidden behaviour checks run at grading"
    )
    assert "all tests passed" not in str(report).lower()
    assert report.score == report.possible > 0


WRONG = [
    # exercise, implementation, the checks it must fail, the outcome there, a phrase of the got
    (
        "ex1",
        "no_transaction",
        {"missing note keeps the nonce", "transaction closed on every path"},
        Outcome.INCORRECT,
        "now recorded",
    ),
    (
        "ex1",
        "delete_then_claim_commits",
        {
            "replay refused",
            "nonces per principal",
            "transaction closed on every path",
            "two processes race",
        },
        Outcome.INCORRECT,
        "note-8 is gone",
    ),
    ("ex1", "select_then_insert", {"two processes race"}, Outcome.INCORRECT, "note-7, note-8"),
    (
        "ex1",
        "forgets_rollback",
        {"missing note keeps the nonce", "transaction closed on every path"},
        Outcome.INCORRECT,
        "still open",
    ),
    (
        "ex1",
        "commits_missing_note",
        {"missing note keeps the nonce", "transaction closed on every path"},
        Outcome.INCORRECT,
        "now recorded",
    ),
    (
        "ex1",
        "forgets_return",
        {c.name for c in EXERCISES["ex1"].checks} | {SAFETY_CHECK},
        Outcome.INCORRECT,
        "it returned None",
    ),
    # Comparing the raw strings also lets a stored uri that does not parse through. These
    # three have no error path either: a DELETE the database refuses leaves their transaction
    # open ("an error rolls back").
    (
        "ex3",
        "string_prefix",
        {"prefix sibling kept", "a uri that does not parse", "an error rolls back"},
        Outcome.INCORRECT,
        "note-evil is gone",
    ),
    (
        "ex3",
        "no_reauthorization",
        {"unauthorized principal", "an error rolls back"},
        Outcome.INCORRECT,
        "note-1 is gone",
    ),
    (
        "ex3",
        "uri_before_transaction",
        {"moved after the form", "an error rolls back"},
        Outcome.INCORRECT,
        "note-2 is gone",
    ),
    (
        "ex3",
        "crashes_on_missing",
        {"missing note"},
        Outcome.ERROR,
        "TypeError: 'NoneType' object is not subscriptable",
    ),
    (
        "ex4",
        "lexical_only",
        {
            "file symlink to outside refused",
            "symlink inside allowed",
            "directory symlink to outside refused",
            # The loop's paired acceptance: a link that stays inside, returned unresolved.
            "a loop of links refused",
            SAFETY_CHECK,  # it returned a path outside the root
        },
        Outcome.INCORRECT,
        "returned PosixPath('<tmp>/notes/",
    ),
    (
        "ex4",
        "startswith_realpath",
        {"directory symlink to outside refused", "a loop of links refused", SAFETY_CHECK},
        Outcome.INCORRECT,
        "returned PosixPath('<tmp>/notes-private/salary.md')",
    ),
    (
        "ex4",
        "last_component_only",
        {"directory symlink to outside refused", SAFETY_CHECK},
        Outcome.INCORRECT,
        "returned PosixPath('<tmp>/notes/shared/salary.md')",
    ),
    (
        "ex4",
        "raises_value_error",
        {
            "escapes refused",
            "file symlink to outside refused",
            "directory symlink to outside refused",
        },
        Outcome.INCORRECT,
        "raised ValueError(",
    ),
]


@pytest.mark.parametrize(
    ("exercise", "impl", "failing", "outcome", "got"), WRONG, ids=[w[1] for w in WRONG]
)
def test_each_wrong_implementation_fails_the_check_written_for_its_bug(
    exercise: str, impl: str, failing: set[str], outcome: Outcome, got: str
) -> None:
    # A wider window for the check-then-act race, so a loaded CI machine still overlaps it.
    delay = 0.3 if impl == "select_then_insert" else 0.1
    report = run(exercise, getattr(sol, impl), race_statement_delay=delay)
    assert {r.name for r in report.failed} == failing, str(report)
    first = next(r for r in report.results if r.name in failing)
    assert first.outcome is outcome
    assert first.points == 0 and first.possible > 0
    assert first.message.startswith(f"{exercise} · {first.name}: ")
    assert ", but " in first.message and got in first.message
    assert "\nNext: " in first.message or ". Next: " in first.message
    assert "\x1b" not in str(report) + report._repr_markdown_()
    # The partial line counts, and the report lists each failed check with its message.
    n = N_CHECKS[exercise]
    assert report.headline == f"{exercise}: {n - len(failing)}/{n} public checks passed"
    for r in report.failed:
        assert r.message in str(report)


def test_the_lexical_escape_message_says_lexical_containment_said_inside() -> None:
    message = by_name(run("ex4", sol.lexical_only))["file symlink to outside refused"].message
    assert "lexical containment says inside" in message
    assert "<tmp>/secret.md, outside" in message


def test_the_replay_message_names_the_check_expected_got_and_next_step() -> None:
    message = by_name(run("ex1", sol.delete_then_claim_commits))["replay refused"].message
    assert message == (
        "ex1 · replay refused: a second claim of nonce 'n-1' (already recorded) should return "
        "False and leave note-8 in place, but note-8 is gone. Next: make the claim fail when the "
        "nonce is already recorded, and undo anything done before that."
    )


def test_an_exception_shows_only_the_learners_frames_and_the_verbatim_error() -> None:
    report = run("ex1", sol.wrong_table)
    result = by_name(report)["fresh claim"]
    assert result.outcome is Outcome.ERROR
    lines = result.message.splitlines()
    assert 'exercise_solutions.py", line ' in lines[1] and lines[1].endswith(", in wrong_table")
    assert lines[2].strip().startswith('conn.execute("INSERT INTO claim VALUES')
    assert lines[3] == "sqlite3.OperationalError: no such table: claim"
    assert lines[4].startswith("Next: ")
    for hidden_frame in ("labkit/course", "threading.py", "Traceback (most recent call last)"):
        assert hidden_frame not in result.message
    # The same learner-only traceback comes back from the spawned racers.
    race = by_name(report)["two processes race"]
    assert race.outcome is Outcome.ERROR
    assert "sqlite3.OperationalError: no such table: claim" in race.message
    assert "in wrong_table" in race.message and "labkit/course" not in race.message


@pytest.mark.parametrize(
    ("exercise", "impl"),
    [
        ("ex1", sol.claim_and_delete),
        ("ex1", sol.no_transaction),
        ("ex3", sol.string_prefix),
        ("ex4", sol.lexical_only),
    ],
)
def test_the_same_code_gets_the_same_report_twice(exercise: str, impl: Callable[..., Any]) -> None:
    one = checker()
    first = one.check(exercise, **{CONTRACT[exercise]: impl})
    second = one.check(exercise, **{CONTRACT[exercise]: impl})
    assert first.to_dict() == second.to_dict()
    json.dumps(first.to_dict())  # the grader's JSON report


@pytest.mark.parametrize("exercise", ["ex1", "ex3", "ex4"])
def test_an_undefined_name_is_not_attempted(exercise: str) -> None:
    report = checker(namespace={"something_else": 1}).check(exercise)
    assert [r.outcome for r in report.results] == [Outcome.NOT_ATTEMPTED] * N_CHECKS[exercise]
    assert report.outcome is Outcome.NOT_ATTEMPTED and not report.passed
    assert (
        f"`{CONTRACT[exercise]}` is not defined in this notebook yet" in report.results[0].message
    )
    assert report.score == 0


@pytest.mark.parametrize("exercise", ["ex1", "ex3", "ex4"])
def test_the_starter_stub_is_not_attempted(exercise: str) -> None:
    def stub(*args: Any) -> Any:
        raise NotImplementedError()  # learner: the stub line the course build writes

    report = checker(namespace={CONTRACT[exercise]: stub}).check(exercise)
    assert [r.outcome for r in report.results] == [Outcome.NOT_ATTEMPTED] * N_CHECKS[exercise]
    assert "still raises NotImplementedError (the starter stub)" in report.results[0].message


def test_the_namespace_is_read_and_a_keyword_overrides_it() -> None:
    from_namespace = checker(namespace={"resolve_inside": sol.resolve_inside}).check("ex4")
    assert from_namespace.passed
    overridden = checker(namespace={"resolve_inside": sol.lexical_only}).check(
        "ex4", resolve_inside=sol.resolve_inside
    )
    assert overridden.passed


def test_the_module_level_check_reads_main_and_says_not_attempted_here() -> None:
    # pytest's __main__ defines no learner function.
    report = labkit.course.check("ex4")
    assert report.outcome is Outcome.NOT_ATTEMPTED


def test_misuse_gets_a_clear_error() -> None:
    with pytest.raises(UnknownExercise, match="unknown exercise 'ex9'; known exercises: ex1, ex2"):
        checker().check("ex9")
    with pytest.raises(TypeError, match="ex1 defines claim_and_delete, not claim"):
        checker().check("ex1", claim=sol.claim_and_delete)


def test_a_hung_call_is_cut_at_the_time_bound_and_reported_as_an_error() -> None:
    release = threading.Event()

    def hangs(root: Any, relative: str) -> Any:
        release.wait(30)
        return None

    try:
        report = run("ex4", hangs, call_timeout=0.2)
    finally:
        release.set()
    first = report.results[0]
    assert first.outcome is Outcome.ERROR
    assert "did not return within 0.2 s" in first.message and "Next: " in first.message


def test_an_exercise_without_checks_says_not_available_yet() -> None:
    pending = Exercise(
        id="ex9",
        title="later",
        contract=Contract("later() -> None"),
        pending="not yet. Next: wait.",
    )
    c = Checker({"ex9": pending}, namespace=dict, settings=CheckSettings(), hints=HintState())
    report = c.check("ex9")
    assert not report.available and not report.passed and report.outcome is None
    assert report.results == ()
    assert "not yet. Next: wait." in str(report)
    assert str(c.hint("ex9")) == "ex9: no hints for this exercise yet."


def test_hints_are_revealed_one_at_a_time() -> None:
    c = checker()
    seen = [str(c.hint("ex1")) for _ in range(4)]
    assert seen[0].startswith("ex1 · hint 1/3: ")
    assert seen[1].startswith("ex1 · hint 2/3: ")
    assert seen[2].startswith("ex1 · hint 3/3: ")
    assert seen[3] == ("ex1: no more hints (you have seen all 3); hint('ex1', n) shows one again.")
    assert str(c.hint("ex1", 2)) == seen[1]
    assert str(c.hint("ex3")).startswith("ex3 · hint 1/3: ")  # per exercise
    assert str(c.hint("ex4", 3)).startswith("ex4 · hint 3/3: ")
    assert str(c.hint("ex4")).startswith("ex4: no more hints")
    assert str(c.hint("ex2")).startswith("ex2 · hint 1/3: ")
    with pytest.raises(ValueError, match="ex1 has hints 1 to 3, not 4"):
        c.hint("ex1", 4)


def test_every_implemented_exercise_has_three_graded_hints_that_do_not_give_the_code() -> None:
    for exercise in ("ex1", "ex3", "ex4"):
        hints = EXERCISES[exercise].hints
        assert len(hints) == 3
        assert all("def " not in h for h in hints)


def test_hidden_checks_come_from_the_grader_and_show_only_their_message() -> None:
    def root_itself(t: Trial) -> Fail | None:
        value = t.call("resolve_inside", t.tempdir(), ".")
        return None if value == t.tempdir().resolve() else Fail("x", "y", "z")

    def secret_rule(t: Trial) -> Fail | None:
        return Fail("a hidden expectation", "something else happened", "think about it")

    grader = Checker(
        namespace=dict,
        extra_checks={
            "ex4": [
                Check("root itself", root_itself, "root itself", hidden=True),
                Check("secret", secret_rule, "s", hidden=True),
            ]
        },
    )
    report = grader.check("ex4", resolve_inside=sol.resolve_inside)
    hidden = [r for r in report.results if r.hidden]
    assert [r.name for r in hidden] == ["root itself", "secret", SAFETY_CHECK]
    # Six public checks, two hidden ones and the safety points (4), counted with the hidden.
    assert report.headline == "ex4: 8/9 checks passed (6 public, 3 hidden); 11/12 points"
    assert hidden[1].message == (
        "ex4 · secret: a hidden expectation, but something else happened. Next: think about it."
    )
    assert "secret_rule" not in str(report)  # never the hidden check's source
    # The exercise itself is untouched: the public run still has its own checks only.
    public = checker().check("ex4", resolve_inside=sol.resolve_inside)
    assert len(public.results) == N_CHECKS["ex4"]


def test_a_bug_in_a_check_is_not_blamed_on_the_learner() -> None:
    def broken(t: Trial) -> Fail | None:
        raise RuntimeError("fixture exploded")

    grader = Checker(namespace=dict, extra_checks={"ex4": [Check("broken", broken, "b")]})
    result = by_name(grader.check("ex4", resolve_inside=sol.resolve_inside))["broken"]
    assert result.outcome is Outcome.ERROR
    assert "the check itself failed (RuntimeError: fixture exploded)" in result.message


def test_markdown_escapes_learner_text_and_plain_text_has_no_markup() -> None:
    def raises_with_backticks(root: Any, relative: str) -> Any:
        raise KeyError("```*not markdown*```")

    report = run("ex4", raises_with_backticks)
    markdown = report._repr_markdown_()
    assert markdown.startswith(f"**ex4: 0/{N_CHECKS['ex4']} public checks passed**")
    assert "````text\n" in markdown  # a fence longer than the learner's backticks
    assert "**" not in str(report)


def test_checkpoints_run_the_reference_walkthrough_as_eleven_checks() -> None:
    report = checker().check("checkpoints")
    assert len(report.results) == 11
    assert report.passed, str(report)
    assert report.results[7].name == "checkpoint 8: two servers: one confirmation, one deletion"
    # Nothing of the learner's is graded here, so no hidden checks are promised.
    assert report.headline == "checkpoints: all 11 checks passed"
    assert "hidden" not in str(report) and "hidden" not in report._repr_html_()


def test_the_html_view_escapes_messages_and_shows_code_as_code() -> None:
    failed = CheckResult(
        "fresh claim",
        Outcome.INCORRECT,
        "ex1 · fresh claim: `claim_and_delete` got <b>wrong</b> & " + "x" * 300,
        0,
        1,
    )
    report = CheckReport("ex1", "SQLite replay store", (failed,))
    view = report._repr_html_()
    assert "&lt;b&gt;wrong&lt;/b&gt; &amp;" in view and "<b>wrong</b>" not in view
    assert "<code>claim_and_delete</code>" in view and "`" not in view
    assert "break-all" not in view
    assert "ex1: 0/1 public checks passed" in view


def test_a_message_shared_by_several_checks_is_shown_once_naming_them() -> None:
    stub = "`claim_and_delete` still raises NotImplementedError (the starter stub). Next: write it."
    results = tuple(
        CheckResult(name, Outcome.NOT_ATTEMPTED, f"ex1 · {name}: {stub}", 0, 1)
        for name in ("fresh claim", "replay refused", "two processes race")
    )
    report = CheckReport("ex1", "SQLite replay store", results)
    for view in (report._repr_html_(), report._repr_markdown_()):
        assert view.count("still raises NotImplementedError") == 1, view
        assert "fresh claim, replay refused, two processes race" in view


def test_a_traceback_is_a_wrapping_block_shown_once() -> None:
    trace = '  File "cell", line 3, in f\n    x = 1 / 0\nZeroDivisionError: division by zero'
    results = tuple(
        CheckResult(
            name,
            Outcome.ERROR,
            f"ex1 · {name}: {name} should work, but it raised:\n{trace}\nNext: fix that line.",
            0,
            1,
        )
        for name in ("fresh claim", "replay refused")
    )
    view = CheckReport("ex1", "SQLite replay store", results)._repr_html_()
    pre = re.search(r'<pre style="([^"]*)">', view)
    assert pre is not None, view
    assert "white-space: pre-wrap" in pre.group(1) and "word-break: normal" in pre.group(1)
    assert view.count("ZeroDivisionError") == 1 and view.count("Next: fix that line.") == 1
    assert "fresh claim should work" in view and "replay refused should work" in view
    assert "(the same error as above)" in view


def test_a_failed_checkpoint_is_read_with_its_notes() -> None:
    text = (
        "[ 1] Discovery\n   -> {}\n     PASS\n\n"
        "[ 2] tools/list\n   .. raised KeyError('x')\n     FAIL\n"
    )
    found = read_walkthrough(text)
    assert found[1].passed is True and found[2].passed is False
    assert found[2].notes == ["raised KeyError('x')"]


def test_only_the_learners_files_count_as_learner_frames() -> None:
    import sqlite3
    import threading as stdlib_module

    import nbclient

    import labkit.course.exercises.trial as checks_module

    assert set(Outcome) == {
        Outcome.PASSED,
        Outcome.INCORRECT,
        Outcome.ERROR,
        Outcome.NOT_ATTEMPTED,
        Outcome.DID_NOT_RUN,
    }
    assert is_learner_file(sol.__file__)
    assert is_learner_file("/tmp/ipykernel_0/1234.py")  # a notebook cell
    assert is_learner_file("<string>")
    for library in (checks_module, stdlib_module, sqlite3, nbclient):
        assert not is_learner_file(str(library.__file__)), library
    assert not is_learner_file("<frozen importlib._bootstrap>")
