"""Hidden checks for ex5,
`to_legacy_requests(input_requests, next_id, new_elicitation_id) -> list[tuple[str, dict]]`.

Owns: the grading-only checks of exercise 5 (`CHECKS`). One modern `inputRequests` map becomes
live 2025-11-25 requests, `(key, request)` in the map's order: a fresh id per entry from
`next_id()`, the method, the params unchanged, plus an `elicitationId` from
`new_elicitation_id()` on a URL-mode `elicitation/create` only (an elicitation without `mode`
is form). The public checks (`labkit.course.exercises.ex5_legacy`) use one or two entries, ids
counting up by one and a single URL entry; these use five entries in an order no sort
reproduces, ids that do not count up, several URL entries, a form without `mode`, sampling and
roots entries (with and without params), a method the adapter does not know, and a map holding
every kind, compared after the call.

Written like the public checks: the id functions are `IdSource` markers (the ids they handed
out come back as `Trial.drawn`), the map after the call comes back as `Trial.args_after`, and
every value is data decoded by exact type.
"""

from __future__ import annotations

import copy
from typing import Any

from labkit.course.exercises.calls import IdSource
from labkit.course.exercises.trial import Check, Fail, Raised, Trial

CONTRACT = "to_legacy_requests"
CREATE = "elicitation/create"
FORM: dict[str, Any] = {
    "method": CREATE,
    "params": {
        "mode": "form",
        "message": "Choose one matching note and confirm deletion.",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "note": {"type": "string", "enum": ["note-14", "note-15"]},
                "confirm": {"type": "boolean"},
            },
            "required": ["note", "confirm"],
        },
    },
}
MODELESS: dict[str, Any] = {
    "method": CREATE,
    "params": {k: copy.deepcopy(v) for k, v in FORM["params"].items() if k != "mode"},
}
SAMPLING: dict[str, Any] = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Summarize note-14."}}],
        "maxTokens": 64,
    },
}
ROOTS: dict[str, Any] = {"method": "roots/list"}
ROOTS_WITH_META: dict[str, Any] = {
    "method": "roots/list",
    "params": {"_meta": {"progressToken": "roots-1"}},
}
UNKNOWN: dict[str, Any] = {"method": "x-vendor/ask", "params": {"question": "Proceed?"}}

FIRST_ID = 41
NEXT_ID = IdSource("next_id", start=FIRST_ID)
NEW_ELICITATION_ID = IdSource("new_elicitation_id", start=1, prefix="elicit-")
SCRIPT: tuple[int | str, ...] = (7, "s-3", 19, 12)
PAIRS_NEXT = "return a list of (key, request) tuples, one per entry of the map"


def _url(service: str, link: str) -> dict[str, Any]:
    return {
        "method": CREATE,
        "params": {
            "mode": "url",
            "message": f"Connect the {service} to continue.",
            "url": f"http://127.0.0.1:8000/connect/{service.replace(' ', '-')}/{link}",
        },
    }


def _show(value: Any) -> str:
    """A learner's value, short enough for a feedback line."""
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "..."


def _difference(expected: Any, got: Any) -> str:
    """What differs first between an expected request (or entry) and the learner's, briefly."""
    if type(got) is not dict:
        return _show(got)
    for key in expected:
        if key not in got:
            return f"{key!r} missing"
    for key in got:
        if key not in expected:
            return f"{key!r}: {_show(got[key])} added"
    for key, value in expected.items():
        if got[key] != value:
            if key == "params" and type(value) is dict:
                return f"params with {_difference(value, got[key])}"
            return f"{key!r}: {_show(got[key])} instead of {_show(value)}"
    return "the same"


def _request(request_id: Any, entry: dict[str, Any]) -> dict[str, Any]:
    request = {"jsonrpc": "2.0", "id": request_id, "method": entry["method"]}
    if "params" in entry:
        request["params"] = copy.deepcopy(entry["params"])
    return request


def _pairs(
    t: Trial, entries: dict[str, Any], expected: str, next_id: IdSource = NEXT_ID
) -> list[tuple[str, Any]] | Fail:
    """The learner's pairs for a copy of `entries`, or a `Fail` saying what came back instead."""
    got = t.call(CONTRACT, copy.deepcopy(entries), next_id, NEW_ELICITATION_ID)
    if got is None:
        return Fail(expected, "it returned None", "return the list (None means a missing return)")
    if type(got) is not list:
        return Fail(expected, f"it returned {_show(got)}", PAIRS_NEXT)
    pairs = [tuple(p) if type(p) in (list, tuple) else p for p in got]
    malformed = [p for p in pairs if not (type(p) is tuple and len(p) == 2 and type(p[0]) is str)]
    if malformed:
        return Fail(expected, f"its list holds {_show(malformed[0])}", PAIRS_NEXT)
    return [(p[0], p[1]) for p in pairs]


