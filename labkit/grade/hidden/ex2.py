"""Hidden checks for ex2, `url_elicitation(capabilities, message, url) -> dict`.

Only an `elicitation` object holding a `url` key declares URL mode (docs/LESSON.md section 5); the
refusal is labkit's ProtocolError with code -32021 and data naming exactly what is missing.
The public checks try the plain declarations and refusals; these try what they skip: unknown
keys beside `url`, an `elicitation` value that is not an object, a `url` key in the wrong
place, a refusal among other declared capabilities, message and URL text that must travel
byte for byte, the caller's capabilities after the call, and two calls in a row.

labkit's ProtocolError is looked up in `sys.modules` (the learner's code imported it in order
to raise it). Imports nothing from labkit (the kernel runs this source from a string).
"""

import copy
import sys
from typing import Any

MISSING_CAPABILITY = -32021
REQUIRED: Any = {"requiredCapabilities": {"elicitation": {"url": {}}}}
MESSAGE = "Connect the report service to continue."
URL = "http://127.0.0.1:8000/connect/report-service/link-7"


def _entry(message: Any = MESSAGE, url: Any = URL) -> Any:
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": message, "url": url},
    }


def _short(text: Any) -> Any:
    """A learner's text, short enough for a feedback line."""
    return text if len(text) <= 300 else text[:300] + "..."


def _show(value: Any) -> Any:
    return _short(repr(value))


def _difference(expected: Any, got: Any) -> Any:
    """What differs first between the expected entry and the learner's, briefly."""
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


def _protocol_error(error: Any) -> Any:
    """Whether `error` is labkit's ProtocolError (loaded once the learner's code imported it)."""
    cls = getattr(sys.modules.get("labkit.errors"), "ProtocolError", None)
    return isinstance(cls, type) and isinstance(error, cls)


def _raised(error: Any) -> Any:
    if _protocol_error(error):
        return f"ProtocolError({_show(error.code)}, data={_show(error.data)})"
    name = type(error).__name__
    if name == "ProtocolError":
        name = "a ProtocolError that is not labkit's (import it from labkit)"
    return f"{name}: {_short(str(error))}"


def _offered(url_elicitation: Any, capabilities: Any, what: Any, **text: Any) -> Any:
    message, url = text.get("message", MESSAGE), text.get("url", URL)
    want = _entry(message, url)
    try:
        got = url_elicitation(capabilities, message, url)
    except NotImplementedError:
        raise
    except Exception as error:
        raise AssertionError(
            f"expected the url-mode entry for {what}, got {_raised(error)}"
        ) from None
    assert got == want, f"expected {_show(want)} for {what}, got {_difference(want, got)}"
    return got


def _refused(url_elicitation: Any, capabilities: Any, what: Any, exact: Any = False) -> Any:
    """-32021 for `capabilities`; with `exact`, the data must be exactly REQUIRED too (the
    other refusals leave the data to that check and the public ones)."""
    data = f", data={REQUIRED!r}" if exact else ""
    expected = f"ProtocolError(-32021{data}) for {what}"
    try:
        got = url_elicitation(capabilities, MESSAGE, URL)
    except NotImplementedError:
        raise
    except Exception as caught:
        error: Any = caught
        assert _protocol_error(error), f"expected {expected}, got {_raised(error)}"
        assert error.code == MISSING_CAPABILITY, f"expected {expected}, got {_raised(error)}"
        assert not exact or error.data == REQUIRED, f"expected {expected}, got {_raised(error)}"
        return
    raise AssertionError(f"expected {expected}, got the entry {_show(got)}")


def unknown_keys_beside_url(url_elicitation: Any) -> Any:
    capabilities = {
        "elicitation": {"form": {}, "url": {"x-vendor": True}, "x-future-mode": {}},
        "sampling": {},
        "roots": {"listChanged": True},
        "experimental": {"x-trace": {}},
    }
    _offered(
        url_elicitation,
        capabilities,
        "capabilities declaring url beside unknown keys (which are ignored)",
    )


def non_object_elicitation_refused(url_elicitation: Any) -> Any:
    for value in ("url", ["url"], None, True, 1):
        _refused(
            url_elicitation,
            {"elicitation": value},
            f"'elicitation': {value!r} (not an object, so no url key)",
        )


def url_outside_elicitation_refused(url_elicitation: Any) -> Any:
    misplaced: Any = (
        {"url": {}, "elicitation": {"form": {}}},
        {"sampling": {"url": {}}},
        {"experimental": {"elicitation": {"url": {}}}},
        {"elicitation": {"form": {"url": {}}}},
    )
    for capabilities in misplaced:
        _refused(
            url_elicitation,
            capabilities,
            f"{capabilities!r} (a url key counts only directly inside elicitation)",
        )


def refusal_names_only_url(url_elicitation: Any) -> Any:
    _refused(
        url_elicitation,
        {"sampling": {}, "roots": {"listChanged": True}, "elicitation": {"form": {}}},
        "sampling, roots and form declared (data names only what is missing)",
        exact=True,
    )


def text_passed_unchanged(url_elicitation: Any) -> Any:
    _offered(
        url_elicitation,
        {"elicitation": {"url": {}}},
        "an unusual message and URL (both travel exactly as given)",
        message="  Connect «Reports» for Zoë: step 2/3.\nThen retry.  ",
        url="https://Reports.example.test/Connect/Report%20Service/link-2?state=a%2Fb&next=%2F#Top",
    )


def capabilities_left_unchanged(url_elicitation: Any) -> Any:
    declared: Any = (
        {"roots": {}},
        {"elicitation": {"form": {}}},
        {"elicitation": {"url": {}}, "sampling": {}},
    )
    for capabilities in declared:
        given = copy.deepcopy(capabilities)
        try:
            url_elicitation(given, MESSAGE, URL)
        except NotImplementedError:
            raise
        except Exception:
            pass  # whether it refused is other checks' business
        assert given == capabilities, (
            f"expected the capabilities {capabilities!r} left as they were, got {_show(given)} "
            "after the call"
        )


def fresh_entry_per_call(url_elicitation: Any) -> Any:
    capabilities: Any = {"elicitation": {"url": {}}}
    first = _offered(url_elicitation, capabilities, "the first of two calls")
    first["params"]["elicitationId"] = "added-by-the-caller"
    second_url = "http://127.0.0.1:8000/connect/report-service/link-8"
    second = _offered(
        url_elicitation,
        capabilities,
        "a second call after the caller changed the first entry (each call builds its own)",
        url=second_url,
    )
    assert first["params"]["url"] == URL, (
        f"expected the first entry to keep its url {URL!r} after a second call, got "
        f"{_show(first['params']['url'])} (both calls returned the same dict)"
    )
    assert second is not first, "expected a new entry per call, got the same dict twice"


CHECKS = (
    (unknown_keys_beside_url, 1, "url declared beside unknown keys is offered"),
    (non_object_elicitation_refused, 2, "an elicitation value that is not an object is refused"),
    (url_outside_elicitation_refused, 1, "a url key outside elicitation is refused"),
    (refusal_names_only_url, 1, "the refusal's data names only the missing url mode"),
    (text_passed_unchanged, 2, "the message and the URL travel unchanged"),
    (capabilities_left_unchanged, 1, "the capabilities passed in are left unchanged"),
    (fresh_entry_per_call, 1, "each call returns a new entry"),
)
