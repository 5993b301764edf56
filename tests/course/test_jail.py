"""labkit.course.lessons.jail: the sandbox tried in a child; the test's own process stays free.

Landlock is available on this project's kernels (test_sandbox.py requires it), so the
restricted column is asserted exactly.
"""

from __future__ import annotations

import os

from labkit.course.lessons.jail import ATTEMPTS, compare, landlock_abi, sandbox_trial


def test_without_the_sandbox_only_fsroot_refuses() -> None:
    off = sandbox_trial("off")
    assert not off.applied
    assert off.results == {
        "read_inside": "allowed",
        "symlink_escape": "refused by fsroot (symlink)",
        "read_outside": "allowed",
        "write_outside": "allowed",
        "unlink_moved": "allowed",
    }
    assert not off.victim_survived  # the descriptor gap: a file outside was deleted


def test_landlock_refuses_what_descriptors_cannot() -> None:
    assert landlock_abi() >= 1
    on = sandbox_trial("required")
    assert on.applied, on.reason
    assert on.results["read_inside"] == "allowed"
    assert on.results["symlink_escape"] == "refused by fsroot (symlink)"
    for key in ("read_outside", "write_outside", "unlink_moved"):
        assert on.results[key] == "EACCES", key
    assert on.victim_survived
    # The caller was never restricted.
    assert os.access("/", os.R_OK) and os.listdir("/")
    table = compare(sandbox_trial("off"), on).splitlines()
    assert len(table) == 1 + len(ATTEMPTS)
    assert table[0].split()[-2:] == ["sandbox", "required"]
