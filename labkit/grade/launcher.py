"""The grading kernel's first instructions: limits, an unprivileged user, Landlock, then ipykernel.

    python -m labkit.grade.launcher --memory BYTES --cpu SECONDS --nproc N --fsize BYTES
        [--user UID] [--keep CAP,...] [--sandbox required|best_effort|off] [--hide PACKAGE]
        [--module NAME]
        -- ARGS...

Owns: what a learner's code may touch from inside its job. The grader starts every job process
here (`containment.launcher_argv`: the kernel's kernelspec, and any other process of a job),
inside the job's container (`containment`: namespaces, cgroup); this module runs in that
process, before ipykernel (or `--module`) and before any thread exists, and:

1. sets resource limits (address space, CPU seconds, processes, file size, no core dumps), so
   a 6 GB allocation becomes `MemoryError`, a CPU hog is killed, a fork bomb stops;
2. when started as root, becomes `--user` (the job's own uid; nobody when unconfined) keeping
   no capability but those `--keep` names (read-search in full mode, none in container mode;
   the kernel exempts uid 0 from the process-count limit whatever its capabilities; see
   `become`), and offers itself first to the out-of-memory killer, so that in a platform's
   memory-limited container a learner's allocation ends the job, not the grader;
3. applies Landlock: read-write on the scratch directory (the working directory) only;
   read-only on the Python installation and a few system files, *except* `labkit/grade/`
   (the hidden checks' source); no TCP; no signals or abstract sockets outside the kernel;
4. with `--hide` (a check worker on `labkit.grade.answer_view`'s view of labkit), adds a
   Landlock layer refusing to read or run any file of labkit's real package (`hiding`), its
   rules made as started, while every path is still readable;
5. runs `--module` as `__main__` (ipykernel's launcher by default) in the same process, so the
   restrictions stay.

Landlock cannot carve a hole in a granted tree, so a tree that holds `labkit/grade/` is granted
piecewise: listing on the tree (names only), full reads on every sibling on the way down, and
nothing on `labkit/grade/` itself (`readable_rules`).

Must not import nbclient, pydantic, the report models or the hidden checks: it is the kernel's first
code and everything it imports is loaded before the restriction.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import os
import resource
import runpy
import site
import stat
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import landlockpy
from landlockpy import AccessFS, AccessNet, Scope

from labkit.sandbox import READ_ONLY, SYSTEM_READ_ONLY, thread_count

NOBODY: Final = 65534
PROTECTED: Final = Path(__file__).resolve().parent  # labkit/grade: the hidden checks live here
# Files a Python process reads through libc name lookups (getpass, pwd); none holds a secret.
EXTRA_READ_ONLY: Final = ("/etc/passwd", "/etc/group")
DEVICES_READ_WRITE: Final = ("/dev/null",)
_PR_CAPBSET_DROP: Final = 24
_PR_CAP_AMBIENT: Final = 47
_PR_CAP_AMBIENT_RAISE: Final = 2
_PR_CAP_AMBIENT_CLEAR_ALL: Final = 4
_PR_SET_KEEPCAPS: Final = 8
# Capability numbers (linux/capability.h), in order: bit N of a capability mask is NAMES[N].
CAPABILITY_NAMES: Final = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
]
_LINUX_CAPABILITY_VERSION_3: Final = 0x20080522
_FILE_RIGHTS: Final = (
    AccessFS.EXECUTE | AccessFS.WRITE_FILE | AccessFS.READ_FILE | AccessFS.TRUNCATE
)


class LaunchError(RuntimeError):
    """The kernel must not start: a limit or the required sandbox could not be applied."""


def python_roots() -> list[Path]:
    """Where the interpreter and its packages live (the labkit package too, for an editable
    install outside site-packages), plus the system files a Python process reads."""
    import labkit

    candidates = [
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        *site.getsitepackages(),
        os.path.dirname(os.path.abspath(labkit.__file__)),
        *SYSTEM_READ_ONLY,
        *EXTRA_READ_ONLY,
    ]
    # Real paths: a venv's `lib64` is a link to its `lib`, and a rule on a link's path holds
    # for its target, so granting `lib64/.../site-packages` would grant `labkit/grade/` too.
    return _distinct(Path(os.path.realpath(p)) for p in candidates if os.path.exists(p))


def _distinct(paths: Iterable[Path]) -> list[Path]:
    """Paths in order, without repeats and without those beneath another listed path."""
    ordered = list(dict.fromkeys(paths))
    return [p for p in ordered if not any(o != p and p.is_relative_to(o) for o in ordered)]


def readable_rules(roots: Sequence[Path], protected: Path) -> list[tuple[Path, AccessFS]]:
    """Read rules for `roots` that leave the files beneath `protected` unreadable."""
    rules: list[tuple[Path, AccessFS]] = []
    for root in roots:
        if root == protected or root.is_relative_to(protected):
            continue
        if not protected.is_relative_to(root):
            rules.append((root, READ_ONLY))
            continue
        rules.append((root, AccessFS.READ_DIR))  # names beneath root, not contents
        current = root
        for part in protected.relative_to(root).parts:
            step = current / part
            for child in sorted(current.iterdir()):
                target = child.resolve()  # a rule holds for what a link points to
                if child == step or target == protected or protected.is_relative_to(target):
                    continue  # a link back up the way (a venv's lib64 -> lib) grants nothing
                if not target.is_relative_to(protected):
                    rules.append((target, READ_ONLY))
            current = step
    return rules


def set_limits(memory: int, cpu: int, nproc: int, fsize: int) -> None:
    """`nproc` more tasks than the user already runs: the limit counts the user's tasks on the
    whole machine (the other kernels of a batch run as the same user)."""
    nproc += tasks_of(os.getuid())
    for limit, value in (
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_NPROC, nproc),
        (resource.RLIMIT_FSIZE, fsize),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(limit, (value, value))


def tasks_of(uid: int) -> int:
    """Tasks (threads) the kernel counts against RLIMIT_NPROC for `uid`, machine-wide."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.stat(entry.path).st_uid == uid:
                    count += len(os.listdir(os.path.join(entry.path, "task")))
            except OSError:
                continue  # the process ended while we looked
    return count


