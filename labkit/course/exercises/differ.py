"""Differential checks: the learner's function and the reference answer (the solution's answer
cell) on the same inputs, generated with Hypothesis from the contract's whole domain, compared
on what a caller can observe.

Owns: `Side` (one of the two: its runner and its own world folder), `differential` (the search,
its seed and bounds, and the failure it reports: the smallest input on which the two differ,
what each did, and the next step chosen from the difference observed), and the sharp-edge
strategies the exercises share (`texts`).

How a check uses it: `play(side, scenario)` builds the scenario's world in `side.folder`,
calls the function through `side.attempt` and returns an observation as plain data (a dict:
the return value by exact type, the exception's type and code, the side effects read back);
the two observations are compared with `==`; `explain(scenario, mine, reference)` names the
cause of a difference (`Cause`: the next step, and the safety fault when there is one).

Runs are deterministic per course version: the seed is derived from labkit's version, the
exercise and the check, and Hypothesis keeps no database, so a regrade sees the same inputs.
Every explicit example (each catalogued mistake's input) runs first.

Must not import ipywidgets or the check engine.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from hypothesis import HealthCheck, Phase, Verbosity, example, given, seed, settings
from hypothesis import strategies as st

import labkit
from labkit.course.exercises.trial import (
    Fail,
    Outcome,
    Raised,
    Returned,
    Stop,
    Trial,
    difference,
    stub_message,
)

S = TypeVar("S")
Observation = dict[str, Any]
CRASHED: Final = " (not raised on purpose)"

NO_REFERENCE: Final = (
    "did not run: this check compares your function with the course's reference answer, "
    "which is not available here"
)


@dataclass(frozen=True)
class Cause:
    """Why the two differ: one next step, and the safety fault when the difference is one."""

    next_step: str
    safety: str = ""


class Side:
    """One side of a differential check: the learner's function (through the trial's runner,
    in the check's shared folder) or the reference (in a folder of the judge's own)."""

    def __init__(self, t: Trial, *, learner: bool) -> None:
        self.trial = t
        self.learner = learner
        if learner:
            self.folder = t.folder()
        else:
            if t.reference is None:
                raise Stop(Outcome.DID_NOT_RUN, NO_REFERENCE)
            self.folder = t.reference_folder()

    def attempt(self, name: str, *args: Any) -> Returned | Raised:
        if self.learner:
            return self.trial.attempt(name, *args)
        assert self.trial.reference is not None
        answer = self.trial.reference.call(name, args, self.trial.settings.call_timeout)
        if answer is None or answer.kind == "stub":
            raise RuntimeError(f"the reference answer did not answer {name}")
        if answer.error is not None:
            return Raised(answer.error, answer.effects)
        return Returned(answer.value, answer.effects)

    def reset(self) -> None:
        """Between two scenarios: close what the markers of the last one opened."""
        runner = self.trial.runner if self.learner else self.trial.reference
        assert runner is not None
        runner.end_check()


class _Differs(Exception):
    def __init__(self, scenario: Any, mine: Observation, reference: Observation) -> None:
        super().__init__("the answer and the reference differ")
        self.scenario = scenario
        self.mine = mine
        self.reference = reference


class _Abort(BaseException):
    """Ends the search at once (a stub, a hang, a dead worker, the time budget): Hypothesis
    neither catches nor shrinks it."""

    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.detail)
        self.stop = stop


def check_seed(t: Trial) -> int:
    text = f"{labkit.__version__}:{t.exercise.id}:{t.check.name}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@dataclass(frozen=True)
class Search(Generic[S]):
    """One differential check's inputs: `inputs` (a strategy), `describe` (a scenario in a few
    words, for the message), `examples` (explicit inputs that always run first)."""

    inputs: st.SearchStrategy[S]
    describe: Callable[[S], str]
    examples: Sequence[S] = ()


def differential(
    t: Trial,
    search: Search[S],
    play: Callable[[Side, S], Observation],
    explain: Callable[[S, Observation, Observation], Cause],
    agree: Callable[[Observation, Observation], bool] = lambda mine, reference: mine == reference,
    also_right: Callable[[Side, S], Sequence[Observation]] | None = None,
) -> Fail | None:
    """Play each scenario on both sides and compare (`agree(mine, reference)`, equality unless
    the contract allows a choice); the smallest differing scenario (as Hypothesis shrinks it)
    becomes the failure. `also_right` plays the reference again where the scenario leaves the
    outcome open (another writer's timing): the answer may agree with any of those instead."""
    mine_side, reference_side = Side(t, learner=True), Side(t, learner=False)
    deadline = time.monotonic() + t.settings.search_budget
    last: list[_Differs] = []

    def one(scenario: S) -> None:
        try:
            reference = play(reference_side, scenario)
            mine = play(mine_side, scenario)
            right = agree(mine, reference)
            if not right and also_right is not None:
                reference_side.reset()
                right = any(agree(mine, other) for other in also_right(reference_side, scenario))
        except Stop as stop:
            raise _Abort(stop) from None
        finally:
            reference_side.reset()
            mine_side.reset()
        if not right:
            last.append(_Differs(scenario, mine, reference))
            raise last[-1]
        if time.monotonic() > deadline:
            raise _Abort(_too_slow(t))

    test = given(search.inputs)(one)
    for case in reversed(search.examples):
        test = example(case)(test)
    test = seed(check_seed(t))(
        settings(
            database=None,
            max_examples=t.settings.examples,
            deadline=None,
            derandomize=False,
            verbosity=Verbosity.quiet,
            phases=(Phase.explicit, Phase.generate, Phase.shrink),
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
        )(test)
    )
    try:
        test()
    except _Differs as found:
        return _failure(t, search, found, explain)
    except _Abort as aborted:
        if last and aborted.stop.outcome is not Outcome.NOT_ATTEMPTED:
            return _failure(t, search, last[-1], explain)
        raise aborted.stop from None
    return None


def _too_slow(t: Trial) -> Stop:
    return Stop(
        Outcome.ERROR,
        f"{t.check.expects}, but your function took more than {t.settings.search_budget:g} s "
        f"over this check's inputs (the reference needs milliseconds). Next: look for a wait "
        "or a loop that does not depend on the input.",
    )


def _failure(
    t: Trial,
    search: Search[S],
    found: _Differs,
    explain: Callable[[S, Observation, Observation], Cause],
) -> Fail:
    scenario: S = found.scenario
    cause = explain(scenario, found.mine, found.reference)
    # An exception the learner's code did not mean, where the reference raised none of its
    # own, is an error in the learner's code (the outcome rule), not a wrong answer.
    crashed = _crashes(found.mine) > _crashes(found.reference)
    return Fail(
        f"on {search.describe(scenario)}, it should have done what the reference does "
        f"({said(found.reference)})",
        f"{difference(found.reference, found.mine)}",
        cause.next_step,
        Outcome.ERROR if crashed else Outcome.INCORRECT,
        safety=cause.safety,
    )


def _crashes(observation: Any) -> int:
    """How many exceptions not raised on purpose an observation records."""
    if isinstance(observation, Mapping):
        return sum(_crashes(v) for v in observation.values())
    if isinstance(observation, list | tuple):
        return sum(_crashes(v) for v in observation)
    return int(isinstance(observation, str) and observation.endswith(CRASHED))


def said(observation: Mapping[str, Any]) -> str:
    return "; ".join(f"{k} {_value(v)}" for k, v in observation.items())


def _value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def observed(outcome: Returned | Raised, *, refusal: str | None = None) -> Observation:
    """A call's outcome as data: the value by exact type, or the exception (`refusal`: the
    qualified name of the contract's exception, reported with its code and data)."""
    if isinstance(outcome, Returned):
        return {"returned": outcome.value}
    error = outcome.error
    if refusal is not None and error.is_a(refusal):
        return {"raised": refusal.rsplit(".", 1)[-1], "code": error.code, "data": error.data}
    kind = error.type if error.deliberate else f"{error.type}{CRASHED}"
    return {"raised": kind}


def stub_stop(name: str) -> Stop:
    return Stop(Outcome.NOT_ATTEMPTED, stub_message(name))


# --- sharp edges shared by the exercises --------------------------------------------------------

# Text where exact transport matters: spaces at the ends, case, non-ASCII in two Unicode forms,
# percent-escapes that must not be decoded, quotes and newlines.
SHARP_TEXT: Final = (
    "",
    " ",
    "Connect.",
    "  Connect «Reports» for Zoë: step 2/3.\nThen retry.  ",
    "Zoe\u0301",
    "Zo\u00eb",
    "%2e%2e/%41",
    "TAB\tand 'quotes\"",
)


def texts() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(SHARP_TEXT), st.text(max_size=12))
