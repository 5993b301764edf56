"""The symlink-swap race: an attacker thread swaps a directory for a symlink while deletions
run. The naive resolve-then-unlink (realpath + commonpath, then os.unlink(path)) runs in the
same loop as a control and must escape, or the harness is not racing; the descriptor-relative
delete of labkit.fsroot must never touch the outside file.

The loop stops by itself: once it has run MIN_SECONDS and MIN_ATTEMPTS and the control has
escaped, or at HARD_STOP_SECONDS or MAX_ATTEMPTS, whichever comes first. The time bounds
only end the loop; nothing asserts a speed.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from labkit.fsroot import Refused, Root

MIN_SECONDS = 3.0
MIN_ATTEMPTS = 20_000
HARD_STOP_SECONDS = 30.0
MAX_ATTEMPTS = 400_000
RENAME_EXCHANGE = 2

_libc = ctypes.CDLL(None, use_errno=True)


def exchange(dirfd: int, a: str, b: str) -> None:
    """renameat2(RENAME_EXCHANGE): `d` is always either the directory or the symlink, never
    missing, so every attempt lands in the race window or next to it."""
    if _libc.renameat2(dirfd, a.encode(), dirfd, b.encode(), RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def naive_delete(root: str, relative: str) -> None:
    """The textbook check: resolve, compare components, then delete by path."""
    path = os.path.join(root, relative)
    real_root = os.path.realpath(root)
    if os.path.commonpath([os.path.realpath(path), real_root]) == real_root:
        os.unlink(path)


@dataclass
class Tally:
    attempts: int = 0
    naive_escapes: int = 0
    naive_inside: int = 0
    safe_escapes: int = 0
    safe_inside: int = 0
    safe_refused: int = 0
    swaps: int = 0
    seconds: float = 0.0


@pytest.mark.slow
@pytest.mark.parametrize("resolver", ["openat2", "walk"])
def test_symlink_swap_race_never_deletes_outside(tmp_path: Path, resolver: str) -> None:
    root_dir = tmp_path / "root"
    (root_dir / "d").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    outside_file = tmp_path / "outside" / "f.md"
    outside_file.write_text("# outside\n")
    (root_dir / "d.alt").symlink_to("../outside")  # swapped with d, back and forth

    real_dir = os.open(root_dir / "d", os.O_DIRECTORY)  # follows the real directory's moves
    swap_fd = os.open(root_dir, os.O_DIRECTORY)
    stop = threading.Event()
    tally = Tally()

    def attacker() -> None:
        while not stop.is_set():
            exchange(swap_fd, "d", "d.alt")
            tally.swaps += 1

    def plant_inside() -> None:
        os.close(os.open("f.md", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, dir_fd=real_dir))

    def outside_gone() -> bool:
        if outside_file.exists():
            return False
        outside_file.write_text("# outside\n")
        return True

    thread = threading.Thread(target=attacker, daemon=True)
    root = Root(str(root_dir), resolver=resolver)  # type: ignore[arg-type]
    start = time.monotonic()
    thread.start()
    try:
        while True:
            elapsed = time.monotonic() - start
            # Until the control has escaped at least once: that proves the window was hit.
            enough = (
                tally.attempts >= MIN_ATTEMPTS
                and elapsed >= MIN_SECONDS
                and tally.naive_escapes > 0
            )
            if enough or elapsed >= HARD_STOP_SECONDS or tally.attempts >= MAX_ATTEMPTS:
                break
            tally.attempts += 1

            plant_inside()
            try:
                naive_delete(str(root_dir), "d/f.md")
                tally.naive_inside += 1
            except OSError:
                pass
            if outside_gone():
                tally.naive_escapes += 1
                tally.naive_inside -= 1

            plant_inside()
            try:
                root.unlink(("d", "f.md"))
                tally.safe_inside += 1
            except Refused:
                tally.safe_refused += 1
            if outside_gone():
                tally.safe_escapes += 1
    finally:
        tally.seconds = time.monotonic() - start
        stop.set()
        thread.join(timeout=10)
        root.close()
        os.close(real_dir)
        os.close(swap_fd)

    print(f"\nsymlink race ({resolver}): {tally}")
    assert not thread.is_alive()
    assert tally.attempts >= MIN_ATTEMPTS
    assert tally.swaps > 0
    assert tally.naive_escapes > 0, "the naive control never escaped: the harness is not racing"
    assert tally.safe_inside > 0, "the safe delete never succeeded: it was not really exercised"
    assert tally.safe_escapes == 0
    assert outside_file.read_text() == "# outside\n"
