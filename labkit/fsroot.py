"""Descriptor-based workspace roots: containment that survives symlinks and races.

Owns: opening an authorized root once (`O_DIRECTORY | O_NOFOLLOW`) and re-checking its
identity on every call; reaching directories beneath it with `openat2` (syscall 437 through
ctypes, `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV`)
or, where openat2 is missing, a component walk with `O_NOFOLLOW` on every step; stat, read
and unlink relative to the parent descriptor; a bounded listing; the user-space symlink
resolution of the "within_root" policy (the algorithm of Go's `os.Root`); and the one seam
where an OS error becomes a `Refused` (this path will not do) or `Unavailable` (descriptors,
memory or the disk failed: a passing condition, never "no such file").

Why descriptors: resolve-then-act by path string is a race. An attacker who swaps a
directory for a symlink between `realpath` and `unlink(path)` deletes outside the root
(measured: 146 escapes in 3 s). Here every step is relative to a descriptor that is already
inside the root, and the kernel refuses to follow a link while reaching it, so a swap can
make an operation fail but never reach outside (docs/security.md, "Delete through file
descriptors").

What a descriptor cannot stop: a directory *moved* out of the root after it was opened keeps
its descriptor. Landlock (labkit.sandbox) closes that gap.

Pure mechanism: no MCP, no note semantics beyond "a regular file with exactly one link".
Must not import the core, the stores or a transport.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final, Literal, Protocol

Parts = tuple[str, ...]
"""A path relative to a root, as components: ("2024", "q1.md")."""

SYS_OPENAT2: Final = 437  # the same number on every architecture (generic syscall table)
RESOLVE_NO_XDEV: Final = 0x01
RESOLVE_NO_MAGICLINKS: Final = 0x02
RESOLVE_NO_SYMLINKS: Final = 0x04
RESOLVE_BENEATH: Final = 0x08
RESOLVE_CONTAINED: Final = (
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV
)
OPENAT2_EAGAIN_RETRIES: Final = 64
MAX_SYMLINK_HOPS: Final = 40  # the kernel's own limit (MAXSYMLINKS)
MAX_DEPTH: Final = 32

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted in a workspace must never hang the server.
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

RefusalKind = Literal[
    "missing",
    "symlink",
    "escape",
    "not_directory",
    "not_regular",
    "hard_link",
    "changed",
    "root_changed",
    "loop",
    "invalid",
    "denied",
    "error",
]

_ERRNO_KINDS: Final[dict[int, RefusalKind]] = {
    errno.ENOENT: "missing",
    errno.ELOOP: "symlink",
    errno.EXDEV: "escape",
    errno.ENOTDIR: "not_directory",
    errno.EACCES: "denied",
    errno.EPERM: "denied",
}


# What the process or the disk ran out of, or an I/O failure: not a refusal of this path but a
# condition that passes. Reported as `Unavailable`, never as "missing" (an empty listing).
TRANSIENT_ERRNOS: Final = frozenset(
    {
        errno.EMFILE,
        errno.ENFILE,
        errno.EIO,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.ENOMEM,
        errno.ENOBUFS,
        errno.EAGAIN,
        errno.EINTR,
        errno.EROFS,
    }
)


class Unavailable(Exception):
    """An operation that failed for a reason that is not the path's (descriptors spent, an
    I/O error, a full disk). Deliberately not a `Refused`: nothing may read it as "no such
    note". `errno` is the cause."""

    def __init__(self, errno_: int, what: str) -> None:
        super().__init__(f"{what}: {os.strerror(errno_)}")
        self.errno = errno_
        self.reason = str(self)


class Refused(Exception):
    """An operation the root will not perform. `kind` is for callers, `reason` for logs."""

    def __init__(self, kind: RefusalKind, reason: str, errno_: int = 0) -> None:
        super().__init__(reason)
        self.kind: RefusalKind = kind
        self.reason = reason
        self.errno = errno_

    def __repr__(self) -> str:
        return f"Refused({self.kind!r}, {self.reason!r})"


def _refusal(exc: OSError, what: str) -> Refused | Unavailable:
    """The one seam where an OS error becomes a refusal (or, for a transient condition of the
    process or the disk, `Unavailable`)."""
    code = exc.errno or 0
    if code in TRANSIENT_ERRNOS:
        return Unavailable(code, what)
    return Refused(_ERRNO_KINDS.get(code, "error"), f"{what}: {os.strerror(code)}", code)


@dataclass(frozen=True)
class Identity:
    """Device, inode and modification time of a file.

    Device and inode name the file; the modification time guards against inode reuse (a
    deleted note's inode handed to a new file) and against an edit after the form was shown.
    A rename keeps all three.
    """

    dev: int
    ino: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> Identity:
        return cls(st.st_dev, st.st_ino, st.st_mtime_ns)

    def matches(self, st: os.stat_result) -> bool:
        return (self.dev, self.ino, self.mtime_ns) == (st.st_dev, st.st_ino, st.st_mtime_ns)


