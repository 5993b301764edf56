"""The course's exercises: what `check()` and `hint()` run.

Owns nothing itself (its modules do): `trial` (what an exercise is written with), one module per
exercise (`ex1_replay` ... `ex5_legacy`, `checkpoints`), their `fixtures` and `race` helpers,
`answers` (the check worker's loop, run where the learner's code runs), `channel` (the parent's
bounded end of that loop's pipes), the `registry` (data) and the check engine `checks` that
reads it. Notebooks import these names through `labkit.course`. Imports nothing, so importing
one module of the room never loads the others. Must not import ipywidgets.
"""
