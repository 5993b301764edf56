"""Hidden checks for ex2, `url_elicitation(capabilities, message, url) -> dict`.

Owns: the grading-only checks of exercise 2 (`CHECKS`). Only an `elicitation` object holding a
`url` key declares URL mode (docs/LESSON.md section 5); the refusal is labkit's ProtocolError with
code -32021 and data naming exactly what is missing. The public checks
(`labkit.course.exercises.ex2_url`) try the plain declarations and refusals; these try what
they skip: unknown keys beside `url`, an `elicitation` value that is not an object, a `url` key
in the wrong place, a refusal among other declared capabilities, message and URL text that must
travel byte for byte, the caller's capabilities after the call, and two calls in a row.

Written like the public checks: learner code is called only through the `Trial`, and what comes
back is data decoded by exact type (a learner's dict subclass is an `Opaque`, never equal to the
entry).
"""

from __future__ import annotations

import copy
from typing import Any

from labkit.course.exercises.calls import LearnerError
from labkit.course.exercises.trial import Check, Fail, Raised, Trial
from labkit.errors import MISSING_CAPABILITY, ProtocolError

CONTRACT = "url_elicitation"
PROTOCOL_ERROR = f"{ProtocolError.__module__}.{ProtocolError.__qualname__}"
REQUIRED: dict[str, Any] = {"requiredCapabilities": {"elicitation": {"url": {}}}}
MESSAGE = "Connect the report service to continue."
URL = "http://127.0.0.1:8000/connect/report-service/link-7"
NOT_LABKITS = "raise labkit's own ProtocolError (import it from labkit), not a class of your own"


def _entry(message: str = MESSAGE, url: str = URL) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": message, "url": url},
    }


def _show(value: Any) -> str:
    """A learner's value, short enough for a feedback line."""
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "..."


def _difference(expected: Any, got: Any) -> str:
    """What differs first between the expected entry and the learner's, briefly."""
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


def _refusal(error: LearnerError) -> str:
    return f"ProtocolError({_show(error.code)}, data={_show(error.data)})"


def _offered(
    t: Trial, capabilities: dict[str, Any], expected: str, next_step: str, **text: str
) -> Fail | None:
    message, url = text.get("message", MESSAGE), text.get("url", URL)
    outcome = t.attempt(CONTRACT, capabilities, message, url)
    if isinstance(outcome, Raised):
        if outcome.error.is_a(PROTOCOL_ERROR):
            return Fail(expected, f"it refused with {_refusal(outcome.error)}", next_step)
        t.crashed(outcome)
    want = _entry(message, url)
    if outcome.value is None:
        return Fail(expected, "it returned None", "return the entry (None means a missing return)")
    if outcome.value != want:
        return Fail(expected, f"it returned {_difference(want, outcome.value)}", next_step)
    return None


def _refused(
    t: Trial, capabilities: Any, described: str, next_step: str, *, exact: bool = False
) -> Fail | None:
    """-32021 for `capabilities`; with `exact`, the data must be exactly REQUIRED too (the other
    refusals leave the data to that check and the public ones)."""
    data = f" with data {REQUIRED!r}" if exact else ""
    expected = f"with {described} it should raise ProtocolError(-32021){data}, offering nothing"
    outcome = t.attempt(CONTRACT, capabilities, MESSAGE, URL)
    if not isinstance(outcome, Raised):
        return Fail(expected, f"it returned {_show(outcome.value)}", next_step)
    error = outcome.error
    if not error.is_a(PROTOCOL_ERROR):
        if error.type == "ProtocolError":
            return Fail(expected, "it raised a ProtocolError that is not labkit's", NOT_LABKITS)
        t.crashed(outcome, "raise labkit.ProtocolError(code, message, data) for the refusal")
    if error.code != MISSING_CAPABILITY or (exact and error.data != REQUIRED):
        return Fail(
            expected,
            f"it raised {_refusal(error)}",
            "use code -32021 and name in data.requiredCapabilities only what this request is "
            "missing",
        )
    return None


def unknown_keys_beside_url(t: Trial) -> Fail | None:
    capabilities = {
        "elicitation": {"form": {}, "url": {"x-vendor": True}, "x-future-mode": {}},
        "sampling": {},
        "roots": {"listChanged": True},
        "experimental": {"x-trace": {}},
    }
    return _offered(
        t,
        capabilities,
        "with url declared beside unknown keys (which are ignored) it should return the "
        "url-mode entry",
        "decide on whether a url key is there, directly inside elicitation; keys you do not "
        "know, beside it or inside it, change nothing",
    )


def non_object_elicitation(t: Trial) -> Fail | None:
    for value in ("url", ["url"], None, True, 1):
        failure = _refused(
            t,
            {"elicitation": value},
            f"'elicitation': {value!r} (not an object, so no url key)",
            "only an object (a dict) under elicitation can declare url; any other value "
            "declares no url mode",
        )
        if failure is not None:
            return failure
    return None


