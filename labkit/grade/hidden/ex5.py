"""Hidden checks for ex5,
`to_legacy_requests(input_requests, next_id, new_elicitation_id) -> list[tuple[str, dict]]`.

One modern `inputRequests` map becomes live 2025-11-25 requests, `(key, request)` in the map's
order: a fresh id per entry from `next_id()`, the method, the params unchanged, plus an
`elicitationId` from `new_elicitation_id()` on a URL-mode `elicitation/create` only (an
elicitation without `mode` is form, docs/protocol.md "Elicitation params"). The public checks use
one or two entries, ids counting up by one and a single URL entry; these use five entries in
an order no sort reproduces, ids that do not count up, several URL entries, a form without
`mode`, sampling and roots entries (with and without params), a method the adapter does not
know, and a map holding every kind, compared after the call.

Imports nothing from labkit (the kernel runs this source from a string).
"""

import copy
from typing import Any

CREATE = "elicitation/create"
FORM: Any = {
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
MODELESS: Any = {
    "method": CREATE,
    "params": {k: copy.deepcopy(v) for k, v in FORM["params"].items() if k != "mode"},
}
SAMPLING: Any = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Summarize note-14."}}],
        "maxTokens": 64,
    },
}
ROOTS: Any = {"method": "roots/list"}
ROOTS_WITH_META: Any = {"method": "roots/list", "params": {"_meta": {"progressToken": "roots-1"}}}
UNKNOWN: Any = {"method": "x-vendor/ask", "params": {"question": "Proceed?"}}


def _url(service: Any, link: Any) -> Any:
    return {
        "method": CREATE,
        "params": {
            "mode": "url",
            "message": f"Connect the {service} to continue.",
            "url": f"http://127.0.0.1:8000/connect/{service.replace(' ', '-')}/{link}",
        },
    }


def _show(value: Any) -> Any:
    """A learner's value, short enough for a feedback line."""
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "..."


class _Source:
    """A stand-in for `next_id` or `new_elicitation_id`: hands out `script`, then `make(n)`,
    and remembers what it handed out."""

    def __init__(self, script: Any, make: Any) -> None:
        self.script = list(script)
        self.make = make
        self.issued: list[Any] = []

    def __call__(self) -> Any:
        n = len(self.issued)
        value = self.script[n] if n < len(self.script) else self.make(n)
        self.issued.append(value)
        return value


def _sources(ids: Any = ()) -> Any:
    return _Source(ids, lambda n: 41 + n), _Source((), lambda n: f"elicit-{n + 1}")


def _call(to_legacy_requests: Any, input_requests: Any, next_id: Any, new_id: Any) -> Any:
    """The pairs for a private copy of `input_requests` as a list of (key, request) tuples, or
    an AssertionError saying what came back instead."""
    got = to_legacy_requests(copy.deepcopy(input_requests), next_id, new_id)
    if got is None:
        raise AssertionError(
            "expected a list of (key, request) pairs, got None (a missing return?)"
        )
    assert isinstance(got, list), f"expected a list of (key, request) pairs, got {_show(got)}"
    pairs = [tuple(p) if isinstance(p, list | tuple) else p for p in got]
    malformed = [
        p for p in pairs if not (isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str))
    ]
    assert not malformed, (
        f"expected (key, request) pairs, each key one of the map's, got {_show(malformed[0])} "
        "among them"
    )
    return pairs


def _difference(expected: Any, got: Any) -> Any:
    """What differs first between an expected request (or entry) and the learner's, briefly."""
    if not isinstance(got, dict):
        return _show(got)
    for key in expected:
        if key not in got:
            return f"{key!r} missing"
    for key in got:
        if key not in expected:
            return f"{key!r}: {_show(got[key])} added"
    for key, value in expected.items():
        if got[key] != value:
            if key == "params" and isinstance(value, dict):
                return f"params with {_difference(value, got[key])}"
            return f"{key!r}: {_show(got[key])} instead of {_show(value)}"
    return "the same"


