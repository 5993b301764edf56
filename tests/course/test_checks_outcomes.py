"""The one outcome rule for exceptions (labkit/course/exercises/trial.py's docstring), the
`difference` helper, per-failure next steps and the third hints.

A refusal raised on purpose with the wrong type or code is *incorrect* and says what was
expected, in every exercise that refuses; an exception the contract never calls for is an
*error in your code*, and only Python's own exceptions are called searchable Python text.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from labkit.course.exercises.calls import describe, raised_on_purpose
from labkit.course.exercises.checks import SAFETY_CHECK, Checker, CheckReport, HintState
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import CheckSettings, Outcome, difference
from labkit.errors import INVALID_PARAMS, ProtocolError
from labkit.url_mode import url_elicitation


def run(exercise_id: str, name: str, fn: Any, tmp_path: Path) -> CheckReport:
    checker = Checker(
        namespace=dict,
        hints=HintState(),
        settings=CheckSettings(call_timeout=10, tmp_parent=tmp_path),
    )
    return checker.check(exercise_id, **{name: fn})


def result(report: CheckReport, name: str) -> Any:
    return next(r for r in report.results if r.name == name)


# --- telling a deliberate raise from a crash ------------------------------------------------


def _caught(fn: Any) -> BaseException:
    try:
        fn()
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def test_a_raise_statement_in_the_learners_code_is_deliberate() -> None:
    def refuses() -> None:
        raise PermissionError("outside the root")

    exc = _caught(refuses)
    assert raised_on_purpose(exc)
    assert describe(exc).deliberate


def test_an_exception_from_python_a_library_or_sqlite_is_not_deliberate() -> None:
    def indexes_none() -> None:
        row: Any = None
        row[0]

    def library() -> None:
        Path("/a").relative_to("/b")

    def typo() -> None:
        sqlite3.connect(":memory:").execute("DELET FROM notes")

    def reraises() -> None:
        try:
            typo()
        except sqlite3.Error:
            raise

    for fn in (indexes_none, library, typo, reraises):
        assert not raised_on_purpose(_caught(fn)), fn.__name__


def test_deliberate_survives_the_json_boundary() -> None:
    def refuses() -> None:
        raise ProtocolError(INVALID_PARAMS, "nope")

    error = describe(_caught(refuses))
    from labkit.course.exercises.calls import LearnerError

    again = LearnerError.from_json(error.to_json())
    assert again.deliberate and again.code == INVALID_PARAMS
    assert not LearnerError.from_json({**error.to_json(), "deliberate": "yes"}).deliberate


# --- the rule, the same in every exercise that refuses ----------------------------------------


def test_a_wrong_type_refusal_on_purpose_is_incorrect_in_ex2_and_ex4_alike(tmp_path: Path) -> None:
    def ex2(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
        if "url" not in (capabilities.get("elicitation") or {}):
            raise ValueError("not declared")
        return {
            "method": "elicitation/create",
            "params": {"mode": "url", "message": message, "url": url},
        }

    def ex4(root: Path, relative: str) -> Path:
        target = (root / relative).resolve()
        if not target.is_relative_to(root.resolve()):
            raise ValueError("outside")
        return target

    two = result(run("ex2", "url_elicitation", ex2, tmp_path), "form only refused")
    four = result(run("ex4", "resolve_inside", ex4, tmp_path), "escapes refused")
    for r, wanted in ((two, "labkit.ProtocolError with code -32021"), (four, "PermissionError")):
        assert r.outcome is Outcome.INCORRECT, r.message
        assert f"on purpose, where the contract expects {wanted}" in r.message
        assert "Python's own" not in r.message


def test_a_protocol_error_with_the_wrong_code_is_incorrect_and_names_the_code(
    tmp_path: Path,
) -> None:
    def wrong_code(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
        if "url" in (capabilities.get("elicitation") or {}):
            return url_elicitation(capabilities, message, url)
        raise ProtocolError(INVALID_PARAMS, "no", {"requiredCapabilities": {}})

    r = result(run("ex2", "url_elicitation", wrong_code, tmp_path), "form only refused")
    assert r.outcome is Outcome.INCORRECT
    assert f"ProtocolError({INVALID_PARAMS})" in r.message and "expected code -32021" in r.message
    assert "it raised ProtocolError(-32602)" in r.message


def test_a_deliberate_refusal_where_the_contract_returns_is_incorrect(tmp_path: Path) -> None:
    def refuses_everything(root: Path, relative: str) -> Path:
        raise PermissionError("never")

    r = result(run("ex4", "resolve_inside", refuses_everything, tmp_path), "plain file inside")
    # ex4's returning checks call through Trial.call: an exception there stays an error.
    assert r.outcome is Outcome.ERROR

    def refuses_offer(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
        raise ProtocolError(-32021, "no", {"requiredCapabilities": {"elicitation": {"url": {}}}})

    offered = result(
        run("ex2", "url_elicitation", refuses_offer, tmp_path), "url offered when declared"
    )
    assert offered.outcome is Outcome.INCORRECT
    assert "it raised ProtocolError(-32021, 'no') on purpose" in offered.message
    assert "Python's own" not in offered.message


def test_a_labkit_exception_that_crashes_is_not_called_pythons_own_text(tmp_path: Path) -> None:
    from labkit import parse_file_uri

    def crashes(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
        parse_file_uri("http://not-a-file")
        return {}

    r = result(run("ex2", "url_elicitation", crashes, tmp_path), "url offered when declared")
    assert r.outcome is Outcome.ERROR
    assert "ScopeError" in r.message
    assert "Python's own" not in r.message and "Next: fix the line shown last above." in r.message


# --- difference -------------------------------------------------------------------------------


def test_difference_names_keys_and_positions_not_whole_values() -> None:
    big = {"note": "x" * 500}
    expected = {"method": "m", "params": {"mode": "url", **big}}
    got = {"method": "m", "params": {"mode": "form", "extra": 1, **big}}
    text = difference(expected, got)
    assert (
        text == "params.mode is 'form' (expected 'url'); params.extra is there (expected none), 1"
    )
    assert "x" * 100 not in text
    assert difference([("k", {"id": 100})], [("k", {"id": "100"})]) == (
        "[0][1].id is '100' of type str (expected 100)"
    )
    assert difference([1, 2], [1]) == "it has 1 items (expected 2)"
    assert difference({"a": 1}, {}) == "a is missing (expected 1)"
    assert difference(True, 1) == "it is 1 of type int (expected True of type bool)"
    assert difference({"a": 1}, {"a": 1}) == ""


def test_ex5_shows_only_what_differs(tmp_path: Path) -> None:
    from labkit.legacy import to_legacy_requests

    def string_ids(input_requests: dict[str, Any], next_id: Any, new_id: Any) -> Any:
        return [
            (k, {**r, "id": str(r["id"])})
            for k, r in to_legacy_requests(input_requests, next_id, new_id)
        ]

    r = result(run("ex5", "to_legacy_requests", string_ids, tmp_path), "one form entry")
    assert r.outcome is Outcome.INCORRECT
    assert "[0][1].id is '100' of type str (expected 100)" in r.message
    assert "requestedSchema" not in r.message  # the unchanged params are not dumped
    assert "as next_id() returns it" in r.message


# --- next steps per failure ---------------------------------------------------------------------


def test_ex1_race_next_step_fits_code_that_already_uses_begin_immediate(tmp_path: Path) -> None:
    def reads_before(
        conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
    ) -> bool:
        taken = conn.execute(
            "SELECT 1 FROM claims WHERE principal = ? AND nonce = ?", (principal, nonce)
        ).fetchone()
        if taken:
            return False
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT OR IGNORE INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?)",
            (principal, nonce, expires_at),
        )
        if conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount != 1:
            conn.execute("ROLLBACK")
            return False
        conn.execute("COMMIT")
        return True

    checker = Checker(
        namespace=dict,
        hints=HintState(),
        settings=CheckSettings(call_timeout=10, tmp_parent=tmp_path, race_statement_delay=0.3),
    )
    r = result(checker.check("ex1", claim_and_delete=reads_before), "two processes race")
    assert r.outcome is Outcome.INCORRECT, r.message
    assert "your SELECT runs before the transaction" in r.message
    assert "starts with BEGIN IMMEDIATE" not in r.message


def test_ex1_a_rowcount_is_told_to_return_a_bool(tmp_path: Path) -> None:
    def rowcount(
        conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
    ) -> int:
        return 0

    r = result(run("ex1", "claim_and_delete", rowcount, tmp_path), "replay refused")
    assert r.outcome is Outcome.INCORRECT
    assert "Next: return True or False, a real bool: 0 is an int" in r.message
    assert "make the claim fail" not in r.message


def test_ex1_a_sql_typo_is_never_told_to_return_false_instead(tmp_path: Path) -> None:
    def typo(
        conn: sqlite3.Connection, principal: str, nonce: str, note_id: str, expires_at: float
    ) -> bool:
        conn.execute("DELET FROM notes WHERE id = ?", (note_id,))
        return True

    report = run("ex1", "claim_and_delete", typo, tmp_path)
    for name in ("replay refused", "missing note keeps the nonce"):
        r = result(report, name)
        assert r.outcome is Outcome.ERROR
        assert "OperationalError" in r.message
        next_step = r.message.partition("Next:")[2]
        assert "return False" not in next_step and "escape" not in next_step
        assert next_step == (
            " fix the line shown last above (the error text is Python's own, so you can search "
            "for it)."
        )


def test_ex5_a_dict_return_is_told_to_return_a_list_not_to_add_an_elicitation_id(
    tmp_path: Path,
) -> None:
    from labkit.legacy import to_legacy_requests

    def as_dict(input_requests: dict[str, Any], next_id: Any, new_id: Any) -> Any:
        return dict(to_legacy_requests(input_requests, next_id, new_id))

    report = run("ex5", "to_legacy_requests", as_dict, tmp_path)
    for r in report.failed:
        if r.name == SAFETY_CHECK:
            continue
        assert "Next: return a list of (key, request) pairs, not a dict." in r.message
        assert "elicitationId" not in r.message.partition("Next:")[2]


def test_ex5_an_elicitation_id_on_a_form_entry_is_not_told_to_call_next_id(tmp_path: Path) -> None:
    from labkit.legacy import to_legacy_requests

    def stamps_form(input_requests: dict[str, Any], next_id: Any, new_id: Any) -> Any:
        out = to_legacy_requests(input_requests, next_id, new_id)
        for _, request in out:
            params = request.get("params")
            if params is not None and params.get("mode") == "form":
                params["elicitationId"] = "extra"
        return out

    r = result(run("ex5", "to_legacy_requests", stamps_form, tmp_path), "order and fresh ids")
    assert "only URL-mode elicitations" in r.message
    assert "next_id() once per entry" not in r.message


# --- the third hint names the idea and the API, not the code ---------------------------------


@pytest.mark.parametrize("exercise_id", ["ex1", "ex2", "ex3", "ex4", "ex5"])
def test_the_last_hint_names_the_idea_and_the_api_not_the_solution(exercise_id: str) -> None:
    last = EXERCISES[exercise_id].hints[-1]
    assert last.startswith("The idea is ")
    assert "Shape" not in last and "->" not in last
    for code in (
        "return {",
        "raise ProtocolError(",
        "params['elicitationId'] =",
        "ROLLBACK, return",
    ):
        assert code not in last, code
    assert len(last) < 400
