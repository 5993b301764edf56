"""Public checks: run an exercise's checks against the learner's code and report each outcome.

Owns: the four outcomes, `CheckResult`/`CheckReport` (what a learner reads and a grader
records), the `Exercise`/`Check` registry types, the bounded call into learner code, the
learner-frames-only traceback, graded hints, and `check()`/`hint()` for notebooks.

Each check ends in exactly one outcome (Kaggle Learn's learntools has the same four): *not
attempted* (the name is undefined, or the starter stub still raises `NotImplementedError`),
*incorrect* (it ran and the result is wrong), *error in your code* (the learner's exception,
with only the learner's frames), *passed*. A message names the check, says what was expected
and what happened, and gives one next step without the answer (COURSE.md, complaint 4). The
pass line never says "all tests passed": hidden checks run at grading (otter #138).

The grader reuses these definitions: `Exercise.checks` are the public checks, and hidden
checks come from a separate mapping given to `Checker(hidden=...)`, so adding them never
edits this module or the exercise modules; `Checker.check(..., **implementations)` runs
against explicit implementations instead of the notebook's namespace.

Must not import ipywidgets: no widget is needed to check or grade. Exercise modules import
this one, never the reverse (the default registry is loaded lazily).
"""

from __future__ import annotations

import enum
import logging
import os
import sys
import sysconfig
import tempfile
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import labkit

log = logging.getLogger("labkit.course.checks")

T = TypeVar("T")


class Outcome(enum.Enum):
    """How one check ended: exactly one of four."""

    PASSED = "passed"
    INCORRECT = "incorrect"
    ERROR = "error in your code"
    NOT_ATTEMPTED = "not attempted"


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
        for r in self.failed:
            # Learner text (exception messages) goes in a fence: never read as markdown.
            fence = "`" * max(3, _longest_backtick_run(r.message) + 1)
            lines += ["", f"{fence}text", r.message, fence]
        return "\n".join(lines) + "\n"

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


def _md_escape(text: str) -> str:
    return "".join("\\" + c if c in "\\`*_[]<>#|" else c for c in text)


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for c in text:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    return longest


# --- what a check function returns -------------------------------------------------------


@dataclass(frozen=True)
class Fail:
    """A failed check: what was expected, what happened, one next step.

    The message reads "ex1 · name: <expected>, but <got>. Next: <next_step>". `outcome` is
    INCORRECT unless the check saw the learner's code crash (ERROR)."""

    expected: str
    got: str
    next_step: str
    outcome: Outcome = Outcome.INCORRECT


@dataclass(frozen=True)
class Pass:
    """A passed check with a note worth showing (for example how it had to run)."""

    note: str


@dataclass(frozen=True)
class Check:
    """One check. `run` returns None (or a `Pass` with a note) when it passed, or a `Fail`.

    `expects` is one line saying what the learner's code should do here: it starts the
    message when the code raises or hangs. `on_error` is the next step for an exception."""

    name: str
    run: Callable[[Trial], Fail | Pass | None]
    expects: str
    points: float = 1
    on_error: str = (
        "fix the line shown last above (the error text is Python's own, so you can search for it)"
    )


@dataclass(frozen=True)
class Exercise:
    """An exercise: its contract names, its public checks and graded hints.

    An exercise with no checks yet says `pending` instead of running anything."""

    id: str
    title: str
    contracts: tuple[str, ...]
    checks: tuple[Check, ...] = ()
    hints: tuple[str, ...] = ()
    pending: str = ""

    @property
    def available(self) -> bool:
        return bool(self.checks)


@dataclass(frozen=True)
class CheckSettings:
    """Bounds and places; every check run gets its own temporary folder under `tmp_parent`."""

    call_timeout: float = 10.0
    race_timeout: float = 60.0
    lock_timeout: float = 5.0
    race_statement_delay: float = 0.1
    tmp_parent: Path | None = None


# --- calling learner code ---------------------------------------------------------------


@dataclass(frozen=True)
class Returned:
    value: Any


@dataclass(frozen=True)
class Raised:
    exception: BaseException
    traceback: str

    @property
    def summary(self) -> str:
        return exception_line(self.exception)


class _Stop(Exception):
    """Ends a check early with a fixed outcome (raised by `Trial`, caught by the runner)."""

    def __init__(self, outcome: Outcome, detail: str) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail


