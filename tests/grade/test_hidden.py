"""The hidden checks of ex2 and ex5 in this process, through the probe the kernel runs them with:
labkit's own functions pass every one, each typical mistake passes every public check and fails
exactly the hidden check written for it (with an "expected ..., got ..." message), and a stub is
not attempted. `test_grade` runs the same checks in real kernels."""

from __future__ import annotations

import importlib
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from grade.grade_helpers import SORTED_KEYS, STRING_GATE
from labkit.course.exercises.checks import Checker, HintState
from labkit.course.exercises.trial import CheckSettings
from labkit.course.exercises.trial import Outcome as PublicOutcome
from labkit.errors import MISSING_CAPABILITY, ProtocolError
from labkit.grade.graded_exercises import EXERCISES
from labkit.grade.probe import outcome_of
from labkit.legacy import to_legacy_requests
from labkit.url_mode import url_elicitation

CONTRACTS = {"ex2": "url_elicitation", "ex5": "to_legacy_requests"}
REQUIRED: dict[str, Any] = {"requiredCapabilities": {"elicitation": {"url": {}}}}
Impl = Callable[..., Any]


def hidden(exercise: str, fn: Impl) -> dict[str, tuple[str, str]]:
    """Each hidden check's (outcome, message), as the kernel would report them."""
    table = importlib.import_module(EXERCISES[exercise].module).CHECKS
    return {check.__name__: outcome_of(check, {CONTRACTS[exercise]: fn}) for check, _, _ in table}


def public_failures(exercise: str, fn: Impl) -> dict[str, PublicOutcome]:
    checker = Checker(namespace=dict, settings=CheckSettings(), hints=HintState())
    report = checker.check(exercise, **{CONTRACTS[exercise]: fn})
    return {r.name: r.outcome for r in report.results if r.outcome is not PublicOutcome.PASSED}


def from_source(source: str) -> Impl:
    namespace: dict[str, Any] = {"ProtocolError": ProtocolError}
    exec(source, namespace)
    fn: Impl = next(v for k, v in namespace.items() if k in CONTRACTS.values())
    return fn


def _refuse(capabilities: Mapping[str, Any] | None = None) -> ProtocolError:
    data = {"requiredCapabilities": {**(capabilities or {}), "elicitation": {"url": {}}}}
    return ProtocolError(MISSING_CAPABILITY, "URL mode needed", data)


def _entry(message: str, url: str) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": message, "url": url},
    }


# --- ex2: url_elicitation mistakes -----------------------------------------------------------


