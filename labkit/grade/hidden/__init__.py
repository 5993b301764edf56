"""Hidden checks, one module per exercise, applied only at grading.

Each module is self-contained (stdlib only: its source is sent to the grading kernel and run
there) and ends with `CHECKS`, a tuple of `(function, points, title)`. A check function takes
the learner's implementations as parameters named after the exercise's contract, and raises
`AssertionError("expected X, got Y")` when the behaviour is wrong. Never copied into learner
notebooks or feedback: feedback carries the title, the outcome and the assertion's message.

Imports nothing from labkit: the kernel cannot read this package.
"""
