"""ElicitationForm, headless: set widget values, click buttons, read `answer` and `errors`."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit import forms
from labkit.course import ElicitationForm
from labkit.notes_delete import delete_choice_schema

TPS_OFFER = [("note-3", "TPS report 2023"), ("note-7", "TPS report 2024")]


def form_params(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return {"mode": "form", "message": "Tell us", "requestedSchema": schema}


def one(field: dict[str, Any], *, required: bool = True) -> ElicitationForm:
    return ElicitationForm(form_params({"x": field}, ["x"] if required else []))


def accepted(form: ElicitationForm) -> dict[str, Any]:
    form.accept_button.click()
    assert form.errors == {}
    assert form.answer is not None and form.answer["action"] == "accept"
    content: dict[str, Any] = form.answer["content"]
    return content


def refused(form: ElicitationForm) -> dict[str, str]:
    form.accept_button.click()
    assert form.answer is None
    assert not form.accept_button.disabled
    return form.errors


def delete_form() -> ElicitationForm:
    return ElicitationForm(
        {
            "mode": "form",
            "message": "Choose the note to delete",
            "requestedSchema": delete_choice_schema(TPS_OFFER),
        }
    )


# -- every field type renders as its widget and answers in its schema type ------------------

WIDGET_OF = [
    ({"type": "string"}, widgets.Text),
    ({"type": "string", "format": "date"}, widgets.Text),
    ({"type": "integer"}, widgets.IntText),
    ({"type": "number"}, widgets.FloatText),
    ({"type": "boolean"}, widgets.Checkbox),
    ({"type": "string", "enum": ["a", "b"]}, widgets.Dropdown),
    ({"type": "string", "oneOf": [{"const": "a", "title": "A"}]}, widgets.Dropdown),
    ({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}, widgets.SelectMultiple),
]


@pytest.mark.parametrize(("field", "widget_class"), WIDGET_OF)
def test_each_type_gets_its_widget_never_a_bounded_one(field: dict[str, Any], widget_class: type):
    field = {**field, "minimum": 1} if field["type"] in ("integer", "number") else field
    form = one(field)
    assert type(form.fields["x"]) is widget_class
    assert "Bounded" not in type(form.fields["x"]).__name__


def test_string_answer():
    form = one({"type": "string", "minLength": 2, "maxLength": 5})
    form.fields["x"].value = "abc"
    assert accepted(form) == {"x": "abc"}


@pytest.mark.parametrize(
    ("fmt", "good"),
    [
        ("email", "ada@example.org"),
        ("uri", "https://example.org/a"),
        ("date", "2026-07-28"),
        ("date-time", "2026-07-28T10:00:00Z"),
    ],
)
def test_string_formats_accept_valid_values(fmt: str, good: str):
    form = one({"type": "string", "format": fmt})
    form.fields["x"].value = good
    assert accepted(form) == {"x": good}


def test_integer_and_number_keep_their_types():
    form = ElicitationForm(
        form_params(
            {
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "f": {"type": "number", "minimum": 0.5},
            },
            ["n", "f"],
        )
    )
    form.fields["n"].value = 7
    form.fields["f"].value = 2.5
    content = accepted(form)
    assert content == {"n": 7, "f": 2.5}
    assert type(content["n"]) is int and type(content["f"]) is float


def test_boolean_answer():
    form = one({"type": "boolean", "title": "Sure?"})
    form.fields["x"].value = True
    assert accepted(form) == {"x": True}


def test_optional_boolean_is_sent_as_shown():
    form = one({"type": "boolean"}, required=False)
    assert accepted(form) == {"x": False}


def test_enum_with_enum_names_shows_the_names():
    form = one({"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]})
    form.fields["x"].value = "g"
    assert form.fields["x"].label == "Green"
    assert accepted(form) == {"x": "g"}


def test_one_of_shows_titles_and_answers_the_const():
    form = delete_form()
    dropdown = form.fields["note_id"]
    assert [label for label, _ in dropdown.options] == ["TPS report 2023", "TPS report 2024"]
    dropdown.value = "note-7"
    assert dropdown.label == "TPS report 2024"
    form.fields["confirm"].value = True
    assert accepted(form) == {"note_id": "note-7", "confirm": True}


def test_required_select_starts_with_nothing_selected():
    form = delete_form()
    assert form.fields["note_id"].value is None
    assert refused(form) == {"note_id": "required: fill this in"}


def test_optional_select_has_an_explicit_empty_choice_that_omits_the_field():
    form = one({"type": "string", "enum": ["a", "b"]}, required=False)
    dropdown = form.fields["x"]
    assert dropdown.options[0] == ("(no choice)", None)
    assert dropdown.value is None
    assert accepted(form) == {}


def test_multi_select_with_titles_answers_a_list_of_consts():
    form = one(
        {
            "type": "array",
            "items": {"anyOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            "minItems": 1,
            "maxItems": 2,
        }
    )
    select = form.fields["x"]
    assert [label for label, _ in select.options] == ["Red", "Green"]
    select.value = ("g", "r")
    assert select.label == ("Green", "Red")
    assert accepted(form) == {"x": ["g", "r"]}


def test_multi_select_with_plain_enum():
    form = one({"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}})
    form.fields["x"].value = ("a", "c")
    assert accepted(form) == {"x": ["a", "c"]}


def test_defaults_fill_the_widgets():
    form = ElicitationForm(
        form_params(
            {
                "s": {"type": "string", "default": "hi"},
                "n": {"type": "integer", "default": 3},
                "f": {"type": "number", "default": 1.5},
                "b": {"type": "boolean", "default": True},
                "e": {"type": "string", "enum": ["a", "b"], "default": "b"},
                "m": {"type": "array", "items": {"enum": ["a", "b"]}, "default": ["a"]},
            }
        )
    )
    assert accepted(form) == {"s": "hi", "n": 3, "f": 1.5, "b": True, "e": "b", "m": ["a"]}


def test_titles_and_descriptions_are_shown_escaped():
    form = one({"type": "string", "title": "<i>Name</i>", "description": "Your & name"})
    shown = " ".join(
        child.value
        for row in form.children
        if isinstance(row, widgets.VBox)
        for child in row.children
        if isinstance(child, widgets.HTML)
    )
    assert "&lt;i&gt;Name&lt;/i&gt;" in shown
    assert "Your &amp; name" in shown


def test_message_is_the_heading():
    form = ElicitationForm(
        {"message": "Pick <one>", "requestedSchema": {"type": "object", "properties": {}}}
    )
    assert form.children[0].value == "<h4>Pick &lt;one&gt;</h4>"
    assert accepted(form) == {}


# -- optional fields left empty are omitted -------------------------------------------------


def test_optional_string_left_empty_is_omitted():
    form = ElicitationForm(form_params({"a": {"type": "string"}, "b": {"type": "string"}}, ["a"]))
    form.fields["a"].value = "x"
    assert accepted(form) == {"a": "x"}


def test_optional_number_starts_empty_and_is_omitted():
    form = one({"type": "integer", "minimum": 5}, required=False)
    assert form.empty["x"].value is True
    assert accepted(form) == {}


def test_typing_a_value_clears_leave_empty():
    form = one({"type": "integer", "minimum": 5}, required=False)
    form.fields["x"].value = 6
    assert form.empty["x"].value is False
    assert accepted(form) == {"x": 6}


def test_optional_number_can_be_zero():
    form = one({"type": "number"}, required=False)
    form.empty["x"].value = False
    assert accepted(form) == {"x": 0.0}


def test_optional_number_with_a_default_starts_set():
    form = one({"type": "integer", "default": 4}, required=False)
    assert form.empty["x"].value is False
    assert accepted(form) == {"x": 4}


def test_required_number_has_no_leave_empty():
    assert one({"type": "integer"}).empty == {}


def test_optional_multi_select_left_empty_is_omitted():
    form = one({"type": "array", "items": {"enum": ["a"]}}, required=False)
    assert accepted(form) == {}


# -- every invalid accept: nothing sent, a message under the field, nothing repaired ---------

INVALID = [
    ({"type": "integer", "maximum": 150}, 999, "above the maximum 150"),
    ({"type": "integer", "minimum": 1}, 0, "below the minimum 1"),
    ({"type": "number", "maximum": 1.5}, 2.0, "above the maximum 1.5"),
    ({"type": "string", "minLength": 3}, "ab", "shorter than 3 characters"),
    ({"type": "string", "maxLength": 3}, "abcd", "longer than 3 characters"),
    ({"type": "string", "format": "email"}, "not-an-email", "not a valid email"),
    ({"type": "string", "format": "uri"}, "no scheme", "not a valid uri"),
    ({"type": "string", "format": "date"}, "28/07/2026", "not a valid date"),
    ({"type": "string", "format": "date-time"}, "2026-07-28", "not a valid date-time"),
    ({"type": "string"}, "", "required: fill this in"),
    (
        {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 2},
        ("a",),
        "fewer than 2 choices",
    ),
    (
        {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 1},
        ("a", "b"),
        "more than 1 choices",
    ),
]


@pytest.mark.parametrize(("field", "value", "message"), INVALID)
def test_invalid_accept_shows_the_error_and_answers_nothing(
    field: dict[str, Any], value: Any, message: str
):
    form = one(field)
    form.fields["x"].value = value
    assert refused(form) == {"x": message}
    assert message.replace("&", "&amp;") in form.error_labels["x"].value
    assert form.fields["x"].value == value  # never clamped or repaired
    assert "1 field(s)" in form.status.value


@settings(max_examples=50)  # each example builds a form of widgets
@given(value=st.integers(-(10**6), 10**6))
def test_integer_in_range_is_sent_as_typed_and_out_of_range_never_clamped(value: int):
    form = one({"type": "integer", "minimum": 0, "maximum": 150})
    form.fields["x"].value = value
    form.accept()
    if 0 <= value <= 150:
        assert form.answer == {"action": "accept", "content": {"x": value}}
    else:
        assert form.answer is None and set(form.errors) == {"x"}
    assert form.fields["x"].value == value


@settings(max_examples=50)
@given(text=st.text(max_size=12))
def test_string_length_bounds_match_the_server(text: str):
    field = {"type": "string", "minLength": 2, "maxLength": 8}
    form = one(field)
    form.fields["x"].value = text
    form.accept()
    server_ok = text != "" and forms.field_problem(field, text) is None
    assert (form.answer is not None) == server_ok
    assert form.fields["x"].value == text


def test_missing_required_choice_and_several_errors_at_once():
    form = ElicitationForm(
        form_params(
            {
                "note": {"type": "string", "enum": ["a"]},
                "age": {"type": "integer", "maximum": 150},
                "ok": {"type": "string"},
            },
            ["note", "age"],
        )
    )
    form.fields["age"].value = 999
    assert refused(form) == {"note": "required: fill this in", "age": "above the maximum 150"}
    assert form.error_labels["ok"].value == ""


def test_fixing_the_errors_clears_them_and_accepts():
    form = one({"type": "integer", "maximum": 150})
    form.fields["x"].value = 999
    refused(form)
    form.fields["x"].value = 42
    assert accepted(form) == {"x": 42}
    assert form.error_labels["x"].value == ""


# -- decline, cancel, one answer per form, callbacks -----------------------------------------


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_buttons(action: str):
    form = delete_form()
    seen: list[dict[str, Any]] = []
    form.on_answer(seen.append)
    getattr(form, f"{action}_button").click()
    assert form.answer == {"action": action}
    assert seen == [{"action": action}]
    assert all(button.disabled for button in form.buttons)


@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
def test_methods_match_the_buttons(action: str):
    form = delete_form()
    form.fields["note_id"].value = "note-3"
    form.fields["confirm"].value = True
    answer = getattr(form, action)()
    assert answer == form.answer
    assert answer["action"] == action


def test_one_answer_per_form():
    form = delete_form()
    seen: list[dict[str, Any]] = []
    form.on_answer(seen.append)
    form.decline()
    form.fields["note_id"].value = "note-3"
    form.fields["confirm"].value = True
    form.accept_button.click()
    assert form.accept() == {"action": "decline"}
    assert form.cancel() == {"action": "decline"}
    assert seen == [{"action": "decline"}]


def test_on_answer_after_the_answer_is_called_at_once():
    form = delete_form()
    form.cancel()
    seen: list[dict[str, Any]] = []
    form.on_answer(seen.append)
    assert seen == [{"action": "cancel"}]


def test_invalid_accept_does_not_call_back():
    form = delete_form()
    seen: list[dict[str, Any]] = []
    form.on_answer(seen.append)
    form.accept()
    assert seen == []


# -- the server's own validation accepts what the widget answers -----------------------------


def test_widget_answer_passes_server_validation_for_notes_delete():
    schema = delete_choice_schema(TPS_OFFER)
    form = delete_form()
    form.fields["note_id"].value = "note-3"
    form.fields["confirm"].value = True
    content = accepted(form)
    assert forms.validate_content(schema, content) == {"note_id": "note-3", "confirm": True}


def test_widget_answer_for_every_type_passes_server_validation():
    properties = {
        "s": {"type": "string", "format": "email"},
        "i": {"type": "integer", "minimum": 0},
        "n": {"type": "number"},
        "b": {"type": "boolean"},
        "e": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
        "m": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}},
    }
    params = form_params(properties, list(properties))
    form = ElicitationForm(params)
    form.fields["s"].value = "a@b.org"
    form.fields["i"].value = 3
    form.fields["e"].value = "a"
    form.fields["m"].value = ("x",)
    content = accepted(form)
    assert forms.validate_content(params["requestedSchema"], content) == content


# -- schemas outside the restricted subset are refused before anything renders ---------------

UNSUPPORTED = [
    ({"type": "object", "properties": {}}, "nested"),
    ({"type": "array", "items": {"type": "object", "properties": {}}}, "arr"),
    ({"$ref": "#/$defs/x"}, "ref"),
    ({"type": "string", "$ref": "#/$defs/x"}, "typed_ref"),
    ({"type": "date"}, "unknown"),
    ({"type": "string", "format": "ipv4"}, "fmt"),
    ({"type": "string", "enum": []}, "empty_enum"),
    ({"type": "string", "oneOf": [{"title": "no const"}]}, "no_const"),
    ({"type": "string", "enum": ["a"], "enumNames": ["A", "B"]}, "names"),
    ({"type": "integer", "format": "date"}, "int_fmt"),
    ({"type": "integer", "maximum": 5, "default": 9}, "bad_default"),
    ({"type": "string", "enum": ["a"], "default": "z"}, "default_choice"),
    ({"type": "array", "items": {"anyOf": [{"title": "no const"}]}}, "anyof_const"),
    ({"type": "array", "items": {"anyOf": ["a"]}}, "anyof_str"),
    ({"type": "array", "items": ["a"]}, "items_list"),
    ({"type": "array", "items": {"$ref": "#/x"}}, "items_ref"),
    ({"type": "array", "items": {"type": "integer", "enum": [1]}}, "int_items"),
    ({"type": "array", "items": {"enum": ["a"]}, "default": "a"}, "multi_default"),
    ({"type": "string", "oneOf": ["a"]}, "oneof_str"),
    ({"type": "string", "enum": [{"a": 1}]}, "enum_obj"),
    ({"type": "string", "minLength": "3"}, "min_str"),
    ({"type": "integer", "maximum": True}, "max_bool"),
    ({"type": "array", "items": {"enum": ["a"]}, "maxItems": -1}, "neg_items"),
]


@pytest.mark.parametrize(("field", "name"), UNSUPPORTED)
def test_unsupported_property_is_refused_by_name(field: dict[str, Any], name: str):
    with pytest.raises(ValueError, match=repr(name)):
        ElicitationForm(form_params({"fine": {"type": "string"}, name: field}))


@pytest.mark.parametrize(
    "params",
    [
        {"message": "m", "requestedSchema": {"type": "array", "items": {"type": "string"}}},
        {"message": "m", "requestedSchema": {"type": "object"}},
        {"message": "m", "requestedSchema": {"$ref": "#/x", "type": "object", "properties": {}}},
        {"message": "m", "requestedSchema": "object"},
        {"message": 3, "requestedSchema": {"type": "object", "properties": {}}},
        {"mode": "url", "message": "m", "url": "https://example.org"},
        {"mode": "form", "message": "m"},
        ["not", "an", "object"],
    ],
)
def test_bad_params_or_root_schema_are_refused(params: Any):
    with pytest.raises(ValueError):
        ElicitationForm(params)


@pytest.mark.parametrize("required", ["x", [1], None])
def test_required_must_be_a_list_of_names(required: Any):
    params = form_params({"x": {"type": "string"}})
    params["requestedSchema"]["required"] = required
    with pytest.raises(ValueError, match="required"):
        ElicitationForm(params)


def test_required_name_missing_from_properties_is_refused():
    with pytest.raises(ValueError, match="ghost"):
        ElicitationForm(form_params({"a": {"type": "string"}}, ["ghost"]))
