"""The scratch tree handed to a job's uid (`launcher.hand_over`), as root: through descriptors,
never along a link, and never into a sticky directory."""

from __future__ import annotations

import os
from pathlib import Path

from labkit.grade.launcher import KEPT_MODE, hand_over

JOB = 54321


def owner(path: Path) -> int:
    return os.lstat(path).st_uid


def test_the_tree_is_the_jobs_and_links_lead_nowhere(tmp_path: Path) -> None:
    host = tmp_path / "host"
    (host / "deep").mkdir(parents=True)
    (host / "secret").write_text("root only")
    scratch = tmp_path / "scratch"
    (scratch / "a" / "b").mkdir(parents=True)
    (scratch / "a" / "b" / "answer.py").write_text("x = 1\n")
    # A directory already swapped for a link when the walk reaches it, and a link to a file.
    (scratch / "a" / "swapped").symlink_to(host)
    (scratch / "a" / "b" / "file-link").symlink_to(host / "secret")
    fifo = scratch / "pipe"
    os.mkfifo(fifo)
    before = {p: (owner(p), os.lstat(p).st_mode) for p in (host, host / "deep", host / "secret")}

    hand_over(scratch, JOB)

    for path in (
        scratch,
        scratch / "a",
        scratch / "a" / "b",
        scratch / "a" / "b" / "answer.py",
        scratch / "a" / "swapped",
        scratch / "a" / "b" / "file-link",
        fifo,
    ):
        assert owner(path) == JOB, path
    assert {p: (owner(p), os.lstat(p).st_mode) for p in before} == before


def test_a_kept_directory_and_all_it_holds_stay_the_graders(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    checks = scratch / "checks-ex1"
    (checks / "check-1").mkdir(parents=True)
    (checks / "check-1" / "notes.db").write_text("")
    checks.chmod(KEPT_MODE)
    (scratch / "submission.ipynb").write_text("{}")
    # jupyter_client makes a kernel's runtime folder sticky: that is no mark of the grader's.
    runtime = scratch / "runtime"
    runtime.mkdir()
    runtime.chmod(0o1700)
    # Nor on a kernel's scratch of root's, 0711 (its space's tmpfs) made sticky the same way.
    kernel = scratch / "kernel"
    kernel.mkdir()
    kernel.chmod(0o1711)

    hand_over(scratch, JOB)

    assert owner(scratch) == owner(scratch / "submission.ipynb") == owner(runtime) == JOB
    assert owner(kernel) == JOB
    root = os.getuid()
    assert owner(checks) == owner(checks / "check-1") == root
    assert owner(checks / "check-1" / "notes.db") == root
