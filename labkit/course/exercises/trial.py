"""What an exercise is written with: the five outcomes, the `Exercise`/`Check` registry
types, what a check function returns (`Fail`, `Pass`), and `Trial`, what one check run sees.

Owns: `Outcome`, `Exercise`, `Check`, `Fail`, `Pass`, `CheckSettings`, the `CheckRunner` protocol
(where the learner's functions run: the notebook's kernel or the grader's worker), `Trial` and
its bounded calls into learner code (`call_bounded`, `Returned`, `Raised`: data, never learner
objects; arguments are data and the markers of `labkit.course.exercises.calls`), and the stub
and missing-name messages.

Each check ends in exactly one outcome. Four a learner meets (Kaggle Learn's learntools has the
same four): *not attempted* (the name is undefined, or the starter stub still raises
`NotImplementedError`), *incorrect* (it ran and the result is wrong), *error in your code* (the
learner's exception, with only the learner's frames), *passed*; and one only grading gives:
*did not run* (the check could not run, so it never passed).

Outcomes for exceptions, one rule every check follows (through `Trial.raised_instead`):

- An exception the learner's code raised ON PURPOSE (a `raise` statement in the learner's own
  code, `LearnerError.deliberate`) is an answer, so a wrong one is *incorrect*: a refusal of
  the wrong type or code where the contract says to refuse, or a refusal where the contract
  says to return. The message says which type and code (or which value) were expected.
- Any other exception is one the contract never calls for (a typo, a failing library call, a
  `None` indexed): *error in your code*, shown with the learner's frames only. Its next step
  says Python's error text can be searched only when the exception is Python's own.
- A next step never advises catching an exception just to return something else: it names
  the case to test for (or the exact exception a library uses to report it).

Messages show what differs, not whole values: `difference(expected, got)` names the differing
keys and positions of dicts and lists.

Exercise modules import this one; it imports `calls` (data across the boundary) and no
exercise, the registry or the check engine, so the exercises and the engine that runs them
form no circle. Must not import ipywidgets.
"""

from __future__ import annotations

import enum
import logging
import os
import shutil
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn, Protocol, TypeVar

from labkit.course.exercises.calls import (
    Answer,
    Frame,
    LearnerError,
    exception_line,
    format_frames,
    learner_frames,
    learner_traceback,
    type_name,
)
from labkit.course.exercises.folder import Folder, Private

if TYPE_CHECKING:
    from labkit.course.exercises.race import RaceResult, RaceSpec

__all__ = [
    "Frame",
    "difference",
    "exception_line",
    "format_frames",
    "learner_frames",
    "learner_traceback",
]

log = logging.getLogger("labkit.course.checks")

T = TypeVar("T")
# Where a run's checks record the safety faults they saw (`Trial.unsafe`), in `shared`.
SAFETY_FAULTS = "safety faults"


class Outcome(enum.Enum):
    """How one check ended: exactly one of five (the last at grading only)."""

    PASSED = "passed"
    INCORRECT = "incorrect"
    ERROR = "error in your code"
    NOT_ATTEMPTED = "not attempted"
    DID_NOT_RUN = "did not run"  # grading only: the check could not run (never passed)


# --- what a check function returns -------------------------------------------------------


@dataclass(frozen=True)
class Fail:
    """A failed check: what was expected, what happened, one next step.

    The message reads "ex1 · name: <expected>, but <got>. Next: <next_step>". `outcome` is
    INCORRECT unless the check saw the learner's code crash (ERROR). `safety` names the safety
    fault the check saw (a deletion outside the workspace, a second deletion, an escape), which
    costs the exercise's safety points (`Exercise.safety`) on top of this check's."""

    expected: str
    got: str
    next_step: str
    outcome: Outcome = Outcome.INCORRECT
    safety: str = ""


@dataclass(frozen=True)
class Pass:
    """A passed check with a note worth showing (for example how it had to run)."""

    note: str


DEFAULT_ON_ERROR = (
    "fix the line shown last above (the error text is Python's own, so you can search for it)"
)