_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# The mode of a folder the grader keeps (a check worker's scratch): sticky, traversable, not
# listable, and no read bit even for its owner, a mode nothing else makes. Sticky alone is no
# mark: jupyter_client sets it on every kernel's runtime folder, and the kernel's own scratch
# (0711, a tmpfs's mode where the job's space is mounted) becomes 01711 that way.
KEPT_MODE: Final = 0o1311


def hand_over(scratch: Path, uid: int) -> None:
    """Give `uid` the scratch tree, as root, through descriptors only: each directory is opened
    `O_NOFOLLOW` under its parent's descriptor and chowned through its own, each other entry
    chowned by name under that descriptor without following it. A directory swapped for a
    link while the walk runs is never followed (the open fails and the link itself is
    chowned), so no host path is ever handed over.

    A directory of root's in `KEPT_MODE` stays the grader's, with all it holds: a check
    worker's scratch and its check folders, where the learner's side may write the files it
    was given but add, rename or replace nothing (racers share no other place)."""

    def enter(fd: int) -> list[str]:
        """The directory's entries to walk, once it is `uid`'s (none in a kept one)."""
        status = os.fstat(fd)
        if status.st_uid == 0 and stat.S_IMODE(status.st_mode) == KEPT_MODE:
            return []
        os.fchown(fd, uid, uid)
        return os.listdir(fd)

    # The open directories from the scratch folder down, each with the names left to visit.
    stack: list[tuple[int, list[str]]] = [(os.open(scratch, _DIRECTORY), [])]
    try:
        stack[-1][1].extend(enter(stack[-1][0]))
        while stack:
            fd, names = stack[-1]
            if not names:
                stack.pop()
                os.close(fd)
                continue
            name = names.pop()
            try:
                child = os.open(name, _DIRECTORY, dir_fd=fd)
            except OSError:  # not a directory (a link among them), gone, or no descriptor left
                with contextlib.suppress(FileNotFoundError):
                    os.chown(name, uid, uid, dir_fd=fd, follow_symlinks=False)
                continue
            stack.append((child, []))
            stack[-1][1].extend(enter(child))
    finally:
        for fd, _ in stack:
            os.close(fd)


