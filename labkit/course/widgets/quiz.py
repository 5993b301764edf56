"""Multiple-choice questions that explain every option, kept out of the notebooks' sources.

Owns: `Quiz`, `Option`, `quiz(quiz_id)`, `quiz_ids()` and the quiz bank `quizzes.toml` (package
data beside this module). A notebook cell is only `quiz("ex1-workers")`: the question, the
options, which one is right and why each is right or wrong live in the bank, so the answer is not
in the cell a learner reads.

A quiz is plain data first: `explanation(index)` returns the chosen option's explanation and
`is_correct(index)` grades it, so no widget is ever needed to grade (a widget must never be what
a grader waits on). Where widgets render, the quiz shows as radio buttons whose labels wrap,
with the verdict and the reason under them as soon as an option is chosen; where they do not, as
a Markdown list of the options and the one call that shows an option's feedback.
Imports nothing from labkit.
"""

from __future__ import annotations

import html
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

import ipywidgets as widgets

BANK: Final = "quizzes.toml"
# Scoped to one class: labels as tall as their text (ipywidgets gives each a fixed height, so a
# long label that wraps runs into the next one), the radio dot aligned with the first line.
_STYLE: Final = """<style>
.labkit-quiz .widget-radio { width: 100% !important; max-width: 52rem; }
.labkit-quiz .widget-radio-box { width: 100% !important; margin-bottom: 0 !important; }
.labkit-quiz .widget-radio-box label {
  display: flex !important; align-items: flex-start; gap: 0.5em;
  height: auto !important; min-height: 1.5em; line-height: 1.4 !important;
  white-space: normal !important; overflow-wrap: break-word; margin: 0 0 0.45em 0 !important;
}
.labkit-quiz .widget-radio-box input { order: -1; flex: none; margin: 0.2em 0 0 0 !important; }
.labkit-quiz .labkit-quiz-feedback { max-width: 52rem; white-space: normal; line-height: 1.4; }
</style>"""


@dataclass(frozen=True)
class Option:
    text: str
    correct: bool
    explanation: str


@dataclass(frozen=True)
class Quiz:
    question: str
    options: tuple[Option, ...]
    id: str = ""

    def __post_init__(self) -> None:
        where = f"quiz {self.id!r}: " if self.id else ""
        if not self.question.strip():
            raise ValueError(f"{where}a quiz needs a question")
        if len(self.options) < 2:
            raise ValueError(f"{where}a quiz needs at least two options")
        if not any(option.correct for option in self.options):
            raise ValueError(f"{where}a quiz needs at least one correct option")
        for number, option in enumerate(self.options, 1):
            if not option.text.strip() or not option.explanation.strip():
                raise ValueError(f"{where}option {number} needs a text and an explanation")

    def _option(self, index: int) -> Option:
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"choose an option by its index (an int), not {index!r}")
        if not 0 <= index < len(self.options):
            raise IndexError(f"there is no option {index}: choose 0 to {len(self.options) - 1}")
        return self.options[index]

    def explanation(self, index: int) -> str:
        """Why option `index` (0-based) is right or wrong."""
        return self._option(index).explanation

    def is_correct(self, index: int) -> bool:
        return self._option(index).correct

    def feedback(self, index: int) -> str:
        """What choosing option `index` shows: right or not, then why."""
        verdict = "Correct." if self.is_correct(index) else "Not quite."
        return f"{verdict} {self.explanation(index)}"

    def _how_to_answer(self) -> str:
        call = f'quiz("{self.id}").feedback(N)' if self.id else "this quiz's .feedback(N)"
        return f"Pick one, then run {call} with its number N to see whether it is right and why."

    def __str__(self) -> str:
        lines = [self.question, ""]
        lines += [f"  {i}. {option.text}" for i, option in enumerate(self.options)]
        lines += ["", self._how_to_answer()]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        lines = [f"**{_md(self.question)}**", ""]
        lines += [f"{i}. {_md(option.text)}" for i, option in enumerate(self.options)]
        call = self._how_to_answer().replace('quiz("', '`quiz("').replace("(N)", "(N)`")
        lines += ["", call]
        return "\n".join(lines)

    def widget(self) -> QuizWidget:
        return QuizWidget(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # The widget view where a frontend renders widgets; plain text and Markdown elsewhere
        # (a grader's nbclient run, nbconvert, a terminal).
        bundle: dict[str, Any] = dict(self.widget()._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = str(self)
        bundle["text/markdown"] = self._repr_markdown_()
        return bundle


def _md(text: str) -> str:
    return "".join("\\" + c if c in "\\`*_[]<>#|" else c for c in text)


class QuizWidget(widgets.VBox):  # type: ignore[misc]
    """The question, radio buttons with wrapping labels, and the chosen option's feedback."""

    def __init__(self, quiz: Quiz) -> None:
        self.quiz = quiz
        self.choices = widgets.RadioButtons(
            options=[(option.text, i) for i, option in enumerate(quiz.options)],
            index=None,
            layout=widgets.Layout(width="100%"),
        )
        self.feedback = widgets.HTML("")
        self.feedback.add_class("labkit-quiz-feedback")
        self.choices.observe(lambda _change: self.show_feedback(), names="value")
        super().__init__(
            children=[
                widgets.HTML(f"{_STYLE}<b>{html.escape(quiz.question)}</b>"),
                self.choices,
                self.feedback,
            ],
            layout=widgets.Layout(width="100%"),
        )
        self.add_class("labkit-quiz")

    def show_feedback(self) -> str:
        """Show (and return) the feedback of the chosen option."""
        index = self.choices.value
        text = "" if index is None else self.quiz.feedback(index)
        self.feedback.value = html.escape(text)
        return text


def from_table(quiz_id: str, table: Mapping[str, Any]) -> Quiz:
    """One quiz of the bank: `question` and a list of `options` (`text`, `correct`, `why`)."""
    question = table.get("question")
    options = table.get("options")
    if not isinstance(question, str) or not isinstance(options, list):
        raise ValueError(f"quiz {quiz_id!r}: needs a question and a list of options")
    parsed = []
    for number, option in enumerate(options, 1):
        text, correct, why = option.get("text"), option.get("correct"), option.get("why")
        if not (isinstance(text, str) and isinstance(correct, bool) and isinstance(why, str)):
            raise ValueError(f"quiz {quiz_id!r}: option {number} needs text, correct and why")
        parsed.append(Option(text, correct, why))
    return Quiz(question, tuple(parsed), quiz_id)


@cache
def _bank() -> dict[str, Quiz]:
    text = resources.files("labkit.course.widgets").joinpath(BANK).read_text(encoding="utf-8")
    return {key: from_table(key, table) for key, table in tomllib.loads(text).items()}


def quiz_ids() -> list[str]:
    """Every quiz in the bank, in its order."""
    return list(_bank())


def quiz(quiz_id: str) -> Quiz:
    """The quiz `quiz_id` of the course's bank, e.g. `quiz("ex1-workers")`."""
    bank = _bank()
    if quiz_id not in bank:
        raise KeyError(f"no quiz {quiz_id!r}; the course has {', '.join(bank)}")
    return bank[quiz_id]


def make_quiz(question: str, options: Iterable[tuple[str, bool, str]], quiz_id: str = "") -> Quiz:
    """A quiz outside the bank: `make_quiz("Which...?", [(text, correct, why), ...])`."""
    return Quiz(question, tuple(Option(t, c, why) for t, c, why in options), quiz_id)
