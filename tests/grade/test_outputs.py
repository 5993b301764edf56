"""nbval's comparison, called in-process, and its plain messages (no kernel)."""

from __future__ import annotations

from typing import Any

from grade.grade_helpers import solution
from labkit.grade import outputs

PATTERNS = outputs.sanitizers()


def stream(text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": text}


def result(text: str) -> dict[str, Any]:
    return {
        "output_type": "execute_result",
        "execution_count": 3,
        "metadata": {},
        "data": {"text/plain": text},
    }


def test_checked_cells_are_the_ones_marked() -> None:
    assert [c.cell_id for c in outputs.checked_cells(solution("replay"))] == ["ex1-demo", "address"]


def test_equal_outputs_pass_and_split_streams_are_coalesced() -> None:
    assert (
        outputs.compare(
            "c", [stream("True False\n")], [stream("True "), stream("False\n")], PATTERNS
        )
        is None
    )


def test_sanitizers_hide_volatile_values() -> None:
    expected = [stream("at 0x7f00aa 2026-12-03T10:00:00Z /tmp/abc/x\n")]
    fresh = [stream("at 0x55ffee 2027-01-01T00:00:01Z /tmp/zzz/y\n")]
    assert outputs.compare("c", expected, fresh, PATTERNS) is None
    assert outputs.compare("c", expected, fresh, []) is not None


def test_a_mismatch_is_one_plain_sentence() -> None:
    message = outputs.compare(
        "ex1-demo", [stream("True False\n")], [stream("True True\n")], PATTERNS
    )
    assert message == "cell `ex1-demo`: expected output 'True False\\n', got 'True True\\n'"


def test_an_error_is_named_without_its_traceback() -> None:
    error = {
        "output_type": "error",
        "ename": "NameError",
        "evalue": "name 'x' is not defined",
        "traceback": ["\x1b[0;31mNameError\x1b[0m Traceback (most recent call last)", "..."],
    }
    message = outputs.compare("c", [stream("42\n")], [error], PATTERNS)
    assert (
        message
        == "cell `c`: expected output '42\\n', got an error: NameError: name 'x' is not defined"
    )
    assert "\x1b" not in message and "Traceback" not in message


def test_a_missing_kind_of_output_is_described() -> None:
    message = outputs.compare("c", [result("3")], [stream("3\n")], PATTERNS)
    assert message == "cell `c`: expected output '3', got '3\\n'"


def test_widget_views_and_images_are_not_compared() -> None:
    widget = {
        "output_type": "display_data",
        "metadata": {},
        "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "abc"}},
    }
    other = {**widget, "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "zz"}}}
    assert outputs.compare("c", [widget], [other], PATTERNS) is None


def test_ansi_codes_are_removed() -> None:
    assert outputs.plain("\x1b[0;31mred\x1b[0m text") == "red text"
