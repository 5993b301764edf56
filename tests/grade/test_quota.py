"""A job's writable space is bounded in all, not only per file (`labkit.grade.quota`): a
size-limited tmpfs where the grader may mount one, and where it may not, a watch that stops
the writers once the bound is passed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.grade import quota

MIB = 1024**2
WRITER_UID = 61951  # outside the default pool
# Starts as root, becomes the writer's uid (its interpreter is loaded by then), and writes
# file after file, each well under any per-file limit, until it is stopped.
WRITER = f"""import os, sys
os.setgroups([]); os.setresgid({WRITER_UID}, {WRITER_UID}, {WRITER_UID})
os.setresuid({WRITER_UID}, {WRITER_UID}, {WRITER_UID})
n = 0
while True:
    with open(os.path.join(sys.argv[1], f"part-{{n}}"), "wb") as part:
        part.write(b"x" * {MIB})
    n += 1
"""


def _refused(area: Path, size: int) -> None:
    raise PermissionError(1, "Operation not permitted (no CAP_SYS_ADMIN here)")


def _mounted(path: Path) -> bool:
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        return any(line.split()[4] == str(path) for line in table)


def test_a_tmpfs_refuses_writes_past_the_bound_and_goes_with_the_block(tmp_path: Path) -> None:
    area = tmp_path / "area"
    area.mkdir()
    with quota.bounded(area, 8 * MIB) as space:
        assert space.how == "tmpfs" and _mounted(area)
        (area / "fits").write_bytes(b"x" * (4 * MIB))
        with pytest.raises(OSError) as refused, (area / "too-much").open("wb") as big:
            big.write(b"x" * (8 * MIB))
            big.flush()
        assert refused.value.errno == 28  # ENOSPC
    assert space.full
    assert "No space left on device" in space.notice("the notebook")
    assert not _mounted(area) and list(area.iterdir()) == []


def test_a_tmpfs_that_was_not_filled_says_nothing(tmp_path: Path) -> None:
    area = tmp_path / "area"
    area.mkdir()
    with quota.bounded(area, 8 * MIB) as space:
        (area / "small").write_bytes(b"x" * 1024)
    assert not space.full and space.notice("the notebook") == ""


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder the writer's uid can reach (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="labkit-quota-"))
    folder.chmod(0o711)
    yield folder
    shutil.rmtree(folder)


def test_where_mounting_is_refused_the_writers_are_stopped_at_the_bound(shared: Path) -> None:
    area = shared / "area"
    area.mkdir()
    area.chmod(0o777)
    with quota.bounded(area, 16 * MIB, mount=_refused) as space:
        assert space.how == "watched"
        writer = subprocess.Popen([sys.executable, "-I", "-S", "-c", WRITER, str(area)])
        try:
            code = writer.wait(timeout=60)
        finally:
            writer.kill()
            writer.wait()
    assert code == -signal.SIGKILL  # stopped by the watch: it never ends on its own
    assert space.full and space.owners == {WRITER_UID}
    assert "its processes were stopped there" in space.notice("the notebook")
    written = sum(p.stat().st_size for p in area.iterdir())
    assert written > 16 * MIB  # it passed the bound (by what it wrote within one look)


def test_too_many_files_count_as_full(tmp_path: Path) -> None:
    area = tmp_path / "area"
    area.mkdir()
    for n in range(1001):
        os.close(os.open(area / f"f{n}", os.O_CREAT | os.O_WRONLY, 0o600))
    with quota.bounded(area, 16 * MIB, mount=_refused, max_entries=1000) as space:
        pass
    assert space.full
