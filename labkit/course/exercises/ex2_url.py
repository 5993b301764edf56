"""Exercise 2, URL mode: public checks and hints for `url_elicitation`.

Contract: `url_elicitation(capabilities, message, url) -> dict` returns the 2026-07-28
`inputRequests` entry that asks the user to open `url` (`{"method": "elicitation/create",
"params": {"mode": "url", "message", "url"}}`, no `elicitationId`), and raises
`labkit.ProtocolError` with code -32021 and `data = {"requiredCapabilities": {"elicitation":
{"url": {}}}}` when *this* request's capabilities do not declare `elicitation.url`
(docs/LESSON.md sections 5 and 7; docs/protocol.md "Elicitation params"). labkit's own version is
`labkit.url_mode.url_elicitation`.

Must not import ipywidgets.
"""

from __future__ import annotations

import copy
from typing import Any

from labkit.course.exercises.trial import (
    Check,
    Contract,
    Equivalent,
    Exercise,
    Fail,
    Raised,
    Rule,
    Safety,
    Trial,
    difference,
)
from labkit.errors import MISSING_CAPABILITY, ProtocolError

PROTOCOL_ERROR = f"{ProtocolError.__module__}.{ProtocolError.__qualname__}"

CONTRACT = "url_elicitation"
MESSAGE = "Connect the report service to continue."
URL = "http://127.0.0.1:8000/connect/report-service/link-1"
REQUIRED: dict[str, Any] = {"requiredCapabilities": {"elicitation": {"url": {}}}}
OTHER_MESSAGE = "Connect the calendar service to continue."
OTHER_URL = "https://mcp.example.com/connect/calendar/link-2"


def _entry(url: str = URL) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": MESSAGE, "url": url},
    }


def _offers(
    t: Trial, capabilities: dict[str, Any], expected: str, message: str = MESSAGE, url: str = URL
) -> Fail | None:
    outcome = t.attempt(CONTRACT, capabilities, message, url)
    if isinstance(outcome, Raised):
        return t.raised_instead(
            outcome,
            expected,
            "the url-mode entry",
            "url is declared here: test whether the key is there ('url' in elicitation), not "
            "whether its value is truthy ({} is an empty object, still a declaration)",
        )
    result = outcome.value
    if result is None:
        return Fail(expected, "it returned None", "return the entry (None means a missing return)")
    want = {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": message, "url": url},
    }
    if result != want:
        return Fail(
            expected,
            f"it returned an entry where {difference(want, result)}",
            _entry_next(result, want),
        )
    return None


def _entry_next(result: Any, want: dict[str, Any] | None = None) -> str:
    """The next step for a wrong entry, from what is wrong with it."""
    if not isinstance(result, dict):
        return "return a dict: {'method': 'elicitation/create', 'params': {...}}"
    want = want or _entry()
    params = result.get("params")
    if "elicitationId" in result or (isinstance(params, dict) and "elicitationId" in params):
        return "remove the elicitationId: at 2026-07-28 a URL entry has no elicitationId"
    wrong = [
        f"params.{k}"
        for k, v in want["params"].items()
        if not isinstance(params, dict) or params.get(k) != v
    ]
    if isinstance(params, dict):
        wrong += [f"params.{k}" for k in params if k not in want["params"]]
    if result.get("method") != "elicitation/create" or set(result) != {"method", "params"}:
        wrong.insert(0, "the top-level keys (method and params only)")
    return (
        f"fix {', '.join(wrong)}: the entry is {{'method': 'elicitation/create', 'params': "
        "{'mode': 'url', 'message': message, 'url': url}}, message and url exactly as given"
    )


def offered_when_declared(t: Trial) -> Fail | None:
    return _offers(
        t,
        {"elicitation": {"url": {}}},
        "with capabilities {'elicitation': {'url': {}}} it should return the url-mode "
        "elicitation/create entry",
    ) or _offers(
        t,
        {"elicitation": {"url": {}}},
        f"with the message {OTHER_MESSAGE!r} and the url {OTHER_URL!r} it should return an "
        "entry holding them exactly",
        OTHER_MESSAGE,
        OTHER_URL,
    )


