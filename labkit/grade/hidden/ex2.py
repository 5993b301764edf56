"""Hidden checks for ex2, `url_elicitation(capabilities, message, url) -> dict`.

Owns: the grading-only checks of exercise 2 (`CHECKS`): differential checks
(`labkit.course.exercises.differ`) that call the learner's function and the reference answer
with the same generated capabilities (every key present or missing, of another type, unknown
keys beside and inside `elicitation`, a `url` key in the wrong place) and the same message and
URL texts (case, percent-escapes, Unicode forms, spaces at the ends, empty), twice in a row,
and compare what a caller sees: the entry by exact type, the refusal's type, code and data,
the capabilities after each call, and whether the second call handed out the first call's
object again. They add inputs, not rules: each rule is one the task states and a public check
shows (`labkit.course.exercises.ex2_url`).
Must not import the kernel runner or the command line.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from labkit.course.exercises import ex2_url as public
from labkit.course.exercises.differ import (
    Cause,
    Observation,
    Search,
    Side,
    differential,
    observed,
    texts,
)
from labkit.course.exercises.trial import Check, Fail, Trial

CONTRACT = public.CONTRACT
URLS = (
    "https://mcp.example.com/connect/report-service",
    "https://Reports.EXAMPLE.test:8443/Connect/Report%20Service/?state=a%2Fb#Top",
    "http://127.0.0.1:8000/c/../d/./e//",
    "https://xn--zo-3ja.example/ü",
    "",
)


@dataclass(frozen=True)
class Offer:
    capabilities: Any
    message: str = public.MESSAGE
    url: str = public.URL
    second_message: str = "Connect the calendar service to continue."
    second_url: str = "https://mcp.example.com/connect/calendar"


def describe(a: Offer) -> str:
    return (
        f"capabilities {a.capabilities!r}, message {a.message!r} and url {a.url!r} "
        f"(then again with message {a.second_message!r} and url {a.second_url!r})"
    )


def play(side: Side, a: Offer) -> Observation:
    calls = []
    for message, url in ((a.message, a.url), (a.second_message, a.second_url)):
        outcome = side.attempt(CONTRACT, copy.deepcopy(a.capabilities), message, url)
        seen = observed(outcome, refusal=public.PROTOCOL_ERROR)
        seen["capabilities after"] = outcome.effects.get("args", [None])[0]
        seen["same object as the first call's"] = bool(outcome.effects.get("returned_before"))
        calls.append(seen)
    return {"first call": calls[0], "second call": calls[1]}


def _declares_url(capabilities: Any) -> bool:
    elicitation = capabilities.get("elicitation") if type(capabilities) is dict else None
    return type(elicitation) is dict and "url" in elicitation


def explain(a: Offer, mine: Observation, reference: Observation) -> Cause:
    for which in ("first call", "second call"):
        got, want = mine[which], reference[which]
        if got == want:
            continue
        declared = _declares_url(a.capabilities)
        if "returned" in got and not declared:
            return Cause(
                "offer URL mode only when this request's capabilities hold an object under "
                "elicitation with a url key in it; anything else is refused with -32021",
                safety="it offered URL mode to a request that did not declare it",
            )
        if "raised" in got and declared:
            return Cause(
                "url is declared here: test whether the key is in the elicitation object "
                "('url' in elicitation), whatever else the capabilities hold",
            )
        if got.get("capabilities after") != want.get("capabilities after"):
            return Cause(
                "only read the capabilities: a lookup that writes a default into the caller's "
                "dict changes the request for everyone after you"
            )
        if got.get("same object as the first call's"):
            return Cause("build a new entry on every call from that call's arguments")
        if "raised" in got:
            if got.get("raised") != "ProtocolError":
                return Cause(
                    "refuse with labkit's ProtocolError(MISSING_CAPABILITY, message, data), "
                    "raised on purpose before anything else can fail"
                )
            if got.get("code") != want.get("code"):
                return Cause("use code -32021 (MISSING_CAPABILITY), not another code")
            return Cause(
                "name exactly what is missing in data: "
                "{'requiredCapabilities': {'elicitation': {'url': {}}}}"
            )
        returned = got.get("returned")
        if type(returned) is not dict:
            return Cause("return a dict: {'method': 'elicitation/create', 'params': {...}}")
        return Cause(public._entry_next(returned))
    return Cause("return what the contract describes for these capabilities")


ELICITATION_VALUES: tuple[Any, ...] = (
    {},
    {"url": {}},
    {"form": {}},
    {"form": {}, "url": {}},
    {"url": {"x-vendor": True}},
    {"url": None},
    {"URL": {}},
    {"x-future-mode": {}},
    None,
    "url",
    ["url"],
    True,
    1,
    0,
    "",
)


def _capabilities() -> st.SearchStrategy[Any]:
    elicitation = st.sampled_from(ELICITATION_VALUES)
    others = st.dictionaries(
        st.sampled_from(("sampling", "roots", "experimental", "url", "x-vendor")),
        st.sampled_from(({}, {"url": {}}, {"listChanged": True}, {"elicitation": {"url": {}}})),
        max_size=3,
    )
    with_elicitation = st.builds(lambda e, o: {**o, "elicitation": e}, elicitation, others)
    return st.one_of(with_elicitation, others)


ASKS = st.builds(
    Offer,
    _capabilities(),
    texts(),
    st.one_of(st.sampled_from(URLS), texts()),
    texts(),
    st.sampled_from(URLS),
)
# Each catalogued mistake's input (tests/course/mistakes/ex2) stays an explicit example.
EXAMPLES = (
    Offer({"elicitation": {"url": {}}}),
    Offer({"elicitation": {}}),
    Offer({"elicitation": "url"}),
    Offer({"elicitation": None}),
    Offer({"url": {}, "elicitation": {"form": {}}}),
    Offer({"roots": {}}),
    Offer({"elicitation": {"url": {}}}, "  Connect «Reports» for Zoë.  ", URLS[1]),
    Offer({"elicitation": {"form": {"url": {}}}, "sampling": {}}),
)


def generated_requests(t: Trial) -> Fail | None:
    return differential(t, Search(ASKS, describe, EXAMPLES), play, explain)


CHECKS: tuple[Check, ...] = (
    Check(
        "generated requests",
        generated_requests,
        "for any capabilities, message and url it should offer or refuse as the reference does",
        points=8,
        hidden=True,
        rules=("url-key", "form-only", "refusal", "refusal-data", "entry", "no-id", "read-only"),
    ),
)
