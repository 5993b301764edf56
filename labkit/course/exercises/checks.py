"""The check engine: run an exercise's checks against the learner's code and report each
outcome; `check()` and `hint()` for notebooks.

Owns: `CheckResult`/`CheckReport` (what a learner reads and a grader records), `Checker` (the
registry it reads, where learner names are looked up, extra checks, bounds, hint state),
`run_check`, graded hints, and `check()`/`hint()` over the default registry.

A message names the check, says what was expected and what happened, and gives one next step
without the answer. The pass line never says "all tests passed":
hidden checks run at grading (otter #138).

The grader reuses these definitions through `run_checks`: `Exercise.checks` are the public
checks, the hidden ones come from the module the exercise names (`Exercise.hidden_checks`, imported
by the grader only), and the reference answer runs beside the learner's for the differential
ones. A check is hidden when it says so (`Check.hidden`), wherever it runs.
`Checker(extra_checks=..., reference=...)` runs the hidden checks in one process (tests);
`Checker.check(..., **implementations)` runs against explicit implementations instead of the
notebook's namespace.

The registry (`labkit.course.exercises.registry.EXERCISES`) is data this engine reads; the
exercise modules are written with `labkit.course.exercises.trial` and never import the engine.
Must not import ipywidgets: no widget is needed to check or grade.
"""

from __future__ import annotations

import html
import json
import logging
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Final

from labkit.course.exercises.calls import Answer, Materialized, perform, roundtrip
from labkit.course.exercises.folder import Tampered
from labkit.course.exercises.race import RaceResult, RaceSpec, race
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import (
    SAFETY_FAULTS,
    Check,
    CheckRunner,
    CheckSettings,
    Exercise,
    Outcome,
    Pass,
    Stop,
    Trial,
    call_bounded,
    exception_line,
    missing_message,
)