def offered_beside_form(t: Trial) -> Fail | None:
    return _offers(
        t,
        {"elicitation": {"form": {}, "url": {}}},
        "with both form and url declared it should return the url-mode entry for "
        f"message {OTHER_MESSAGE!r} and url {OTHER_URL!r}",
        OTHER_MESSAGE,
        OTHER_URL,
    )


NOT_AN_OBJECT = (
    "an elicitation value that is not an object declares no mode: test that it is a dict "
    "before looking inside it"
)


def _refuses(
    t: Trial, capabilities: dict[str, Any], described: str, cause: str = ""
) -> Fail | None:
    """`cause`, when given, is the next step whatever went wrong: what this input teaches."""
    expected = (
        f"with {described} it should raise ProtocolError(-32021) with data "
        f"{REQUIRED!r}, offering nothing"
    )
    outcome = t.attempt(CONTRACT, capabilities, MESSAGE, URL)
    if not isinstance(outcome, Raised):
        return Fail(
            expected,
            f"it returned {outcome.value!r}",
            cause
            or "check this request's capabilities first: a mode the request did not declare "
            "is never offered",
        )
    error = outcome.error
    if not error.is_a(PROTOCOL_ERROR):
        return t.raised_instead(
            outcome,
            expected,
            "labkit.ProtocolError with code -32021",
            "refuse with raise ProtocolError(MISSING_CAPABILITY, message, data): the contract "
            "names labkit.ProtocolError, code -32021",
            cause
            or "the refusal is a ProtocolError you raise yourself: test for the missing "
            "capability first, so nothing else can fail on the way",
        )
    if error.code != MISSING_CAPABILITY:
        return Fail(
            expected,
            f"it raised ProtocolError({error.code!r}) (expected code -32021)",
            "use code -32021 (MISSING_CAPABILITY: a capability the request needs was not "
            "declared), not another JSON-RPC code",
        )
    if error.data != REQUIRED:
        return Fail(
            expected,
            "it raised ProtocolError(-32021) whose data differs: "
            f"{difference(REQUIRED, error.data)}",
            "name exactly what is missing in data.requiredCapabilities: "
            "{'elicitation': {'url': {}}}",
        )
    return None


def refused_form_only(t: Trial) -> Fail | None:
    return offered_when_declared(t) or _refuses(
        t, {"elicitation": {"form": {}}}, "only form declared"
    )


def refused_empty_elicitation(t: Trial) -> Fail | None:
    return offered_when_declared(t) or _refuses(
        t, {"elicitation": {}}, "'elicitation': {} (which means form support only)"
    )


def refused_nothing(t: Trial) -> Fail | None:
    return offered_when_declared(t) or _refuses(t, {}, "no capabilities at all")


def non_object_elicitation(t: Trial) -> Fail | None:
    # The refusal counts only with the acceptance beside it: an object with url is offered.
    accepted = offered_when_declared(t)
    if accepted is not None:
        return accepted
    for value in (None, ["url"], "url"):
        described = f"'elicitation': {value!r} (not an object)"
        failure = _refuses(t, {"elicitation": value}, described, NOT_AN_OBJECT)
        if failure is not None:
            return failure
    return None


def capabilities_unchanged(t: Trial) -> Fail | None:
    capabilities: dict[str, Any]
    for capabilities in ({"elicitation": {"url": {}}}, {"roots": {}}):
        t.attempt(CONTRACT, copy.deepcopy(capabilities), MESSAGE, URL)
        after = t.args_after()[0]
        if after != capabilities:
            return Fail(
                f"the capabilities {capabilities!r} should be left as they were",
                f"after the call they are {after!r}",
                "only read the capabilities: a lookup that writes a default into the caller's "
                "dict changes the request for everyone after you",
            )
    return offered_when_declared(t)


