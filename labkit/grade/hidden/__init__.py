"""Hidden checks, one module per exercise, applied only at grading.

Owns: nothing itself; each module `exN` owns its exercise's grading-only checks and exports
`CHECKS`, a tuple of `labkit.course.exercises.trial.Check` with `hidden=True`, written exactly
like the course's public checks: learner code is called only through the `Trial` (argument
markers from `labkit.course.exercises.calls`, never live objects) and its answers are data
decoded by exact type. The grader runs them in its own process with `run_checks`, against the
check worker (a `CheckRunner`) and the reference answer; never copied into learner notebooks
or the worker. Feedback carries a check's name, outcome and message (expected, got, next step).
Imports nothing.
"""