def check_parts(parts: Parts) -> None:
    """Every component is one real name: never empty, `.`, `..`, or containing `/` or NUL."""
    for part in parts:
        if not isinstance(part, str) or part in ("", ".", "..") or "/" in part or "\0" in part:
            raise Refused("invalid", f"invalid path component {part!r}")


def require_note_file(st: os.stat_result) -> None:
    """A regular file with exactly one link.

    A hard link is refused: its other name may live outside the workspace, and reading it
    would show an outside file's heading (the store cannot tell where the other name is).
    """
    if not stat.S_ISREG(st.st_mode):
        kind: RefusalKind = "symlink" if stat.S_ISLNK(st.st_mode) else "not_regular"
        raise Refused(kind, "not a regular file")
    if st.st_nlink != 1:
        raise Refused("hard_link", f"a regular file with {st.st_nlink} links")


# -- openat2 -----------------------------------------------------------------------------------


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long

RawOpenat2 = Callable[[int, bytes, int, int], int]


def raw_openat2(dirfd: int, path: bytes, flags: int, resolve: int) -> int:
    """One openat2(2) call; raises OSError (with its errno) on failure."""
    how = _OpenHow(flags, 0, resolve)
    fd = _syscall(
        ctypes.c_long(SYS_OPENAT2),
        ctypes.c_int(dirfd),
        ctypes.c_char_p(path),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), os.fsdecode(path))
    return int(fd)


def openat2(
    dirfd: int,
    path: str,
    flags: int,
    resolve: int,
    *,
    raw: RawOpenat2 = raw_openat2,
    retries: int = OPENAT2_EAGAIN_RETRIES,
) -> int:
    """openat2 with O_CLOEXEC, retrying EAGAIN.

    With RESOLVE_BENEATH the kernel answers EAGAIN when a rename anywhere on the system races
    the lookup (it cannot prove the walk stayed beneath); the lookup is simply retried, a
    bounded number of times.
    """
    encoded = os.fsencode(path)
    for _ in range(retries):
        try:
            return raw(dirfd, encoded, flags | os.O_CLOEXEC, resolve)
        except OSError as exc:
            if exc.errno != errno.EAGAIN:
                raise
    raise OSError(errno.EAGAIN, f"openat2 still failing with EAGAIN after {retries} tries", path)


@functools.cache
def openat2_available() -> bool:
    """Whether this kernel (and any seccomp filter) allows openat2 with the flags used here."""
    try:
        root = os.open("/", _DIR_FLAGS)
    except OSError:
        return False
    try:
        os.close(openat2(root, ".", _DIR_FLAGS, RESOLVE_CONTAINED))
    except OSError:  # ENOSYS (before 5.6), EPERM (seccomp), EINVAL/E2BIG (unknown flags)
        return False
    finally:
        os.close(root)
    return True


# -- resolvers: how a directory beneath the root is reached -----------------------------------


class Resolver(Protocol):
    name: str

    def open_dir(self, root_fd: int, root_dev: int, parts: Parts) -> int:
        """A new descriptor for the directory `parts` beneath the root; raises OSError."""
        ...


class Openat2Resolver:
    """The kernel resolves the whole path and refuses any symlink, magic link, `..` that
    climbs out, or mount crossing, atomically."""

    name = "openat2"

    def __init__(self, raw: RawOpenat2 = raw_openat2) -> None:
        self._raw = raw

    def open_dir(self, root_fd: int, root_dev: int, parts: Parts) -> int:
        return openat2(
            root_fd, "/".join(parts) or ".", _DIR_FLAGS, RESOLVE_CONTAINED, raw=self._raw
        )


class WalkResolver:
    """One component at a time, each opened with O_NOFOLLOW relative to the previous one.

    Components are checked by `check_parts` (no `..`), O_NOFOLLOW refuses a symlink at
    every step, and the device is compared after every step (RESOLVE_NO_XDEV by hand). A
    swap after a step has been opened is harmless: the walk holds the directory, not its name.
    """

    name = "walk"

    def open_dir(self, root_fd: int, root_dev: int, parts: Parts) -> int:
        fd = os.open(".", _DIR_FLAGS, dir_fd=root_fd)
        try:
            for part in parts:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                if os.fstat(fd).st_dev != root_dev:
                    raise OSError(errno.EXDEV, "crosses a mount point", part)
        except BaseException:
            os.close(fd)
            raise
        return fd


ResolverName = Literal["auto", "openat2", "walk"]


