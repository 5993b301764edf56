"""Form-mode elicitation: the restricted schema and the server-side validation of answers.

Owns: building single-select fields, checking that a schema is a valid flat form schema, and
validating `content` against the schema that was asked (docs/protocol.md, "Elicitation params").
Pure module. The widget renderer and the tool both use it, so a form is validated the same
way on both sides.
Imports nothing from labkit.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

PRIMITIVE_TYPES = ("string", "number", "integer", "boolean", "array")
STRING_FORMATS = ("email", "uri", "date", "date-time")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$")


class FormError(ValueError):
    """An answer (or a schema) that does not fit the restricted form schema."""


def single_select(
    choices: Iterable[tuple[str, str]], *, title: str, description: str = ""
) -> dict[str, Any]:
    """A titled single-select enum: `oneOf: [{"const": value, "title": label}, ...]`."""
    field: dict[str, Any] = {
        "type": "string",
        "title": title,
        "oneOf": [{"const": value, "title": label} for value, label in choices],
    }
    if description:
        field["description"] = description
    return field


def choices(field: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """(value, label) pairs of a single-select field, whichever enum form it uses."""
    if "oneOf" in field:
        return [(o["const"], str(o.get("title", o["const"]))) for o in field["oneOf"]]
    if "enum" in field:
        names = field.get("enumNames") or [str(v) for v in field["enum"]]
        return list(zip(field["enum"], names, strict=False))
    return []


def multi_choices(field: Mapping[str, Any]) -> list[tuple[Any, str]]:
    items = field.get("items", {})
    if "anyOf" in items:
        return [(o["const"], str(o.get("title", o["const"]))) for o in items["anyOf"]]
    return [(v, str(v)) for v in items.get("enum", [])]


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise FormError unless `schema` is a flat form schema (no nesting, known types)."""
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise FormError("a form schema is an object with properties")
    for name, field in schema["properties"].items():
        if not isinstance(field, dict) or field.get("type") not in PRIMITIVE_TYPES:
            raise FormError(f"field {name!r}: only flat primitive fields are allowed")
        if field["type"] == "array" and not multi_choices(field):
            raise FormError(f"field {name!r}: an array field must be a multi-select enum")
        if field.get("format") not in (None, *STRING_FORMATS):
            raise FormError(f"field {name!r}: unsupported format {field['format']!r}")
    required = schema.get("required", [])
    unknown = [r for r in required if r not in schema["properties"]]
    if unknown:
        raise FormError(f"required fields not in properties: {unknown}")


def validate_content(schema: Mapping[str, Any], content: object) -> dict[str, Any]:
    """Return `content` if it answers `schema` exactly, else raise FormError.

    Exactly: every required field present, no field the form did not ask, each value of the
    asked type and within its constraints. Missing content is never consent.
    """
    if not isinstance(content, dict):
        raise FormError("content must be an object")
    properties: Mapping[str, Any] = schema["properties"]
    extra = sorted(set(content) - set(properties))
    if extra:
        raise FormError(f"unexpected field(s) {extra}")
    missing = [name for name in schema.get("required", []) if name not in content]
    if missing:
        raise FormError(f"missing required field(s) {missing}")
    for name, value in content.items():
        problem = field_problem(properties[name], value)
        if problem:
            raise FormError(f"field {name!r}: {problem}")
    return content


def field_problem(field: Mapping[str, Any], value: object) -> str | None:
    """Why `value` does not fit `field`, or None."""
    return _CHECKS[field["type"]](field, value)


def _check_string(field: Mapping[str, Any], value: object) -> str | None:
    if not isinstance(value, str):
        return "expected a string"
    if ("oneOf" in field or "enum" in field) and all(value != v for v, _ in choices(field)):
        return "not one of the offered choices"
    if len(value) < field.get("minLength", 0):
        return f"shorter than {field['minLength']} characters"
    if "maxLength" in field and len(value) > field["maxLength"]:
        return f"longer than {field['maxLength']} characters"
    fmt = field.get("format")
    if fmt and not _FORMATS[fmt](value):
        return f"not a valid {fmt}"
    return None


def _check_number(field: Mapping[str, Any], value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "expected a number"
    if field["type"] == "integer" and not (isinstance(value, int) or value.is_integer()):
        return "expected an integer"
    if "minimum" in field and value < field["minimum"]:
        return f"below the minimum {field['minimum']}"
    if "maximum" in field and value > field["maximum"]:
        return f"above the maximum {field['maximum']}"
    return None


def _check_boolean(field: Mapping[str, Any], value: object) -> str | None:
    return None if isinstance(value, bool) else "expected true or false"


def _check_array(field: Mapping[str, Any], value: object) -> str | None:
    if not isinstance(value, list):
        return "expected a list of choices"
    allowed = [v for v, _ in multi_choices(field)]
    if any(v not in allowed for v in value):
        return "contains a value that was not offered"
    if len(set(map(str, value))) != len(value):
        return "repeats a choice"
    if len(value) < field.get("minItems", 0):
        return f"fewer than {field['minItems']} choices"
    if "maxItems" in field and len(value) > field["maxItems"]:
        return f"more than {field['maxItems']} choices"
    return None


def _is_date(value: str) -> bool:
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return len(value) == 10


def _is_datetime(value: str) -> bool:
    try:
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in value or "t" in value


_FORMATS: dict[str, Callable[[str], bool]] = {
    "email": lambda v: bool(_EMAIL.match(v)),
    "uri": lambda v: bool(_URI.match(v)),
    "date": _is_date,
    "date-time": _is_datetime,
}

_CHECKS: dict[str, Callable[[Mapping[str, Any], object], str | None]] = {
    "string": _check_string,
    "number": _check_number,
    "integer": _check_number,
    "boolean": _check_boolean,
    "array": _check_array,
}
