"""The course's exercises as data: the registry the check engine reads.

Owns: `EXERCISES`, one `Exercise` per notebook exercise (id, title, contract names, public
checks, graded hints), in lesson order (docs/LESSON.md section 11), plus `checkpoints`.

The grader adds hidden checks without editing this module: `Checker(hidden={"ex1": [...]})`.
It imports the exercise modules and never the check engine (`labkit.course.exercises.checks`
reads it), so no import circle runs through it. Must not import ipywidgets.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from labkit.course.exercises import (
    checkpoints,
    ex1_replay,
    ex2_url,
    ex3_notes,
    ex4_symlinks,
    ex5_legacy,
)
from labkit.course.exercises.trial import Exercise

EXERCISES: Mapping[str, Exercise] = MappingProxyType(
    {
        e.id: e
        for e in (
            ex1_replay.EXERCISE,
            ex2_url.EXERCISE,
            ex3_notes.EXERCISE,
            ex4_symlinks.EXERCISE,
            ex5_legacy.EXERCISE,
            checkpoints.EXERCISE,
        )
    }
)