class Trial:
    """What one check run sees: the learner's implementations, bounded calls, a private
    temporary folder, cleanup callbacks, and values shared by the checks of one run."""

    def __init__(
        self,
        exercise: Exercise,
        check: Check,
        implementations: Mapping[str, Any],
        settings: CheckSettings,
        shared: dict[str, Any],
        stack: ExitStack,
    ) -> None:
        self.exercise = exercise
        self.check = check
        self.implementations = implementations
        self.settings = settings
        self._shared = shared
        self._stack = stack
        self._tmp: Path | None = None

    def impl(self, name: str) -> Any:
        return self.implementations[name]

    def defer(self, callback: Callable[[], object]) -> None:
        """Run `callback` when the check ends, whatever happened (errors ignored)."""

        def quietly() -> None:
            try:
                callback()
            except Exception:  # cleanup of a fixture must never change the outcome
                log.debug("cleanup failed", exc_info=True)

        self._stack.callback(quietly)

    def tempdir(self) -> Path:
        if self._tmp is None:
            made = tempfile.TemporaryDirectory(prefix="labkit-check-", dir=self.settings.tmp_parent)
            self._stack.callback(made.cleanup)
            self._tmp = Path(made.name)
        return self._tmp

    def once(self, key: str, factory: Callable[[], T]) -> T:
        """A value computed once per `check()` run and shared by its checks."""
        if key not in self._shared:
            self._shared[key] = factory()
        value: T = self._shared[key]
        return value

    def attempt(self, name: str, *args: Any) -> Returned | Raised:
        """Call the learner's `name` with a time bound. A stub ends the check as not attempted
        and a hang as an error; any other exception comes back as `Raised`."""
        fn = self.impl(name)
        result = call_bounded(fn, args, self.settings.call_timeout)
        if result is None:
            self.stop(
                Outcome.ERROR,
                f"{self.check.expects}, but your code did not return within "
                f"{self.settings.call_timeout:g} s, so the check stopped waiting. "
                "Next: look for a loop that never ends or a lock your code waits for.",
            )
        if isinstance(result, Raised) and isinstance(result.exception, NotImplementedError):
            self.stop(Outcome.NOT_ATTEMPTED, stub_message(name))
        return result

    def call(self, name: str, *args: Any) -> Any:
        """Like `attempt`, but any exception ends the check as an error in the learner's code."""
        result = self.attempt(name, *args)
        if isinstance(result, Raised):
            self.crashed(result)
        return result.value

    def crashed(self, raised: Raised, next_step: str | None = None) -> NoReturn:
        self.stop(
            Outcome.ERROR,
            f"{self.check.expects}, but your code raised an exception:\n"
            f"{raised.traceback}\nNext: {next_step or self.check.on_error}.",
        )

    def stop(self, outcome: Outcome, detail: str) -> NoReturn:
        raise _Stop(outcome, detail)


def call_bounded(
    fn: Callable[..., Any], args: Sequence[Any], timeout: float
) -> Returned | Raised | None:
    """Run `fn(*args)` in a daemon thread and wait at most `timeout` seconds.

    None means it did not return in time: the thread is abandoned (Python cannot stop it), but
    the check and the notebook carry on (COURSE.md, complaint 7)."""
    box: list[Returned | Raised] = []

    def target() -> None:
        try:
            box.append(Returned(fn(*args)))
        except BaseException as exc:  # the learner's code may raise anything, even SystemExit
            box.append(Raised(exc, learner_traceback(exc)))

    thread = threading.Thread(target=target, name="labkit-check-call", daemon=True)
    thread.start()
    thread.join(timeout)
    return box[0] if box else None


def stub_message(name: str) -> str:
    return (
        f"`{name}` still raises NotImplementedError (the starter stub). "
        "Next: replace the stub line with your code, run that cell, then check again."
    )


def missing_message(name: str) -> str:
    return (
        f"`{name}` is not defined in this notebook yet. Next: run the cell that defines it "
        "(after a kernel restart, run the notebook from the top)."
    )


# --- tracebacks with only the learner's frames ------------------------------------------

_LABKIT_DIR = os.path.realpath(os.path.dirname(labkit.__file__)) + os.sep


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(sorted(os.path.realpath(d) + os.sep for d in dirs))


_LIBRARY_DIRS = _library_dirs()


def is_learner_file(filename: str) -> bool:
    """False for labkit itself, the standard library, site-packages and frozen modules."""
    if filename.startswith("<frozen"):
        return False
    if not os.path.isabs(filename):
        return True  # "<string>", "<stdin>", a cell name: written by the learner
    real = os.path.realpath(filename)
    return not (real.startswith(_LABKIT_DIR) or real.startswith(_LIBRARY_DIRS))


@dataclass(frozen=True)
class Frame:
    filename: str
    lineno: int
    name: str
    line: str


