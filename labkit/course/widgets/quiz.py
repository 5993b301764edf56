"""Multiple-choice questions that explain every option (COURSE.md: "quizzes explain every option").

Owns: `Quiz`, `Option` and `quiz(...)`. A quiz is plain data first: `answer(index)` returns the
chosen option's explanation and `is_correct(index)` grades it, so no widget is ever needed to
grade (COURSE.md rule 7: widgets hang graders). Where widgets render, the quiz shows as radio
buttons and a Check button; where they do not, as a Markdown list of the options.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets


@dataclass(frozen=True)
class Option:
    text: str
    correct: bool
    explanation: str


@dataclass(frozen=True)
class Quiz:
    question: str
    options: tuple[Option, ...]

    def __post_init__(self) -> None:
        if not self.question.strip():
            raise ValueError("a quiz needs a question")
        if len(self.options) < 2:
            raise ValueError("a quiz needs at least two options")
        if not any(option.correct for option in self.options):
            raise ValueError("a quiz needs at least one correct option")
        for number, option in enumerate(self.options, 1):
            if not option.text.strip() or not option.explanation.strip():
                raise ValueError(f"option {number} needs a text and an explanation")

    def _option(self, index: int) -> Option:
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"choose an option by its index (an int), not {index!r}")
        if not 0 <= index < len(self.options):
            raise IndexError(f"there is no option {index}: choose 0 to {len(self.options) - 1}")
        return self.options[index]

    def answer(self, index: int) -> str:
        """The explanation of option `index` (0-based)."""
        return self._option(index).explanation

    def is_correct(self, index: int) -> bool:
        return self._option(index).correct

    def feedback(self, index: int) -> str:
        """What the Check button says: right or not, then why."""
        verdict = "Correct." if self.is_correct(index) else "Not quite."
        return f"{verdict} {self.answer(index)}"

    def __str__(self) -> str:
        lines = [self.question, ""]
        lines += [f"  {i}. {option.text}" for i, option in enumerate(self.options)]
        lines += ["", "Answer with quiz.answer(index)."]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        lines = [f"**{self.question}**", ""]
        lines += [f"{i}. {option.text}" for i, option in enumerate(self.options)]
        lines += ["", "Answer with `quiz.answer(index)`."]
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


class QuizWidget(widgets.VBox):  # type: ignore[misc]
    """Radio buttons, a Check button and the chosen option's explanation."""

    def __init__(self, quiz: Quiz) -> None:
        self.quiz = quiz
        self.choices = widgets.RadioButtons(
            options=[(option.text, i) for i, option in enumerate(quiz.options)], index=None
        )
        self.check_button = widgets.Button(description="Check")
        self.feedback = widgets.HTML("")
        self.check_button.on_click(lambda _b: self.check())
        super().__init__(
            children=[
                widgets.HTML(f"<b>{html.escape(quiz.question)}</b>"),
                self.choices,
                self.check_button,
                self.feedback,
            ]
        )

    def check(self) -> str:
        index = self.choices.value
        text = "Choose an option first." if index is None else self.quiz.feedback(index)
        self.feedback.value = html.escape(text)
        return text


def quiz(question: str, options: Iterable[tuple[str, bool, str]]) -> Quiz:
    """`quiz("Which...?", [(text, correct, explanation), ...])`."""
    return Quiz(question, tuple(Option(text, correct, why) for text, correct, why in options))
