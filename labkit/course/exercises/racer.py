"""Entry point of one racing child: `python -m labkit.course.exercises.racer` (started by
`labkit.course.exercises.race`, never imported by anything else).

A fresh interpreter, like multiprocessing's spawn, but started by path-free `-m`: spawn re-runs
the parent's `__main__` by file name, which fails when the parent is a script fed on stdin or
an embedding with an unusual `__main__`. Must not import ipywidgets.
"""

from __future__ import annotations

import os
import sys

from labkit.course.exercises.race import child_main

if __name__ == "__main__":
    # The protocol keeps the real stdout; the learner's prints (Python's or C's) go to stderr.
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    child_main(sys.stdin.buffer, protocol)
