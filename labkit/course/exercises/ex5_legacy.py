"""Exercise 5, the legacy 2025-11-25 adapter: public checks and hints for `to_legacy_requests`.

Contract: `to_legacy_requests(input_requests, next_id, new_elicitation_id) ->
list[tuple[str, dict]]` turns one modern `inputRequests` map into live 2025-11-25
server-to-client JSON-RPC requests, as `(input key, request)` pairs in the map's order: each
request gets a fresh id from `next_id()`, the entry's method, and its params unchanged, except
that a URL-mode `elicitation/create` gains the `elicitationId` 2025-11-25 requires (from
`new_elicitation_id()`); an entry without params (`roots/list`) has none. The input map is never
modified: the modern handler's result is not the adapter's to change (docs/LESSON.md section 11,
exercise 5). labkit's own version is `labkit.legacy.to_legacy_requests`.

Must not import ipywidgets.
"""

from __future__ import annotations

import copy
from typing import Any

from labkit.course.exercises.calls import IdSource, type_name
from labkit.course.exercises.trial import (
    Check,
    Contract,
    Exercise,
    Fail,
    Rule,
    Safety,
    Trial,
    difference,
)

CONTRACT = "to_legacy_requests"

FORM: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Choose one matching note and confirm deletion.",
        "requestedSchema": {
            "type": "object",
            "properties": {"confirm": {"type": "boolean"}},
            "required": ["confirm"],
        },
    },
}
URL: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "mode": "url",
        "message": "Connect the report service to continue.",
        "url": "http://127.0.0.1:8000/connect/report-service/link-1",
    },
}
ROOTS: dict[str, Any] = {"method": "roots/list"}


NEXT_ID = IdSource("next_id", start=100)
NEW_ELICITATION_ID = IdSource("new_elicitation_id", start=1, prefix="elicit-")


def _run(t: Trial, input_requests: dict[str, Any]) -> Any:
    return t.call(CONTRACT, input_requests, NEXT_ID, NEW_ELICITATION_ID)


def _compare(
    expected: str, got: Any, want: list[tuple[str, dict[str, Any]]], step: str
) -> Fail | None:
    if got is None:
        return Fail(expected, "it returned None", "return the list (None means a missing return)")
    if not isinstance(got, list):
        return Fail(
            expected,
            f"it returned a {type_name(got)}",
            f"return a list of (key, request) pairs, not a {type_name(got)}",
        )
    pairs = [tuple(p) if isinstance(p, list | tuple) else p for p in got]
    wanted: list[Any] = [tuple(w) for w in want]
    if pairs != wanted:
        return Fail(
            expected,
            f"it returned a list where {difference(wanted, pairs)}",
            pair_next(pairs, wanted, step),
        )
    return None


def pair_next(pairs: list[Any], wanted: list[Any], step: str) -> str:
    """The next step for the first wrong pair, from what is wrong with it; else `step`."""
    for pair, (key, request) in zip(pairs, wanted, strict=False):
        if pair == (key, request):
            continue
        if not (isinstance(pair, tuple) and len(pair) == 2):
            return "make each item a (key, request) pair: a tuple of the input key and the request"
        first, second = pair
        if isinstance(first, dict) and isinstance(second, str):
            return "put each pair as (key, request): the input key first, then the request"
        if not isinstance(second, dict):
            return step
        extra = sorted(k for k in second if k not in (*request, "params", "elicitationId"))
        if extra:
            return (
                f"send only the request's own keys ({', '.join(request)}): "
                f"{', '.join(map(repr, extra))} is not one of them"
            )
        if second.get("id") != request["id"] and str(second.get("id")) == str(request["id"]):
            return "use each id as next_id() returns it (an int here), without converting it"
        params, want_params = second.get("params"), request.get("params")
        if "elicitationId" in second:
            return (
                "put elicitationId inside params (params['elicitationId']), not on the request "
                "itself"
            )
        if isinstance(params, dict) and isinstance(want_params, dict):
            if "elicitationId" in params and "elicitationId" not in want_params:
                return (
                    "only URL-mode elicitations (params['mode'] == 'url') get an elicitationId; "
                    "form entries keep their params unchanged"
                )
            if "elicitationId" not in params and "elicitationId" in want_params:
                return (
                    "for method elicitation/create with mode 'url', add params['elicitationId'] "
                    "= new_elicitation_id()"
                )
        return step
    return step


def one_form_entry(t: Trial) -> Fail | None:
    got = _run(t, {"delete_choice": copy.deepcopy(FORM)})
    want = [("delete_choice", {"jsonrpc": "2.0", "id": 100, **copy.deepcopy(FORM)})]
    return _compare(
        "one form entry 'delete_choice' should become [('delete_choice', {'jsonrpc': '2.0', "
        "'id': 100, 'method': 'elicitation/create', 'params': <the same params>})] with the "
        "id taken from next_id()",
        got,
        want,
        "build a JSON-RPC request per entry: jsonrpc, a fresh id from next_id(), the method and "
        "the params as they are",
    )


