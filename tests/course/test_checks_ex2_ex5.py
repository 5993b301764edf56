"""Public checks for exercises 2 (URL mode) and 5 (the legacy adapter): labkit's own functions
pass them, each typical mistake fails the check that names it, and a stub is not attempted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from labkit.course.exercises.checks import SAFETY_CHECK, Checker, CheckReport, HintState
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import CheckSettings, Outcome
from labkit.errors import INVALID_PARAMS, MISSING_CAPABILITY, ProtocolError
from labkit.legacy import to_legacy_requests
from labkit.url_mode import url_elicitation

# Every public check of the exercise, and its safety points (earned only beside a passed check).
EVERY = {e: {c.name for c in EXERCISES[e].checks} | {SAFETY_CHECK} for e in ("ex2", "ex5")}
REFUSALS = {c.name for c in EXERCISES["ex2"].checks if c.name.endswith(" refused")}


def count(exercise: str) -> int:
    return len(EVERY[exercise])


def run(exercise: str, name: str, fn: Callable[..., Any]) -> CheckReport:
    checker = Checker(namespace=dict, settings=CheckSettings(), hints=HintState())
    return checker.check(exercise, **{name: fn})


def failed(report: CheckReport) -> dict[str, Outcome]:
    return {r.name: r.outcome for r in report.results if r.outcome is not Outcome.PASSED}


def test_labkit_url_elicitation_passes_every_ex2_check() -> None:
    report = run("ex2", "url_elicitation", url_elicitation)
    assert report.passed, str(report)
    n = count("ex2")
    assert f"public checks passed ({n}/{n}); hidden behaviour checks run at grading" in str(report)


def test_labkit_to_legacy_requests_passes_every_ex5_check() -> None:
    report = run("ex5", "to_legacy_requests", to_legacy_requests)
    assert report.passed, str(report)
    assert f"public checks passed ({count('ex5')}/{count('ex5')})" in str(report)


def never_gates(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": message, "url": url},
    }


def empty_means_url(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
    if "elicitation" not in capabilities:
        raise ProtocolError(
            MISSING_CAPABILITY, "no", {"requiredCapabilities": {"elicitation": {"url": {}}}}
        )
    return never_gates(capabilities, message, url)


def wrong_code(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
    if "url" not in (capabilities.get("elicitation") or {}):
        raise ProtocolError(INVALID_PARAMS, "no url")
    return never_gates(capabilities, message, url)


def legacy_shape(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
    entry = url_elicitation(capabilities, message, url)
    entry["params"]["elicitationId"] = "e-1"
    return entry


def stub(*args: Any) -> Any:
    raise NotImplementedError()  # learner


@pytest.mark.parametrize(
    ("fn", "failing"),
    [
        (never_gates, REFUSALS),
        (empty_means_url, REFUSALS - {"no capabilities refused"}),
        (wrong_code, REFUSALS),
        # Every refusal counts only with its acceptance, which this one never gives.
        (legacy_shape, EVERY["ex2"]),
    ],
)
def test_ex2_mistakes_fail_the_check_that_names_them(
    fn: Callable[..., Any], failing: set[str]
) -> None:
    report = run("ex2", "url_elicitation", fn)
    assert failed(report) == dict.fromkeys(failing, Outcome.INCORRECT), str(report)
    for result in report.results:
        if result.name in failing:
            assert "Next: " in result.message
            assert "but" in result.message or result.name == SAFETY_CHECK
            assert "\x1b[" not in result.message


def test_ex2_a_refusal_of_the_wrong_type_raised_on_purpose_is_incorrect() -> None:
    def raises_value_error(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
        if "url" not in (capabilities.get("elicitation") or {}):
            raise ValueError("url mode not declared")
        return never_gates(capabilities, message, url)

    report = run("ex2", "url_elicitation", raises_value_error)
    assert set(failed(report).values()) == {Outcome.INCORRECT}
    message = report.results[2].message
    assert "it raised ValueError('url mode not declared') on purpose" in message
    assert "expects labkit.ProtocolError with code -32021" in message


def test_ex2_a_crash_on_the_way_to_the_refusal_is_an_error_in_the_learners_code() -> None:
    def crashes(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
        if "url" not in capabilities["elicitation"]:  # KeyError when nothing is declared
            raise ProtocolError(MISSING_CAPABILITY, "no url", {"requiredCapabilities": {}})
        return never_gates(capabilities, message, url)

    report = run("ex2", "url_elicitation", crashes)
    result = next(r for r in report.results if r.name == "no capabilities refused")
    assert result.outcome is Outcome.ERROR
    assert "KeyError: 'elicitation'" in result.message
    assert "Next: the refusal is a ProtocolError you raise yourself" in result.message


def copies_nothing(input_requests: dict[str, Any], next_id: Any, new_id: Any) -> list[Any]:
    out = []
    for key, entry in input_requests.items():
        message = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        if "params" in entry:
            params = entry["params"]  # mutates the caller's map below
            if params.get("mode") == "url":
                params["elicitationId"] = new_id()
            message["params"] = params
        out.append((key, message))
    return out


def one_id_for_all(input_requests: dict[str, Any], next_id: Any, new_id: Any) -> list[Any]:
    shared = next_id()
    return [
        (k, {**m, "id": shared}) for k, m in to_legacy_requests(input_requests, next_id, new_id)
    ]


def no_elicitation_id(input_requests: dict[str, Any], next_id: Any, new_id: Any) -> list[Any]:
    return to_legacy_requests(input_requests, next_id, lambda: None)  # type: ignore[arg-type, return-value]


def drops_keys(input_requests: dict[str, Any], next_id: Any, new_id: Any) -> list[Any]:
    return [m for _, m in to_legacy_requests(input_requests, next_id, new_id)]


@pytest.mark.parametrize(
    ("fn", "failing"),
    [
        (copies_nothing, {"input left unchanged"}),
        (one_id_for_all, {"order and fresh ids"}),
        # "Left unchanged" counts only with the URL entry it leaves the input for.
        (no_elicitation_id, {"url entry gets an elicitationId", "input left unchanged"}),
        (drops_keys, EVERY["ex5"]),
    ],
)
def test_ex5_mistakes_fail_the_check_that_names_them(
    fn: Callable[..., Any], failing: set[str]
) -> None:
    report = run("ex5", "to_legacy_requests", fn)
    assert failed(report) == dict.fromkeys(failing, Outcome.INCORRECT), str(report)


@pytest.mark.parametrize(
    ("exercise", "name"), [("ex2", "url_elicitation"), ("ex5", "to_legacy_requests")]
)
def test_stubs_are_not_attempted(exercise: str, name: str) -> None:
    report = run(exercise, name, stub)
    assert {r.outcome for r in report.results} == {Outcome.NOT_ATTEMPTED}
    assert not report.passed
