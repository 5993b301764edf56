"""One submission's writable space, bounded in all: `bounded`.

Owns: the total a submission's jobs may write (the kernel's scratch copy and every check
worker's folder live in one area), and the notice when a submission reached it. The
per-process file-size limit alone bounds each file, not their number: a submission writing
file after file filled the grader's disk (1 GB in one run). Two ways, the first this machine
allows:

- **a size-limited tmpfs** mounted over the area (`size=` bytes, `nosuid`, `nodev`): the
  kernel refuses a write past it (`No space left on device`) whoever writes, and what is
  written is memory charged to the writer's job cgroup. Needs the right to mount (root on the
  host); the mount is private to the area and removed with it.
- **watched**, where mounting is refused (a container without CAP_SYS_ADMIN): a thread adds up
  the area's blocks every `POLL` seconds (and counts its entries: more than `MAX_ENTRIES`
  count as full) and, once the total passes the bound, kills every process of the uids that
  own files there, on every look while it stays passed. What the writers can add beyond the
  bound is what they write within one look (`POLL` seconds); each file is still bounded by
  the job's own file-size limit.

Either way `Space.full` says whether the bound was reached, for the report's notice.

The mount and the watch's poll interval are injected. Must not import the kernel runner or the
report models.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

log = logging.getLogger("labkit.grade")

POLL: Final = 0.05
MAX_ENTRIES: Final = 100_000
_MS_NOSUID: Final = 2
_MS_NODEV: Final = 4
_MNT_DETACH: Final = 2
_SLACK: Final = 1024**2  # a tmpfs this close to its size refused a write (or was about to)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount_tmpfs(area: Path, size: int) -> None:
    """A tmpfs of `size` bytes over `area` (root-owned, mode 0711). `OSError` when refused."""
    options = f"size={size},mode=0711,uid=0,gid=0".encode()
    flags = _MS_NOSUID | _MS_NODEV
    if _libc().mount(b"tmpfs", str(area).encode(), b"tmpfs", flags, options) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno), str(area))


def unmount(area: Path) -> None:
    if _libc().umount2(str(area).encode(), _MNT_DETACH) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno), str(area))


def _size(size: int) -> str:
    return f"{size // 1024**2} MiB" if size >= 1024**2 else f"{size} bytes"


@dataclass
class Space:
    """A submission's writable space: `area`, at most `size` bytes in all (`how`: "tmpfs" or
    "watched"). `full` once the bound was reached."""

    area: Path
    size: int
    how: str
    max_entries: int = MAX_ENTRIES
    full: bool = False
    owners: set[int] = field(default_factory=set)

    def notice(self, who: str) -> str:
        """What the report says once the bound was reached by `who` ("" before)."""
        if not self.full:
            return ""
        if self.how == "tmpfs":
            return (
                f"{who} filled the {_size(self.size)} of files a job may write in all: "
                "later writes failed (No space left on device)"
            )
        return (
            f"{who} wrote more than the {_size(self.size)} of files a job may write in all: "
            "its processes were stopped there"
        )

    def usage(self) -> tuple[int, int]:
        """Bytes in use and entries in the area (entries counted up to `max_entries` + 1)."""
        if self.how == "tmpfs":
            fs = os.statvfs(self.area)
            return (fs.f_blocks - fs.f_bfree) * fs.f_frsize, 0
        used = entries = 0
        pending = [str(self.area)]
        while pending and entries <= self.max_entries:
            folder = pending.pop()
            try:
                listed = list(os.scandir(folder))
            except OSError:
                continue
            for entry in listed:
                entries += 1
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                used += info.st_blocks * 512
                # Never root, nor the grader's own uid (a job runs as it where the platform
                # gives no other, e.g. a restricted pod): the watch would stop the grader.
                if info.st_uid not in (0, os.getuid()):
                    self.owners.add(info.st_uid)
                if stat.S_ISDIR(info.st_mode):
                    pending.append(entry.path)
        return used, entries

    def look(self) -> None:
        """One look (watched): past the bound, the writers' processes are killed."""
        used, entries = self.usage()
        if used > self.size or entries > self.max_entries:
            self.full = True
            for uid in sorted(self.owners):
                _kill_every_process_of(uid)


def _kill_every_process_of(uid: int) -> None:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="utf-8") as status:
                line = next(x for x in status if x.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if str(uid) in line.split()[1:4]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)


@contextlib.contextmanager
def bounded(
    area: Path,
    size: int,
    *,
    mount: Callable[[Path, int], None] = mount_tmpfs,
    poll: float = POLL,
    max_entries: int = MAX_ENTRIES,
) -> Iterator[Space]:
    """`area` (an empty folder) as a space of at most `size` bytes, for the block's duration;
    on leaving, the tmpfs (if any) is unmounted with all it holds."""
    try:
        mount(area, size)
    except OSError as error:
        log.debug("no tmpfs for %s (%s): its size is watched", area, error)
        space = Space(area, size, "watched", max_entries)
    else:
        space = Space(area, size, "tmpfs", max_entries)
    stop = threading.Event()
    watcher: threading.Thread | None = None
    if space.how == "watched":

        def watch() -> None:
            while not stop.wait(poll):
                space.look()

        watcher = threading.Thread(target=watch, name="labkit-quota", daemon=True)
        watcher.start()
    try:
        yield space
    finally:
        stop.set()
        if watcher is not None:
            watcher.join()
            space.look()
        elif space.usage()[0] >= size - _SLACK:
            space.full = True
        if space.how == "tmpfs":
            try:
                unmount(area)
            except OSError as error:
                log.warning("the submission's space could not be unmounted: %s", error)