HINTS = (
    "Capabilities are per request: read only the `capabilities` argument, never something an "
    "earlier request said. `{'elicitation': {}}` means form, not URL.",
    "Two steps: gate (is there a `url` key inside `elicitation`?), then build. The refusal is "
    "the same -32021 error `notes_delete` uses for form, with `url` in requiredCapabilities.",
    "The idea is gate, then build: a capability is declared by the presence of a key, so test "
    "membership (`in`, a mapping pattern) on this request's `elicitation` object; refuse with "
    "`labkit.ProtocolError` and `labkit.errors.MISSING_CAPABILITY`, and build a new dict per "
    'call (docs/protocol.md, "Elicitation params").',
)

CONTRACT_TEXT = Contract(
    "url_elicitation(capabilities, message, url) -> dict",
    rules=(
        Rule("url-key", "only an explicit `url` key inside `elicitation` means URL mode"),
        Rule("form-only", '(`{"elicitation": {}}` means form only)'),
        Rule(
            "refusal", "without URL mode, raise `ProtocolError(MISSING_CAPABILITY, message, data)`"
        ),
        Rule("refusal-data", '`data = {"requiredCapabilities": {"elicitation": {"url": {}}}}`'),
        Rule("entry", "with it, return the `inputRequests` entry"),
        Rule("no-id", "the entry has no `elicitationId`"),
        Rule("read-only", "read only `capabilities`"),
    ),
)

EXERCISE = Exercise(
    id="ex2",
    title="URL mode: an out-of-band setup flow",
    contract=CONTRACT_TEXT,
    notebook="04-ex2-url-mode",
    hidden_checks="labkit.grade.hidden.ex2",
    safety=Safety(3, "no URL-mode entry should be offered to a request that did not declare it"),
    equivalent_mutants=tuple(
        Equivalent(
            '"This tool needs URL-mode elicitation",',
            f"{text},",
            "the refusal's message is the learner's own words: the contract fixes its code and "
            "data, never its text",
        )
        for text in (
            '"XXThis tool needs URL-mode elicitationXX"',
            '"this tool needs url-mode elicitation"',
            '"THIS TOOL NEEDS URL-MODE ELICITATION"',
        )
    ),
    outputs={
        "ex2-try": (
            "url offered when declared",
            "url offered beside form",
            "form only refused",
            "empty elicitation refused",
            "no capabilities refused",
            "generated requests",
        ),
    },
    checks=(
        Check(
            "url offered when declared",
            offered_when_declared,
            "with elicitation.url declared it should return the url-mode entry",
            rules=("url-key", "entry", "no-id"),
        ),
        Check(
            "url offered beside form",
            offered_beside_form,
            "with form and url declared it should return the url-mode entry",
            rules=("url-key", "entry"),
        ),
        Check(
            "form only refused",
            refused_form_only,
            "with only form declared it should raise ProtocolError(-32021)",
            rules=("refusal", "refusal-data"),
        ),
        Check(
            "empty elicitation refused",
            refused_empty_elicitation,
            "with 'elicitation': {} it should raise ProtocolError(-32021)",
            rules=("form-only", "refusal", "refusal-data"),
        ),
        Check(
            "no capabilities refused",
            refused_nothing,
            "with no capabilities it should raise ProtocolError(-32021)",
            rules=("refusal", "refusal-data"),
        ),
        Check(
            "non-object elicitation refused",
            non_object_elicitation,
            "an elicitation value that is not an object should raise ProtocolError(-32021)",
            rules=("url-key", "refusal"),
        ),
        Check(
            "capabilities left unchanged",
            capabilities_unchanged,
            "the capabilities passed in should be left unchanged",
            rules=("read-only", "entry"),
        ),
    ),
    hints=HINTS,
)
