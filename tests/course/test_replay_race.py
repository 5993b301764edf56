"""The notebook's race report: the reference's in-memory store lets two processes both claim
one nonce, the exercise's reference transaction lets exactly one, and a stub is reported as
not attempted."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import exercise_solutions as sol
import pytest

from labkit.course.exercises.checks import Checker
from labkit.course.exercises.fixtures import add_notes, connect, create_ex1_schema, note_ids
from labkit.course.exercises.registry import EXERCISES
from labkit.course.lessons.replay_race import (
    PROCESS_REPLAY,
    RaceReport,
    memory_claim_and_delete,
    race_one_nonce,
)


def test_the_in_memory_store_is_per_process_so_both_racers_win() -> None:
    before = len(PROCESS_REPLAY)
    report = race_one_nonce(memory_claim_and_delete)
    assert report.processes
    assert report.outcomes == ("returned True", "returned True")
    assert report.winners == 2 and report.deleted == 2 and report.notes_left == ()
    assert report.claims == 0  # the claims lived in the racers' memory, never in the database
    assert len(PROCESS_REPLAY) == before  # the racers' stores were their own, not this one
    assert "NOT exactly once" in str(report)


def test_one_transaction_lets_exactly_one_racer_win() -> None:
    report = race_one_nonce(sol.claim_and_delete)
    assert report.processes
    assert sorted(report.outcomes) == ["returned False", "returned True"]
    assert report.exactly_once and len(report.notes_left) == 1 and report.claims == 1
    assert str(report).splitlines()[1:] == [
        "racers:          1 returned False, 1 returned True",
        "notes deleted:   1 of 2 (one confirmation)",
        "claims recorded: 1",
        "verdict:         exactly once",
    ]


def test_the_stub_is_reported_as_not_attempted() -> None:
    report = race_one_nonce(sol.stub)
    assert report.winners == 0 and report.deleted == 0
    assert str(report).splitlines()[1] == "racers:          2 still the starter stub"
    assert str(report).endswith("not attempted: write the function first, then race it again")


def test_in_one_process_the_memory_store_refuses_the_second_claim() -> None:
    conn = connect(":memory:")
    create_ex1_schema(conn)
    add_notes(conn, [(n, f"file:///work/notes/{n}.md", n) for n in ("note-7", "note-8")])
    nonce = "n-in-one-process"
    first = memory_claim_and_delete(conn, "alice", nonce, "note-7", 1_800_000_300.0)
    second = memory_claim_and_delete(conn, "alice", nonce, "note-8", 1_800_000_300.0)
    assert (first, second) == (True, False) and note_ids(conn) == ["note-8"]
    conn.close()


def test_a_report_names_threads_and_why() -> None:
    report = RaceReport(("returned True", "returned False"), 1, ("note-8",), 1, False, "a closure")
    assert str(report).splitlines()[0] == "raced in:        two threads (not processes: a closure)"


RACE_CHECK = "two processes race"


def race_check_passes(fn: Callable[..., Any]) -> bool:
    """The public check's verdict on the race alone (ex1's other checks left out)."""
    ex1 = EXERCISES["ex1"]
    only_race = dataclasses.replace(
        ex1, checks=tuple(c for c in ex1.checks if c.name == RACE_CHECK)
    )
    results = Checker({"ex1": only_race}, namespace=dict).check("ex1", claim_and_delete=fn).results
    # The exercise's safety result rides along with any check run; the race's own decides.
    (result,) = (r for r in results if r.name == RACE_CHECK)
    return result.passed


@pytest.mark.parametrize(
    "fn",
    [
        sol.claim_and_delete,
        sol.replay_left_open,
        sol.raises_on_replay,
        sol.forgets_return,
        sol.wrong_table,
        memory_claim_and_delete,
    ],
    ids=lambda fn: fn.__name__,
)
def test_the_verdict_agrees_with_the_public_race_check(fn: Callable[..., Any]) -> None:
    report = race_one_nonce(fn)
    assert report.exactly_once == race_check_passes(fn), str(report)
    if not report.exactly_once:
        assert "NOT exactly once" in str(report).splitlines()[-1]


def test_a_racer_that_left_its_transaction_open_is_named() -> None:
    report = race_one_nonce(sol.replay_left_open)
    assert report.winners == 1 and report.deleted == 1  # the notes alone look right
    assert str(report).splitlines()[-1] == (
        "verdict:         NOT exactly once: a racer left its transaction open (no COMMIT or "
        "ROLLBACK)"
    )