def _request(request_id: Any, entry: Any) -> Any:
    request = {"jsonrpc": "2.0", "id": request_id, "method": entry["method"]}
    if "params" in entry:
        request["params"] = copy.deepcopy(entry["params"])
    return request


def _without_elicitation_ids(pairs: Any) -> Any:
    """The pairs with URL entries' elicitationId taken out (`elicitation_id_per_url_entry`
    judges those), so the other checks compare the rest exactly."""
    plain = copy.deepcopy(pairs)
    for _, request in plain:
        params = request.get("params") if isinstance(request, dict) else None
        if isinstance(params, dict) and params.get("mode") == "url":
            params.pop("elicitationId", None)
    return plain


def several_entries_in_order(to_legacy_requests: Any) -> Any:
    entries = {
        "zeta_connect": _url("report service", "link-1"),
        "alpha_choice": FORM,
        "m_roots": ROOTS,
        "b_choice": {**FORM, "params": {**FORM["params"], "message": "Pick the workspace."}},
        "a_calendar": _url("calendar service", "link-2"),
    }
    next_id, new_id = _sources()
    pairs = _call(to_legacy_requests, entries, next_id, new_id)
    keys = [p[0] for p in pairs]
    assert keys == list(entries), (
        f"expected the pairs in the map's order {list(entries)}, got {_show(keys)}"
    )
    want = [(key, _request(41 + n, entry)) for n, (key, entry) in enumerate(entries.items())]
    got = _without_elicitation_ids(pairs)
    for n, ((key, expected), (_, request)) in enumerate(zip(want, got, strict=True)):
        assert request == expected, (
            f"expected entry {n + 1} of 5, '{key}', sent with id {41 + n}, its method and its "
            f"params as they are, got {_difference(expected, request)}"
        )


def ids_taken_from_next_id(to_legacy_requests: Any) -> Any:
    script = [7, "s-3", 19, 12]
    entries = {
        "one": FORM,
        "two": ROOTS,
        "three": _url("report service", "link-1"),
        "four": ROOTS_WITH_META,
    }
    next_id, new_id = _sources(script)
    pairs = _call(to_legacy_requests, entries, next_id, new_id)
    ids = [r.get("id") if isinstance(r, dict) else r for _, r in pairs]
    assert ids == script, (
        f"expected the ids next_id() handed out, one per entry in order ({script}), got "
        f"{_show(ids)}"
    )
    assert len(next_id.issued) == len(entries), (
        f"expected next_id() called once per entry ({len(entries)} times), got "
        f"{len(next_id.issued)} calls"
    )
    next_id, new_id = _sources()
    pairs = _call(to_legacy_requests, {}, next_id, new_id)
    assert pairs == [], f"expected [] for an empty map, got {_show(pairs)}"
    assert not next_id.issued, (
        f"expected next_id() not called for an empty map, got {len(next_id.issued)} call(s)"
    )


def elicitation_id_per_url_entry(to_legacy_requests: Any) -> Any:
    entries = {
        "connect": _url("report service", "link-1"),
        "choice": FORM,
        "calendar": _url("calendar service", "link-2"),
        "again": _url("report service", "link-3"),
    }
    next_id, new_id = _sources()
    pairs = _call(to_legacy_requests, entries, next_id, new_id)
    requests = dict(pairs)
    assert set(requests) == set(entries), (
        f"expected a request for each of {list(entries)}, got {_show(list(requests))}"
    )
    params: Any = {k: r.get("params") if isinstance(r, dict) else None for k, r in requests.items()}
    assert isinstance(params["choice"], dict) and "elicitationId" not in params["choice"], (
        f"expected no elicitationId on the form entry 'choice', got {_show(params['choice'])}"
    )
    given: Any = {}
    for key in ("connect", "calendar", "again"):
        found = params[key] if isinstance(params[key], dict) else {}
        assert "elicitationId" in found, (
            f"expected an elicitationId in the URL entry '{key}', got {_show(params[key])}"
        )
        given[key] = found["elicitationId"]
        assert given[key] in new_id.issued, (
            f"expected '{key}' to get its elicitationId from new_elicitation_id() (which "
            f"handed out {new_id.issued}), got {_show(given[key])}"
        )
    assert len(set(map(repr, given.values()))) == len(given), (
        f"expected a fresh elicitationId per URL entry, got {_show(given)}"
    )


