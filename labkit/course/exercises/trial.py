"""What an exercise is written with: the four outcomes, the `Exercise`/`Check` registry
types, what a check function returns (`Fail`, `Pass`), and `Trial`, what one check run sees.

Owns: `Outcome`, `Exercise`, `Check`, `Fail`, `Pass`, `CheckSettings`, `Trial` and its bounded
call into learner code (`call_bounded`, `Returned`, `Raised`), the learner-frames-only
traceback, and the stub and missing-name messages.

Each check ends in exactly one outcome (Kaggle Learn's learntools has the same four): *not
attempted* (the name is undefined, or the starter stub still raises `NotImplementedError`),
*incorrect* (it ran and the result is wrong), *error in your code* (the learner's exception,
with only the learner's frames), *passed*.

Exercise modules import this one; it imports no exercise, the registry or the check engine, so
the exercises and the engine that runs them form no circle. Must not import ipywidgets.
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
from dataclasses import dataclass
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


class Stop(Exception):
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
        raise Stop(outcome, detail)


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
