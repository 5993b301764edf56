"""Hidden checks for ex5,
`to_legacy_requests(input_requests, next_id, new_elicitation_id) -> list[tuple[str, dict]]`.

Owns: the grading-only checks of exercise 5 (`CHECKS`): a differential check
(`labkit.course.exercises.differ`) that gives the learner's function and the reference answer
the same generated `inputRequests` maps (any number of entries, keys in an order no sort
reproduces, form entries with and without `mode`, URL entries, `mode` spelled otherwise,
`roots/list` and `sampling/createMessage` with and without params, a method the adapter does
not know, params of another type) and the same id functions (ids scripted so they need not
count up, ints or strings), and compares what a caller sees: the pairs by exact type, how many
ids each function handed out, and the map after the call. They add inputs, not rules: each rule
is one the task states and a public check shows (`labkit.course.exercises.ex5_legacy`).
Must not import the kernel runner or the command line.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from labkit.course.exercises import ex5_legacy as public
from labkit.course.exercises.calls import IdSource
from labkit.course.exercises.differ import Cause, Observation, Search, Side, differential, observed
from labkit.course.exercises.trial import Check, Fail, Trial

CONTRACT = public.CONTRACT
CREATE = "elicitation/create"


@dataclass(frozen=True)
class Translate:
    entries: tuple[tuple[str, Any], ...]  # the map, in order
    ids: tuple[int | str, ...] = ()  # what next_id() hands out first


def describe(x: Translate) -> str:
    ids = f", next_id() handing out {list(x.ids)} first" if x.ids else ""
    return f"the map {dict(x.entries)!r}{ids}"


def play(side: Side, x: Translate) -> Observation:
    entries = copy.deepcopy(dict(x.entries))
    next_id = IdSource("next_id", start=100, script=x.ids)
    elicitation = IdSource("new_elicitation_id", start=1, prefix="elicit-")
    outcome = side.attempt(CONTRACT, entries, next_id, elicitation)
    seen = observed(outcome)
    drawn = outcome.effects.get("drawn", {})
    seen["ids handed out"] = len(drawn.get("next_id", []))
    seen["elicitation ids handed out"] = len(drawn.get("new_elicitation_id", []))
    seen["map after the call"] = outcome.effects.get("args", [None])[0]
    return seen


def explain(x: Translate, mine: Observation, reference: Observation) -> Cause:
    before = dict(x.entries)
    if mine.get("map after the call") != reference.get("map after the call"):
        return Cause(
            "build each request as a new dict (and new params where you add a key); the map "
            "is the modern handler's, not the adapter's",
            safety="it changed the modern handler's inputRequests map",
        )
    if "raised" in mine:
        return Cause("send every entry, whatever its method or params; nothing here is an error")
    got = mine.get("returned")
    want = reference["returned"]
    if type(got) is not list:
        return Cause("return a list of (key, request) tuples, one per entry of the map")
    if not all(type(p) is tuple and len(p) == 2 for p in got):
        return Cause("make each item a (key, request) tuple: the input key, then the request")
    if [p[0] for p in got] != [p[0] for p in want]:
        return Cause("one pair per entry, in the map's own order (dict order, not sorted)")
    if mine["ids handed out"] != reference["ids handed out"]:
        return Cause("call next_id() exactly once per entry, and use what it returns as it is")
    if mine["elicitation ids handed out"] != reference["elicitation ids handed out"]:
        return Cause(
            "call new_elicitation_id() once for each URL-mode elicitation/create entry (mode "
            "exactly 'url'), and for nothing else"
        )
    for (key, request), (_, expected) in zip(got, want, strict=True):
        if request == expected:
            continue
        entry = before[key]
        if type(request) is dict and request.get("id") != expected.get("id"):
            return Cause("use each id as next_id() returns it, int or str, without converting")
        if type(request) is dict and ("params" in request) != ("params" in expected):
            return Cause("add params only when the entry has them, and then always")
        copy_as_is = (
            f"copy the {entry.get('method')!r} entry's method and params as they are (adding "
            "only elicitationId, inside params, to a URL-mode elicitation/create)"
        )
        return Cause(public.pair_next([(key, request)], [(key, expected)], copy_as_is))
    return Cause("return the pairs the contract describes")


def _url(n: int) -> dict[str, Any]:
    return {
        "method": CREATE,
        "params": {"mode": "url", "message": f"Connect {n}.", "url": f"https://x.example/{n}"},
    }


ENTRIES: tuple[Any, ...] = (
    public.FORM,
    public.URL,
    _url(2),
    public.ROOTS,
    {"method": "roots/list", "params": {"_meta": {"progressToken": "r-1"}}},
    {"method": CREATE, "params": {"message": "Pick one.", "requestedSchema": {"type": "object"}}},
    {"method": CREATE, "params": {**public.URL["params"], "mode": "URL"}},
    {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 8}},
    {"method": "x-vendor/ask", "params": {"question": "Proceed?"}},
    {"method": "x-vendor/url", "params": {"mode": "url", "url": "https://x.example/v"}},
)
KEYS = ("delete_choice", "connect", "z", "a", "Zoë", "", "roots", "b_choice", "0")
TRANSLATES = st.builds(
    Translate,
    st.lists(
        st.tuples(st.sampled_from(KEYS), st.sampled_from(ENTRIES)),
        max_size=5,
        unique_by=lambda pair: pair[0],
    ).map(tuple),
    st.lists(st.one_of(st.integers(-3, 50), st.sampled_from(("s-3", "7", ""))), max_size=3).map(
        tuple
    ),
)
# Each catalogued mistake's input (tests/course/mistakes/ex5) stays an explicit example.
EXAMPLES = (
    Translate((("z", public.FORM), ("a", public.ROOTS))),
    Translate((("connect", public.URL), ("again", _url(2)))),
    Translate((("choice", ENTRIES[5]),)),
    Translate((("sample", ENTRIES[7]), ("ask", ENTRIES[8]))),
    Translate((("one", public.FORM), ("two", public.ROOTS)), ids=(7, "s-3")),
    Translate((("connect", public.URL), ("choice", public.FORM))),
    Translate(()),
)


def generated_maps(t: Trial) -> Fail | None:
    return differential(t, Search(TRANSLATES, describe, EXAMPLES), play, explain)


CHECKS: tuple[Check, ...] = (
    Check(
        "generated maps",
        generated_maps,
        "for any inputRequests map and id functions it should send what the reference sends",
        points=8,
        hidden=True,
        rules=("pairs", "request", "no-params", "unchanged", "elicitation-id", "never-modified"),
    ),
)