def select_resolver(
    name: ResolverName = "auto", *, available: Callable[[], bool] = openat2_available
) -> Resolver:
    """With "auto", openat2 where the kernel has it, else the walk; "openat2" insists on it."""
    if name == "walk":
        return WalkResolver()
    if name not in ("auto", "openat2"):
        raise ValueError(f"unknown resolver {name!r}; use auto, openat2 or walk")
    if available():
        return Openat2Resolver()
    if name == "openat2":
        raise OSError(errno.ENOSYS, "openat2 is not available on this system")
    return WalkResolver()


# -- operations relative to a directory descriptor ---------------------------------------------


def read_head_at(dirfd: int, name: str, limit: int) -> tuple[bytes, os.stat_result]:
    """The first `limit` bytes of the note file `name` in `dirfd`, and its fstat.

    lstat first, so a FIFO or a device is never even opened; then open with O_NOFOLLOW and
    compare identities, so a file swapped in between is refused rather than read.
    """
    try:
        before = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError as exc:
        raise _refusal(exc, "stat") from None
    require_note_file(before)
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dirfd)
    except OSError as exc:
        raise _refusal(exc, "open") from None
    try:
        st = os.fstat(fd)
        require_note_file(st)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise Refused("changed", "replaced while being opened")
        chunks: list[bytes] = []
        remaining = limit
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks), st
    except OSError as exc:
        raise _refusal(exc, "read") from None
    finally:
        os.close(fd)


def unlink_at(dirfd: int, name: str, expect: Identity | None, *, durable: bool = False) -> Identity:
    """Unlink the note file `name` from `dirfd` if it is still the file `expect` names.

    unlinkat never follows the last component, and `dirfd` is already inside the root, so
    the only file this can remove is the one that was stat'ed in this very directory.
    `durable` fsyncs the directory, so a "done" recorded afterwards never outlives the unlink.
    """
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError as exc:
        raise _refusal(exc, "stat") from None
    require_note_file(st)
    if expect is not None and not expect.matches(st):
        raise Refused("changed", "a different file (or a changed one) now has this name")
    try:
        os.unlink(name, dir_fd=dirfd)
        if durable:
            os.fsync(dirfd)
    except OSError as exc:
        raise _refusal(exc, "unlink") from None
    return Identity.of(st)


# -- the root ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanEntry:
    parts: Parts
    identity: Identity
    head: bytes


class Scan:
    """A bounded, deterministic listing of note files beneath a directory of the root.

    Iterate it once. A directory's files come first, then its subdirectories, depth first,
    everything in name order. Symlinks are never followed (whatever they point to inside the
    root is listed under its real name anyway); hidden names, other devices, FIFOs, devices,
    hard-linked files and names that are not UTF-8 are left out. `truncated` tells whether
    `max_entries` cut the listing short; `ignored` counts what was left out or vanished.
    """

    def __init__(
        self, root: Root, base: Parts, *, suffix: str, max_entries: int, read_limit: int
    ) -> None:
        self._root = root
        self._base = base
        self._suffix = suffix
        self._max_entries = max_entries
        self._read_limit = read_limit
        self.truncated = False
        self.examined = 0
        self.ignored = 0

    def __iter__(self) -> Iterator[ScanEntry]:
        stack: list[Parts] = [self._base]
        while stack:
            parts = stack.pop()
            subdirs: list[Parts] = []
            try:
                with self._root.directory(parts) as dirfd:
                    try:
                        with os.scandir(dirfd) as it:
                            entries = sorted(it, key=lambda e: e.name)
                    except OSError as exc:
                        raise _refusal(exc, "/".join(parts) or ".") from None
                    for entry in entries:
                        self.examined += 1
                        if self.examined > self._max_entries:
                            self.truncated = True
                            return
                        if not _listable(entry.name):
                            self.ignored += 1
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            if len(parts) - len(self._base) < MAX_DEPTH:
                                subdirs.append((*parts, entry.name))
                            continue
                        if not entry.name.endswith(self._suffix):
                            continue
                        try:
                            head, st = read_head_at(dirfd, entry.name, self._read_limit)
                        except Refused:
                            self.ignored += 1
                            continue
                        if st.st_dev != self._root.dev:
                            self.ignored += 1
                            continue
                        yield ScanEntry((*parts, entry.name), Identity.of(st), head)
            except Refused as exc:
                if exc.kind == "root_changed" or parts == self._base:
                    raise
                self.ignored += 1  # a subdirectory swapped or removed while listing
                continue
            stack.extend(reversed(subdirs))


def _listable(name: str) -> bool:
    if name.startswith("."):
        return False
    try:
        name.encode("utf-8")  # a non-UTF-8 name decodes to lone surrogates
    except UnicodeEncodeError:
        return False
    return not any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)


