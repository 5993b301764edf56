"""The notebook MRTR path: a tool call whose forms are answered by clicks, without blocking.

Owns: `start_tool`, `LiveCall`, and the step-API contract (`StepHost`, `PendingRound`) it
drives. A kernel cannot handle a button click while a cell is still running, so nothing here
waits: `start_tool` makes the first call, renders one panel per `inputRequests` entry and
returns at once; the last panel's answer calls `host.resume` from the click handler and shows
the outcome (the final result, the next round's panels or the error) in the same area.

The panels stay truthful about what the server did: a round that asks exactly what the shown
panels ask (a URL the user has not finished with yet) re-arms those panels with a note instead
of drawing copies, and after a round answered only with `cancel` (which mutates nothing and
leaves the request answerable, docs/LESSON.md section 8) the result is shown and the same
panels work again for the same `requestState`.

Does not own the protocol: the host builds requests, keeps `requestState` byte-exact and
retries with a new id (docs/LESSON.md section 4). Nothing in the protocol core may import
this module.
Must not import the grader.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

import ipywidgets as widgets

from labkit.course.widgets.consent_panel import Opener, UrlConsent
from labkit.course.widgets.elicitation_form import ElicitationForm, ElicitationResult

Result = dict[str, Any]
Panel = ElicitationForm | UrlConsent

STILL_OPEN: Final = "Nothing changed, and the request is still open: answer it again, or leave it."
# What a panel says when the server asks exactly the same again.
ASKED_AGAIN: Final[dict[type, str]] = {
    UrlConsent: "The server has no record yet that you finished on the page, and asks again "
    "with the same link: finish there, then press Continue.",
    ElicitationForm: "The server asked the same question again: answer it below.",
}


class PendingRound(Protocol):
    """One `input_required` round as the host hands it out (a frozen dataclass in `Host`)."""

    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> Mapping[str, Any]: ...
    @property
    def input_requests(self) -> Mapping[str, Mapping[str, Any]]: ...
    @property
    def request_state(self) -> str | None: ...
    @property
    def round(self) -> int: ...


P = TypeVar("P", bound=PendingRound)


class StepHost(Protocol[P]):
    """The non-blocking step API of `labkit.client.Host`: each call sends one request and
    returns the next round to answer, or the final result; a protocol error raises an exception
    carrying `.code`, `.message` and `.data`."""

    def begin(self, name: str, arguments: dict[str, Any]) -> P | Result: ...

    def resume(self, pending: P, answers: dict[str, dict[str, Any]]) -> P | Result: ...


if TYPE_CHECKING:
    from labkit.client import Host, Pending

    def _host_is_a_step_host(host: Host) -> StepHost[Pending]:
        # mypy proves here that the course Host fits the contract `start_tool` is written against.
        return host


def _form(params: Mapping[str, Any], opener: Opener | None) -> Panel:
    return ElicitationForm(params)


def _url(params: Mapping[str, Any], opener: Opener | None) -> Panel:
    return UrlConsent(params, opener=opener)


# Elicitation mode -> panel. A missing mode means form (docs/protocol.md, "Elicitation params").
PANELS: dict[str, Callable[[Mapping[str, Any], Opener | None], Panel]] = {
    "form": _form,
    "url": _url,
}


def panel_for(key: str, entry: Mapping[str, Any], opener: Opener | None = None) -> Panel:
    """The panel answering one `inputRequests` entry, or ValueError naming the entry."""
    if not isinstance(entry, Mapping) or entry.get("method") != "elicitation/create":
        method = entry.get("method") if isinstance(entry, Mapping) else None
        raise ValueError(f"inputRequests[{key!r}]: {method!r} cannot be answered with a widget")
    params = entry.get("params")
    if not isinstance(params, Mapping):
        raise ValueError(f"inputRequests[{key!r}]: params must be an object")
    mode = params.get("mode", "form")
    build = PANELS.get(mode) if isinstance(mode, str) else None
    if build is None:
        raise ValueError(f"inputRequests[{key!r}]: unknown elicitation mode {mode!r}")
    try:
        return build(params, opener)
    except ValueError as exc:
        raise ValueError(f"inputRequests[{key!r}]: {exc}") from None


class LiveCall(Generic[P]):
    """A tool call in progress. `widget` shows it; `result` is the final result once there is
    one, `error` the exception that ended it, `rounds` every `input_required` round shown, and
    `panels` the current round's panels by input key."""

    def __init__(self, host: StepHost[P], area: Any, opener: Opener | None) -> None:
        self.host = host
        self.widget = area
        self.result: Result | None = None
        self.error: Exception | None = None
        self.rounds: list[P] = []
        self.panels: dict[str, Panel] = {}
        self._opener = opener
        self._sent: dict[str, ElicitationResult] = {}

    @property
    def done(self) -> bool:
        """The call ended: an error, or a result with no request left open."""
        return self.error is not None or (self.result is not None and not self.panels)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # A cell ending in `start_tool(...)` shows the call's area.
        return self.widget._repr_mimebundle_(**kwargs)

    def _run(self, step: Callable[[], P | Result]) -> None:
        # Called from `start_tool` and from click handlers: an exception raised here would only
        # reach the kernel's log, so every failure is shown in the area and kept in `.error`.
        try:
            outcome = step()
            if isinstance(outcome, dict):
                self._show_result(outcome)
            else:
                self._show_round(outcome)
            self._sent = {}
        except Exception as exc:
            self._show_error(exc)

    def _show_round(self, pending: P) -> None:
        if self.panels and self.rounds and self.rounds[-1].input_requests == pending.input_requests:
            self.rounds.append(pending)
            self._arm(pending, lambda panel: ASKED_AGAIN[type(panel)])
            return
        panels = {key: panel_for(key, e, self._opener) for key, e in pending.input_requests.items()}
        self.rounds.append(pending)
        self.panels = panels
        heading = widgets.HTML(f"<b>Round {len(self.rounds)}</b>: the server needs your input.")
        if not panels:
            # State alone means "retry later" (docs/protocol.md, MRTR): the user decides when.
            retry = widgets.Button(description="Retry")
            retry.on_click(lambda _b: self._resume(pending, {}, retry))
            self._append(heading, widgets.HTML("The server asked to retry later."), retry)
            return
        self._append(heading, *panels.values())
        self._arm(pending, None)

    def _arm(self, pending: P, note: Callable[[Panel], str] | None) -> None:
        """Collect this round's answers from the shown panels (re-armed with `note` first)."""
        answers: dict[str, ElicitationResult] = {}
        for key, panel in self.panels.items():
            if note is not None:
                panel.reopen(note(panel))
            panel.on_answer(self._collector(pending, answers, key))

    def _collector(
        self, pending: P, answers: dict[str, ElicitationResult], key: str
    ) -> Callable[[ElicitationResult], None]:
        def collect(answer: ElicitationResult) -> None:
            answers[key] = answer
            # Retry once, when the last entry of the round is answered (same keys back).
            if len(answers) == len(pending.input_requests):
                self._resume(pending, answers, None)

        return collect

    def _resume(self, pending: P, answers: dict[str, ElicitationResult], button: Any) -> None:
        if button is not None:
            button.disabled = True
        self._sent = dict(answers)
        self._run(lambda: self.host.resume(pending, dict(answers)))

    def _show_result(self, result: Result) -> None:
        self.result = result
        cancelled = bool(self._sent) and all(
            a.get("action") == "cancel" for a in self._sent.values()
        )
        if not (cancelled and self.panels and not result.get("isError")):
            self.panels = {}
        texts = [
            html.escape(str(item.get("text", "")))
            for item in result.get("content", [])
            if isinstance(item, Mapping)
            and item.get("type") == "text"
            and not _is_structured_copy(item.get("text"), result)
        ]
        title = "Tool error" if result.get("isError") else "Result"
        parts = [f"<b>{title}</b>: {'<br>'.join(texts)}"]
        if "structuredContent" in result:
            body = json.dumps(result["structuredContent"], indent=2, sort_keys=True)
            parts.append(f"<pre>{html.escape(body)}</pre>")
        self._append(widgets.HTML("".join(parts)))
        if self.panels:  # a cancel the server kept open: the same round, answerable again
            self._arm(self.rounds[-1], lambda _panel: STILL_OPEN)

    def _show_error(self, exc: Exception) -> None:
        self.error = exc
        self.panels = {}
        code = getattr(exc, "code", None)
        message = getattr(exc, "message", None) or str(exc)
        label = f"Error {code}" if code is not None else type(exc).__name__
        text = f"{label}: {message}"
        data = getattr(exc, "data", None)
        if data is not None:
            text += f" {json.dumps(data, sort_keys=True, default=str)}"
        self._append(widgets.HTML(f"<span style='color: #b00020'>{html.escape(text)}</span>"))

    def _append(self, *children: Any) -> None:
        self.widget.children = (*self.widget.children, *children)


def _is_structured_copy(text: object, result: Result) -> bool:
    """A text item that only repeats `structuredContent` as JSON (the SDK sends one, for
    clients that read text only): shown once, as the structured content."""
    if not isinstance(text, str) or "structuredContent" not in result:
        return False
    try:
        return bool(json.loads(text) == result["structuredContent"])
    except ValueError:
        return False


def start_tool(
    host: StepHost[P],
    name: str,
    arguments: dict[str, Any],
    *,
    out: Any = None,
    opener: Opener | None = None,
) -> LiveCall[P]:
    """Call tool `name` through `host` and return at once with a `LiveCall`.

    `out` is the `ipywidgets.Box` to show the call in (a new `VBox` by default); `opener`
    is handed to URL-mode panels (default: show a clickable link, never fetch).
    """
    area = out if out is not None else widgets.VBox()
    call = LiveCall(host, area, opener)
    call._run(lambda: host.begin(name, arguments))
    return call
