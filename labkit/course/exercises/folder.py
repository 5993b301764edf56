"""The folders a check prepares for the learner's side, and how the judge reads them back
without ever acting on a path the learner's side could have changed.

Owns: `Folder` (one check's shared folder: made by the judge, traversable but not writable by
the learner's side, kept open as a directory descriptor from the moment it is made) and
`Private` (a folder only the judge can enter, for building worlds and reading copies).

Why: when grading runs as root, the learner's code runs as another user in the same folders.
A judge that reopened a learner-visible path (`sqlite3.connect(path)`, `chmod`, `open`) would
follow whatever the learner put there, a symlink to a host file included. So:

- a shared folder is root's, mode 1755 (sticky, not writable by the learner's user): the
  learner's side may write the contents of the files placed in it (a database and its `-wal`
  and `-shm`, pre-made and mode 0666, so SQLite never needs to create a file beside the
  database), but cannot add, rename or replace an entry, so racing processes share no
  writable place but the database itself;
- every operation of the judge in it goes through the directory descriptor opened when the
  folder was made (`openat` semantics: `dir_fd`, `O_NOFOLLOW`, `O_EXCL`), never through a path;
- effects are read from a private copy of the database and its `-wal`, opened without
  following links, bounded in size; a file that is not a regular file any more (or too large)
  is the submission's fault (`Tampered`), never the judge's.

Must not import ipywidgets or the checks.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Final

MAX_COPY: Final = 64 * 1024 * 1024
_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
COMPANIONS: Final = ("-wal", "-shm")


class Tampered(Exception):
    """A file of the check's world is not what the judge placed (replaced, removed, a link,
    or grown past the bound): the submission's doing."""


class Private:
    """A folder only the judge enters (mode 0700), removed by `close`."""

    def __init__(self, parent: Path | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="labkit-private-", dir=parent))
        self._count = 0

    def fresh(self, name: str) -> Path:
        self._count += 1
        return self.path / f"{self._count}-{name}"

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class Folder:
    """One check's shared folder (see the module docstring). `path` is what the learner's side
    is told; the judge itself only uses the descriptor."""

    def __init__(self, parent: Path | None, private: Private) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="labkit-check-", dir=parent))
        self._fd = os.open(self.path, _DIRECTORY)
        os.fchmod(self._fd, 0o1755)  # the learner's side may run as another user
        self._private = private

    def close(self) -> None:
        os.close(self._fd)

    # --- placing ------------------------------------------------------------------------------

    def place_db(self, name: str, build: Callable[[sqlite3.Connection], None]) -> Path:
        """A SQLite database (WAL mode) built by `build` in private, placed here as `name`
        with its `-wal` and `-shm` made empty beforehand; replaces an earlier one of that name."""
        built = self._private.fresh(name)
        with closing(sqlite3.connect(built, isolation_level=None)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            build(conn)
        for suffix in ("", *COMPANIONS):
            self.remove(name + suffix)
        self._create(name, built.read_bytes())
        for suffix in COMPANIONS:
            self._create(name + suffix, b"")
        return self.path / name

    def write(self, relative: str, text: str) -> None:
        parent, name = self._parent(relative)
        try:
            fd = os.open(name, _CREATE, 0o644, dir_fd=parent)
            with os.fdopen(fd, "w") as out:
                out.write(text)
        finally:
            os.close(parent)

    def mkdir(self, relative: str) -> None:
        parent, name = self._parent(relative)
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
        finally:
            os.close(parent)

    def symlink(self, target: str, relative: str) -> None:
        parent, name = self._parent(relative)
        try:
            os.symlink(target, name, dir_fd=parent)
        finally:
            os.close(parent)

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self._fd)

    def _create(self, name: str, data: bytes) -> None:
        fd = os.open(name, _CREATE, 0o600, dir_fd=self._fd)
        try:
            os.write(fd, data)
            os.fchmod(fd, 0o666)
        finally:
            os.close(fd)

    def _parent(self, relative: str) -> tuple[int, str]:
        """A descriptor of the directory holding `relative` (walked without following links)
        and the last component."""
        *parts, last = [p for p in relative.split("/") if p]
        fd = os.dup(self._fd)
        for part in parts:
            try:
                inner = os.open(part, _DIRECTORY, dir_fd=fd)
            finally:
                os.close(fd)
            fd = inner
        return fd, last

    # --- reading ------------------------------------------------------------------------------

    @contextmanager
    def read_db(self, name: str) -> Iterator[sqlite3.Connection]:
        """A connection to a private copy of database `name` (with its `-wal`, so committed
        changes are there and an unfinished transaction is not)."""
        copy = self._private.fresh(name)
        self._copy(name, copy, required=True)
        self._copy(name + "-wal", copy.with_name(copy.name + "-wal"), required=False)
        conn = sqlite3.connect(copy, isolation_level=None)
        try:
            yield conn
        except sqlite3.DatabaseError as error:
            raise Tampered(f"the database {name} could not be read ({error})") from None
        finally:
            conn.close()
            for suffix in ("", *COMPANIONS):
                copy.with_name(copy.name + suffix).unlink(missing_ok=True)

    def _copy(self, name: str, to: Path, *, required: bool) -> None:
        try:
            fd = os.open(name, _READ, dir_fd=self._fd)
        except FileNotFoundError:
            if required:
                raise Tampered(f"the file {name} is gone") from None
            return
        except OSError as error:  # ELOOP: a symbolic link where the judge placed a file
            raise Tampered(f"the file {name} was replaced ({error.strerror})") from None
        with os.fdopen(fd, "rb") as source:
            info = os.fstat(source.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise Tampered(f"the file {name} is no longer a regular file")
            data = source.read(MAX_COPY + 1)
        if len(data) > MAX_COPY:
            raise Tampered(f"the file {name} grew past {MAX_COPY // 2**20} MiB")
        to.write_bytes(data)