def learner_frames(exc: BaseException) -> list[Frame]:
    return [
        Frame(f.filename, f.lineno or 0, f.name, (f.line or "").strip())
        for f in traceback.extract_tb(exc.__traceback__)
        if is_learner_file(f.filename)
    ]


def exception_line(exc: BaseException) -> str:
    """The exception's type and message, verbatim, as Python prints them (searchable)."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def format_frames(frames: Sequence[Frame], last_line: str) -> str:
    lines = []
    for f in frames:
        lines.append(f"  {display_location(f.filename, f.lineno)}, in {f.name}")
        if f.line:
            lines.append(f"    {f.line}")
    lines.append(last_line)
    return "\n".join(lines)


def learner_traceback(exc: BaseException) -> str:
    """Only the learner's frames, then the exception line; never a bare library traceback."""
    return format_frames(learner_frames(exc), exception_line(exc))


def display_location(filename: str, lineno: int) -> str:
    """`Cell In[3], line 4` for a notebook cell (as IPython says it), else the file."""
    shell = _ipython()
    if shell is not None:
        try:
            kind, name = shell.compile.format_code_name(filename) or (None, None)
        except Exception:  # IPython internals changed: fall back to the file name
            kind = name = None
        if kind is not None:
            return f"{kind} {name}, line {lineno}"
    return f'File "{filename}", line {lineno}'


def _ipython() -> Any:
    module = sys.modules.get("IPython")
    if module is None:
        return None
    try:
        return module.get_ipython()
    except Exception:
        return None


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


class Checker:
    """Runs checks. Every collaborator is injectable: the registry, where learner names are
    looked up, the grader's hidden checks, time bounds and the hint state."""

    def __init__(
        self,
        registry: Mapping[str, Exercise] | None = None,
        *,
        namespace: Callable[[], Mapping[str, Any]] = main_namespace,
        hidden: Mapping[str, Sequence[Check]] | None = None,
        settings: CheckSettings | None = None,
        hints: HintState | None = None,
    ) -> None:
        self._registry = registry
        self._namespace = namespace
        self._hidden = dict(hidden or {})
        self.settings = settings or CheckSettings()
        self.hint_state = hints if hints is not None else HintState()

    @property
    def registry(self) -> Mapping[str, Exercise]:
        if self._registry is None:
            from labkit.course.exercises import EXERCISES

            self._registry = EXERCISES
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
        public = [(c, False) for c in exercise.checks]
        hidden = [(c, True) for c in self._hidden.get(exercise.id, ())]
        shared: dict[str, Any] = {}
        results = []
        for c, is_hidden in public + hidden:
            if missing:
                text = missing_message(missing[0])
                result = _result(exercise, c, Outcome.NOT_ATTEMPTED, text, is_hidden)
            else:
                result = run_check(exercise, c, found, self.settings, shared, hidden=is_hidden)
            log.info("%s · %s: %s", exercise.id, c.name, result.outcome.value)
            results.append(result)
        return CheckReport(exercise.id, exercise.title, tuple(results))

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


def run_check(
    exercise: Exercise,
    check: Check,
    implementations: Mapping[str, Any],
    settings: CheckSettings,
    shared: dict[str, Any] | None = None,
    *,
    hidden: bool = False,
) -> CheckResult:
    """Run one check against explicit implementations; its fixtures are cleaned up after."""
    with ExitStack() as stack:
        trial = Trial(
            exercise, check, implementations, settings, {} if shared is None else shared, stack
        )
        try:
            fail = check.run(trial)
        except _Stop as stop:
            return _result(exercise, check, stop.outcome, stop.detail, hidden)
        except Exception as exc:
            # A bug in the check itself, not in the learner's code: say so plainly.
            log.exception("%s · %s: the check itself failed", exercise.id, check.name)
            text = (
                f"the check itself failed ({exception_line(exc)}), so it could not judge your "
                "code. Next: re-run the cell; if it happens again, report it to the course team."
            )
            return _result(exercise, check, Outcome.ERROR, text, hidden)
    if fail is None:
        return _result(exercise, check, Outcome.PASSED, "passed", hidden)
    if isinstance(fail, Pass):
        return _result(exercise, check, Outcome.PASSED, f"passed ({fail.note})", hidden)
    got = fail.got.rstrip()
    # A traceback ends the text verbatim (no period glued onto Python's message).
    sep = "\n" if "\n" in got else ". "
    text = f"{fail.expected}, but {got}{sep}Next: {fail.next_step.rstrip('.')}."
    return _result(exercise, check, fail.outcome, text, hidden)


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
