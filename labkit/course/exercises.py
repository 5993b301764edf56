"""The course's exercises: the registry `check()` and `hint()` read, and the helpers a notebook
uses in its examples (so a notebook imports only `labkit` and `labkit.course`).

Owns: `EXERCISES`, one `Exercise` per notebook exercise (id, title, contract names, public
checks, graded hints), in lesson order (LESSON.md section 11), plus `checkpoints`. Exercises
2 (URL mode) and 5 (legacy adapter) are registered with their contract only until the parts
of labkit they exercise exist; `check("ex2")` then says so instead of running anything.

The grader adds hidden checks without editing this module: `Checker(hidden={"ex1": [...]})`.
Must not import ipywidgets.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from labkit.course import checkpoint_checks, ex1_replay, ex3_notes, ex4_symlinks
from labkit.course.checks import Exercise
from labkit.course.fixtures import (
    EXAMPLE_NOTES,
    WORKSPACE_URI,
    SymlinkTree,
    add_notes,
    claimed,
    connect,
    create_ex1_schema,
    create_ex3_schema,
    example_authorizer,
    make_symlink_tree,
    note_ids,
    note_uri,
)

__all__ = [
    "EXAMPLE_NOTES",
    "EXERCISES",
    "WORKSPACE_URI",
    "SymlinkTree",
    "add_notes",
    "claimed",
    "connect",
    "create_ex1_schema",
    "create_ex3_schema",
    "example_authorizer",
    "make_symlink_tree",
    "note_ids",
    "note_uri",
]

_PENDING = (
    "public checks are not available yet in this version of labkit (they arrive with {what}). "
    "Next: work through the notebook; run check({id!r}) again after updating labkit."
)

EX2 = Exercise(
    id="ex2",
    title="URL mode: an out-of-band setup flow",
    contracts=("url_elicitation_flow",),
    pending=_PENDING.format(what="the URL-mode host", id="ex2"),
)

EX5 = Exercise(
    id="ex5",
    title="Legacy adapter for 2025-11-25 peers",
    contracts=("LegacyAdapter",),
    pending=_PENDING.format(what="the legacy 2025-11-25 adapter", id="ex5"),
)

EXERCISES: Mapping[str, Exercise] = MappingProxyType(
    {
        e.id: e
        for e in (
            ex1_replay.EXERCISE,
            EX2,
            ex3_notes.EXERCISE,
            ex4_symlinks.EXERCISE,
            EX5,
            checkpoint_checks.EXERCISE,
        )
    }
)
