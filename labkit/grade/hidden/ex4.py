"""Hidden checks for ex4, `resolve_inside(root, relative) -> Path`.

Owns: the grading-only checks of exercise 4 (`CHECKS`). The symlink policy: a path whose
resolution leaves `root` raises PermissionError; a link that stays inside resolves. The traps
the public checks (`labkit.course.exercises.ex4_symlinks`) do not show: a directory link in
the middle of the path, an absolute link, a chain of links, a dangling link, a loop, and a root
that is itself reached through a link (so only a resolved root contains the resolved files).

Each check builds its own tree in the check's temporary folder (`Trial.tempdir`) and passes
paths as data; the answer comes back decoded by exact type. Paths in messages start with
`<tmp>` so a message is the same on every run.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath
from typing import Any

from labkit.course.exercises.trial import Check, Fail, Raised, Trial

CONTRACT = "resolve_inside"
WRONG_EXCEPTION_NEXT = (
    "raise PermissionError for every refusal: the contract names it, and callers rely on that type"
)
RESOLVE_NEXT = (
    "follow every symlink of the whole path (Path.resolve) and decide on where the file really "
    "is, compared component by component with the real root"
)


def _tree(t: Trial) -> tuple[Path, Path]:
    """<tmp>/root/docs/a.txt inside, <tmp>/secret/key.txt outside."""
    base = (t.tempdir() / "tree").resolve()
    root = base / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("inside")
    (base / "secret").mkdir()
    (base / "secret" / "key.txt").write_text("outside")
    return base, root


def _show(base: Path, value: Any) -> str:
    if isinstance(value, str | PurePath):
        text = os.fspath(value)
        prefix = os.fspath(base)
        if text == prefix or text.startswith(prefix + os.sep):
            text = "<tmp>" + text[len(prefix) :]
        return f"{type(value).__name__}({text!r})" if isinstance(value, PurePath) else repr(text)
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "..."


def _refused(
    t: Trial, base: Path, root: Path, relative: str, what: str, *, missing_ok: bool = False
) -> Fail | None:
    """PermissionError for `relative` under `root`; with `missing_ok`, a link that leads
    nowhere (dangling, a loop) may also end in the OSError or RuntimeError of resolving it."""
    expected = f"{what}, resolve_inside(<tmp>/root, {relative!r}), should raise PermissionError"
    outcome = t.attempt(CONTRACT, root, relative)
    if isinstance(outcome, Raised):
        error = outcome.error
        if error.is_a("PermissionError"):
            return None
        if missing_ok and (error.is_a("OSError") or error.is_a("RuntimeError")):
            return None
        if error.is_a("OSError") or error.is_a("ValueError"):
            return Fail(expected, f"it raised {outcome.summary}", WRONG_EXCEPTION_NEXT)
        t.crashed(outcome)
    return Fail(expected, f"it returned {_show(base, outcome.value)}", RESOLVE_NEXT)


def directory_link_in_the_middle(t: Trial) -> Fail | None:
    base, root = _tree(t)
    os.symlink(base / "secret", root / "docs" / "shared")
    return _refused(
        t,
        base,
        root,
        "docs/shared/key.txt",
        "a directory link in the middle of the path (docs/shared -> <tmp>/secret) leading outside",
    )


def absolute_link(t: Trial) -> Fail | None:
    base, root = _tree(t)
    os.symlink(str(base / "secret" / "key.txt"), root / "abs")
    return _refused(t, base, root, "abs", "an absolute link to <tmp>/secret/key.txt, outside")


def chain_of_links(t: Trial) -> Fail | None:
    base, root = _tree(t)
    os.symlink("two", root / "one")
    os.symlink("docs/../three", root / "two")
    os.symlink("../secret/key.txt", root / "three")
    return _refused(
        t, base, root, "one", "a chain of links (one -> two -> three) ending outside the root"
    )


def dangling_link(t: Trial) -> Fail | None:
    base, root = _tree(t)
    os.symlink("../secret/missing.txt", root / "gone")
    return _refused(
        t, base, root, "gone", "a dangling link pointing outside the root", missing_ok=True
    )


def link_loop(t: Trial) -> Fail | None:
    base, root = _tree(t)
    os.symlink("loop-b", root / "loop-a")
    os.symlink("loop-a", root / "loop-b")
    return _refused(
        t, base, root, "loop-a", "a loop of links (loop-a -> loop-b -> loop-a)", missing_ok=True
    )


def _resolves(t: Trial, base: Path, root: Path, relative: str, expected: str) -> Fail | None:
    want = base / "root" / "docs" / "a.txt"
    outcome = t.attempt(CONTRACT, root, relative)
    if isinstance(outcome, Raised):
        if outcome.error.is_a("PermissionError"):
            return Fail(
                expected,
                f"it raised {outcome.summary}",
                "compare the resolved file with the resolved root: both real paths, so a link "
                "on the way (to the root or inside it) does not matter",
            )
        t.crashed(outcome)
    got = outcome.value
    if not isinstance(got, str | PurePath) or Path(got) != want:
        return Fail(
            expected,
            f"it returned {_show(base, got)}",
            "return the real path of the file, with every link followed",
        )
    return None


def link_inside_allowed(t: Trial) -> Fail | None:
    base, root = _tree(t)
    os.symlink("docs/a.txt", root / "latest")
    return _resolves(
        t,
        base,
        root,
        "latest",
        "'latest', a link to docs/a.txt inside the root, should resolve to <tmp>/root/docs/a.txt",
    )


def root_through_a_link(t: Trial) -> Fail | None:
    base, _ = _tree(t)
    os.symlink("root", base / "current")
    return _resolves(
        t,
        base,
        base / "current",
        "docs/a.txt",
        "with the root given as <tmp>/current, a link to <tmp>/root, 'docs/a.txt' should be "
        "allowed and resolve to its real path <tmp>/root/docs/a.txt",
    )


CHECKS: tuple[Check, ...] = (
    Check(
        "directory link in the middle",
        directory_link_in_the_middle,
        "a directory link in the middle of the path leading outside should raise PermissionError",
        points=2,
        hidden=True,
    ),
    Check(
        "absolute link",
        absolute_link,
        "an absolute link to a file outside should raise PermissionError",
        hidden=True,
    ),
    Check(
        "chain of links",
        chain_of_links,
        "a chain of links ending outside should raise PermissionError",
        hidden=True,
    ),
    Check(
        "dangling link",
        dangling_link,
        "a dangling link pointing outside should be refused",
        hidden=True,
    ),
    Check(
        "link loop",
        link_loop,
        "a loop of links should be refused, not followed forever",
        hidden=True,
    ),
    Check(
        "link inside allowed",
        link_inside_allowed,
        "a link that stays inside the root should resolve",
        hidden=True,
    ),
    Check(
        "root through a link",
        root_through_a_link,
        "a root given through a link should still hold its files",
        hidden=True,
    ),
)
