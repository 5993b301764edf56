"""Entry point of one racing child: `python -m labkit.course.exercises.racer` (started by
`labkit.course.exercises.race`, never imported by anything else).

The check worker's loop (`labkit.course.exercises.answers.main`: it says "ready", then answers
JSON lines, the learner's prints sent to stderr), its "define" rebuilding the function carried
from the kernel (`race.define_carried`), so a racing child and a check worker speak one racing
protocol. A fresh interpreter, like multiprocessing's spawn, but started by path-free `-m`:
spawn re-runs the parent's `__main__` by file name, which fails when the parent is a script fed
on stdin or an embedding with an unusual `__main__`. Must not import ipywidgets.
"""

from __future__ import annotations

from labkit.course.exercises.answers import main
from labkit.course.exercises.race import define_carried

if __name__ == "__main__":
    main(define_carried)
