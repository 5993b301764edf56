"""Hidden checks for ex5,
`to_legacy_requests(input_requests, next_id, new_elicitation_id) -> list[tuple[str, dict]]`.

One modern `inputRequests` map becomes live 2025-11-25 requests, `(key, request)` in the map's
order: a fresh id per entry from `next_id()`, the method, the params unchanged, plus an
`elicitationId` from `new_elicitation_id()` on a URL-mode `elicitation/create` only (an
elicitation without `mode` is form, PROTOCOL.md "Elicitation params"). The public checks use
one or two entries, ids counting up by one and a single URL entry; these use five entries in
an order no sort reproduces, ids that do not count up, several URL entries, a form without
`mode`, sampling and roots entries (with and without params), a method the adapter does not
know, and a map holding every kind, compared after the call.

Imports nothing from labkit (the kernel runs this source from a string).
"""

import copy
from typing import Any

CREATE = "elicitation/create"
FORM = {
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
MODELESS = {"method": CREATE, "params": {k: v for k, v in FORM["params"].items() if k != "mode"}}
SAMPLING = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Summarize note-14."}}],
        "maxTokens": 64,
    },
}
ROOTS = {"method": "roots/list"}
ROOTS_WITH_META = {"method": "roots/list", "params": {"_meta": {"progressToken": "roots-1"}}}
UNKNOWN = {"method": "x-vendor/ask", "params": {"question": "Proceed?"}}


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
    """The pairs as a list of (key, request) tuples, or an AssertionError saying what came."""
    got = to_legacy_requests(input_requests, next_id, new_id)
    assert isinstance(got, list), (
        f"expected a list of (key, request) pairs, got {_show(got)}"
        + (" (a missing return?)" if got is None else "")
    )
    pairs = [tuple(p) if isinstance(p, list | tuple) else p for p in got]
    malformed = [p for p in pairs if not (isinstance(p, tuple) and len(p) == 2)]
    assert not malformed, f"expected (key, request) pairs, got {_show(malformed[0])} among them"
    return pairs


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
        "b_sample": SAMPLING,
        "a_calendar": _url("calendar service", "link-2"),
    }
    next_id, new_id = _sources()
    pairs = _call(to_legacy_requests, copy.deepcopy(entries), next_id, new_id)
    keys = [p[0] for p in pairs]
    assert keys == list(entries), (
        f"expected the pairs in the map's order {list(entries)}, got {_show(keys)}"
    )
    want = [(key, _request(41 + n, entry)) for n, (key, entry) in enumerate(entries.items())]
    got = _without_elicitation_ids(pairs)
    for (key, expected), (_, request) in zip(want, got, strict=True):
        assert request == expected, (
            f"expected {_show(expected)} for '{key}' (the 5 entries took ids 41 to 45), got "
            f"{_show(request)}"
        )


def ids_taken_from_next_id(to_legacy_requests: Any) -> Any:
    next_id, new_id = _sources()
    pairs = _call(to_legacy_requests, {}, next_id, new_id)
    assert pairs == [], f"expected [] for an empty map, got {_show(pairs)}"
    assert not next_id.issued, (
        f"expected no id taken for an empty map, got {len(next_id.issued)} next_id() calls"
    )
    script = [7, "s-3", 19, 12]
    entries = {"one": FORM, "two": ROOTS, "three": _url("report service", "link-1"), "four": ROOTS}
    next_id, new_id = _sources(script)
    pairs = _call(to_legacy_requests, copy.deepcopy(entries), next_id, new_id)
    ids = [r.get("id") if isinstance(r, dict) else r for _, r in pairs]
    assert ids == script, (
        f"expected the ids next_id() handed out, one per entry in order ({script}), got "
        f"{_show(ids)}"
    )
    assert len(next_id.issued) == len(entries), (
        f"expected next_id() called once per entry ({len(entries)} times), got "
        f"{len(next_id.issued)} calls"
    )


def elicitation_id_per_url_entry(to_legacy_requests: Any) -> Any:
    entries = {
        "connect": _url("report service", "link-1"),
        "choice": FORM,
        "calendar": _url("calendar service", "link-2"),
        "again": _url("report service", "link-3"),
    }
    next_id, new_id = _sources()
    pairs = _call(to_legacy_requests, copy.deepcopy(entries), next_id, new_id)
    requests = dict(pairs)
    assert set(requests) == set(entries), (
        f"expected a request for each of {list(entries)}, got {_show(list(requests))}"
    )
    params = {k: r.get("params") if isinstance(r, dict) else None for k, r in requests.items()}
    assert isinstance(params["choice"], dict) and "elicitationId" not in params["choice"], (
        f"expected no elicitationId on the form entry 'choice', got {_show(params['choice'])}"
    )
    given = {}
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
    pairs = _call(to_legacy_requests, {"choice": copy.deepcopy(MODELESS)}, next_id, new_id)
    want = [("choice", _request(41, MODELESS))]
    assert pairs == want, (
        "expected an elicitation/create without mode (form mode, at both revisions) to travel "
        f"unchanged with no elicitationId: {_show(want)}, got {_show(pairs)}"
    )


def every_entry_sent(to_legacy_requests: Any) -> Any:
    entries = {"roots": ROOTS, "sample": SAMPLING, "roots_meta": ROOTS_WITH_META}
    next_id, new_id = _sources()
    pairs = _call(to_legacy_requests, copy.deepcopy(entries), next_id, new_id)
    want = [(key, _request(41 + n, entry)) for n, (key, entry) in enumerate(entries.items())]
    assert pairs == want, (
        "expected roots/list (with and without params) and sampling/createMessage to travel "
        f"unchanged: {_show(want)}, got {_show(pairs)}"
    )
    next_id, new_id = _sources()
    try:
        pairs = _call(
            to_legacy_requests, {"ask": copy.deepcopy(UNKNOWN), "roots": ROOTS}, next_id, new_id
        )
    except (NotImplementedError, AssertionError):
        raise
    except Exception:
        return  # refusing a method inputRequests never holds is fine; dropping it is not
    sent = dict(pairs).get("ask")
    assert sent == _request(41, UNKNOWN), (
        f"expected the entry 'ask' with the unknown method {UNKNOWN['method']!r} sent unchanged "
        f"or refused with an exception, got {_show(pairs)}"
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
            f"expected the entry '{key}' left as {_show(entry)}, got {_show(given[key])} after "
            "the call"
        )


CHECKS = (
    (several_entries_in_order, 2, "five entries come back in the map's order"),
    (ids_taken_from_next_id, 1, "each request's id is the next one next_id() hands out"),
    (elicitation_id_per_url_entry, 2, "each URL entry gets its own elicitationId"),
    (modeless_form_unchanged, 1, "an elicitation without mode is form: no elicitationId"),
    (every_entry_sent, 1, "roots/list and sampling entries travel unchanged; none is dropped"),
    (input_left_unchanged, 1, "no entry of the map passed in is changed"),
)