def exact_declarations(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
    """Accepts only the two declarations the lesson shows, word for word."""
    if capabilities.get("elicitation") not in ({"url": {}}, {"form": {}, "url": {}}):
        raise _refuse()
    return _entry(message, url)


def searches_everywhere(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
    """Takes a `url` key anywhere in the capabilities as URL mode."""

    def has_url(value: Any) -> bool:
        return isinstance(value, dict) and ("url" in value or any(map(has_url, value.values())))

    if not has_url(capabilities):
        raise _refuse()
    return _entry(message, url)


def echoes_capabilities(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
    """Puts everything the request declared into requiredCapabilities, plus the url mode."""
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise _refuse(capabilities)
    return _entry(message, url)


def tidies_text(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
    """Strips the message and decodes the URL 'for display'."""
    return url_elicitation(capabilities, message.strip(), urllib.parse.unquote(url))


def mutates_capabilities(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
    """`setdefault` in the gate: a request without elicitation gains `elicitation: {}`."""
    elicitation = capabilities.setdefault("elicitation", {})
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise _refuse()
    return _entry(message, url)


def template_entry() -> Impl:
    """One entry dict filled in and handed out by every call."""
    template: dict[str, Any] = {"method": "elicitation/create", "params": {"mode": "url"}}

    def url_elicitation_(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
        url_elicitation(capabilities, message, url)  # the gate
        template["params"].update(message=message, url=url)
        return template

    return url_elicitation_


# --- ex5: to_legacy_requests mistakes --------------------------------------------------------


def counts_from_first(input_requests: Any, next_id: Any, new_id: Any) -> list[Any]:
    """Takes one id, then counts up from it."""
    first = next_id()
    ids = iter(range(first, first + len(input_requests)))
    return to_legacy_requests(input_requests, lambda: next(ids), new_id)


def one_elicitation_id(input_requests: Any, next_id: Any, new_id: Any) -> list[Any]:
    """One elicitationId for the whole map."""
    shared = new_id()
    return to_legacy_requests(input_requests, next_id, lambda: shared)


def mode_not_form(input_requests: Any, next_id: Any, new_id: Any) -> list[Any]:
    """Every elicitation that does not say 'form' gets an elicitationId, mode-less ones too."""
    requests = []
    for key, entry in input_requests.items():
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        if "params" in entry:
            params = dict(entry["params"])
            if entry["method"] == "elicitation/create" and params.get("mode") != "form":
                params["elicitationId"] = new_id()
            request["params"] = params
        requests.append((key, request))
    return requests


def drops_others(input_requests: Any, next_id: Any, new_id: Any) -> list[Any]:
    """Knows elicitation/create and roots/list; anything else vanishes without a word."""
    handled = ("elicitation/create", "roots/list")
    known = {k: e for k, e in input_requests.items() if e["method"] in handled}
    return to_legacy_requests(known, next_id, new_id)


def reuses_entries(input_requests: Any, next_id: Any, new_id: Any) -> list[Any]:
    """Sends a params-less entry as it is, after stamping jsonrpc and id on the caller's dict."""
    requests = []
    for key, entry in input_requests.items():
        if "params" in entry:
            requests += to_legacy_requests({key: entry}, next_id, new_id)
        else:
            entry.update(jsonrpc="2.0", id=next_id())
            requests.append((key, entry))
    return requests


MISTAKES = [
    ("ex2", lambda: exact_declarations, "unknown_keys_beside_url", "got ProtocolError(-32021"),
    ("ex2", lambda: from_source(STRING_GATE), "non_object_elicitation_refused", "got the entry"),
    ("ex2", lambda: searches_everywhere, "url_outside_elicitation_refused", "{'url': {}, 'eli"),
    ("ex2", lambda: echoes_capabilities, "refusal_names_only_url", "'sampling': {}"),
    ("ex2", lambda: tidies_text, "text_passed_unchanged", "got params with 'message'"),
    ("ex2", lambda: mutates_capabilities, "capabilities_left_unchanged", "'elicitation': {}"),
    ("ex2", template_entry, "fresh_entry_per_call", "'added-by-the-caller'"),
    ("ex5", lambda: from_source(SORTED_KEYS), "several_entries_in_order", "['a_calendar', "),
    ("ex5", lambda: counts_from_first, "ids_taken_from_next_id", "[7, 8, 9, 10]"),
    ("ex5", lambda: one_elicitation_id, "elicitation_id_per_url_entry", "'elicit-1', 'again'"),
    ("ex5", lambda: mode_not_form, "modeless_form_unchanged", "'elicitationId': 'elicit-1'"),
    ("ex5", lambda: drops_others, "every_entry_sent", "got ['roots', 'roots_meta']"),
    ("ex5", lambda: reuses_entries, "input_left_unchanged", "'jsonrpc': '2.0'"),
]


@pytest.mark.parametrize(
    ("exercise", "fn"), [("ex2", url_elicitation), ("ex5", to_legacy_requests)]
)
def test_labkit_passes_every_hidden_check(exercise: str, fn: Impl) -> None:
    outcomes = hidden(exercise, fn)
    assert len(outcomes) >= 6
    assert outcomes == dict.fromkeys(outcomes, ("passed", ""))


@pytest.mark.parametrize(
    ("exercise", "make", "check", "shown"), MISTAKES, ids=[m[2] for m in MISTAKES]
)
def test_each_mistake_passes_the_public_checks_and_fails_its_hidden_one(
    exercise: str, make: Callable[[], Impl], check: str, shown: str
) -> None:
    assert public_failures(exercise, make()) == {}  # the public checks cannot see it
    outcomes = hidden(exercise, make())
    failed = {name: result for name, result in outcomes.items() if result != ("passed", "")}
    assert list(failed) == [check], failed
    outcome, message = failed[check]
    assert outcome == "incorrect"
    assert message.startswith("expected ") and ", got " in message
    assert shown in message, message
    for source in ("def ", "assert ", "CHECKS", "_refused", "_Source"):
        assert source not in message  # the author's message, never the check's code


def test_every_hidden_check_has_a_mistake_written_for_it() -> None:
    for exercise in CONTRACTS:
        table = importlib.import_module(EXERCISES[exercise].module).CHECKS
        names = {check.__name__ for check, _, _ in table}
        assert names == {m[2] for m in MISTAKES if m[0] == exercise}


@pytest.mark.parametrize("exercise", CONTRACTS)
def test_a_stub_is_not_attempted(exercise: str) -> None:
    def stub(*args: Any) -> Any:
        raise NotImplementedError()  # learner: the starter stub

    outcomes = hidden(exercise, stub)
    assert {outcome for outcome, _ in outcomes.values()} == {"not attempted"}
    assert all("still raises NotImplementedError" in m for _, m in outcomes.values())


def test_a_refusal_that_is_not_labkits_protocol_error_is_named() -> None:
    class OwnProtocolError(Exception):
        code, data = MISSING_CAPABILITY, REQUIRED

    OwnProtocolError.__name__ = "ProtocolError"

    def own_error(capabilities: dict[str, Any], message: str, url: str) -> dict[str, Any]:
        try:
            return url_elicitation(capabilities, message, url)
        except ProtocolError:
            raise OwnProtocolError("URL mode needed") from None

    outcome, message = hidden("ex2", own_error)["non_object_elicitation_refused"]
    assert outcome == "incorrect"
    assert "got a ProtocolError that is not labkit's (import it from labkit): URL mode" in message
    key_error = hidden("ex2", lambda c, m, u: {}["elicitation"]["url"])
    assert key_error["refusal_names_only_url"] == (
        "incorrect",
        "expected ProtocolError(-32021, data={'requiredCapabilities': {'elicitation': {'url': "
        "{}}}}) for sampling, roots and form declared (data names only what is missing), got "
        "KeyError: 'elicitation'",
    )


def test_a_missing_return_a_refused_and_a_dropped_unknown_method() -> None:
    outcome, message = hidden("ex5", lambda *args: None)["several_entries_in_order"]
    assert (outcome, message) == (
        "incorrect",
        "expected a list of (key, request) pairs, got None (a missing return?)",
    )

    def refuses_unknown(input_requests: Any, next_id: Any, new_id: Any) -> list[Any]:
        known = ("elicitation/create", "roots/list", "sampling/createMessage")
        if any(e["method"] not in known for e in input_requests.values()):
            raise ValueError("inputRequests holds an unknown method")
        return to_legacy_requests(input_requests, next_id, new_id)

    # inputRequests never holds another method: refusing one is as good as passing it on.
    assert set(hidden("ex5", refuses_unknown).values()) == {("passed", "")}

    def drops_unknown(input_requests: Any, next_id: Any, new_id: Any) -> list[Any]:
        known = {k: e for k, e in input_requests.items() if not e["method"].startswith("x-")}
        return to_legacy_requests(known, next_id, new_id)

    assert hidden("ex5", drops_unknown)["every_entry_sent"] == (
        "incorrect",
        "expected the entry 'ask' with the unknown method 'x-vendor/ask' sent unchanged or "
        "refused with an exception, got no request for it",
    )
