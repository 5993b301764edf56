"""Quizzes: the course's bank (package data), graded as plain data, shown as widgets or as
Markdown, and used by the notebooks only through `quiz("<id>")`."""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import labkit.course.widgets.quiz as quiz_module
from labkit.course import Option, Quiz, QuizWidget, quiz
from labkit.course.widgets.quiz import BANK, from_table, make_quiz, quiz_ids

REPO = Path(__file__).resolve().parents[2]
BANK_FILE = Path(quiz_module.__file__).with_name(BANK)
QUIZ_CELL = re.compile(r'^quiz\("(?P<id>[a-z0-9-]+)"\)$')

ROOTS = make_quiz(
    "At 2026-07-28, what do client Roots prove about a workspace?",
    [
        ("That the caller may use it", False, "Roots are client-declared: never authorization."),
        ("Nothing: the server authorizes", True, "The server checks its own per-principal list."),
        ("That the path is sandboxed", False, "Only the operating system can sandbox."),
    ],
    "test-roots",
)


def test_explanation_and_grading_need_no_widget():
    assert ROOTS.explanation(1) == "The server checks its own per-principal list."
    assert ROOTS.explanation(0) == "Roots are client-declared: never authorization."
    assert [ROOTS.is_correct(i) for i in range(3)] == [False, True, False]
    assert ROOTS.feedback(2) == "Not quite. Only the operating system can sandbox."
    assert ROOTS.feedback(1) == "Correct. The server checks its own per-principal list."


def test_plain_text_and_markdown_list_every_option_and_hide_the_explanations():
    text, markdown = str(ROOTS), ROOTS._repr_markdown_()
    for i, option in enumerate(ROOTS.options):
        assert f"{i}. {option.text}" in text
        assert f"{i}. {option.text}" in markdown
    assert markdown.startswith("**At 2026-07-28")
    for shown in (text, markdown):
        assert "per-principal" not in shown and "never authorization" not in shown
        assert "quiz.answer" not in shown


def test_the_printed_instruction_works_when_followed():
    """The fallback's instruction is run as written, for every option of a bank quiz."""
    bank_quiz = quiz("ex1-workers")
    call = re.search(r'quiz\("ex1-workers"\)\.feedback\(N\)', str(bank_quiz))
    assert call is not None, str(bank_quiz)
    for n in range(len(bank_quiz.options)):
        said = eval(call.group(0).replace("(N)", f"({n})"), {"quiz": quiz})
        assert said == bank_quiz.feedback(n)
        assert said.startswith("Correct." if bank_quiz.is_correct(n) else "Not quite.")


def test_mimebundle_has_the_widget_and_the_text_fallbacks():
    bundle = ROOTS._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/markdown"] == ROOTS._repr_markdown_()
    assert bundle["text/plain"] == str(ROOTS)


def test_choosing_an_option_shows_its_verdict_and_reason():
    widget = ROOTS.widget()
    assert isinstance(widget, QuizWidget)
    assert widget.choices.value is None and widget.feedback.value == ""
    widget.choices.value = 0
    assert widget.feedback.value == "Not quite. Roots are client-declared: never authorization."
    widget.choices.value = 1
    assert widget.feedback.value == "Correct. The server checks its own per-principal list."
    assert widget.show_feedback() == "Correct. The server checks its own per-principal list."
    # Nothing to click: no Check button stands between the choice and the reason.
    assert not any(type(child).__name__ == "Button" for child in widget.children)


def test_widget_labels_wrap_instead_of_overlapping():
    widget = ROOTS.widget()
    assert "labkit-quiz" in widget._dom_classes
    style = widget.children[0].value
    # ipywidgets gives each radio label a fixed height: a wrapped label would run into the next.
    assert re.search(r"\.labkit-quiz \.widget-radio-box label \{[^}]*height: auto", style)
    assert "white-space: normal" in style


def test_widget_escapes_text():
    q = make_quiz("<b>?</b>", [("a", True, "<i>yes</i>"), ("b", False, "no")])
    widget = q.widget()
    widget.choices.value = 0
    assert widget.feedback.value == "Correct. &lt;i&gt;yes&lt;/i&gt;"
    assert widget.children[0].value.endswith("<b>&lt;b&gt;?&lt;/b&gt;</b>")


def test_dataclass_api():
    q = Quiz("Q?", (Option("a", True, "because"), Option("b", False, "no")))
    assert q.explanation(0) == "because"
    assert "quiz.answer" not in str(q)


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
        make_quiz(question, options)