log = logging.getLogger("labkit.course.checks")


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome. `points` are earned, `possible` is what the check is worth."""

    name: str
    outcome: Outcome
    message: str
    points: float
    possible: float
    hidden: bool = False

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASSED

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "outcome": self.outcome.value,
            "message": self.message,
            "points": self.points,
            "possible": self.possible,
            "hidden": self.hidden,
        }


@dataclass(frozen=True)
class CheckReport:
    """Everything `check()` found for one exercise; tests and the grader read the fields."""

    exercise_id: str
    title: str
    results: tuple[CheckResult, ...]
    available: bool = True
    note: str = ""
    # Whether hidden checks exist for this exercise at grading (not for one with no learner code).
    graded: bool = True

    @property
    def passed(self) -> bool:
        return self.available and bool(self.results) and all(r.passed for r in self.results)

    @property
    def counts(self) -> dict[Outcome, int]:
        return {o: sum(r.outcome is o for r in self.results) for o in Outcome}

    @property
    def n_passed(self) -> int:
        return self.counts[Outcome.PASSED]

    @property
    def score(self) -> float:
        return sum(r.points for r in self.results)

    @property
    def possible(self) -> float:
        return sum(r.possible for r in self.results)

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    @property
    def outcome(self) -> Outcome | None:
        """The summary: PASSED when every check passed, NOT_ATTEMPTED when none was
        attempted, ERROR when any check hit an error in the learner's code, else INCORRECT.
        None when the exercise has no checks available yet."""
        if not self.available or not self.results:
            return None
        counts = self.counts
        if counts[Outcome.PASSED] == len(self.results):
            return Outcome.PASSED
        if counts[Outcome.NOT_ATTEMPTED] == len(self.results):
            return Outcome.NOT_ATTEMPTED
        if counts[Outcome.ERROR]:
            return Outcome.ERROR
        return Outcome.INCORRECT

    @property
    def headline(self) -> str:
        if not self.available:
            return f"{self.exercise_id}: {self.note}"
        hidden = sum(r.hidden for r in self.results)
        total = len(self.results)
        if hidden:
            # Grading: the hidden checks ran, so the line counts both kinds.
            return (
                f"{self.exercise_id}: {self.n_passed}/{total} checks passed "
                f"({total - hidden} public, {hidden} hidden); "
                f"{self.score:g}/{self.possible:g} points"
            )
        if self.passed and not self.graded:
            return f"{self.exercise_id}: all {total} checks passed"
        if self.passed:
            return (
                f"{self.exercise_id}: public checks passed ({total}/{total}); "
                "hidden behaviour checks run at grading"
            )
        return f"{self.exercise_id}: {self.n_passed}/{total} public checks passed"

    def __str__(self) -> str:
        lines = [f"{self.headline}  [{self.title}]"]
        for r in self.results:
            lines.append(f"  {r.outcome.value:<19} {r.name}")
        for r in self.failed:
            lines.append("")
            lines.extend(r.message.splitlines())
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        lines = [f"**{_md_escape(self.headline)}** ({_md_escape(self.title)})", ""]
        for r in self.results:
            mark = "**" if not r.passed else ""
            lines.append(f"- {mark}{r.outcome.value}{mark} · {_md_escape(r.name)}")
        for names, first, verbatim, after in self._failures():
            lines += ["", f"**{_md_escape(', '.join(names))}**: {_md_prose(first)}"]
            if verbatim:
                # Learner text (a traceback) goes in a fence: never read as Markdown.
                fence = "`" * max(3, _longest_backtick_run("\n".join(verbatim)) + 1)
                lines += ["", f"{fence}text", *verbatim, fence]
            lines += [f"\n{_md_prose(line)}" for line in after]
        return "\n".join(lines) + "\n"

    def _repr_html_(self) -> str:
        """JupyterLab's view: the outcome of each check, then each distinct failure message
        once (the checks that share it named together), its code in `<code>`, a traceback in
        a block that wraps at spaces (JupyterLab's own `pre` rule breaks lines inside words)."""
        items = "".join(
            f"<li>{'<b>' if not r.passed else ''}{html.escape(r.outcome.value)}"
            f"{'</b>' if not r.passed else ''} · {html.escape(r.name)}</li>"
            for r in self.results
        )
        parts = [f"<p><b>{html.escape(self.headline)}</b> ({html.escape(self.title)})</p>"]
        if items:
            parts.append(f"<ul>{items}</ul>")
        for names, first, verbatim, after in self._failures():
            parts.append(
                f'<p class="labkit-check-failure"><b>{html.escape(", ".join(names))}</b>: '
                f"{_html_prose(first)}</p>"
            )
            if verbatim:
                parts.append(f'<pre style="{_WRAP}">{html.escape(chr(10).join(verbatim))}</pre>')
            parts += [f"<p>{_html_prose(line)}</p>" for line in after]
        return f'<div class="labkit-check">{"".join(parts)}</div>'

    def _failures(self) -> list[tuple[list[str], str, list[str], list[str]]]:
        """Each failure to show, said once: `(check names, first sentence, verbatim lines,
        sentences after)`. Checks with the same message are named together; a traceback or
        a next step already shown is not repeated (a later one points back instead)."""
        grouped: dict[str, list[str]] = {}
        for r in self.failed:
            detail = r.message.removeprefix(f"{self.exercise_id} · {r.name}: ")
            grouped.setdefault(detail, []).append(r.name)
        shown: set[str] = set()
        failures = []
        for detail, names in grouped.items():
            prose, verbatim = _split_detail(detail)
            block = "\n".join(verbatim)
            if block in shown:
                verbatim = [SAME_ERROR]
            after = [line for line in prose[1:] if line not in shown]
            shown.update([block, *prose[1:]])
            failures.append((names, prose[0], verbatim, after))
        return failures

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def to_dict(self) -> dict[str, Any]:
        return {
            "exercise": self.exercise_id,
            "title": self.title,
            "available": self.available,
            "outcome": None if self.outcome is None else self.outcome.value,
            "score": self.score,
            "possible": self.possible,
            "headline": self.headline,
            "results": [r.to_dict() for r in self.results],
        }


# Wrap long message lines at spaces; a word longer than the line is the only thing broken.
_WRAP: Final = (
    "white-space: pre-wrap; word-break: normal; overflow-wrap: break-word; margin: 0.5em 0"
)


def _md_escape(text: str) -> str:
    return "".join("\\" + c if c in "\\`*_[]<>#|" else c for c in text)


SAME_ERROR: Final = "(the same error as above)"
# A check author's code span: one backtick, no backtick inside (a learner's backtick runs stay
# text, escaped).
_CODE: Final = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def _split_detail(detail: str) -> tuple[list[str], list[str]]:
    """(prose lines, verbatim lines) of a failure: the first line and a `Next:` line are the
    check author's sentences; the lines between (a traceback, a listing) are shown as they are."""
    lines = detail.split("\n")
    if len(lines) == 1:
        return lines, []
    rest = lines[1:]
    prose_end = [line for line in rest if line.startswith("Next: ")]
    verbatim = [line for line in rest if not line.startswith("Next: ")]
    while verbatim and not verbatim[-1].strip():
        verbatim.pop()
    return [lines[0], *prose_end], verbatim


def _html_prose(line: str) -> str:
    out, at = [], 0
    for found in _CODE.finditer(line):
        out.append(html.escape(line[at : found.start()]))
        out.append(f"<code>{html.escape(found.group(1))}</code>")
        at = found.end()
    out.append(html.escape(line[at:]))
    return "".join(out)


def _md_prose(line: str) -> str:
    out, at = [], 0
    for found in _CODE.finditer(line):
        out.append(_md_escape(line[at : found.start()]))
        out.append(f"`{found.group(1)}`")
        at = found.end()
    out.append(_md_escape(line[at:]))
    return "".join(out)


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for c in text:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    return longest


# --- hints ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HintText:
    """One hint (or the "no more hints" note), displayable in a terminal and in Jupyter."""

    exercise_id: str
    number: int
    total: int
    text: str

    def __str__(self) -> str:
        if self.number == 0:
            return f"{self.exercise_id}: {self.text}"
        return f"{self.exercise_id} · hint {self.number}/{self.total}: {self.text}"

    def _repr_markdown_(self) -> str:
        return _md_escape(str(self)) + "\n"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


@dataclass
class HintState:
    """How many hints each exercise has revealed (inject a fresh one per test)."""

    shown: dict[str, int] = field(default_factory=dict)


# --- running ---------------------------------------------------------------------------------


class UnknownExercise(ValueError):
    pass


def main_namespace() -> Mapping[str, Any]:
    """The notebook's globals: IPython makes the user namespace `__main__`."""
    return vars(sys.modules["__main__"])


class InProcessRunner:
    """The learner's functions in this process (the notebook's kernel, for feedback): every
    call goes through the same encoding as the grader's worker (`calls.perform`), so a check
    sees data, never a learner object, whichever runner it has."""

    def __init__(self, implementations: Mapping[str, Any]) -> None:
        self._implementations = dict(implementations)
        self._made = Materialized()

    def call(self, name: str, args: Sequence[Any], timeout: float) -> Answer | None:
        data = [roundtrip(a) for a in args]
        got = call_bounded(perform, (self._implementations[name], data, self._made), timeout)
        if got is None:
            return None
        return Answer.from_json(json.loads(json.dumps(got[0])))

    def race(self, spec: RaceSpec) -> RaceResult:
        """The race procedure both runners use (`race.race_in_processes`), each racer a child
        interpreter given the function carried from here; threads when it cannot travel."""
        return race(self._implementations[spec.name], spec)

    def end_check(self) -> None:
        self._made.close()
        self._made = Materialized()


class Checker:
    """Runs checks. Every collaborator is injectable: the registry, where learner names are
    looked up, checks to run after an exercise's public ones (`extra_checks`, by exercise id:
    the hidden checks, each saying so itself) and the reference answers they compare with,
    time bounds and the hint state."""

    def __init__(
        self,
        registry: Mapping[str, Exercise] | None = None,
        *,
        namespace: Callable[[], Mapping[str, Any]] = main_namespace,
        extra_checks: Mapping[str, Sequence[Check]] | None = None,
        reference: Mapping[str, Mapping[str, Any]] | None = None,
        settings: CheckSettings | None = None,
        hints: HintState | None = None,
    ) -> None:
        self._registry = EXERCISES if registry is None else registry
        self._namespace = namespace
        self._extra_checks = dict(extra_checks or {})
        # The reference answers' functions by exercise (differential hidden checks need them).
        self._reference = dict(reference or {})
        self.settings = settings or CheckSettings()
        self.hint_state = hints if hints is not None else HintState()

    @property
    def registry(self) -> Mapping[str, Exercise]:
        return self._registry

    def exercise(self, exercise_id: str) -> Exercise:
        try:
            return self.registry[exercise_id]
        except KeyError:
            known = ", ".join(self.registry)
            raise UnknownExercise(
                f"unknown exercise {exercise_id!r}; known exercises: {known}"
            ) from None

    def check(self, exercise_id: str, /, **implementations: Any) -> CheckReport:
        exercise = self.exercise(exercise_id)
        if not exercise.available:
            return CheckReport(
                exercise.id, exercise.title, (), available=False, note=exercise.pending
            )
        found, missing = self._find(exercise, implementations)
        checks = [*exercise.checks, *self._extra_checks.get(exercise.id, ())]
        reference = self._reference.get(exercise.id)
        shared: dict[str, Any] = {}
        results = []
        for c in checks:
            if missing:
                text = missing_message(missing[0])
                result = _result(exercise, c, Outcome.NOT_ATTEMPTED, text, c.hidden)
            else:
                runner = InProcessRunner(found)
                result = run_check(
                    exercise,
                    c,
                    runner,
                    self.settings,
                    shared,
                    reference=None if reference is None else InProcessRunner(reference),
                )
            log.info("%s · %s: %s", exercise.id, c.name, result.outcome.value)
            results.append(result)
        results += safety_result(exercise, results, shared)
        graded = bool(exercise.contracts)
        return CheckReport(exercise.id, exercise.title, tuple(results), graded=graded)

    def _find(
        self, exercise: Exercise, given: Mapping[str, Any]
    ) -> tuple[dict[str, Any], list[str]]:
        unknown = sorted(set(given) - set(exercise.contracts))
        if unknown:
            raise TypeError(
                f"{exercise.id} defines {', '.join(exercise.contracts) or 'no names'}, "
                f"not {', '.join(unknown)}"
            )
        namespace: Mapping[str, Any] = (
            {} if len(given) == len(exercise.contracts) else (self._namespace())
        )
        found: dict[str, Any] = {}
        missing: list[str] = []
        for name in exercise.contracts:
            if name in given:
                found[name] = given[name]
            elif name in namespace:
                found[name] = namespace[name]
            else:
                missing.append(name)
        return found, missing

    def hint(self, exercise_id: str, n: int | None = None) -> HintText:
        exercise = self.exercise(exercise_id)
        total = len(exercise.hints)
        if total == 0:
            return HintText(exercise.id, 0, 0, "no hints for this exercise yet.")
        shown = self.hint_state.shown.get(exercise.id, 0)
        if n is None:
            if shown >= total:
                return HintText(
                    exercise.id,
                    0,
                    total,
                    f"no more hints (you have seen all {total}); hint({exercise.id!r}, n) "
                    "shows one again.",
                )
            n = shown + 1
        if not 1 <= n <= total:
            raise ValueError(f"{exercise.id} has hints 1 to {total}, not {n}")
        self.hint_state.shown[exercise.id] = max(shown, n)
        return HintText(exercise.id, n, total, exercise.hints[n - 1])


def run_checks(
    exercise: Exercise,
    checks: Sequence[Check],
    runner: CheckRunner,
    defined: Callable[[str], bool],
    settings: CheckSettings,
    reference: CheckRunner | None = None,
) -> CheckReport:
    """Run `checks` (public and hidden alike) against the learner's functions behind `runner`
    (the grader's worker), the differential ones against `reference` too; a contract name
    `defined` says is missing makes every check not attempted. The exercise's safety points
    come last (`safety_result`)."""
    missing = [n for n in exercise.contracts if not defined(n)]
    shared: dict[str, Any] = {}
    results = []
    for c in checks:
        if missing:
            result = _result(
                exercise, c, Outcome.NOT_ATTEMPTED, missing_message(missing[0]), c.hidden
            )
        else:
            result = run_check(exercise, c, runner, settings, shared, reference=reference)
        results.append(result)
    results += safety_result(exercise, results, shared)
    return CheckReport(exercise.id, exercise.title, tuple(results))


SAFETY_CHECK: Final = "no safety fault"
_UNJUDGED: Final = frozenset({Outcome.NOT_ATTEMPTED, Outcome.DID_NOT_RUN})


def safety_result(
    exercise: Exercise, results: Sequence[CheckResult], shared: Mapping[str, Any]
) -> list[CheckResult]:
    """The exercise's safety points as one more result: earned when no check saw a safety
    fault and the answer did its job at least once (a check passed), so an answer that does
    nothing, a stub or a constant, earns none of them."""
    if exercise.safety is None or not results:
        return []
    hidden = any(r.hidden for r in results)
    check = Check(SAFETY_CHECK, lambda t: None, exercise.safety.faults, exercise.safety.points)
    faults: list[str] = list(shared.get(SAFETY_FAULTS, []))
    if faults:
        detail = (
            f"{exercise.safety.faults}, but {faults[0]} (each such fault costs these "
            "points). Next: fix that check's failure first."
        )
        return [_result(exercise, check, Outcome.INCORRECT, detail, hidden)]
    if not any(r.passed for r in results):
        # Judged only where a check judged the answer: an answer found wrong earns none of
        # these points; one no check could judge (the worker's end, the deadline) did not run.
        detail = (
            "these points count once your function does its job in at least one check, "
            "without a safety fault. Next: get one of the checks above right first."
        )
        unjudged = [r for r in results if r.outcome is Outcome.DID_NOT_RUN]
        outcome = Outcome.INCORRECT
        if all(r.outcome is Outcome.NOT_ATTEMPTED for r in results):
            outcome = Outcome.NOT_ATTEMPTED
        elif unjudged and all(r.outcome in _UNJUDGED for r in results):
            outcome = Outcome.DID_NOT_RUN
            detail = f"not judged, since the checks could not run ({unjudged[0].message})"
        return [_result(exercise, check, outcome, detail, hidden)]
    return [_result(exercise, check, Outcome.PASSED, "passed", hidden)]


def run_check(
    exercise: Exercise,
    check: Check,
    runner: CheckRunner,
    settings: CheckSettings,
    shared: dict[str, Any] | None = None,
    *,
    reference: CheckRunner | None = None,
) -> CheckResult:
    """Run one check against the learner's functions behind `runner` (and the reference's
    behind `reference`); its fixtures are cleaned up after. The result is hidden when the
    check is (`Check.hidden`). No message names the judge's own folders: they read `<tmp>`."""
    shown: Mapping[str, str] = {}
    with ExitStack() as stack:
        shared = {} if shared is None else shared
        trial = Trial(exercise, check, runner, settings, shared, stack, reference)
        try:
            fail = check.run(trial)
        except Stop as stop:
            return _result(exercise, check, stop.outcome, _scrub(stop.detail, trial), check.hidden)
        except Tampered as tampered:
            trial.unsafe(f"the check's files were tampered with ({tampered})")
            text = (
                f"{check.expects}, but {tampered}: only your function's own connection may "
                "change the check's files. Next: leave the files the check gives you where "
                "they are, and change nothing outside them"
            )
            return _result(exercise, check, Outcome.INCORRECT, _scrub(text, trial), check.hidden)
        except Exception as exc:
            # A bug in the check itself, not in the learner's code: say so plainly.
            log.exception("%s · %s: the check itself failed", exercise.id, check.name)
            text = (
                f"the check itself failed ({exception_line(exc)}), so it could not judge your "
                "code. Next: re-run the cell; if it happens again, report it to the course team."
            )
            return _result(exercise, check, Outcome.ERROR, text, check.hidden)
        shown = trial.shown
    if fail is None:
        return _result(exercise, check, Outcome.PASSED, "passed", check.hidden)
    if isinstance(fail, Pass):
        return _result(exercise, check, Outcome.PASSED, f"passed ({fail.note})", check.hidden)
    if fail.safety:
        shared.setdefault(SAFETY_FAULTS, []).append(f"{check.name}: {fail.safety}")
    got = fail.got.rstrip()
    # A traceback ends the text verbatim (no period glued onto Python's message).
    sep = "\n" if "\n" in got else ". "
    text = f"{fail.expected}, but {got}{sep}Next: {fail.next_step.rstrip('.')}."
    return _result(exercise, check, fail.outcome, _replace(text, shown), check.hidden)


def _scrub(text: str, trial: Trial) -> str:
    return _replace(text, trial.shown)


def _replace(text: str, places: Mapping[str, str]) -> str:
    for place in sorted(places, key=len, reverse=True):
        text = text.replace(place, places[place])
    return text


def _result(
    exercise: Exercise, check: Check, outcome: Outcome, detail: str, hidden: bool
) -> CheckResult:
    message = f"{exercise.id} · {check.name}: {detail}"
    points = check.points if outcome is Outcome.PASSED else 0
    return CheckResult(check.name, outcome, message, points, check.points, hidden)


_default = Checker()


def check(exercise_id: str, /, **implementations: Any) -> CheckReport:
    """Run the public checks of `exercise_id` against the notebook's own definitions (or the
    implementations passed by keyword, e.g. `check("ex1", claim_and_delete=fn)`)."""
    return _default.check(exercise_id, **implementations)


def hint(exercise_id: str, n: int | None = None) -> HintText:
    """The next graded hint for `exercise_id` (or hint `n`)."""
    return _default.hint(exercise_id, n)
