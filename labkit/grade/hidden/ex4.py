"""Hidden checks for ex4, `resolve_inside(root, relative) -> Path`.

The symlink policy: a path whose resolution leaves `root` raises PermissionError; a link that
stays inside resolves. The traps the public checks do not show: a directory link in the middle
of the path, an absolute link, a chain of links, a dangling link, a loop, and a root that is
itself reached through a link (so only a resolved root contains the resolved files). Each
check builds its own tree in a fresh directory and names the file that must stay out of reach.
Imports nothing from labkit (the kernel runs this source from a string).
"""

import os
import tempfile
from pathlib import Path
from typing import Any


def _tree() -> Any:
    base = Path(tempfile.mkdtemp(prefix="ex4-", dir=".")).resolve()
    root = base / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("inside")
    (base / "secret").mkdir()
    (base / "secret" / "key.txt").write_text("outside")
    return base, root


def _refused(resolve_inside: Any, root: Any, relative: Any, what: Any) -> Any:
    try:
        result = resolve_inside(root, relative)
    except NotImplementedError:
        raise
    except PermissionError:
        return
    except (FileNotFoundError, RuntimeError, OSError) as error:
        assert what.startswith(("a dangling", "a loop")), (
            f"expected PermissionError for {what}, got {type(error).__name__}"
        )
        return
    raise AssertionError(f"expected PermissionError for {what}, got the path {str(result)!r}")


def directory_link_in_the_middle(resolve_inside: Any) -> Any:
    base, root = _tree()
    os.symlink(base / "secret", root / "docs" / "shared")
    _refused(
        resolve_inside,
        root,
        "docs/shared/key.txt",
        "a directory link in the middle leading outside",
    )


def absolute_link(resolve_inside: Any) -> Any:
    base, root = _tree()
    os.symlink(str(base / "secret" / "key.txt"), root / "abs")
    _refused(resolve_inside, root, "abs", "an absolute link to a file outside")


def chain_of_links(resolve_inside: Any) -> Any:
    base, root = _tree()
    os.symlink("two", root / "one")
    os.symlink("docs/../three", root / "two")
    os.symlink("../secret/key.txt", root / "three")
    _refused(resolve_inside, root, "one", "a chain of links ending outside")


def dangling_link(resolve_inside: Any) -> Any:
    base, root = _tree()
    os.symlink("../secret/missing.txt", root / "gone")
    _refused(resolve_inside, root, "gone", "a dangling link pointing outside")


def link_loop(resolve_inside: Any) -> Any:
    base, root = _tree()
    os.symlink("loop-b", root / "loop-a")
    os.symlink("loop-a", root / "loop-b")
    _refused(resolve_inside, root, "loop-a", "a loop of links")


def link_inside_allowed(resolve_inside: Any) -> Any:
    base, root = _tree()
    os.symlink("docs/a.txt", root / "latest")
    result = resolve_inside(root, "latest")
    expected = root / "docs" / "a.txt"
    assert Path(result) == expected, f"expected {expected.name} inside the root, got {result!r}"


def root_through_a_link(resolve_inside: Any) -> Any:
    base, root = _tree()
    os.symlink("root", base / "current")
    expected = root / "docs" / "a.txt"
    try:
        result = resolve_inside(base / "current", "docs/a.txt")
    except NotImplementedError:
        raise
    except PermissionError:
        raise AssertionError(
            "expected docs/a.txt allowed under a root given as a link to the real root, got "
            "PermissionError (resolve the root too: the resolved file lies under the resolved "
            "root, never under the link's own path)"
        ) from None
    assert Path(result) == expected, (
        f"expected the real path <root>/docs/a.txt for a root given as a link, got {result!r}"
    )


CHECKS = (
    (directory_link_in_the_middle, 2, "a directory link in the middle of the path is refused"),
    (absolute_link, 1, "an absolute link outside is refused"),
    (chain_of_links, 1, "a chain of links ending outside is refused"),
    (dangling_link, 1, "a dangling link is refused"),
    (link_loop, 1, "a loop of links is refused, not followed forever"),
    (link_inside_allowed, 1, "a link that stays inside resolves"),
    (root_through_a_link, 1, "a root given through a link still holds its files"),
)