def url_outside_elicitation(t: Trial) -> Fail | None:
    misplaced: tuple[dict[str, Any], ...] = (
        {"url": {}, "elicitation": {"form": {}}},
        {"sampling": {"url": {}}},
        {"experimental": {"elicitation": {"url": {}}}},
        {"elicitation": {"form": {"url": {}}}},
    )
    for capabilities in misplaced:
        failure = _refused(
            t,
            capabilities,
            f"{capabilities!r} (a url key counts only directly inside elicitation)",
            "look for the url key in one place only: directly inside the elicitation object",
        )
        if failure is not None:
            return failure
    return None


def refusal_names_only_url(t: Trial) -> Fail | None:
    return _refused(
        t,
        {"sampling": {}, "roots": {"listChanged": True}, "elicitation": {"form": {}}},
        "sampling, roots and form declared (the data names only what is missing)",
        "requiredCapabilities names what is missing, not what the request declared",
        exact=True,
    )


def text_unchanged(t: Trial) -> Fail | None:
    return _offered(
        t,
        {"elicitation": {"url": {}}},
        "with an unusual message and URL it should return both exactly as given",
        "put the message and the url into the entry as they came: no stripping, decoding or "
        "changing case",
        message="  Connect «Reports» for Zoë: step 2/3.\nThen retry.  ",
        url="https://Reports.example.test/Connect/Report%20Service/link-2?state=a%2Fb&next=%2F#Top",
    )


def capabilities_unchanged(t: Trial) -> Fail | None:
    """Each call leaves the caller's capabilities as they were, and answers what it is asked:
    an answer that ignores its inputs (returning `{}`) cannot pass by writing nothing."""
    declared: tuple[dict[str, Any], ...] = (
        {"roots": {}},
        {"elicitation": {"form": {}}},
        {"elicitation": {"url": {}}, "sampling": {}},
    )
    for capabilities in declared:
        url_declared = "url" in capabilities.get("elicitation", {})
        answered = (
            _offered(
                t,
                copy.deepcopy(capabilities),
                f"with {capabilities!r} it should return the url-mode entry",
                "build the entry from the message and url when elicitation.url is declared",
            )
            if url_declared
            else _refused(
                t,
                copy.deepcopy(capabilities),
                f"the capabilities {capabilities!r}",
                "refuse with ProtocolError(-32021) when elicitation.url is not declared",
            )
        )
        if answered is not None:
            return answered
        after = t.args_after()[0]
        if after != capabilities:
            return Fail(
                f"the capabilities {capabilities!r} should be left as they were",
                f"after the call they are {_show(after)}",
                "only read the capabilities: a lookup that writes a default into the caller's "
                "dict changes the request for everyone after you",
            )
    return None


def new_entry_per_call(t: Trial) -> Fail | None:
    capabilities: dict[str, Any] = {"elicitation": {"url": {}}}
    second_url = "http://127.0.0.1:8000/connect/report-service/link-8"
    first = _offered(
        t,
        capabilities,
        "the first of two calls should return its url-mode entry",
        "build the entry from this call's arguments",
    )
    if first is not None:
        return first
    expected = (
        "a second call with another message and URL should return an entry of its own, with "
        "the second message and URL"
    )
    second = _offered(
        t,
        capabilities,
        expected,
        "build a new entry on every call from that call's arguments, never one kept from "
        "an earlier call",
        message="Connect the calendar service to continue.",
        url=second_url,
    )
    if second is None and t.returned_before():
        return Fail(
            expected,
            "it returned the same dict object as the first call, filled in again",
            "each call builds its own entry: whoever still holds the first one sees it change",
        )
    return second


CHECKS: tuple[Check, ...] = (
    Check(
        "url beside unknown keys",
        unknown_keys_beside_url,
        "url declared beside unknown keys should be offered",
        hidden=True,
    ),
    Check(
        "non-object elicitation refused",
        non_object_elicitation,
        "an elicitation value that is not an object should raise ProtocolError(-32021)",
        points=2,
        hidden=True,
    ),
    Check(
        "url outside elicitation refused",
        url_outside_elicitation,
        "a url key outside elicitation should raise ProtocolError(-32021)",
        hidden=True,
    ),
    Check(
        "refusal names only url",
        refusal_names_only_url,
        "the refusal's data should name only the missing url mode",
        hidden=True,
    ),
    Check(
        "message and url unchanged",
        text_unchanged,
        "the message and the URL should travel unchanged",
        points=2,
        hidden=True,
    ),
    Check(
        "capabilities left unchanged",
        capabilities_unchanged,
        "the capabilities passed in should be left unchanged",
        hidden=True,
    ),
    Check(
        "a new entry per call",
        new_entry_per_call,
        "each call should return its own entry",
        hidden=True,
    ),
)
