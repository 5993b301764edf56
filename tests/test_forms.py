"""Form-mode elicitation: the flat schema labkit asks with and the validation of answers.

The answer check is the server-side re-validation docs/LESSON.md section 6 requires: exactly the
fields that were asked, of the asked type, within the asked choices and bounds.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import TPS_OFFER
from mcp_types import _v2026_07_28 as v

from labkit import forms
from labkit.notes_delete import delete_choice_schema


def test_single_select_carries_titles() -> None:
    field = forms.single_select([("note-14", "TPS report 2025")], title="Note to delete")
    assert field == {
        "type": "string",
        "title": "Note to delete",
        "oneOf": [{"const": "note-14", "title": "TPS report 2025"}],
    }
    v.TitledSingleSelectEnumSchema.model_validate(field, strict=True)
    described = forms.single_select([("a", "A")], title="T", description="why")
    assert described["description"] == "why"


def test_delete_choice_schema_is_a_flat_form_with_titled_choices() -> None:
    schema = delete_choice_schema(TPS_OFFER)
    forms.check_schema(schema)
    v.RequestedSchema.model_validate(schema, strict=True)
    assert schema["required"] == ["note_id", "confirm"]
    note_id = v.TitledSingleSelectEnumSchema.model_validate(
        schema["properties"]["note_id"], strict=True
    )
    assert [(o.const, o.title) for o in note_id.one_of] == TPS_OFFER
    confirm = v.BooleanSchema.model_validate(schema["properties"]["confirm"], strict=True)
    assert confirm.default is False  # the safe choice is preselected
    assert all(f["type"] != "object" for f in schema["properties"].values())


def test_choices_reads_every_single_select_form() -> None:
    assert forms.choices({"type": "string", "oneOf": [{"const": "a", "title": "A"}]}) == [
        ("a", "A")
    ]
    assert forms.choices({"type": "string", "oneOf": [{"const": "a"}]}) == [("a", "a")]
    assert forms.choices({"type": "string", "enum": ["a", "b"]}) == [("a", "a"), ("b", "b")]
    assert forms.choices({"type": "string", "enum": ["a"], "enumNames": ["Alpha"]}) == [
        ("a", "Alpha")
    ]
    assert forms.choices({"type": "string"}) == []


def test_multi_choices_reads_both_multi_select_forms() -> None:
    titled = {"type": "array", "items": {"anyOf": [{"const": "r", "title": "Red"}]}}
    untitled = {"type": "array", "items": {"type": "string", "enum": ["r", "g"]}}
    assert forms.multi_choices(titled) == [("r", "Red")]
    assert forms.multi_choices(untitled) == [("r", "r"), ("g", "g")]


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"type": "array", "properties": {}}, id="root-not-object"),
        pytest.param({"type": "object"}, id="no-properties"),
        pytest.param({"type": "object", "properties": {"a": {"type": "object"}}}, id="nested"),
        pytest.param({"type": "object", "properties": {"a": {"type": "null"}}}, id="null-type"),
        pytest.param({"type": "object", "properties": {"a": "string"}}, id="field-not-object"),
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "array", "items": {}}}},
            id="array-without-choices",
        ),
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "string", "format": "password"}}},
            id="unknown-format",
        ),
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
            id="required-unknown",
        ),
    ],
)
def test_check_schema_rejects_what_form_mode_cannot_render(schema: dict[str, Any]) -> None:
    with pytest.raises(forms.FormError):
        forms.check_schema(schema)


ALL_TYPES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "color": {"type": "string", "enum": ["red", "green"]},
        "size": {"type": "number", "minimum": 0, "maximum": 10},
        "count": {"type": "integer", "minimum": 1},
        "ok": {"type": "boolean"},
        "tags": {
            "type": "array",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "minItems": 1,
            "maxItems": 2,
        },
    },
    "required": ["name"],
}
GOOD: dict[str, Any] = {
    "name": "Ann",
    "email": "ann@example.com",
    "site": "https://example.com/x",
    "day": "2026-07-28",
    "at": "2026-07-28T10:00:00Z",
    "color": "green",
    "size": 2.5,
    "count": 3,
    "ok": False,
    "tags": ["a", "c"],
}


def test_a_complete_valid_answer_passes() -> None:
    forms.check_schema(ALL_TYPES)
    assert forms.validate_content(ALL_TYPES, GOOD) == GOOD
    assert forms.validate_content(ALL_TYPES, {"name": "Al"}) == {"name": "Al"}
    assert forms.validate_content(ALL_TYPES, {**GOOD, "count": 3.0, "size": 10})


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"name": 5}, "expected a string"),
        ({"name": "A"}, "shorter"),
        ({"name": "Annabel"}, "longer"),
        ({"email": "not-an-email"}, "email"),
        ({"site": "no scheme"}, "uri"),
        ({"day": "28/07/2026"}, "date"),
        ({"day": "20260728"}, "date"),
        ({"at": "2026-07-28"}, "date-time"),
        ({"at": "yesterday"}, "date-time"),
        ({"color": "blue"}, "not one of the offered choices"),
        ({"size": "2"}, "expected a number"),
        ({"size": True}, "expected a number"),
        ({"size": -1}, "below the minimum"),
        ({"size": 11}, "above the maximum"),
        ({"count": 2.5}, "expected an integer"),
        ({"count": 0}, "below the minimum"),
        ({"ok": "true"}, "expected true or false"),
        ({"ok": 1}, "expected true or false"),
        ({"tags": "a"}, "expected a list"),
        ({"tags": ["d"]}, "not offered"),
        ({"tags": ["a", "a"]}, "repeats"),
        ({"tags": []}, "fewer than"),
        ({"tags": ["a", "b", "c"]}, "more than"),
        ({"extra": 1}, "unexpected field"),
    ],
)
def test_an_answer_that_does_not_fit_is_rejected(change: dict[str, Any], problem: str) -> None:
    with pytest.raises(forms.FormError, match=problem):
        forms.validate_content(ALL_TYPES, {**GOOD, **change})


@pytest.mark.parametrize("content", [None, [], "yes", 1, True])
def test_content_must_be_an_object(content: object) -> None:
    with pytest.raises(forms.FormError, match="object"):
        forms.validate_content(ALL_TYPES, content)


def test_a_missing_required_field_is_never_consent() -> None:
    schema = delete_choice_schema(TPS_OFFER)
    with pytest.raises(forms.FormError, match="missing"):
        forms.validate_content(schema, {"note_id": "note-14"})
    with pytest.raises(forms.FormError, match="missing"):
        forms.validate_content(schema, {"confirm": True})
    with pytest.raises(forms.FormError, match="missing"):
        forms.validate_content(schema, {})


@pytest.mark.parametrize(
    "content",
    [
        {"note_id": "note-99", "confirm": True},  # in the workspace, but never offered
        {"note_id": "NOTE-14", "confirm": True},
        {"note_id": "TPS report 2025", "confirm": True},  # a title is not a choice
        {"note_id": 14, "confirm": True},
        {"note_id": ["note-14"], "confirm": True},
        {"note_id": "note-14", "confirm": "yes"},
        {"note_id": "note-14", "confirm": 1},
        {"note_id": "note-14", "confirm": None},
        {"note_id": "note-14", "confirm": True, "also": "note-7"},
    ],
)
def test_the_delete_choice_accepts_only_an_offered_id_and_a_boolean(
    content: dict[str, Any],
) -> None:
    with pytest.raises(forms.FormError):
        forms.validate_content(delete_choice_schema(TPS_OFFER), content)


def test_the_delete_choice_accepts_each_offered_id() -> None:
    schema = delete_choice_schema(TPS_OFFER)
    for note_id, _ in TPS_OFFER:
        for confirm in (True, False):
            content = {"note_id": note_id, "confirm": confirm}
            assert forms.validate_content(schema, content) == content
