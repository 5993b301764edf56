"""A form-mode elicitation request rendered as live ipywidgets (docs/LESSON.md section 6).

Owns: `ElicitationForm`, the mapping from a restricted-schema field to an input widget, reading
the widgets back into an answer, and the per-field error labels.
Does not own the schema rules: which schemas are allowed and whether a value fits its field
come from `labkit.forms`, the module the server validates answers with, so a form accepted
here is an answer the server accepts. Nothing in the protocol core may import this module.

Choices the schema leaves open, made once here:
- An empty text box is "not filled": an optional string left empty is omitted, a required one
  is reported missing (so a required string can never be answered with "").
- An optional integer or number has a "leave empty" checkbox next to its box (an `IntText`
  or `FloatText` always holds a number). It starts ticked unless the field has a default, and
  typing a value unticks it. A ticked box omits the field.
- A checkbox always holds an answer: an optional boolean is sent as shown (false unless ticked).
- A single select without a default starts with nothing selected (never the first option: a
  preselected note is a deletion the user did not choose). An optional one also offers an
  explicit empty choice that omits the field.
- Nothing is clamped or repaired: a value out of range, too long or in the wrong format stays
  as typed and the accept is refused with a message under the field.
Must not import the grader.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets

from labkit import forms

ElicitationResult = dict[str, Any]
"""What the user answered to one elicitation, as on the wire: `{"action": "accept", "content":
{...}}`, `{"action": "decline"}` or `{"action": "cancel"}`."""
AnswerCallback = Callable[[ElicitationResult], object]

EMPTY_CHOICE = "(no choice)"
MISSING_MESSAGE = "required: fill this in"
_ERROR_STYLE = "color: #b00020"


# -- the schema subset, refused before anything renders --------------------------------------


def check_params(params: object) -> tuple[str, Mapping[str, Any]]:
    """(message, requestedSchema) of form-mode params, or ValueError naming what is wrong."""
    if not isinstance(params, Mapping):
        raise ValueError("elicitation params must be an object")
    mode = params.get("mode", "form")
    if mode != "form":
        raise ValueError(f"ElicitationForm renders form mode, not mode {mode!r}")
    message = params.get("message")
    if not isinstance(message, str):
        raise ValueError("elicitation params need a message (a string)")
    schema = params.get("requestedSchema")
    if not isinstance(schema, Mapping):
        raise ValueError("requestedSchema must be an object schema")
    check_schema(schema)
    return message, schema


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise ValueError (a `forms.FormError`) unless `schema` is in the restricted subset.

    `labkit.forms.check_schema` holds the rules the server applies; the renderer adds what it
    needs to draw a field safely: no `$ref` anywhere, well-formed choice lists and constraint
    values, formats on strings only, and a default that fits its own field.
    """
    if "$ref" in schema or "$defs" in schema:
        raise forms.FormError("requestedSchema: $ref and $defs are outside the form subset")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise forms.FormError("requestedSchema: required must be a list of property names")
    properties = schema.get("properties")
    for name, field in properties.items() if isinstance(properties, Mapping) else ():
        if isinstance(field, Mapping) and field.get("type") == "array":
            _check_items(name, field.get("items"))
    forms.check_schema(schema)
    for name, field in schema["properties"].items():
        _check_field(name, field)


def _check_items(name: str, items: object) -> None:
    # Before `forms.check_schema`, which reads `items` as a well-formed choice list.
    if not isinstance(items, Mapping):
        raise forms.FormError(f"field {name!r}: an array field needs items (an object)")
    if "$ref" in items:
        raise forms.FormError(f"field {name!r}: $ref is outside the form subset")
    titled = items.get("anyOf", [])
    if not isinstance(titled, list) or not all(
        isinstance(o, Mapping) and "const" in o for o in titled
    ):
        raise forms.FormError(f"field {name!r}: each anyOf choice is an object with a const")


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_scalar(value: object) -> bool:
    return isinstance(value, str | int | float | bool)


# Constraint keyword -> what its value must be, so a bad schema fails here, not at accept time.
_CONSTRAINTS: dict[str, Callable[[object], bool]] = {
    "minLength": _is_count,
    "maxLength": _is_count,
    "minItems": _is_count,
    "maxItems": _is_count,
    "minimum": _is_number,
    "maximum": _is_number,
}


def _check_field(name: str, field: Mapping[str, Any]) -> None:
    def refuse(why: str) -> forms.FormError:
        return forms.FormError(f"field {name!r}: {why}")

    if "$ref" in field:
        raise refuse("$ref is outside the form subset")
    items = field.get("items", {})
    for keyword, valid in _CONSTRAINTS.items():
        if keyword in field and not valid(field[keyword]):
            raise refuse(f"{keyword} must be a number, not {field[keyword]!r}")
    kind = field_kind(field)
    source = items if kind == "multi" else field
    if kind == "multi" and (
        not isinstance(items, Mapping) or items.get("type", "string") != "string"
    ):
        raise refuse("a multi-select holds strings")
    titled = source.get("anyOf" if kind == "multi" else "oneOf")
    options = titled if titled is not None else source.get("enum")
    if kind in ("select", "multi"):
        if not isinstance(options, list) or not options:
            raise refuse("a select needs a non-empty list of choices")
        if titled is not None and not all(isinstance(o, Mapping) and "const" in o for o in titled):
            raise refuse("each oneOf/anyOf choice is an object with a const")
        if titled is None and not all(_is_scalar(o) for o in options):
            raise refuse("enum values are plain values")
        names = field.get("enumNames")
        if names is not None and (not isinstance(names, list) or len(names) != len(options)):
            raise refuse("enumNames must name every enum value")
    if "format" in field and field["type"] != "string":
        raise refuse("format applies to strings only")
    if "default" in field:
        problem = forms.field_problem(field, field["default"])
        if problem:
            raise refuse(f"default {field['default']!r} is {problem}")