def modeless_form_unchanged(to_legacy_requests: Any) -> Any:
    next_id, new_id = _sources()
    pairs = _call(to_legacy_requests, {"choice": MODELESS}, next_id, new_id)
    assert [p[0] for p in pairs] == ["choice"], (
        f"expected one request for the entry 'choice', got {_show(pairs)}"
    )
    expected, request = _request(41, MODELESS), pairs[0][1]
    assert request == expected, (
        "expected an elicitation/create without mode (form, at both revisions) sent with its "
        f"params unchanged and no elicitationId, got {_difference(expected, request)}"
    )


def every_entry_sent(to_legacy_requests: Any) -> Any:
    entries = {"roots": ROOTS, "sample": SAMPLING, "roots_meta": ROOTS_WITH_META}
    next_id, new_id = _sources()
    pairs = _call(to_legacy_requests, entries, next_id, new_id)
    requests = dict(pairs)
    assert sorted(requests) == sorted(entries), (
        f"expected a request for each of {list(entries)}, got {_show([p[0] for p in pairs])}"
    )
    entry: Any
    for key, entry in entries.items():  # the ids are `ids_taken_from_next_id`'s business
        request = requests[key]
        expected = _request(request.get("id") if isinstance(request, dict) else None, entry)
        assert request == expected, (
            f"expected the {entry['method']} entry '{key}' sent with its params unchanged, got "
            f"{_difference(expected, request)}"
        )
    next_id, new_id = _sources()
    try:
        pairs = _call(to_legacy_requests, {"ask": UNKNOWN, "roots": ROOTS}, next_id, new_id)
    except (NotImplementedError, AssertionError):
        raise
    except Exception:
        return  # refusing a method inputRequests never holds is fine; dropping it is not
    sent = dict(pairs).get("ask")
    expected = _request(sent.get("id") if isinstance(sent, dict) else None, UNKNOWN)
    assert sent == expected, (
        f"expected the entry 'ask' with the unknown method {UNKNOWN['method']!r} sent unchanged "
        "or refused with an exception, got "
        + ("no request for it" if sent is None else _difference(expected, sent))
    )


def input_left_unchanged(to_legacy_requests: Any) -> Any:
    original = {
        "connect": _url("report service", "link-1"),
        "choice": FORM,
        "roots": ROOTS,
        "plain": MODELESS,
        "sample": SAMPLING,
        "roots_meta": ROOTS_WITH_META,
    }
    given = copy.deepcopy(original)
    next_id, new_id = _sources()
    to_legacy_requests(given, next_id, new_id)
    assert list(given) == list(original), (
        f"expected the map's keys left as {list(original)}, got {_show(list(given))}"
    )
    for key, entry in original.items():
        assert given[key] == entry, (
            f"expected the entry '{key}' left as it was, got {_difference(entry, given[key])} "
            "after the call"
        )


CHECKS = (
    (several_entries_in_order, 2, "five entries come back in the map's order"),
    (ids_taken_from_next_id, 1, "each request's id is the next one next_id() hands out"),
    (elicitation_id_per_url_entry, 2, "each URL entry gets its own elicitationId"),
    (modeless_form_unchanged, 1, "an elicitation without mode is form: no elicitationId"),
    (every_entry_sent, 1, "roots/list and sampling entries travel unchanged; none is dropped"),
    (input_left_unchanged, 1, "no entry of the map passed in is changed"),
)
