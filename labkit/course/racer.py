"""Entry point of one racing child: `python -m labkit.course.racer` (started by
`labkit.course.race`, never imported by anything else).

A fresh interpreter, like multiprocessing's spawn, but started by path-free `-m`: spawn re-runs
the parent's `__main__` by file name, which fails when the parent is a script fed on stdin or
an embedding with an unusual `__main__`. Must not import ipywidgets.
"""

from __future__ import annotations

import sys

from labkit.course.race import child_main

if __name__ == "__main__":
    child_main(sys.stdin.buffer, sys.stdout)