def become(uid: int, scratch: Path, keep: Sequence[str] = ("dac_read_search",)) -> None:
    """From root to `uid`, keeping only the capabilities `keep` names (lower case, no `cap_`).

    Why not stay root without capabilities: the kernel never applies RLIMIT_NPROC to uid 0
    (fork() exempts the initial user outright), so a fork bomb would run free. Why keep
    CAP_DAC_READ_SEARCH in full mode: the interpreter may live where only root can look
    (`/root/.pyenv`); the capability bypasses read permissions only, and Landlock still
    decides every open, open_by_handle_at included (it answers EACCES outside the granted
    paths). Container mode keeps nothing: a platform's container (Docker's default set) has
    no read-search to keep, and its interpreter is readable by every user. The scratch tree
    is handed to `uid` so the learner's code can write there; the bounding set is emptied so
    nothing is regained through exec (Landlock also sets no_new_privs). A kept capability is
    also ambient, so the processes a submission starts (Python interpreters, like exercise
    1's racers) reach the same interpreter and their scratch copy, under the same Landlock
    rules, and nothing more."""
    kept = [CAPABILITY_NAMES.index(name.upper()) for name in keep]
    hand_over(scratch, uid)
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        dropped = cap in kept or libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0
        if not dropped and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    mask = sum(1 << cap for cap in kept)
    low, high = mask & 0xFFFFFFFF, mask >> 32
    # Two 32-bit words of (effective, permitted, inheritable).
    data = (ctypes.c_uint32 * 6)(low, low, low, high, high, high)
    if libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        raise LaunchError(f"could not set capabilities: {os.strerror(ctypes.get_errno())}")
    for cap in kept:
        if libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0:
            name = CAPABILITY_NAMES[cap].lower()
            raise LaunchError(f"could not keep {name}: {os.strerror(ctypes.get_errno())}")


def confine(scratch: Path, mode: str) -> str:
    """Apply Landlock; returns what happened. Mode "required" raises when it cannot."""
    abi = landlockpy.abi_version()
    if mode == "off":
        return "sandbox off"
    if abi < 1 or thread_count() != 1:
        reason = "Landlock unavailable" if abi < 1 else "threads already running"
        if mode == "required":
            raise LaunchError(f"sandbox required but not applied: {reason}")
        return f"sandbox not applied: {reason}"
    handled = landlockpy.fs_for_abi(abi)
    net = landlockpy.net_for_abi(abi) & (AccessNet.BIND_TCP | AccessNet.CONNECT_TCP)
    scoped = landlockpy.scope_for_abi(abi) & (Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL)
    with landlockpy.Ruleset(handled_fs=handled, handled_net=net, scoped=scoped) as ruleset:
        for path, access in readable_rules(python_roots(), PROTECTED):
            _allow(ruleset, path, access)
        for device in DEVICES_READ_WRITE:
            _allow(ruleset, Path(device), AccessFS.READ_FILE | AccessFS.WRITE_FILE)
        ruleset.allow_path(str(scratch), handled)
        ruleset.restrict()
    return f"Landlock ABI {abi}"


def _allow(ruleset: landlockpy.Ruleset, path: Path, access: AccessFS) -> None:
    if not path.exists():
        return
    ruleset.allow_path(str(path), access if path.is_dir() else access & _FILE_RIGHTS)


def flags(
    *,
    memory: int,
    cpu: int,
    nproc: int,
    fsize: int,
    sandbox: str,
    user: str | None = None,
    keep: str | None = None,
) -> list[str]:
    """The options `parse` reads, for a command that starts a job process (the kernel's
    launcher, or a check worker, which parses them itself)."""
    argv = [f"--memory={memory}", f"--cpu={cpu}", f"--nproc={nproc}", f"--fsize={fsize}"]
    argv.append(f"--sandbox={sandbox}")
    argv += [] if user is None else [f"--user={user}"]
    return argv if keep is None else [*argv, f"--keep={keep}"]


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="labkit.grade.launcher")
    parser.add_argument("--memory", type=int, required=True)
    parser.add_argument("--cpu", type=int, required=True)
    parser.add_argument("--nproc", type=int, required=True)
    parser.add_argument("--fsize", type=int, required=True)
    parser.add_argument("--user", type=int, default=NOBODY, help="uid to become when root")
    parser.add_argument(
        "--keep",
        type=_capability_list,
        default=("dac_read_search",),
        help="capabilities kept when root becomes --user (comma-separated; empty: none)",
    )
    parser.add_argument("--sandbox", choices=("required", "best_effort", "off"), default="required")
    parser.add_argument("--module", default="ipykernel_launcher", help="what to run as __main__")
    parser.add_argument("--hide", type=Path, help="a package the module must not read (`hiding`)")
    split = list(argv).index("--") if "--" in argv else len(argv)
    return parser.parse_args(list(argv[:split])), list(argv[split + 1 :])


