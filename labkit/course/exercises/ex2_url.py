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

from typing import Any

from labkit.course.exercises.trial import Check, Exercise, Fail, Raised, Trial
from labkit.errors import MISSING_CAPABILITY, ProtocolError

PROTOCOL_ERROR = f"{ProtocolError.__module__}.{ProtocolError.__qualname__}"

CONTRACT = "url_elicitation"
MESSAGE = "Connect the report service to continue."
URL = "http://127.0.0.1:8000/connect/report-service/link-1"
REQUIRED: dict[str, Any] = {"requiredCapabilities": {"elicitation": {"url": {}}}}


def _entry(url: str = URL) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": MESSAGE, "url": url},
    }


def _offers(t: Trial, capabilities: dict[str, Any], expected: str) -> Fail | None:
    result = t.call(CONTRACT, capabilities, MESSAGE, URL)
    if result is None:
        return Fail(expected, "it returned None", "return the entry (None means a missing return)")
    if result != _entry():
        return Fail(
            expected,
            f"it returned {result!r}",
            "build exactly {'method': 'elicitation/create', 'params': {'mode': 'url', "
            "'message': ..., 'url': ...}}: at 2026-07-28 a URL entry has no elicitationId",
        )
    return None


def offered_when_declared(t: Trial) -> Fail | None:
    return _offers(
        t,
        {"elicitation": {"url": {}}},
        "with capabilities {'elicitation': {'url': {}}} it should return the url-mode "
        "elicitation/create entry",
    )


def offered_beside_form(t: Trial) -> Fail | None:
    return _offers(
        t,
        {"elicitation": {"form": {}, "url": {}}},
        "with both form and url declared it should return the url-mode entry",
    )


def _refuses(t: Trial, capabilities: dict[str, Any], described: str) -> Fail | None:
    expected = (
        f"with {described} it should raise ProtocolError(-32021) with data "
        f"{REQUIRED!r}, offering nothing"
    )
    outcome = t.attempt(CONTRACT, capabilities, MESSAGE, URL)
    if not isinstance(outcome, Raised):
        return Fail(
            expected,
            f"it returned {outcome.value!r}",
            "check this request's capabilities first: a mode the request did not declare is "
            "never offered",
        )
    error = outcome.error
    if not error.is_a(PROTOCOL_ERROR):
        t.crashed(outcome, "raise labkit.ProtocolError(code, message, data) for the refusal")
    if error.code != MISSING_CAPABILITY or error.data != REQUIRED:
        return Fail(
            expected,
            f"it raised ProtocolError({error.code}, data={error.data!r})",
            "use code -32021 (a capability the request needs was not declared) and name "
            "exactly what is missing in data.requiredCapabilities",
        )
    return None


def refused_form_only(t: Trial) -> Fail | None:
    return _refuses(t, {"elicitation": {"form": {}}}, "only form declared")


def refused_empty_elicitation(t: Trial) -> Fail | None:
    return _refuses(t, {"elicitation": {}}, "'elicitation': {} (which means form support only)")


def refused_nothing(t: Trial) -> Fail | None:
    return _refuses(t, {}, "no capabilities at all")


HINTS = (
    "Capabilities are per request: read only the `capabilities` argument, never something an "
    "earlier request said. `{'elicitation': {}}` means form, not URL.",
    "Two steps: gate (is there a `url` key inside `elicitation`?), then build. The refusal is "
    "the same -32021 error `notes_delete` uses for form, with `url` in requiredCapabilities.",
    "Shape: elicitation = capabilities.get('elicitation'); not a dict or no 'url' in it? "
    "raise ProtocolError(-32021, message, {'requiredCapabilities': {'elicitation': "
    "{'url': {}}}}) -> return {'method': 'elicitation/create', 'params': {'mode': 'url', "
    "'message': message, 'url': url}}.",
)

EXERCISE = Exercise(
    id="ex2",
    title="URL mode: an out-of-band setup flow",
    contracts=(CONTRACT,),
    checks=(
        Check(
            "url offered when declared",
            offered_when_declared,
            "with elicitation.url declared it should return the url-mode entry",
        ),
        Check(
            "url offered beside form",
            offered_beside_form,
            "with form and url declared it should return the url-mode entry",
        ),
        Check(
            "form only refused",
            refused_form_only,
            "with only form declared it should raise ProtocolError(-32021)",
        ),
        Check(
            "empty elicitation refused",
            refused_empty_elicitation,
            "with 'elicitation': {} it should raise ProtocolError(-32021)",
        ),
        Check(
            "no capabilities refused",
            refused_nothing,
            "with no capabilities it should raise ProtocolError(-32021)",
        ),
    ),
    hints=HINTS,
)
