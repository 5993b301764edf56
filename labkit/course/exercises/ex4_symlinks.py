"""Exercise 4, a symlink policy on a real filesystem: public checks and hints for
`resolve_inside`.

Contract: `resolve_inside(root, relative) -> pathlib.Path` returns the real path of the file
`relative` names under `root` when, after following every symlink, it is still inside `root`
(whole components); raises `PermissionError` otherwise, `..` escapes and absolute paths
included (docs/LESSON.md section 3: lexical containment cannot stop a symlink escape).

Each check builds the tree of `fixtures.make_symlink_tree` in its own temporary folder.
Paths in messages start with `<tmp>` so a message is the same on every run. Must not import
ipywidgets.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath
from typing import Any

from labkit.course.exercises.fixtures import SymlinkTree, make_symlink_tree
from labkit.course.exercises.trial import (
    Check,
    Contract,
    Equivalent,
    Exercise,
    Fail,
    Raised,
    Rule,
    Safety,
    Trial,
)

CONTRACT = "resolve_inside"
WRONG_EXCEPTION_NEXT = (
    "raise PermissionError for every refusal: the contract names it, and callers test for "
    "exactly that type"
)
CRASH_NEXT = (
    "the contract's refusal is a PermissionError you raise: test containment yourself "
    "(Path.is_relative_to on resolved paths), or where a library reports the escape with its "
    "own exception (Path.relative_to's ValueError), raise PermissionError from exactly that one"
)


def _tree(t: Trial) -> SymlinkTree:
    trees = t.once(f"trees {id(t)}", lambda: [0])
    trees[0] += 1
    name = "tree" if trees[0] == 1 else f"tree-{trees[0]}"
    return make_symlink_tree(t.tempdir() / name)


def _show(tree: SymlinkTree, value: Any) -> str:
    if isinstance(value, str | PurePath):
        text = os.fspath(value)
        base = os.fspath(tree.base)
        if text == base or text.startswith(base + os.sep):
            text = "<tmp>" + text[len(base) :]
        return f"{type(value).__name__}({text!r})" if isinstance(value, PurePath) else repr(text)
    return repr(value)


def _returns(
    t: Trial, tree: SymlinkTree, relative: str, want: Path, expected: str, next_step: str
) -> Fail | None:
    result = t.call(CONTRACT, tree.root, relative)
    if result is None:
        return Fail(
            expected, "it returned None", "return the resolved path (None means a missing return)"
        )
    if not isinstance(result, PurePath):
        return Fail(
            expected,
            f"it returned {_show(tree, result)}",
            "return a pathlib.Path, as the contract says",
        )
    if Path(result) != want:
        return Fail(expected, f"it returned {_show(tree, result)}", next_step)
    return None


def _refuses(
    t: Trial, tree: SymlinkTree, relative: str, expected: str, why: str, next_step: str
) -> Fail | None:
    outcome = t.attempt(CONTRACT, tree.root, relative)
    if isinstance(outcome, Raised):
        if outcome.error.is_a("PermissionError"):
            return None
        return t.raised_instead(
            outcome, expected, "PermissionError", WRONG_EXCEPTION_NEXT, CRASH_NEXT
        )
    value = outcome.value
    if value is None:
        next_step = "refuse by raising PermissionError, not by returning None"
    elif isinstance(value, str | PurePath) and Path(value) == tree.root:
        next_step = (
            "refuse by raising PermissionError, never by returning a fallback path such as the "
            "root: the caller would act on a file it never asked for"
        )
    # Every probe here names a file outside the root: a path returned for it (other than the
    # root as a fallback) is one the caller would act on outside the root.
    escaped = isinstance(value, str | PurePath) and Path(value) != tree.root
    return Fail(
        expected,
        f"it returned {_show(tree, value)}{why}",
        next_step,
        safety="it returned a path whose real place is outside the root" if escaped else "",
    )


def plain_file(t: Trial) -> Fail | None:
    tree = _tree(t)
    want = tree.root / "2024" / "tps.md"
    return _returns(
        t,
        tree,
        "2024/tps.md",
        want,
        f"resolve_inside(<tmp>/notes, '2024/tps.md') should return {_show(tree, want)}",
        "return the absolute real path of the file under root",
    )


def escapes_refused(t: Trial) -> Fail | None:
    # A refusal counts only with the acceptance beside it.
    accepted = plain_file(t)
    if accepted is not None:
        return accepted
    tree = _tree(t)
    probes = (
        ("../secret.md", "a '..' escape"),
        (os.fspath(tree.base / "secret.md"), "an absolute path"),
    )
    for relative, kind in probes:
        failure = _refuses(
            t,
            tree,
            relative,
            f"{kind}, resolve_inside(<tmp>/notes, {_show(tree, relative)}), should raise "
            "PermissionError",
            " (<tmp>/secret.md is outside <tmp>/notes)",
            "refuse any path whose resolved form is not inside root, compared component by "
            "component",
        )
        if failure is not None:
            return failure
    return None


def file_link_outside(t: Trial) -> Fail | None:
    # A refusal counts only with the acceptance beside it.
    accepted = plain_file(t)
    if accepted is not None:
        return accepted
    tree = _tree(t)
    return _refuses(
        t,
        tree,
        "escape.md",
        "'escape.md' is a symlink inside the root pointing to ../secret.md: lexical containment "
        "says inside (the text <tmp>/notes/escape.md starts with the root's components), but "
        "the file it names is <tmp>/secret.md, outside, so it should raise PermissionError",
        "",
        "follow every symlink first (os.path.realpath or Path.resolve) and check containment "
        "on the real path",
    )


def link_inside(t: Trial) -> Fail | None:
    tree = _tree(t)
    want = tree.root / "2024" / "tps.md"
    return _returns(
        t,
        tree,
        "latest.md",
        want,
        "'latest.md' is a symlink to 2024/tps.md, inside the root: it should be allowed and "
        f"return the real path {_show(tree, want)}",
        "a link whose target stays inside is fine: resolve it and return where it really points",
    )


def directory_link_outside(t: Trial) -> Fail | None:
    # A refusal counts only with the acceptance beside it.
    accepted = plain_file(t)
    if accepted is not None:
        return accepted
    tree = _tree(t)
    return _refuses(
        t,
        tree,
        "shared/salary.md",
        "'shared/salary.md' passes through 'shared', a directory symlink to ../notes-private; "
        "the real path <tmp>/notes-private/salary.md is outside <tmp>/notes (notes-private only "
        "shares the name prefix), so it should raise PermissionError",
        "",
        "resolve the whole path (every component, not only the last) and compare whole "
        "components (Path.is_relative_to on resolved paths), never string prefixes",
    )


def loop_refused(t: Trial) -> Fail | None:
    # The refusal counts only with the acceptance beside it: a link that stays inside.
    accepted = link_inside(t)
    if accepted is not None:
        return accepted
    tree = _tree(t)
    (tree.root / "loop-a").symlink_to("loop-b")
    (tree.root / "loop-b").symlink_to("loop-a")
    outcome = t.attempt(CONTRACT, tree.root, "loop-a")
    expected = (
        "'loop-a' -> 'loop-b' -> 'loop-a' is a loop of links, which leads nowhere: it should be "
        "refused (PermissionError, or the OSError or RuntimeError of resolving it)"
    )
    if isinstance(outcome, Raised):
        error = outcome.error
        if any(error.is_a(e) for e in ("PermissionError", "OSError", "RuntimeError")):
            return None
        return t.raised_instead(outcome, expected, "a refusal", WRONG_EXCEPTION_NEXT, CRASH_NEXT)
    return Fail(
        expected,
        f"it returned {_show(tree, outcome.value)}",
        "resolve with Path.resolve() or os.path.realpath(strict=True), which report a loop, "
        "and let that refusal stand",
    )


HINTS = (
    "The path text can stay inside while the file it names is outside: a symlink anywhere "
    "along the path (the last component or a directory on the way) moves the real target.",
    "Resolve first, then compare: the real path of root and the real path of root / relative, "
    "with every symlink followed; containment is a whole-component question "
    "(PurePath.is_relative_to), never str.startswith.",
    "The idea is resolve first, then compare: follow every symlink of both the root and the "
    "target (Path.resolve, or os.path.realpath with strict=True, which also reports a loop of "
    "links), then test whole-component containment (PurePath.is_relative_to); every refusal "
    "is a PermissionError.",
)

CONTRACT_TEXT = Contract(
    "resolve_inside(root, relative) -> Path",
    rules=(
        Rule("real-path", "return the **real** path of the file `relative` names under `root`"),
        Rule("every-link", "(the last component *and* every directory on the way)"),
        Rule("whole-components", "compared by **whole\ncomponents** of the resolved root"),
        Rule("permission-error", "otherwise raise `PermissionError`"),
        Rule(
            "escapes",
            "That covers a `..` escape, an absolute `relative`, and a\n"
            "link whose target is outside",
        ),
        Rule("link-inside", "A link that stays inside (`latest.md -> 2024/tps.md`) is fine"),
        Rule("nowhere", "A link that leads nowhere"),
    ),
)

EXERCISE = Exercise(
    id="ex4",
    title="Symlink policy on a real filesystem",
    contract=CONTRACT_TEXT,
    notebook="06-ex4-symlink-policy",
    hidden_checks="labkit.grade.hidden.ex4",
    safety=Safety(4, "no path whose real place is outside the root should be returned"),
    equivalent_mutants=(
        *(
            Equivalent(
                f'raise PermissionError(f"{text}")',
                "raise PermissionError(None)",
                "the refusal's message is the learner's own words: the contract fixes the "
                "exception's type, never its text",
            )
            for text in (
                "{relative!r} is an absolute path",
                "{relative!r} resolves outside the root",
            )
        ),
        *(
            Equivalent(
                "real_root = root.resolve(strict=True)",
                f"real_root = root.resolve(strict={strict})",
                "the root is an existing directory (the contract's domain), which resolves to "
                "the same path whether missing parts would be an error or not",
            )
            for strict in ("False", "None")
        ),
    ),
    outputs={
        "try": (
            "plain file inside",
            "escapes refused",
            "file symlink to outside refused",
            "symlink inside allowed",
            "directory symlink to outside refused",
        ),
    },
    checks=(
        Check(
            "plain file inside",
            plain_file,
            "a plain file inside the root should be returned",
            rules=("real-path",),
        ),
        Check(
            "escapes refused",
            escapes_refused,
            "a '..' escape or an absolute path should raise PermissionError",
            rules=("escapes", "permission-error"),
        ),
        Check(
            "file symlink to outside refused",
            file_link_outside,
            "a symlink inside the root pointing outside should raise PermissionError",
            rules=("escapes", "permission-error", "every-link"),
        ),
        Check(
            "symlink inside allowed",
            link_inside,
            "a symlink inside the root pointing inside should return the real path",
            rules=("link-inside", "real-path"),
        ),
        Check(
            "directory symlink to outside refused",
            directory_link_outside,
            "a path through a directory symlink pointing outside should raise PermissionError",
            rules=("every-link", "whole-components", "permission-error", "escapes"),
        ),
        Check(
            "a loop of links refused",
            loop_refused,
            "a loop of links should be refused, not followed forever",
            rules=("nowhere", "link-inside"),
        ),
    ),
    hints=HINTS,
)
