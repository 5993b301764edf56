"""Hidden checks for ex4, `resolve_inside(root, relative) -> Path`.

Owns: the grading-only checks of exercise 4 (`CHECKS`): a differential check
(`labkit.course.exercises.differ`) that builds the same generated tree for the learner's
function and for the reference answer (each in a folder of its own) and asks both for the same
path: link chains, loops, absolute and relative links, dangling links, links to directories
in the middle of the path, a look-alike sibling (`root-evil`), the root itself, and a root that
is reached through a link; `relative` is made of `..`, `.`, names and links, or is absolute.
Compared: the path returned (by exact type, the tree's folder shown as `<tmp>`), or a refusal.
A link that leads nowhere (dangling, or a loop) may be refused with PermissionError or with
the OSError or RuntimeError resolving it raises, as the task says. They add inputs, not rules:
each rule is one the task states and a public check shows
(`labkit.course.exercises.ex4_symlinks`).
Must not import the kernel runner or the command line.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path, PurePath

from hypothesis import strategies as st

from labkit.course.exercises import ex4_symlinks as public
from labkit.course.exercises.calls import type_name
from labkit.course.exercises.differ import Cause, Observation, Search, Side, differential
from labkit.course.exercises.trial import Check, Fail, Raised, Trial

CONTRACT = public.CONTRACT
REFUSED = {"refused": "PermissionError"}
NOWHERE = {"refused": "a link that leads nowhere"}
# Where links may be made inside the root, and what they may point to ("ABS/" is the tree's
# own folder, so an absolute link).
PLACES = ("l1", "docs/l2", "l3")
TARGETS = (
    "docs/a.txt",
    "a.txt",
    "../secret/key.txt",
    "ABS/secret/key.txt",
    "ABS/root/docs/a.txt",
    "docs",
    "../secret",
    "../root-evil",
    "..",
    ".",
    "l1",
    "l3",
    "missing.txt",
    "../secret/missing.txt",
)
PARTS = ("docs", "a.txt", "l1", "l2", "l3", "..", ".", "sub", "secret", "key.txt", "root-evil")
_count = itertools.count()


@dataclass(frozen=True)
class Resolve:
    relative: str
    links: tuple[tuple[str, str], ...] = ()  # (where, target)
    root_through_link: bool = False


def describe(r: Resolve) -> str:
    tree = "; ".join(f"{where} -> {target}" for where, target in r.links) or "no links"
    root = "<tmp>/current (a link to <tmp>/root)" if r.root_through_link else "<tmp>/root"
    return f"root {root} holding docs/a.txt and docs/sub/, links {tree}, relative {r.relative!r}"


def _build(side: Side, r: Resolve) -> tuple[str, str]:
    """The tree in a new folder of `side`'s; returns (the tree's path, the root given)."""
    name = f"tree-{next(_count)}"
    folder = side.folder
    base = str(folder.path / name)
    for directory in ("", "/root", "/root/docs", "/root/docs/sub", "/secret", "/root-evil"):
        folder.mkdir(name + directory)
    folder.write(f"{name}/root/docs/a.txt", "inside")
    folder.write(f"{name}/secret/key.txt", "outside")
    folder.write(f"{name}/root-evil/x.txt", "look-alike")
    for where, target in r.links:
        folder.symlink(target.replace("ABS", base), f"{name}/root/{where}")
    if r.root_through_link:
        folder.symlink("root", f"{name}/current")
        return base, f"{base}/current"
    return base, f"{base}/root"


def play(side: Side, r: Resolve) -> Observation:
    base, root = _build(side, r)
    relative = r.relative.replace("ABS", base)
    outcome = side.attempt(CONTRACT, Path(root), relative)
    # The judge's own tree: whether the path leads anywhere is read there, never in the
    # learner's folder.
    missing = not side.learner and not os.path.exists(os.path.join(root, relative))
    if missing and isinstance(outcome, Raised):
        return NOWHERE
    if isinstance(outcome, Raised):
        if outcome.error.is_a("PermissionError"):
            return REFUSED
        if outcome.error.is_a("OSError") or outcome.error.is_a("RuntimeError"):
            return NOWHERE
        return {"raised": outcome.error.type}
    value = outcome.value
    if isinstance(value, str | PurePath):
        text = os.fspath(value)
        if text == base or text.startswith(base + os.sep):
            text = "<tmp>" + text[len(base) :]
        seen: Observation = {"returned": text, "of type": type_name(value)}
        return {**seen, MISSING: True} if missing else seen
    return {"returned": repr(value), "of type": type_name(value)}


MISSING = "(no file there)"


def agree(mine: Observation, reference: Observation) -> bool:
    """Equal; or, where the path leads nowhere (a dangling link, a loop, no file there), any
    refusal the task allows."""
    if reference == NOWHERE or MISSING in reference:
        if mine in (REFUSED, NOWHERE):
            return True
        return mine == {k: v for k, v in reference.items() if k != MISSING}
    return mine == reference


def explain(r: Resolve, mine: Observation, reference: Observation) -> Cause:
    if "returned" in mine and "returned" not in reference:
        escape = reference == REFUSED
        return Cause(
            public.CRASH_NEXT if escape else "a link that leads nowhere is refused too",
            safety="it returned a path outside the root" if escape else "",
        )
    if "raised" in mine:
        return Cause(public.WRONG_EXCEPTION_NEXT)
    if "refused" in mine:
        return Cause(
            "compare the resolved file with the resolved root: both real paths, so a link on "
            "the way (to the root or inside it) does not matter"
        )
    if mine.get("of type") not in ("PosixPath", "Path"):
        return Cause("return a pathlib.Path, as the contract says")
    return Cause("return the real path of the file, with every link followed")


_RELATIVE = st.one_of(
    st.lists(st.sampled_from(PARTS), min_size=1, max_size=4).map("/".join),
    st.sampled_from(("ABS/secret/key.txt", "ABS/root/docs/a.txt", "", ".", "docs/")),
)
RESOLVES = st.builds(
    Resolve,
    _RELATIVE,
    st.lists(
        st.tuples(st.sampled_from(PLACES), st.sampled_from(TARGETS)),
        max_size=3,
        unique_by=lambda x: x[0],
    ).map(tuple),
    st.booleans(),
)
# Each catalogued mistake's input (tests/course/mistakes/ex4) stays an explicit example.
EXAMPLES = (
    Resolve("docs/a.txt", root_through_link=True),
    Resolve("l1", (("l1", "l3"), ("l3", "l1"))),
    Resolve("l1/key.txt", (("l1", "../secret"),)),
    Resolve("docs/l2/x.txt", (("docs/l2", "../../root-evil"),)),
    Resolve("l1", (("l1", "ABS/secret/key.txt"),)),
    Resolve("l1", (("l1", "l3"), ("l3", "../secret/key.txt"))),
    Resolve("l1", (("l1", "../secret/missing.txt"),)),
    Resolve("docs/../../secret/key.txt"),
    Resolve("ABS/secret/key.txt"),
    Resolve("l1", (("l1", "docs/a.txt"),)),
    Resolve("."),
)


def generated_trees(t: Trial) -> Fail | None:
    return differential(t, Search(RESOLVES, describe, EXAMPLES), play, explain, agree)


CHECKS: tuple[Check, ...] = (
    Check(
        "generated trees",
        generated_trees,
        "for any tree of links and any path it should return or refuse as the reference does",
        points=8,
        hidden=True,
        rules=(
            "real-path",
            "every-link",
            "whole-components",
            "permission-error",
            "escapes",
            "link-inside",
            "nowhere",
        ),
    ),
)