def field_kind(field: Mapping[str, Any]) -> str:
    """The widget kind of a (checked) field: its type, or `select` / `multi` for choices."""
    if field["type"] == "array":
        return "multi"
    if "oneOf" in field or "enum" in field:
        return "select"
    return str(field["type"])


# -- one field: its input widget and how to read it back ------------------------------------

_NOT_FILLED = object()


@dataclass
class _Field:
    """One property: the input widget, the optional "leave empty" toggle, the error label."""

    name: str
    schema: Mapping[str, Any]
    kind: str
    required: bool
    input: Any
    empty: Any = None

    def read(self) -> object:
        """The value to send, or `_NOT_FILLED`."""
        return _READERS[self.kind](self)


def _text(field: Mapping[str, Any], required: bool) -> Any:
    placeholder = {"date": "YYYY-MM-DD", "date-time": "YYYY-MM-DDTHH:MM:SSZ"}
    return widgets.Text(
        value=field.get("default", ""),
        placeholder=placeholder.get(field.get("format", ""), field.get("format", "")),
    )


def _int(field: Mapping[str, Any], required: bool) -> Any:
    return widgets.IntText(value=field.get("default", 0))


def _float(field: Mapping[str, Any], required: bool) -> Any:
    return widgets.FloatText(value=field.get("default", 0.0))


def _checkbox(field: Mapping[str, Any], required: bool) -> Any:
    return widgets.Checkbox(value=field.get("default", False), indent=False)


def _dropdown(field: Mapping[str, Any], required: bool) -> Any:
    options: list[tuple[str, Any]] = [(label, value) for value, label in forms.choices(field)]
    if not required:
        options.insert(0, (EMPTY_CHOICE, None))
    if "default" in field:
        return widgets.Dropdown(options=options, value=field["default"])
    if not required:
        return widgets.Dropdown(options=options, value=None)
    # Nothing preselected: a required choice must be made by the user.
    return widgets.Dropdown(options=options, index=None)


def _select_multiple(field: Mapping[str, Any], required: bool) -> Any:
    options = [(label, value) for value, label in forms.multi_choices(field)]
    return widgets.SelectMultiple(options=options, value=tuple(field.get("default", ())))


# Field kind -> widget builder (never a Bounded* widget: they clamp silently).
_BUILDERS: dict[str, Callable[[Mapping[str, Any], bool], Any]] = {
    "string": _text,
    "integer": _int,
    "number": _float,
    "boolean": _checkbox,
    "select": _dropdown,
    "multi": _select_multiple,
}


def _read_text(f: _Field) -> object:
    value: str = f.input.value
    return value if value else _NOT_FILLED


def _read_number(f: _Field) -> object:
    if f.empty is not None and f.empty.value:
        return _NOT_FILLED
    return int(f.input.value) if f.kind == "integer" else float(f.input.value)


def _read_checkbox(f: _Field) -> object:
    return bool(f.input.value)


def _read_select(f: _Field) -> object:
    return _NOT_FILLED if f.input.value is None else f.input.value


def _read_multi(f: _Field) -> object:
    value = list(f.input.value)
    # An untouched optional multi-select is "not filled"; a required one sends what was picked
    # and the minItems check speaks for itself.
    return value if value or f.required else _NOT_FILLED


_READERS: dict[str, Callable[[_Field], object]] = {
    "string": _read_text,
    "integer": _read_number,
    "number": _read_number,
    "boolean": _read_checkbox,
    "select": _read_select,
    "multi": _read_multi,
}


# -- the form -----------------------------------------------------------------------------