@dataclass(frozen=True)
class Check:
    """One check. `run` returns None (or a `Pass` with a note) when it passed, or a `Fail`.

    `expects` is one line saying what the learner's code should do here: it starts the
    message when the code raises or hangs. `on_error` is the next step for an exception the
    contract never calls for (the outcome rule in the module docstring); the default says
    Python's error text can be searched only for Python's own exceptions. `hidden` marks a
    check the grader runs and the learner never sees (its result is hidden, wherever it runs)."""

    name: str
    run: Callable[[Trial], Fail | Pass | None]
    expects: str
    points: float = 1
    hidden: bool = False
    on_error: str = DEFAULT_ON_ERROR
    # The contract's rules (`Rule.id`) this check asserts: it may grade nothing else.
    rules: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rule:
    """One behaviour the task states and the checks grade. `states` is a phrase of the task
    cell, word for word (whitespace aside): the rule is graded only because the task says it."""

    id: str
    states: str


@dataclass(frozen=True)
class Contract:
    """What the learner writes: `signature` as the task cell states it after "Write"
    (`name(params) -> type`), and every rule a check grades."""

    signature: str
    rules: tuple[Rule, ...] = ()

    @property
    def name(self) -> str:
        return self.signature.split("(", 1)[0].strip()

    @property
    def params(self) -> tuple[str, ...]:
        inside = self.signature.split("(", 1)[1].rsplit(")", 1)[0]
        return tuple(p.strip() for p in inside.split(",") if p.strip())

    def rule(self, rule_id: str) -> Rule:
        return next(r for r in self.rules if r.id == rule_id)


@dataclass(frozen=True)
class Safety:
    """The exercise's safety points and the faults that cost them (one sentence)."""

    points: float
    faults: str


@dataclass(frozen=True)
class Equivalent:
    """A change to the reference answer that no check can catch because no caller can observe
    it (a message nobody reads, a bound never reached): the line as the reference has it
    (`was`), as the mutant has it (`becomes`), and why the two behave the same. Mutation
    testing (`labkit course mutants`) leaves these out of the checks' strength."""

    was: str
    becomes: str
    why: str


SQL_ANY_CASE: Final = "SQLite reads keywords and table and column names the same in any case"


def sql_in_any_case(line: str, sql: str) -> tuple[Equivalent, ...]:
    """The mutants that spell the SQL text `sql` of the reference's `line` in lower or in
    upper case: equivalent (`SQL_ANY_CASE`)."""
    spellings = {sql.lower(), sql.upper()} - {sql}
    return tuple(Equivalent(line, line.replace(sql, s), SQL_ANY_CASE) for s in sorted(spellings))


@dataclass(frozen=True)
class Exercise:
    """An exercise, declared once: its id, title, the solution notebook that holds its task and
    reference answer (`notebook`, a stem of solutions/), its contract, public checks, the
    module of its hidden checks (`hidden_checks`, imported only by the grader), its safety
    points and graded hints. The registry, the grader's graded set, the README's exercise
    table and the tests' exercise lists all derive from these.

    An exercise with no checks yet says `pending` instead of running anything."""

    id: str
    title: str
    contract: Contract | None = None
    checks: tuple[Check, ...] = ()
    hints: tuple[str, ...] = ()
    pending: str = ""
    notebook: str = ""
    hidden_checks: str = ""
    safety: Safety | None = None
    # The checked-output cells of the notebook that show the exercise's function at work, by
    # cell id, each with the checks (public or hidden, by name) that exercise what it shows:
    # the cell's output point counts only when all of them passed.
    outputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    # Mutants of the reference answer that change nothing observable, each argued (`Equivalent`).
    equivalent_mutants: tuple[Equivalent, ...] = ()

    @property
    def available(self) -> bool:
        return bool(self.checks)

    @property
    def contracts(self) -> tuple[str, ...]:
        """The names the learner's code defines."""
        return () if self.contract is None else (self.contract.name,)


@dataclass(frozen=True)
class CheckSettings:
    """Bounds and places; every check run gets its own temporary folder under `tmp_parent`."""

    call_timeout: float = 10.0
    race_timeout: float = 60.0
    lock_timeout: float = 5.0
    race_statement_delay: float = 0.1
    tmp_parent: Path | None = None
    # Differential checks (`labkit.course.exercises.differ`): generated inputs per check, and
    # the seconds one check may spend on them before the answer counts as too slow.
    examples: int = 40
    search_budget: float = 120.0


