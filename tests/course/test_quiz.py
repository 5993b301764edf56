"""Quizzes: graded as plain data, shown as widgets or as Markdown."""

from __future__ import annotations

from typing import Any

import pytest

from labkit.course import Option, Quiz, QuizWidget, quiz

ROOTS = quiz(
    "At 2026-07-28, what do client Roots prove about a workspace?",
    [
        ("That the caller may use it", False, "Roots are client-declared: never authorization."),
        ("Nothing: the server authorizes", True, "The server checks its own per-principal list."),
        ("That the path is sandboxed", False, "Only the operating system can sandbox."),
    ],
)


def test_answer_returns_the_explanation_without_a_widget():
    assert ROOTS.answer(1) == "The server checks its own per-principal list."
    assert ROOTS.answer(0) == "Roots are client-declared: never authorization."
    assert [ROOTS.is_correct(i) for i in range(3)] == [False, True, False]
    assert ROOTS.feedback(2) == "Not quite. Only the operating system can sandbox."


def test_plain_text_and_markdown_list_every_option():
    text, markdown = str(ROOTS), ROOTS._repr_markdown_()
    for i, option in enumerate(ROOTS.options):
        assert f"{i}. {option.text}" in text
        assert f"{i}. {option.text}" in markdown
    assert markdown.startswith("**At 2026-07-28")
    assert "quiz.answer(index)" in text
    # The explanations are the feedback: they are not shown before an answer.
    assert "per-principal" not in text and "per-principal" not in markdown


def test_mimebundle_has_the_widget_and_the_text_fallbacks():
    bundle = ROOTS._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/markdown"] == ROOTS._repr_markdown_()
    assert bundle["text/plain"] == str(ROOTS)


def test_widget_check_shows_the_chosen_explanation_and_verdict():
    widget = ROOTS.widget()
    assert isinstance(widget, QuizWidget)
    assert widget.choices.value is None
    widget.check_button.click()
    assert widget.feedback.value == "Choose an option first."
    widget.choices.value = 0
    widget.check_button.click()
    assert widget.feedback.value == "Not quite. Roots are client-declared: never authorization."
    widget.choices.value = 1
    assert widget.check() == "Correct. The server checks its own per-principal list."


def test_widget_escapes_text():
    q = quiz("<b>?</b>", [("a", True, "<i>yes</i>"), ("b", False, "no")])
    widget = q.widget()
    widget.choices.value = 0
    widget.check()
    assert widget.feedback.value == "Correct. &lt;i&gt;yes&lt;/i&gt;"
    assert widget.children[0].value == "<b>&lt;b&gt;?&lt;/b&gt;</b>"


def test_dataclass_api():
    q = Quiz("Q?", (Option("a", True, "because"), Option("b", False, "no")))
    assert q.answer(0) == "because"


@pytest.mark.parametrize(
    ("question", "options", "why"),
    [
        ("", [("a", True, "x"), ("b", False, "y")], "question"),
        ("Q?", [("a", True, "x")], "at least two"),
        ("Q?", [("a", False, "x"), ("b", False, "y")], "correct"),
        ("Q?", [("a", True, "x"), ("b", False, " ")], "option 2"),
        ("Q?", [("a", True, "x"), ("", False, "y")], "option 2"),
    ],
)
def test_bad_quizzes_are_refused(question: str, options: Any, why: str):
    with pytest.raises(ValueError, match=why):
        quiz(question, options)


@pytest.mark.parametrize(("index", "error"), [(3, IndexError), (-1, IndexError), (True, TypeError)])
def test_bad_indexes_are_refused(index: Any, error: type[Exception]):
    with pytest.raises(error):
        ROOTS.answer(index)