def _without_elicitation_ids(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The pairs with URL entries' elicitationId taken out (`elicitation_id_per_url_entry`
    judges those), so the other checks compare the rest exactly."""
    plain = copy.deepcopy(pairs)
    for _, request in plain:
        params = request.get("params") if type(request) is dict else None
        if type(params) is dict and params.get("mode") == "url":
            params.pop("elicitationId", None)
    return plain


def several_entries_in_order(t: Trial) -> Fail | None:
    entries = {
        "zeta_connect": _url("report service", "link-1"),
        "alpha_choice": FORM,
        "m_roots": ROOTS,
        "b_choice": {**FORM, "params": {**FORM["params"], "message": "Pick the workspace."}},
        "a_calendar": _url("calendar service", "link-2"),
    }
    expected = (
        f"five entries should come back in the map's order {list(entries)}, each with the next "
        "id, its method and its params as they are"
    )
    pairs = _pairs(t, entries, expected)
    if isinstance(pairs, Fail):
        return pairs
    keys = [key for key, _ in pairs]
    if keys != list(entries):
        return Fail(
            expected,
            f"the keys came back as {_show(keys)}",
            "walk the map in its own order (dicts keep the order their keys were added in)",
        )
    got = _without_elicitation_ids(pairs)
    for n, (key, entry) in enumerate(entries.items()):
        want = _request(FIRST_ID + n, entry)
        if got[n][1] != want:
            return Fail(
                expected,
                f"entry {n + 1} of 5, '{key}', came back with {_difference(want, got[n][1])}",
                "copy each entry's method and params as they are, with the id next_id() "
                "hands out for it",
            )
    return None


def ids_from_next_id(t: Trial) -> Fail | None:
    entries = {
        "one": FORM,
        "two": ROOTS,
        "three": _url("report service", "link-1"),
        "four": ROOTS_WITH_META,
    }
    expected = (
        f"each request's id should be the one next_id() hands out for it, in order; here "
        f"next_id() hands out {list(SCRIPT)}"
    )
    pairs = _pairs(t, entries, expected, IdSource("next_id", script=SCRIPT))
    if isinstance(pairs, Fail):
        return pairs
    ids = [r.get("id") if type(r) is dict else r for _, r in pairs]
    drawn = t.drawn("next_id")
    if ids != list(SCRIPT) or len(drawn) != len(entries):
        return Fail(
            expected,
            f"the ids are {_show(ids)} and next_id() was called {len(drawn)} time(s)",
            "call next_id() once per entry and use what it returns, as it is: ids need not "
            "count up",
        )
    # A marker of its own: what one key draws adds up over the calls of a check.
    empty = t.call(CONTRACT, {}, IdSource("next_id_empty", start=FIRST_ID), NEW_ELICITATION_ID)
    calls = len(t.drawn("next_id_empty"))
    if empty != [] or calls:
        return Fail(
            "an empty map should give [] without calling next_id()",
            f"it returned {_show(empty)} after {calls} call(s) to next_id()",
            "draw an id only for an entry that is there",
        )
    return None


def elicitation_id_per_url_entry(t: Trial) -> Fail | None:
    entries = {
        "connect": _url("report service", "link-1"),
        "choice": FORM,
        "calendar": _url("calendar service", "link-2"),
        "again": _url("report service", "link-3"),
    }
    expected = (
        "each of the three URL entries should get an elicitationId of its own from "
        "new_elicitation_id(), inside params, and the form entry none"
    )
    pairs = _pairs(t, entries, expected)
    if isinstance(pairs, Fail):
        return pairs
    requests = dict(pairs)
    if set(requests) != set(entries):
        return Fail(expected, f"the keys came back as {_show(list(requests))}", PAIRS_NEXT)
    params = {k: r.get("params") if type(r) is dict else None for k, r in requests.items()}
    choice = params["choice"]
    if type(choice) is not dict or "elicitationId" in choice:
        return Fail(
            expected,
            f"the form entry 'choice' has params {_show(choice)}",
            "add an elicitationId only to URL-mode elicitation/create entries",
        )
    issued = t.drawn("new_elicitation_id")
    given: dict[str, Any] = {}
    for key in ("connect", "calendar", "again"):
        value = params[key]
        found: dict[str, Any] = value if isinstance(value, dict) else {}
        if "elicitationId" not in found or found["elicitationId"] not in issued:
            return Fail(
                expected,
                f"the URL entry '{key}' has params {_show(params[key])} (new_elicitation_id() "
                f"handed out {issued})",
                "put the id new_elicitation_id() returns into that entry's params",
            )
        given[key] = found["elicitationId"]
    if len(set(map(repr, given.values()))) != len(given):
        return Fail(
            expected,
            f"the URL entries got {_show(given)}",
            "call new_elicitation_id() once for each URL entry",
        )
    return None


def modeless_form_unchanged(t: Trial) -> Fail | None:
    expected = (
        "an elicitation/create without mode (form, at both revisions) should be sent with its "
        "params unchanged and no elicitationId"
    )
    pairs = _pairs(t, {"choice": MODELESS}, expected)
    if isinstance(pairs, Fail):
        return pairs
    want = _request(FIRST_ID, MODELESS)
    if [key for key, _ in pairs] != ["choice"] or pairs[0][1] != want:
        got = _difference(want, pairs[0][1]) if len(pairs) == 1 else _show(pairs)
        return Fail(
            expected,
            f"it came back as {got}",
            "only an entry whose mode is 'url' is URL mode; a missing mode means form",
        )
    return None


def every_entry_sent(t: Trial) -> Fail | None:
    entries = {"roots": ROOTS, "sample": SAMPLING, "roots_meta": ROOTS_WITH_META}
    expected = (
        "roots/list and sampling/createMessage entries should each be sent, with their params "
        "(or none) unchanged"
    )
    pairs = _pairs(t, entries, expected)
    if isinstance(pairs, Fail):
        return pairs
    requests = dict(pairs)
    if sorted(requests) != sorted(entries):
        return Fail(
            expected,
            f"the keys came back as {_show([key for key, _ in pairs])}",
            "send a request for every entry of the map, whatever its method",
        )
    for key, entry in entries.items():  # the ids are `ids_from_next_id`'s business
        request = requests[key]
        want = _request(request.get("id") if type(request) is dict else None, entry)
        if request != want:
            return Fail(
                expected,
                f"the {entry['method']} entry '{key}' came back with {_difference(want, request)}",
                "copy the method and the params as they are; add params only when the entry "
                "has them",
            )
    outcome = t.attempt(CONTRACT, {"ask": UNKNOWN, "roots": ROOTS}, NEXT_ID, NEW_ELICITATION_ID)
    if isinstance(outcome, Raised):
        return None  # refusing a method inputRequests never holds is fine; dropping it is not
    got = outcome.value if type(outcome.value) is list else []
    pairs = [p for p in got if type(p) in (list, tuple) and len(p) == 2 and type(p[0]) is str]
    sent = dict(pairs).get("ask")
    want = _request(sent.get("id") if type(sent) is dict else None, UNKNOWN)
    if sent != want:
        return Fail(
            f"the entry 'ask' with the unknown method {UNKNOWN['method']!r} should be sent "
            "unchanged or refused with an exception",
            "no request came back for it" if sent is None else _difference(want, sent),
            "never drop an entry without a word: send it as it is, or raise",
        )
    return None


def input_left_unchanged(t: Trial) -> Fail | None:
    original = {
        "connect": _url("report service", "link-1"),
        "choice": FORM,
        "roots": ROOTS,
        "plain": MODELESS,
        "sample": SAMPLING,
        "roots_meta": ROOTS_WITH_META,
    }
    expected = "no entry of the map passed in should be changed by the call"
    never = (
        "build each request as a new dict (and new params where you add a key); the map is the "
        "modern handler's, not the adapter's"
    )
    # The call must answer the map too: an answer that ignores it cannot pass by writing nothing.
    pairs = _pairs(t, original, expected)
    if isinstance(pairs, Fail):
        return pairs
    if [key for key, _ in pairs] != list(original):
        keys = [key for key, _ in pairs]
        return Fail(expected, f"the keys came back as {_show(keys)}", "send one request per entry")
    given = t.args_after()[0]
    if type(given) is not dict or list(given) != list(original):
        keys = list(given) if type(given) is dict else given
        return Fail(expected, f"its keys are {_show(keys)} after the call", never)
    for key, entry in original.items():
        if given[key] != entry:
            return Fail(
                expected,
                f"the entry '{key}' has {_difference(entry, given[key])} after the call",
                never,
            )
    return None


CHECKS: tuple[Check, ...] = (
    Check(
        "five entries in order",
        several_entries_in_order,
        "five entries should come back in the map's order",
        points=2,
        hidden=True,
    ),
    Check(
        "ids from next_id",
        ids_from_next_id,
        "each request's id should be the next one next_id() hands out",
        hidden=True,
    ),
    Check(
        "an elicitation id per url entry",
        elicitation_id_per_url_entry,
        "each URL entry should get its own elicitationId",
        points=2,
        hidden=True,
    ),
    Check(
        "modeless form unchanged",
        modeless_form_unchanged,
        "an elicitation without mode is form and should get no elicitationId",
        hidden=True,
    ),
    Check(
        "every entry sent",
        every_entry_sent,
        "roots/list and sampling entries should travel unchanged, none dropped",
        hidden=True,
    ),
    Check(
        "no entry of the map changed",
        input_left_unchanged,
        "no entry of the map passed in should be changed",
        hidden=True,
    ),
)