class OneAnswer:
    """The answer contract both panels share: one answer per request, then buttons disabled,
    until the call asks the same request again (`reopen`).

    Subclasses set `answer = None`, `_callbacks = []`, `buttons` and `status` in `__init__`.
    """

    answer: ElicitationResult | None
    _callbacks: list[AnswerCallback]
    buttons: tuple[Any, ...]
    status: Any

    def decline(self) -> ElicitationResult:
        """The user explicitly refused: terminal, the server mutates nothing."""
        return self.answer if self.answer is not None else self._finish({"action": "decline"})

    def cancel(self) -> ElicitationResult:
        """The user dismissed the request: nothing happens, a later retry stays possible."""
        return self.answer if self.answer is not None else self._finish({"action": "cancel"})

    def on_answer(self, callback: AnswerCallback) -> None:
        """Call `callback(answer)` once answered (at once if it already is)."""
        self._callbacks.append(callback)
        if self.answer is not None:
            callback(self.answer)

    def reopen(self, note: str) -> None:
        """The request is open again (a cancel the server kept open, or the same request asked
        again): the buttons work again, `note` says why, and earlier callbacks are dropped (the
        call registers the ones for its current round)."""
        self.answer = None
        self._callbacks = []
        for button in self.buttons:
            button.disabled = False
        self.status.value = html.escape(note)

    def _finish(self, answer: ElicitationResult, status: str = "") -> ElicitationResult:
        self.answer = answer
        for button in self.buttons:
            button.disabled = True
        self.status.value = html.escape(status or _STATUS[answer["action"]])
        for callback in self._callbacks:
            callback(answer)
        return answer


_STATUS = {"accept": "Accepted.", "decline": "Declined.", "cancel": "Cancelled."}


class ElicitationForm(OneAnswer, widgets.VBox):  # type: ignore[misc]
    """A form-mode `elicitation/create` request as a displayable widget.

    `fields[name]` is each property's input widget; `errors` maps a property to the plain
    message shown under it after a refused accept; `answer` is None until the user accepts a
    valid form, declines or cancels, then the elicitation result to send back.
    """

    def __init__(self, params: Mapping[str, Any]) -> None:
        # Check everything before building anything: a refused schema renders nothing.
        message, schema = check_params(params)
        self.params = params
        self.schema = schema
        self.answer = None
        self.errors: dict[str, str] = {}
        self._callbacks = []
        required = set(schema.get("required", []))
        self._fields: dict[str, _Field] = {}
        self.error_labels: dict[str, Any] = {}
        rows: list[Any] = [widgets.HTML(f"<h4>{html.escape(message)}</h4>")]
        for name, field in schema["properties"].items():
            kind = field_kind(field)
            is_required = name in required
            f = _Field(name, field, kind, is_required, _BUILDERS[kind](field, is_required))
            if kind in ("integer", "number") and not is_required:
                f.empty = widgets.Checkbox(
                    value="default" not in field, description="leave empty", indent=False
                )
                f.input.observe(lambda _change, f=f: setattr(f.empty, "value", False), "value")
            self._fields[name] = f
            self.error_labels[name] = widgets.HTML("")
            rows.append(self._row(f))
        self.accept_button = widgets.Button(description="Accept", button_style="success")
        self.decline_button = widgets.Button(description="Decline", button_style="warning")
        self.cancel_button = widgets.Button(description="Cancel")
        self.accept_button.on_click(lambda _b: self.accept())
        self.decline_button.on_click(lambda _b: self.decline())
        self.cancel_button.on_click(lambda _b: self.cancel())
        self.buttons = (self.accept_button, self.decline_button, self.cancel_button)
        self.status = widgets.HTML("")
        super().__init__(children=[*rows, widgets.HBox(self.buttons), self.status])

    @property
    def fields(self) -> dict[str, Any]:
        """Property name -> its input widget (`.value` holds the schema's type)."""
        return {name: f.input for name, f in self._fields.items()}

    @property
    def empty(self) -> dict[str, Any]:
        """Property name -> the "leave empty" checkbox of each optional integer or number."""
        return {name: f.empty for name, f in self._fields.items() if f.empty is not None}

    def _row(self, f: _Field) -> Any:
        title = html.escape(str(f.schema.get("title", f.name)))
        mark = " <span title='required'>*</span>" if f.required else ""
        parts: list[Any] = [widgets.HTML(f"<b>{title}</b>{mark}")]
        if "description" in f.schema:
            parts.append(
                widgets.HTML(f"<small>{html.escape(str(f.schema['description']))}</small>")
            )
        parts.append(widgets.HBox([f.input, f.empty]) if f.empty is not None else f.input)
        parts.append(self.error_labels[f.name])
        return widgets.VBox(parts)

    # -- the three answers ---------------------------------------------------------------

    def accept(self) -> ElicitationResult | None:
        """Validate every field; answer `accept` with the filled ones, or show the errors."""
        if self.answer is not None:
            return self.answer
        content, errors = self.collect()
        self.errors = errors
        for name, label in self.error_labels.items():
            problem = errors.get(name)
            label.value = (
                f"<span style='{_ERROR_STYLE}'>{html.escape(problem)}</span>" if problem else ""
            )
        if errors:
            self.status.value = html.escape(f"Not sent: {len(errors)} field(s) need attention.")
            return None
        # The server's own check, so a form accepted here is an answer the server accepts.
        forms.validate_content(self.schema, content)
        return self._finish({"action": "accept", "content": content})

    def collect(self) -> tuple[dict[str, Any], dict[str, str]]:
        """(content of the filled fields, property -> problem); never clamps or repairs."""
        content: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for name, f in self._fields.items():
            value = f.read()
            if value is _NOT_FILLED:
                if f.required:
                    errors[name] = MISSING_MESSAGE
                continue
            problem = forms.field_problem(f.schema, value)
            if problem:
                errors[name] = problem
            else:
                content[name] = value
        return content, errors