class Root:
    """An authorized directory, opened once; every operation stays beneath it.

    The root's own path is configuration (trusted); everything beneath it is data (not).
    """

    def __init__(self, path: str, *, resolver: ResolverName | Resolver = "auto") -> None:
        self.path = path
        self.resolver: Resolver = (
            select_resolver(resolver) if isinstance(resolver, str) else resolver
        )
        self._fd = os.open(path, _DIR_FLAGS)
        st = os.fstat(self._fd)
        self.dev = st.st_dev
        self.ino = st.st_ino

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Root:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Root({self.path!r}, resolver={self.resolver.name!r})"

    def still_root(self) -> None:
        """The descriptor is still the directory opened at start, and that directory still
        lives at its configured path (a workspace renamed or replaced is no longer served)."""
        if self._fd < 0:
            raise Refused("root_changed", "root is closed")
        try:
            st = os.fstat(self._fd)
            at_path = os.stat(self.path, follow_symlinks=False)
        except OSError as exc:
            if exc.errno in TRANSIENT_ERRNOS:
                raise Unavailable(exc.errno or 0, f"root {self.path}") from None
            raise Refused("root_changed", f"root {self.path}: {exc.strerror}") from None
        expected = (self.dev, self.ino)
        if (st.st_dev, st.st_ino) != expected or st.st_nlink == 0:
            raise Refused("root_changed", f"root {self.path}: descriptor no longer the root")
        if (at_path.st_dev, at_path.st_ino) != expected:
            raise Refused("root_changed", f"root {self.path} was moved or replaced")

    @contextlib.contextmanager
    def directory(self, parts: Parts) -> Iterator[int]:
        """A descriptor for the directory `parts` beneath the root, closed on exit."""
        check_parts(parts)
        self.still_root()
        try:
            fd = self.resolver.open_dir(self._fd, self.dev, parts)
        except OSError as exc:
            raise _refusal(exc, "/".join(parts) or ".") from None
        try:
            yield fd
        finally:
            os.close(fd)

    def lstat(self, parts: Parts) -> os.stat_result:
        """lstat of the last component, from inside its parent directory."""
        _require_name(parts)
        with self.directory(parts[:-1]) as parent:
            try:
                return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                raise _refusal(exc, "stat") from None

    def read_head(self, parts: Parts, limit: int) -> tuple[bytes, os.stat_result]:
        _require_name(parts)
        with self.directory(parts[:-1]) as parent:
            return read_head_at(parent, parts[-1], limit)

    def unlink(
        self, parts: Parts, expect: Identity | None = None, *, durable: bool = False
    ) -> Identity:
        """Remove the note file at `parts` (only if it still is `expect`, when given)."""
        _require_name(parts)
        with self.directory(parts[:-1]) as parent:
            return unlink_at(parent, parts[-1], expect, durable=durable)

    def scan(
        self, parts: Parts = (), *, suffix: str = ".md", max_entries: int, read_limit: int
    ) -> Scan:
        return Scan(self, parts, suffix=suffix, max_entries=max_entries, read_limit=read_limit)

    def canonical(self, parts: Parts) -> Parts:
        """Resolve in-root symlinks in user space, one component at a time (Go's os.Root).

        Returns the symlink-free path of what `parts` names. A link is refused when it is
        absolute (it would resolve against the process root, not the workspace), when `..`
        would climb above the root, after MAX_SYMLINK_HOPS links (cycles), or when a step
        crosses a mount point. The result is only a *name*: every operation on it goes
        through `directory`, which refuses symlinks again, so a link swapped after this
        returned can make the operation fail but never lead outside.
        """
        check_parts(parts)
        resolved: list[str] = []
        pending = list(reversed(parts))
        hops = 0
        while pending:
            part = pending.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if not resolved:
                    raise Refused("escape", "a symbolic link leads above the root")
                resolved.pop()
                continue
            with self.directory(tuple(resolved)) as dirfd:
                try:
                    st = os.stat(part, dir_fd=dirfd, follow_symlinks=False)
                    target = os.readlink(part, dir_fd=dirfd) if stat.S_ISLNK(st.st_mode) else ""
                except OSError as exc:
                    raise _refusal(exc, "resolve") from None
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise Refused("loop", "too many symbolic links")
                if target.startswith("/"):
                    raise Refused("escape", "absolute symbolic link")
                pending.extend(reversed(target.split("/")))
                continue
            if st.st_dev != self.dev:
                raise Refused("escape", "crosses a mount point")
            resolved.append(part)
        return tuple(resolved)


def _require_name(parts: Parts) -> None:
    check_parts(parts)  # the last component too: lstat(("..",)) would name the root's parent
    if not parts:
        raise Refused("invalid", "a file path needs at least one component")
