"""Layer 3 of the three-layer rule: the kernel confines the server process (Landlock).

Owns: `apply_sandbox`, the read-only set the interpreter needs, and the report that says
what happened. After it succeeds, the process can read and write only its workspaces and its
state directory, and only read (and execute) the Python installation, /usr, certificates and
a few /etc files; everything else fails with EACCES, whatever path tricks the code falls for.

Why, although labkit.fsroot already resolves everything beneath descriptors: a directory
*moved* out of a workspace after it was opened keeps its descriptor, and an unlink through
that descriptor would land outside. Landlock checks the file's real place in the hierarchy
at the moment of access, so that unlink fails with EACCES (docs/security.md, "Layer 3").

Restriction is irreversible and per thread: on the ABI of this project's kernels (7; TSYNC
arrives with 8) only the calling thread and threads it starts later are restricted. So
`apply_sandbox` must run before any thread exists; it counts the threads in /proc/self/task
and refuses otherwise. Modes: "required" raises `SandboxUnavailable` when it cannot restrict
(no Landlock, threads already running, kernel error); "best_effort" logs a warning and goes
on unrestricted; "off" does nothing. The outcome and the ABI are logged either way.

Network access is not restricted here (the HTTP transport needs to listen).
Must not import the core, a store or a transport.
"""

from __future__ import annotations

import logging
import os
import site
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import landlockpy
from landlockpy import AccessFS, AccessNet, LandlockError

log = logging.getLogger("labkit.sandbox")

SandboxMode = Literal["required", "best_effort", "off"]
MODES: Final = ("required", "best_effort", "off")

READ_ONLY: Final = AccessFS.READ_FILE | AccessFS.READ_DIR | AccessFS.EXECUTE
READ_WRITE: Final = (
    AccessFS.READ_FILE
    | AccessFS.READ_DIR
    | AccessFS.WRITE_FILE
    | AccessFS.TRUNCATE
    | AccessFS.REMOVE_FILE
    | AccessFS.REMOVE_DIR
    | AccessFS.MAKE_REG
    | AccessFS.MAKE_DIR
    | AccessFS.REFER
)

# What a Python server reads besides its own installation: shared libraries, TLS roots,
# time zones, name resolution. Entries missing on this system are left out.
SYSTEM_READ_ONLY: Final = (
    "/usr",
    "/lib",
    "/lib64",
    "/bin",
    "/etc/ssl",
    "/etc/pki",
    "/etc/ca-certificates",
    "/etc/localtime",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/dev/urandom",
    "/dev/random",
)
SYSTEM_READ_WRITE: Final = ("/dev/null",)
# Rights that make sense on a file; the kernel rejects directory rights on a file (EINVAL).
_FILE_RIGHTS: Final = (
    AccessFS.EXECUTE
    | AccessFS.WRITE_FILE
    | AccessFS.READ_FILE
    | AccessFS.TRUNCATE
    | AccessFS.IOCTL_DEV
)


class SandboxUnavailable(RuntimeError):
    """Mode "required" could not restrict the process; the server must not start."""


@dataclass(frozen=True)
class SandboxReport:
    mode: str
    abi: int
    applied: bool
    threads_at_apply: int
    reason: str


def interpreter_paths() -> tuple[str, ...]:
    """Read-only paths the running interpreter needs: its prefixes, site-packages and the
    labkit package itself (an editable install lives outside site-packages): the directory
    this module is in, found without importing the package root (which is the core)."""
    candidates = [
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        *site.getsitepackages(),
        os.path.dirname(os.path.abspath(__file__)),
        *SYSTEM_READ_ONLY,
    ]
    seen: dict[str, None] = {}
    for path in candidates:
        if os.path.exists(path):
            seen.setdefault(os.path.abspath(path), None)
    return tuple(seen)


def thread_count() -> int:
    """Threads of this process as the kernel sees them (C extensions included), and never
    fewer than the threading module knows."""
    try:
        tasks = len(os.listdir("/proc/self/task"))
    except OSError:
        tasks = 0
    return max(tasks, threading.active_count())


def apply_sandbox(
    mode: SandboxMode,
    *,
    read_write: Sequence[str],
    read_only: Sequence[str] = (),
    include_interpreter: bool = True,
    landlock_abi: Callable[[], int] = landlockpy.abi_version,
) -> SandboxReport:
    """Restrict this process to `read_write` (workspaces, state directory) and `read_only`
    (plus `interpreter_paths()` unless `include_interpreter` is False). Call it once at
    start, before any thread exists. `landlock_abi` is the kernel probe (injectable)."""
    if mode not in MODES:
        raise ValueError(f"sandbox mode must be one of {MODES}, not {mode!r}")
    threads = thread_count()
    abi = landlock_abi()
    if mode == "off":
        report = SandboxReport(mode, abi, False, threads, "sandbox off by configuration")
        log.warning("sandbox (Landlock ABI %d): %s", abi, report.reason)
        return report
    missing = [p for p in read_write if not os.path.isdir(p)]
    if missing:
        raise ValueError(f"sandbox read-write paths must be existing directories: {missing}")
    if abi < 1:
        return _unavailable(mode, abi, threads, "Landlock is not available on this kernel")
    if threads != 1:
        return _unavailable(
            mode,
            abi,
            threads,
            f"{threads} threads already run; Landlock ABI {abi} restricts only the calling "
            "thread, so the sandbox must be applied before any thread starts",
        )
    readable = [p for p in read_only if os.path.exists(p)]
    if include_interpreter:
        readable += interpreter_paths()
    try:
        handled = landlockpy.fs_for_abi(abi)
        # handled_net must be NONE explicitly: the library's default handles (denies) all TCP.
        with landlockpy.Ruleset(handled_fs=handled, handled_net=AccessNet.NONE) as ruleset:
            for path in readable:
                _allow(ruleset, path, READ_ONLY)
            for path in SYSTEM_READ_WRITE:
                if os.path.exists(path):
                    _allow(ruleset, path, AccessFS.READ_FILE | AccessFS.WRITE_FILE)
            for path in read_write:
                _allow(ruleset, path, READ_WRITE)
            threads = thread_count()  # the count at the moment of restriction
            ruleset.restrict()
    except (LandlockError, OSError) as exc:
        return _unavailable(mode, abi, threads, f"Landlock refused the ruleset: {exc}")
    report = SandboxReport(
        mode,
        abi,
        True,
        threads,
        f"restricted to {len(read_write)} read-write and {len(readable)} read-only paths",
    )
    log.info("sandbox: Landlock ABI %d applied (%s): %s", abi, mode, report.reason)
    return report


def _allow(ruleset: landlockpy.Ruleset, path: str, access: AccessFS) -> None:
    ruleset.allow_path(path, access if os.path.isdir(path) else access & _FILE_RIGHTS)


def _unavailable(mode: SandboxMode, abi: int, threads: int, reason: str) -> SandboxReport:
    if mode == "required":
        log.error("sandbox required but not applied (Landlock ABI %d): %s", abi, reason)
        raise SandboxUnavailable(reason)
    log.warning("sandbox not applied (Landlock ABI %d, best effort): %s", abi, reason)
    return SandboxReport(mode, abi, False, threads, reason)