@pytest.mark.parametrize(
    ("table", "why"),
    [
        ({"question": "Q?"}, "list of options"),
        ({"options": []}, "question"),
        ({"question": "Q?", "options": [{"text": "a", "correct": "yes", "why": "x"}]}, "option 1"),
        ({"question": "Q?", "options": [{"text": "a", "correct": True}]}, "option 1"),
    ],
)
def test_bad_bank_entries_are_refused(table: dict[str, Any], why: str):
    with pytest.raises(ValueError, match=why):
        from_table("bad", table)


@pytest.mark.parametrize(("index", "error"), [(3, IndexError), (-1, IndexError), (True, TypeError)])
def test_bad_indexes_are_refused(index: Any, error: type[Exception]):
    with pytest.raises(error):
        ROOTS.explanation(index)


def test_an_unknown_quiz_names_the_known_ones():
    with pytest.raises(KeyError, match="ex1-workers"):
        quiz("ex1-nonesuch")


# -- the bank and the notebooks -------------------------------------------------------------


def test_every_quiz_of_the_bank_is_valid_and_explains_every_option():
    raw = tomllib.loads(BANK_FILE.read_text(encoding="utf-8"))
    assert list(raw) == quiz_ids() and len(quiz_ids()) >= 8
    for quiz_id in quiz_ids():
        q = quiz(quiz_id)
        assert q.id == quiz_id
        assert sum(o.correct for o in q.options) == 1, f"{quiz_id}: exactly one right answer"
        assert all(o.explanation.strip() for o in q.options)
        assert (REPO / "solutions" / f"{raw[quiz_id]['notebook']}.ipynb").is_file(), quiz_id


def test_the_bank_ships_in_the_wheel():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    data = pyproject["tool"]["setuptools"]["package-data"]["labkit"]
    assert f"course/widgets/{BANK}" in data


def quiz_cells(folder: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted((REPO / folder).glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            source = "".join(cell["source"]).strip()
            if cell["cell_type"] == "code" and "quiz(" in source:
                found.setdefault(path.stem, []).append(source)
    return found


@pytest.mark.parametrize("folder", ["solutions", "notebooks"])
def test_notebook_cells_hold_only_the_quiz_id_never_the_answers(folder: str):
    raw = tomllib.loads(BANK_FILE.read_text(encoding="utf-8"))
    used: list[str] = []
    for stem, sources in quiz_cells(folder).items():
        for source in sources:
            match = QUIZ_CELL.fullmatch(source)
            assert match is not None, f"{folder}/{stem}: a quiz cell holds more: {source}"
            assert raw[match.group("id")]["notebook"] == stem, source
            used.append(match.group("id"))
    assert sorted(used) == sorted(quiz_ids()), "every quiz is used once, and only bank quizzes"


def test_no_notebook_tells_the_learner_to_call_quiz_answer():
    for folder in ("solutions", "notebooks"):
        for path in (REPO / folder).glob("*.ipynb"):
            assert "quiz.answer" not in path.read_text(encoding="utf-8"), path


# -- the bank has no tells -------------------------------------------------------------------

VERDICT_WORDS = re.compile(r"^(Right|Correct|Wrong|Not quite|Yes|No)\b", re.IGNORECASE)


def correct_index(q: Quiz) -> int:
    (index,) = [i for i, option in enumerate(q.options) if option.correct]
    return index


def test_the_correct_options_are_spread_over_the_positions() -> None:
    quizzes = [quiz(quiz_id) for quiz_id in quiz_ids()]
    positions = Counter(correct_index(q) for q in quizzes)
    most = max(len(q.options) for q in quizzes)
    fair = math.ceil(len(quizzes) / most)
    assert set(positions) == set(range(most)), positions
    assert max(positions.values()) <= fair, f"correct options by position: {positions}"


def test_the_correct_option_is_not_given_away_by_its_length() -> None:
    quizzes = [quiz(quiz_id) for quiz_id in quiz_ids()]
    longest = 0
    for q in quizzes:
        lengths = [len(option.text) for option in q.options]
        right = lengths[correct_index(q)]
        others = max(length for i, length in enumerate(lengths) if i != correct_index(q))
        assert right <= 1.25 * others, f"{q.id}: the correct option stands out by its length"
        longest += right == max(lengths)
    assert longest <= len(quizzes) // 3, f"the correct option is the longest in {longest} quizzes"


def test_each_verdict_is_said_once() -> None:
    for quiz_id in quiz_ids():
        for index, option in enumerate(quiz(quiz_id).options):
            assert not VERDICT_WORDS.match(option.explanation), (quiz_id, option.explanation)
            feedback = quiz(quiz_id).feedback(index)
            assert feedback.count("Correct") + feedback.count("Not quite") == 1, feedback