def _capability_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip().lower() for name in text.split(",") if name.strip())
    unknown = [n for n in names if n.upper() not in CAPABILITY_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown capability: {', '.join(unknown)}")
    return names


def main(argv: Sequence[str] | None = None) -> None:
    args, kernel_args = parse(sys.argv[1:] if argv is None else argv)
    hidden = hiding(args.hide, args.sandbox)  # made as started: every path is still readable
    prepare(args)
    if hidden is not None:
        with hidden:
            hidden.restrict()
    sys.argv = [sys.argv[0], *kernel_args]
    runpy.run_module(args.module, run_name="__main__", alter_sys=True)


def hiding(hidden: Path | None, mode: str) -> landlockpy.Ruleset | None:
    """A Landlock ruleset (to apply once `prepare` has) that refuses to read or run any file
    under `hidden`: labkit's real package, when a check worker runs on the view of it
    (`labkit.grade.answer_view`). None when there is nothing to hide (no `--hide`, or the view
    is bound over the real package's path). A `--hide` process that did not import labkit from
    the view does not start; in `required` mode, no Landlock is an error too, as for
    `confine`."""
    import labkit

    if hidden is None:
        return None
    if not getattr(labkit, "_ANSWER_VIEW", False):  # answer_view.MARK
        raise LaunchError(f"labkit's view is not first on the import path: {hidden}")
    if Path(labkit.__file__).resolve().parent == hidden:
        return None  # the view is bound over the real package: nothing else is there
    if landlockpy.abi_version() < 1:
        if mode == "required":
            raise LaunchError(f"{hidden} cannot be hidden: Landlock unavailable")
        return None
    rights = AccessFS.READ_FILE | AccessFS.EXECUTE
    ruleset = landlockpy.Ruleset(handled_fs=rights)
    for path, access in readable_rules([Path("/")], hidden):
        if access & rights:
            with contextlib.suppress(OSError):  # a dangling link, a file gone since
                ruleset.allow_path(str(path), access & rights)
    return ruleset


def prepare(args: argparse.Namespace) -> str:
    """Steps 1 to 3 in this process (the kernel, or a check worker), in the working directory
    as scratch; returns what Landlock did."""
    scratch = Path.cwd()
    with contextlib.suppress(OSError):  # the learner's job, not the grader, is the one to end
        Path("/proc/self/oom_score_adj").write_text("1000", encoding="ascii")
    if os.geteuid() == 0:
        become(args.user, scratch, args.keep)
    set_limits(args.memory, args.cpu, args.nproc, args.fsize)
    # Everything IPython would write under $HOME goes to the scratch copy instead.
    for name in ("HOME", "IPYTHONDIR", "JUPYTER_RUNTIME_DIR", "MPLCONFIGDIR", "TMPDIR"):
        os.environ[name] = str(scratch)
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    for name in ("PWD", "OLDPWD"):  # set by the container's shell and bubblewrap
        os.environ.pop(name, None)
    if os.getppid() == 1:
        # In a job's PID namespace the parent is the namespace's init, which ipykernel's parent
        # poller would take for "the grader is gone"; the container ends the job with the grader.
        os.environ.pop("JPY_PARENT_PID", None)
    sys.dont_write_bytecode = True
    done = confine(scratch, args.sandbox)
    if sys.path and sys.path[0] in ("", str(scratch)):
        del sys.path[0]  # as ipykernel_launcher does: the cwd is the learner's, not a package
    return done


if __name__ == "__main__":
    main()
