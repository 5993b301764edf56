"""The course's exercises: the registry `check()` and `hint()` read, and the helpers a notebook
uses in its examples (so a notebook imports only `labkit` and `labkit.course`).

Owns: `EXERCISES`, one `Exercise` per notebook exercise (id, title, contract names, public
checks, graded hints), in lesson order (LESSON.md section 11), plus `checkpoints`.

The grader adds hidden checks without editing this module: `Checker(hidden={"ex1": [...]})`.
Must not import ipywidgets.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from labkit.course import (
    checkpoint_checks,
    ex1_replay,
    ex2_url,
    ex3_notes,
    ex4_symlinks,
    ex5_legacy,
)
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

EXERCISES: Mapping[str, Exercise] = MappingProxyType(
    {
        e.id: e
        for e in (
            ex1_replay.EXERCISE,
            ex2_url.EXERCISE,
            ex3_notes.EXERCISE,
            ex4_symlinks.EXERCISE,
            ex5_legacy.EXERCISE,
            checkpoint_checks.EXERCISE,
        )
    }
)