def order_and_fresh_ids(t: Trial) -> Fail | None:
    got = _run(t, {"first": copy.deepcopy(FORM), "second": copy.deepcopy(ROOTS)})
    want = [
        ("first", {"jsonrpc": "2.0", "id": 100, **copy.deepcopy(FORM)}),
        ("second", {"jsonrpc": "2.0", "id": 101, "method": "roots/list"}),
    ]
    return _compare(
        "two entries should come back in the map's order, each with its own id from next_id(), "
        "and roots/list (an entry without params) should carry no params key",
        got,
        want,
        "call next_id() once per entry, keep the keys so each answer can be matched, and add "
        "params only when the entry has them",
    )


def url_entry_gets_elicitation_id(t: Trial) -> Fail | None:
    got = _run(t, {"connect": copy.deepcopy(URL)})
    params = {**copy.deepcopy(URL["params"]), "elicitationId": "elicit-1"}
    want = [
        ("connect", {"jsonrpc": "2.0", "id": 100, "method": "elicitation/create", "params": params})
    ]
    return _compare(
        "a URL-mode entry should gain 'elicitationId' from new_elicitation_id() (2025-11-25 "
        "requires it; 2026-07-28 has none)",
        got,
        want,
        "for method elicitation/create with mode 'url', add params['elicitationId'] = "
        "new_elicitation_id()",
    )


def input_left_unchanged(t: Trial) -> Fail | None:
    # Leaving the map alone counts only with an answer built from it.
    answered = url_entry_gets_elicitation_id(t)
    if answered is not None:
        return answered
    original = {"connect": copy.deepcopy(URL), "delete_choice": copy.deepcopy(FORM)}
    _run(t, copy.deepcopy(original))
    given = t.args_after()[0]
    if given != original:
        return Fail(
            "the inputRequests map passed in should be left exactly as it was",
            f"after the call {difference(original, given)}",
            "the input map is never modified: build a new request dict per entry and copy the "
            "params before adding elicitationId (the modern handler's result is not the "
            "adapter's to change)",
        )
    return None


HINTS = (
    "The adapter speaks for the modern handler: it sends each inputRequests entry to the legacy "
    "client as a live JSON-RPC request and keeps the entry's key to match the answer later.",
    "Only one thing differs between the eras here: a URL-mode elicitation needs an elicitationId "
    "at 2025-11-25. Everything else travels unchanged, and the input is never modified.",
    "The idea is a pure translation: iterate the map in order (dict.items()), build a new "
    "JSON-RPC request per entry with its own next_id(), and give URL-mode elicitations a "
    "new_elicitation_id() inside a copy of their params (dict(...) or copy.deepcopy).",
)

CONTRACT_TEXT = Contract(
    "to_legacy_requests(input_requests, next_id, new_elicitation_id) -> list[tuple[str, dict]]",
    rules=(
        Rule("pairs", "For every entry of\nthe map, in order, it returns a pair `(key, request)`"),
        Rule(
            "request",
            'the request is `{"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}`',
        ),
        Rule("no-params", "so it gets no `params` key"),
        Rule("unchanged", "the params travel unchanged"),
        Rule(
            "elicitation-id",
            'a URL-mode `elicitation/create` gains\n  `"elicitationId": new_elicitation_id()`',
        ),
        Rule("never-modified", "the map you are given is **never modified**"),
    ),
)

EXERCISE = Exercise(
    id="ex5",
    title="Legacy adapter for 2025-11-25 peers",
    contract=CONTRACT_TEXT,
    notebook="07-ex5-legacy-adapter",
    hidden_checks="labkit.grade.hidden.ex5",
    safety=Safety(3, "the modern handler's inputRequests map should never be changed"),
    outputs={
        "try": (
            "one form entry",
            "order and fresh ids",
            "url entry gets an elicitationId",
            "input left unchanged",
            "generated maps",
        ),
    },
    checks=(
        Check(
            "one form entry",
            one_form_entry,
            "one form entry should become one live elicitation/create request",
            rules=("request", "unchanged", "pairs"),
        ),
        Check(
            "order and fresh ids",
            order_and_fresh_ids,
            "two entries should keep their order and get their own ids",
            rules=("pairs", "request", "no-params"),
        ),
        Check(
            "url entry gets an elicitationId",
            url_entry_gets_elicitation_id,
            "a URL-mode entry should gain an elicitationId",
            rules=("elicitation-id",),
        ),
        Check(
            "input left unchanged",
            input_left_unchanged,
            "the inputRequests map should be left unchanged",
            rules=("never-modified",),
        ),
    ),
    hints=HINTS,
)
