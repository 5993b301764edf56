"""The ex1 race: functions from a test module travel by reference, functions defined in a
notebook's `__main__` travel by source (with their helpers and modules), and a function that
cannot travel races in threads, saying so."""

from __future__ import annotations

import importlib.util
import itertools
import linecache
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import exercise_solutions as sol
import pytest

from labkit.course.exercises.checks import InProcessRunner, run_check
from labkit.course.exercises.fixtures import add_notes, connect, create_ex1_schema
from labkit.course.exercises.race import (
    ByReference,
    BySource,
    NotPortable,
    RaceSpec,
    carry,
    race,
)
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import CheckSettings, Outcome

RACE = next(c for c in EXERCISES["ex1"].checks if c.name == "two processes race")

# A notebook cell: a helper, a module, a constant, and the contract function using them.
CELL = """\
import sqlite3

CLAIM_SQL = (
    "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
    "ON CONFLICT (principal, nonce) DO NOTHING"
)


def record_claim(conn: sqlite3.Connection, principal, nonce, expires_at) -> bool:
    return conn.execute(CLAIM_SQL, (principal, nonce, expires_at)).rowcount == 1


def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not record_claim(conn, principal, nonce, expires_at):
            conn.execute("ROLLBACK")
            return False
        if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount != 1:
            conn.execute("ROLLBACK")
            return False
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def broken_claim(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("ROLLBACK")
    return 1 / 0
"""

_cells = itertools.count(1)


@pytest.fixture
def notebook() -> Iterator[dict[str, Any]]:
    """CELL run the way IPython runs a cell: compiled under a file name that exists only in
    linecache, in a namespace whose `__name__` is `__main__`."""
    filename = f"/tmp/ipykernel_0/{next(_cells)}0001.py"
    linecache.cache[filename] = (len(CELL), None, CELL.splitlines(keepends=True), filename)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(CELL, filename, "exec"), namespace)
    try:
        yield namespace
    finally:
        linecache.cache.pop(filename, None)


def run_race(fn: Callable[..., Any], **settings: Any) -> Any:
    runner = InProcessRunner({"claim_and_delete": fn})
    return run_check(EXERCISES["ex1"], RACE, runner, CheckSettings(**settings))


def test_a_test_module_function_travels_by_reference_and_races_in_processes() -> None:
    assert isinstance(carry(sol.claim_and_delete), ByReference)
    result = run_race(sol.claim_and_delete)
    assert result.outcome is Outcome.PASSED and result.message == "ex1 · two processes race: passed"


def test_a_notebook_function_travels_by_source_with_its_helpers(notebook: dict[str, Any]) -> None:
    carrier = carry(notebook["claim_and_delete"])
    assert isinstance(carrier, BySource)
    assert [h.name for h in carrier.helpers] == ["record_claim"]
    assert carrier.helpers[0].modules == (("sqlite3", "sqlite3"),)
    assert [name for name, _ in carrier.helpers[0].values] == ["CLAIM_SQL"]
    result = run_race(notebook["claim_and_delete"])
    assert result.outcome is Outcome.PASSED and result.message == "ex1 · two processes race: passed"


def test_a_notebook_global_with_a_parameters_name_does_not_stop_the_journey(
    notebook: dict[str, Any],
) -> None:
    # A cell's `with closing(connect(...)) as conn:` leaves an unpicklable global `conn`; the
    # function's own parameter `conn` shadows it, so it must not be carried.
    notebook["conn"] = sqlite3.connect(":memory:")
    try:
        carrier = carry(notebook["claim_and_delete"])
        assert isinstance(carrier, BySource)
        assert "conn" not in [name for name, _ in carrier.values]
        result = run_race(notebook["claim_and_delete"])
        assert result.message == "ex1 · two processes race: passed"
    finally:
        notebook["conn"].close()


def test_a_notebook_functions_error_in_a_child_points_at_the_cell(
    notebook: dict[str, Any], tmp_path: Path
) -> None:
    database = tmp_path / "race.sqlite3"

    def reset() -> None:
        with connect(database) as conn:
            create_ex1_schema(conn)
            add_notes(conn, [("note-7", "file:///work/notes/a.md", "a")])

    reset()
    calls = (("alice", "n", "note-7", 1.0), ("alice", "n", "note-7", 1.0))
    spec = RaceSpec("broken_claim", database, calls, 60, lock_timeout=5, delay=0, reset=reset)
    outcome = race(notebook["broken_claim"], spec)
    assert outcome.processes
    for racer in outcome.racers:
        assert racer.kind == "raised"
        assert racer.exception == "ZeroDivisionError: division by zero"
        assert racer.frames[-1].filename.startswith("/tmp/ipykernel_0/")
        assert racer.frames[-1].line == "return 1 / 0"
        assert racer.frames[-1].name == "broken_claim"


def test_a_function_with_a_closure_races_in_threads_and_says_so() -> None:
    reference = sol.claim_and_delete

    def claim_and_delete(*args: Any) -> Any:
        return reference(*args)

    with pytest.raises(NotPortable, match="uses variables of an enclosing function"):
        carry(claim_and_delete)
    result = run_race(claim_and_delete)
    assert result.outcome is Outcome.PASSED
    assert result.message == (
        "ex1 · two processes race: passed (raced with threads because claim_and_delete uses "
        "variables of an enclosing function)"
    )


def test_a_value_that_cannot_be_pickled_is_named(notebook: dict[str, Any]) -> None:
    notebook["CLAIM_SQL"] = threading.Lock()
    with pytest.raises(NotPortable, match="record_claim uses 'CLAIM_SQL' \\(lock\\)"):
        carry(notebook["claim_and_delete"])


def test_threads_catch_the_check_then_act_race_too() -> None:
    wrong = sol.select_then_insert

    def select_then_insert(*args: Any) -> Any:
        return wrong(*args)  # a closure: cannot travel, so the race uses threads

    result = run_race(select_then_insert, race_statement_delay=0.3)
    assert result.outcome is Outcome.INCORRECT
    assert "two threads, each with its own connection" in result.message
    assert "the notes deleted are: note-7, note-8" in result.message


def test_a_racer_that_never_lets_go_is_cut_at_the_bound() -> None:
    result = run_race(sol.sleeps_holding_the_lock, race_timeout=3, lock_timeout=0.5)
    assert result.outcome is Outcome.ERROR
    assert "did not finish in time" in result.message
    assert "(the check waits at most 3 s)" in result.message


def test_a_racer_printing_protocol_lookalikes_does_not_confuse_the_race() -> None:
    result = run_race(sol.chatty)
    assert result.outcome is Outcome.PASSED and result.message == "ex1 · two processes race: passed"


def test_a_function_the_child_cannot_import_falls_back_to_threads(tmp_path: Path) -> None:
    # Importable here (registered in sys.modules) but on no path the child knows.
    source = tmp_path / "vanishing_cell.py"
    source.write_text(
        "from exercise_solutions import claim_and_delete as reference\n\n"
        "def claim_and_delete(*args):\n    return reference(*args)\n"
    )
    spec = importlib.util.spec_from_file_location("vanishing_cell", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["vanishing_cell"] = module
    try:
        spec.loader.exec_module(module)
        assert isinstance(carry(module.claim_and_delete), ByReference)
        result = run_race(module.claim_and_delete)
    finally:
        del sys.modules["vanishing_cell"]
    assert result.outcome is Outcome.PASSED
    assert result.message == (
        "ex1 · two processes race: passed (raced with threads because it could not be rebuilt "
        "in another process (ModuleNotFoundError: No module named 'vanishing_cell'))"
    )
