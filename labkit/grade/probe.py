"""Kernel-side check runner: this file's *source* is sent to the grading kernel, never imported
there (the kernel cannot read `labkit/grade/`).

Owns: calling one check with the learner's implementations (looked up by the check's
parameter names in the notebook's namespace), turning what happens into one of the outcomes
and the check author's message (the outcome words are the grader's `GradedOutcome` values:
"passed", "incorrect", "error in your code", "not attempted"), and displaying the result as one
`application/vnd.labkit.check+json` output the grader reads back. No traceback and no check
source ever leaves here: only the outcome and the message.

Imports nothing from labkit (the kernel runs it from a string): `public` loads the course's
public checks by name, in the kernel, where `labkit.course` is readable.
"""

import inspect
from typing import Any

MIME = "application/vnd.labkit.check+json"
PUBLIC_MIME = "application/vnd.labkit.public+json"


def outcome_of(check: Any, namespace: Any) -> Any:
    names = list(inspect.signature(check).parameters)
    missing = [name for name in names if not callable(namespace.get(name))]
    if missing:
        return "not attempted", (
            f"`{missing[0]}` is not defined: run its answer cell (or restore the cell if it "
            "was deleted)"
        )
    try:
        check(**{name: namespace[name] for name in names})
    except NotImplementedError:
        return "not attempted", f"`{names[0]}` still raises NotImplementedError: write your answer"
    except AssertionError as failure:
        return "incorrect", str(failure) or "the check failed"
    except Exception as error:  # the learner's code raised: report it, not a traceback
        return "error in your code", f"your code raised {type(error).__name__}: {error}"
    return "passed", ""


def run(check: Any, namespace: Any, key: Any) -> Any:
    from IPython.display import display

    outcome, message = outcome_of(check, namespace)
    result = {"key": key, "outcome": outcome, "message": message}
    display({MIME: result}, raw=True)  # type: ignore[no-untyped-call]


def public(exercise_id: Any, namespace: Any) -> Any:
    """The course's public checks (`labkit.course.exercises.checks`), against the notebook's
    names."""
    import importlib

    from IPython.display import display

    checks = importlib.import_module("labkit.course.exercises.checks")
    report = checks.Checker(namespace=lambda: namespace).check(exercise_id)
    results = [r.to_dict() for r in report.results]
    display({PUBLIC_MIME: {"results": results}}, raw=True)  # type: ignore[no-untyped-call]