# --- calling learner code ---------------------------------------------------------------


@dataclass(frozen=True)
class Returned:
    """The learner's function returned `value` (decoded data: never a learner object)."""

    value: Any
    effects: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Raised:
    """The learner's function raised: the exception as data."""

    error: LearnerError
    effects: Mapping[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        return self.error.summary

    @property
    def traceback(self) -> str:
        return self.error.traceback


class CheckRunner(Protocol):
    """Where the learner's functions run: in the notebook's kernel (feedback) or in the
    grader's worker process (the grade). Arguments are data and markers; answers are data."""

    def call(self, name: str, args: Sequence[Any], timeout: float) -> Answer | None:
        """One call; None when it did not return within `timeout` seconds."""
        ...

    def race(self, spec: RaceSpec) -> RaceResult:
        """`spec.name(conn, *args)` for each `args` of `spec.calls` at once, each with its own
        connection (`RaceSpec`)."""
        ...

    def end_check(self) -> None:
        """The check ended: close what its markers opened."""
        ...


class Stop(Exception):
    """Ends a check early with a fixed outcome (raised by `Trial`, caught by the runner)."""

    def __init__(self, outcome: Outcome, detail: str) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail


class Trial:
    """What one check run sees: a runner for the learner's functions, bounded calls, a private
    temporary folder, cleanup callbacks, and values shared by the checks of one run."""

    def __init__(
        self,
        exercise: Exercise,
        check: Check,
        runner: CheckRunner,
        settings: CheckSettings,
        shared: dict[str, Any],
        stack: ExitStack,
        reference: CheckRunner | None = None,
    ) -> None:
        self.exercise = exercise
        self.check = check
        self.runner = runner
        self.settings = settings
        # The reference answer (the solution's answer cell) behind a runner of its own, for
        # differential checks; None where no solution is at hand (a learner's notebook).
        self.reference = reference
        self._shared = shared
        self._stack = stack
        self._folder: Folder | None = None
        self._reference_folder: Folder | None = None
        self._private: Private | None = None
        self.effects: Mapping[str, Any] = {}
        stack.callback(runner.end_check)
        if reference is not None:
            stack.callback(reference.end_check)

    def defer(self, callback: Callable[[], object]) -> None:
        """Run `callback` when the check ends, whatever happened (errors ignored)."""

        def quietly() -> None:
            try:
                callback()
            except Exception:  # cleanup of a fixture must never change the outcome
                log.debug("cleanup failed", exc_info=True)

        self._stack.callback(quietly)

    def folder(self) -> Folder:
        """The check's shared folder (`labkit.course.exercises.folder`): what the learner's
        side is given, read back only through the judge's own descriptor."""
        if self._folder is None:
            folder = Folder(self.settings.tmp_parent, self.private())
            self.defer(lambda: _remove(folder.path))
            self.defer(folder.close)
            self._folder = folder
        return self._folder

    def reference_folder(self) -> Folder:
        """The reference answer's folder in a differential check: the judge's own (inside
        `private`), closed when the check ends."""
        if self._reference_folder is None:
            private = self.private()
            folder = Folder(private.path, private)
            self.defer(folder.close)
            self._reference_folder = folder
        return self._reference_folder

    def tempdir(self) -> Path:
        return self.folder().path

    def private(self) -> Private:
        """A folder of the judge's own (worlds are built and read there)."""
        if self._private is None:
            self._private = Private()
            self.defer(self._private.close)
        return self._private

    @property
    def shown(self) -> Mapping[str, str]:
        """Text to replace in every message: the check's folders, named as the learner sees
        them, never as the judge's scratch paths."""
        places = {}
        if self._folder is not None:
            places[str(self._folder.path)] = "<tmp>"
            places[os.path.realpath(self._folder.path)] = "<tmp>"
        if self._private is not None:
            places[str(self._private.path)] = "<tmp>"
        if self.settings.tmp_parent is not None:
            places[str(self.settings.tmp_parent)] = "<scratch>"
        return places

    def unsafe(self, fault: str) -> None:
        """Record a safety fault: the exercise's safety points are lost."""
        self._shared.setdefault(SAFETY_FAULTS, []).append(f"{self.check.name}: {fault}")

    def once(self, key: str, factory: Callable[[], T]) -> T:
        """A value computed once per `check()` run and shared by its checks."""
        if key not in self._shared:
            self._shared[key] = factory()
        value: T = self._shared[key]
        return value

    def in_transaction(self, key: str = "conn") -> bool:
        """Whether the connection marker `key` was left inside a transaction by the last call."""
        return bool(self.effects.get("in_transaction", {}).get(key, False))

    def drawn(self, key: str) -> list[Any]:
        """The ids the last call drew from the `IdSource` marker `key`."""
        return list(self.effects.get("drawn", {}).get(key, []))

    def statements(self, key: str = "conn") -> list[str]:
        """The SQL the last call ran on the connection marker `key` (when it has `record`)."""
        return list(self.effects.get("statements", {}).get(key, []))

    def returned_before(self) -> bool:
        """Whether the last call's answer (or a dict or list inside it) is an object an earlier
        call of this check returned: one template handed out again."""
        return bool(self.effects.get("returned_before", False))

    def args_after(self) -> list[Any]:
        """The arguments of the last call as the learner's code left them (data)."""
        return list(self.effects.get("args", []))

    def attempt(self, name: str, *args: Any) -> Returned | Raised:
        """Call the learner's `name` with a time bound. A stub ends the check as not attempted
        and a hang as an error; any other exception comes back as `Raised`."""
        answer = self.runner.call(name, args, self.settings.call_timeout)
        if answer is None:
            self.stop(
                Outcome.ERROR,
                f"{self.check.expects}, but your code did not return within "
                f"{self.settings.call_timeout:g} s, so the check stopped waiting. "
                "Next: look for a loop that never ends or a lock your code waits for.",
            )
        self.effects = answer.effects
        if answer.kind == "stub":
            self.stop(Outcome.NOT_ATTEMPTED, stub_message(name))
        if answer.error is not None:
            return Raised(answer.error, answer.effects)
        return Returned(answer.value, answer.effects)

    def call(self, name: str, *args: Any) -> Any:
        """Like `attempt`, but any exception ends the check as an error in the learner's code."""
        result = self.attempt(name, *args)
        if isinstance(result, Raised):
            self.crashed(result)
        return result.value

    def race(
        self,
        name: str,
        database: Path,
        calls: Sequence[tuple[Any, ...]],
        reset: Callable[[], None],
        *,
        delay: float | None = None,
    ) -> RaceResult:
        """`name(conn, *args)` for each `args` at once; `delay` (seconds before each SQL
        statement of a racer) overrides the settings' `race_statement_delay`."""
        from labkit.course.exercises.race import RaceSpec

        return self.runner.race(
            RaceSpec(
                name,
                database,
                tuple(calls),
                timeout=self.settings.race_timeout,
                lock_timeout=self.settings.lock_timeout,
                delay=self.settings.race_statement_delay if delay is None else delay,
                reset=reset,
            )
        )

    def crashed(self, raised: Raised, next_step: str | None = None) -> NoReturn:
        step = next_step or self.check.on_error
        if step == DEFAULT_ON_ERROR and not pythons_own(raised.error):
            step = "fix the line shown last above"
        self.stop(
            Outcome.ERROR,
            f"{self.check.expects}, but your code raised an exception:\n"
            f"{raised.traceback}\nNext: {step}.",
        )

    def raised_instead(
        self,
        raised: Raised,
        expected: str,
        wanted: str,
        next_step: str,
        on_crash: str | None = None,
    ) -> Fail:
        """The outcome rule (module docstring) for an exception where the contract wants
        `wanted` (a value, or a refusal of another type or code): raised on purpose, it is an
        incorrect answer with `next_step`; otherwise the check ends as an error in the learner's
        code with `on_crash` (default: the check's `on_error`)."""
        if raised.error.deliberate:
            return Fail(
                expected,
                f"it raised {raised_text(raised.error)} on purpose, where the contract expects "
                f"{wanted}",
                next_step,
            )
        self.crashed(raised, on_crash)

    def stop(self, outcome: Outcome, detail: str) -> NoReturn:
        raise Stop(outcome, detail)


def _remove(folder: Path) -> None:
    """Remove a check's folder; what cannot be removed is logged and left. The learner's side
    may still be writing into it (a thread started when the answer cells ran): that must never
    change the check's outcome, and the grader removes the whole scratch area once the
    learner's processes are gone."""

    def logged(function: Any, path: str, error: Any) -> None:
        log.warning("a check folder could not be removed: %s (%s)", path, error[1])

    shutil.rmtree(folder, onerror=logged)


def call_bounded(fn: Callable[..., T], args: Sequence[Any], timeout: float) -> tuple[T] | None:
    """Run `fn(*args)` in a daemon thread and wait at most `timeout` seconds; `fn` must not
    raise (it is `calls.perform`). None means it did not return in time: the thread is
    abandoned (Python cannot stop it), but the check and the notebook carry on."""
    box: list[T] = []

    def target() -> None:
        try:
            box.append(fn(*args))
        except BaseException:  # nothing to report: the caller sees None, as for a hang
            log.debug("bounded call failed", exc_info=True)

    thread = threading.Thread(target=target, name="labkit-check-call", daemon=True)
    thread.start()
    thread.join(timeout)
    return (box[0],) if box else None


def not_a_bool_next(result: Any) -> str:
    """The next step when `result` is not a bool at all (None, a rowcount), else ""."""
    if result is None:
        return "end every path with `return True` or `return False` (None means a missing return)"
    if type(result) is int:
        return (
            f"return True or False, a real bool: {result!r} is an int (a rowcount, perhaps), "
            "and the contract's answer is compared with `is True` / `is False`"
        )
    if type(result) is not bool:
        return f"return True or False, a real bool, not a {type_name(result)}"
    return ""


def pythons_own(error: LearnerError) -> bool:
    """Whether the exception's type comes with Python (builtins or the standard library)."""
    return error.module.partition(".")[0] in ("builtins", *sys.stdlib_module_names)


def raised_text(error: LearnerError) -> str:
    """The exception as it was raised: `ValueError('text')`, `ProtocolError(-32602, 'text')`."""
    args = [] if error.code is None else [repr(error.code)]
    if error.message:
        text = error.message if len(error.message) <= 120 else error.message[:117] + "..."
        args.append(repr(text))
    return f"{error.type}({', '.join(args)})"


def difference(expected: Any, got: Any, limit: int = 6) -> str:
    """What differs between `expected` and `got`, by key and position, not the whole values:
    `params.mode is 'form' (expected 'url'); elicitationId is there (expected none)`.
    Values of another type are shown whole (they are short or the type is the news)."""
    found: list[str] = []
    _differences(expected, got, "", found)
    if len(found) > limit:
        found = [*found[:limit], f"and {len(found) - limit} more differences"]
    return "; ".join(found)


def _differences(expected: Any, got: Any, where: str, found: list[str]) -> None:
    if type(expected) is type(got) and isinstance(expected, dict):
        for key in expected:
            at = f"{where}.{key}" if where else str(key)
            if key not in got:
                found.append(f"{at} is missing (expected {_short(expected[key])})")
            else:
                _differences(expected[key], got[key], at, found)
        for key in got:
            if key not in expected:
                at = f"{where}.{key}" if where else str(key)
                found.append(f"{at} is there (expected none), {_short(got[key])}")
        return
    if type(expected) is type(got) and isinstance(expected, list | tuple):
        for i, (e, g) in enumerate(zip(expected, got, strict=False)):
            _differences(e, g, f"{where}[{i}]", found)
        if len(expected) != len(got):
            found.append(f"{where or 'it'} has {len(got)} items (expected {len(expected)})")
        return
    if type(expected) is not type(got) or expected != got:
        what = where or "it"
        if type(expected) is not type(got) and expected == got:
            found.append(
                f"{what} is {_short(got)} of type {type_name(got)} "
                f"(expected {_short(expected)} of type {type_name(expected)})"
            )
        elif type(expected) is not type(got):
            found.append(
                f"{what} is {_short(got)} of type {type_name(got)} (expected {_short(expected)})"
            )
        else:
            found.append(f"{what} is {_short(got)} (expected {_short(expected)})")


def _short(value: Any, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


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
