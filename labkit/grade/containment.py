"""One grading job's container, in one of three named modes, and the survey that decides which
modes this machine can give.

Owns: what surrounds a job (one submission's kernel, or a process the grader starts for it),
the probes that try each piece of it before grading (`survey`), and the modes built on them:

- **full** (`Containment`): bubblewrap (`/usr/bin/bwrap`) gives the job a network namespace
  of its own (no TCP, UDP or abstract Unix socket reaches anything), a PID namespace whose end
  kills every process of the job (double-forked daemons included; `--die-with-parent` ends it
  with the grader), and a private mount view: read-only binds of the Python installation, the
  venv, the labkit package without `labkit/grade/` (only the launcher's files are shown
  there), the system libraries and a few /etc files; the scratch folder
  read-write; a private /tmp, a minimal /dev and the new namespace's /proc. A cgroup per job
  (v2 where the grader's own v2 cgroup can hand `memory` and `pids` to its children, else
  v1's `memory` and `pids` hierarchies, beneath the grader's own place in each) holds the
  memory and task limits for the job's whole tree; without one the limits stay per process
  and the description starts with `NO_CGROUP`, a notice every report shows. A uid of its own
  per concurrent job (`UidPool`).
- **container** (`ContainerJobs`), for a platform that already runs the grading in a container
  of its own per submission or per job (Gradescope, a Kubernetes pod, a CI VM): no namespace
  and no cgroup, which such a container refuses (Docker's seccomp profile blocks `unshare` and
  namespace flags of `clone`, and mounts cgroupfs read-only); the job's own uid through
  `setuid` (Docker's default capabilities include SETUID and SETGID), from a block of uids
  drawn at random (`scattered_pool`: other containers on the host share its uids), every
  process of that uid killed when the job ends, and the launcher keeping no capability at
  all. A grader that
  is not root (a "restricted" Kubernetes pod) cannot hand out uids: its jobs run as its own
  uid, and the description says so.
- **unconfined** (`Unconfined`), only when asked for: the launcher's own layers alone; the
  description says so, and names the uid that really ran the job.

In every mode the launcher (`labkit.grade.launcher`) runs first inside the job: rlimits, the
drop to the job's uid, Landlock (required in container mode: it is what keeps the solutions and
the hidden checks from the job there). `launcher_argv` builds its command; `Job.command` fills
in the job's uid and capabilities and wraps the command in the job's container;
`Jobs.start` starts a process in a fresh job in one call.

Containment is probed, never assumed: `survey()` starts a real bubblewrap sandbox with the
job's namespaces, creates and writes a job cgroup, switches a child process to a job uid, has
a child take the launcher's capability set of each mode (and read the interpreter as that
uid), and reads Landlock's ABI. A mode this machine cannot give is refused
(`ContainmentUnavailable` names each missing piece and the flag to pass).

The cgroup roots are injected (`CgroupRoots`); `survey()` reads the real ones.
Must not import nbclient, the kernel runner, the report models or the hidden checks.
"""

from __future__ import annotations

import enum
import errno
import fcntl
import os
import pwd
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any, Final

import landlockpy

from labkit.grade import launcher, scrub

BWRAP: Final = "/usr/bin/bwrap"
FIRST_UID: Final = 61000
SLOTS: Final = 64
LOCKS: Final = Path("/run/lock/labkit-grade")
NOBODY: Final = 65534
UID_PLACEHOLDER: Final = "{job_uid}"
KEEP_PLACEHOLDER: Final = "{job_capabilities}"
UNCONFINED: Final = "UNCONFINED"  # how an unconfined job's description starts
NO_CGROUP: Final = "NOTICE no cgroup"  # how a description without a job cgroup starts
WARNINGS: Final = (UNCONFINED, NO_CGROUP)  # descriptions every report shows to its reader
LAUNCHER: Final = "labkit.grade.launcher"
KERNEL_MODULE: Final = "ipykernel_launcher"
# Tasks the container itself adds to the job's cgroup: the shell that joins it, bubblewrap
# and its init in the new PID namespace.
CONTAINER_TASKS: Final = 4
GRADE: Final = Path(__file__).resolve().parent  # labkit/grade: the hidden checks live here
SYSTEM: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# /etc files a Python process reads (the dynamic loader's cache, name lookups, time zone,
# TLS roots); none holds a secret. Missing ones are left out.
ETC: Final = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/alternatives",
)
# Inside bubblewrap (full mode), the launcher needs these as root to become the job's uid and
# keep read-search; every other capability is gone before it runs.
CAPABILITIES: Final = (
    "CAP_CHOWN",
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_SETPCAP",
    "CAP_DAC_READ_SEARCH",
)
# Docker's (and containerd's) default capability set: what a platform's container gives root.
DOCKER_DEFAULT: Final = frozenset(
    [
        "CHOWN",
        "DAC_OVERRIDE",
        "FSETID",
        "FOWNER",
        "MKNOD",
        "NET_RAW",
        "SETGID",
        "SETUID",
        "SETFCAP",
        "SETPCAP",
        "NET_BIND_SERVICE",
        "SYS_CHROOT",
        "KILL",
        "AUDIT_WRITE",
    ]
)
_NAMESPACES: Final = (
    "--unshare-net",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
)
_JOB_CONTROLLERS: Final = frozenset({"memory", "pids"})
LEAF: Final = "labkit-grader"  # where v2 puts the grader's own processes (no internal process)
GIB: Final = 1024**3


class ContainmentUnavailable(RuntimeError):
    """This machine cannot contain a job the way grading asked; says what is missing."""


class Mode(enum.StrEnum):
    """How jobs are contained; every report names it."""

    FULL = "full"
    CONTAINER = "container"
    UNCONFINED = "unconfined"


# What the launcher keeps, per mode, when it drops from root to the job's uid (`launcher.become`).
# Full: read-search, to reach an interpreter where only root may look (`/root/.pyenv`), still
# under Landlock and the mount view. Container: nothing (Docker's default set has no
# DAC_READ_SEARCH, and the job's uid must reach the interpreter by plain permissions).
KEEP: Final[Mapping[Mode, tuple[str, ...]]] = {
    Mode.FULL: ("dac_read_search",),
    Mode.CONTAINER: (),
    Mode.UNCONFINED: ("dac_read_search",),
}


@dataclass(frozen=True)
class Limits:
    """What one job may use. Seconds, bytes and counts."""

    cell_timeout: int = 10
    total_timeout: float = 300.0
    startup_timeout: float = 60.0
    memory: int = 2 * GIB
    cpu: int = 240
    nproc: int = 256
    fsize: int = 256 * 1024**2


def launcher_argv(
    limits: Limits,
    module: str,
    args: Sequence[str] = (),
    *,
    python: str = sys.executable,
    sandbox: str = "required",
    user: str = UID_PLACEHOLDER,
) -> list[str]:
    """The launcher's command for `python -m module args...`; `user` and the capabilities stay
    placeholders that `Job.command` fills for the job."""
    sizes = {"memory": limits.memory, "cpu": limits.cpu, "nproc": limits.nproc}
    options = launcher.flags(
        **sizes, fsize=limits.fsize, sandbox=sandbox, user=user, keep=KEEP_PLACEHOLDER
    )
    return [python, "-P", "-m", LAUNCHER, *options, f"--module={module}", "--", *args]


def _size(value: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= scale and value % scale == 0:
            return f"{value // scale}{unit}"
    return f"{value}B"


def _rlimits(limits: Limits) -> str:
    return f"rlimits(as={_size(limits.memory)},nproc={limits.nproc},cpu={limits.cpu}s)"


# -- cgroups -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CgroupRoots:
    """Where the hierarchies are mounted (`mountinfo`) and this process's place in each."""

    mountinfo: Path = Path("/proc/self/mountinfo")
    own: Path = Path("/proc/self/cgroup")

    def placement(self) -> dict[str, str]:
        """{"": v2 path, "memory": v1 path, "pids": v1 path} from /proc/self/cgroup."""
        found: dict[str, str] = {}
        try:
            lines = self.own.read_text(encoding="utf-8").splitlines()
        except OSError:
            return found
        for line in lines:
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                found[name] = path
        return found

    def mounts(self) -> dict[str, tuple[Path, str]]:
        """{"": the cgroup2 mount, "memory" and "pids": the v1 mounts}, each as (mount point,
        the cgroup it shows at its top), from the mount table: v2 is wherever it is mounted
        (`/sys/fs/cgroup` on a unified host, `/sys/fs/cgroup/unified` on a hybrid one)."""
        found: dict[str, tuple[Path, str]] = {}
        try:
            lines = self.mountinfo.read_text(encoding="utf-8").splitlines()
        except OSError:
            return found
        for line in lines:
            mount, _, tail = line.partition(" - ")
            fields, after = mount.split(), tail.split()
            if len(fields) < 5 or len(after) < 3:
                continue
            point = Path(_unescape(fields[4]))
            if after[0] == "cgroup2":
                found.setdefault("", (point, _unescape(fields[3])))
            elif after[0] == "cgroup":
                for option in after[2].split(","):
                    if option in _JOB_CONTROLLERS:
                        found.setdefault(option, (point, _unescape(fields[3])))
        return found

    def where(self) -> dict[str, Path]:
        """This process's cgroup directory in each hierarchy that is mounted."""
        place = self.placement()
        found: dict[str, Path] = {}
        for key, (point, top) in self.mounts().items():
            if key not in place:
                continue
            path = place[key]
            if top != "/" and (path == top or path.startswith(top.rstrip("/") + "/")):
                path = path[len(top.rstrip("/")) :]  # a mount that shows a subtree only
            found[key] = point / path.lstrip("/")
        return found


def _unescape(text: str) -> str:
    """Mount table fields write space, tab, newline and backslash as octal escapes."""
    for code in ("040", "011", "012", "134"):
        text = text.replace(f"\\{code}", chr(int(code, 8)))
    return text


@dataclass(frozen=True)
class Cgroups:
    """Where job cgroups are made: one v2 parent, or the v1 memory and pids parents."""

    version: int
    parents: tuple[Path, ...]

    @classmethod
    def usable(
        cls, roots: CgroupRoots, write: Callable[[Path, str], None] | None = None
    ) -> tuple[Cgroups | None, list[str]]:
        """The hierarchy jobs can use, and why others could not. Under v2 this may move the
        grader's cgroup's processes into a leaf (`_delegate`, writing with `write`)."""
        where = roots.where()
        reasons: list[str] = []
        if "" in where:
            parent = where[""]
            reason = _delegate(parent, write or _write)
            if reason is None:
                return cls(2, (parent,)), reasons
            reasons.append(reason)
        if "memory" in where and "pids" in where:
            memory, pids = where["memory"], where["pids"]
            usable = [
                p for p in (memory, pids) if (p / "cgroup.procs").exists() and os.access(p, os.W_OK)
            ]
            if len(usable) == 2:
                return cls(1, (memory, pids)), reasons
            reasons.append(f"v1 memory and pids not writable at {memory} and {pids}")
        elif "" not in where:
            reasons.append("no cgroup hierarchy is mounted")
        else:
            reasons.append("no v1 memory and pids hierarchies are mounted")
        return None, reasons

    def describe(self, limits: Limits) -> str:
        return f"cgroup-v{self.version}(memory={_size(limits.memory)},pids={limits.nproc})"

    def create(self, name: str, limits: Limits) -> Cgroup:
        """A fresh cgroup `name` under each parent, with the job's limits written. A leftover
        of the same name (a grader that died mid-job) is emptied and removed first."""
        dirs = tuple(parent / name for parent in self.parents)
        group = Cgroup(self.version, dirs)
        group.remove()
        for directory in dirs:
            directory.mkdir()
        pids = str(limits.nproc + CONTAINER_TASKS)
        if self.version == 2:
            _write(dirs[0] / "memory.max", str(limits.memory))
            _write_if_present(dirs[0] / "memory.swap.max", "0")
            _write(dirs[0] / "pids.max", pids)
        else:
            memory, tasks = dirs
            _write(memory / "memory.limit_in_bytes", str(limits.memory))
            _write_if_present(memory / "memory.memsw.limit_in_bytes", str(limits.memory))
            _write(tasks / "pids.max", pids)
        return group


def _delegate(parent: Path, write: Callable[[Path, str], None]) -> str | None:
    """Make `parent` (the grader's v2 cgroup) hand `memory` and `pids` to child cgroups; None
    when it does, else why not. v2's no-internal-process rule: a cgroup that holds processes
    cannot enable controllers for its children (the root cgroup aside), so when enabling is
    refused as busy, every process of `parent` (the grader, and whatever else the platform
    runs there, as a container's init) first moves into the leaf `parent/labkit-grader`."""
    try:
        enabled = set(_read(parent / "cgroup.subtree_control").split())
        offered = set(_read(parent / "cgroup.controllers").split())
    except OSError as error:
        return f"v2 at {parent}: {error.strerror}"
    if enabled >= _JOB_CONTROLLERS:
        return None if os.access(parent, os.W_OK) else f"v2 at {parent} is not writable"
    if not offered >= _JOB_CONTROLLERS:
        return (
            f"v2 at {parent} offers {' '.join(sorted(offered)) or 'no controller'}"
            f" to its children ({' '.join(sorted(enabled)) or 'none enabled'})"
        )
    try:
        try:
            write(parent / "cgroup.subtree_control", "+memory +pids")
        except OSError as error:
            if error.errno != errno.EBUSY:
                raise
            leaf = parent / LEAF
            leaf.mkdir(exist_ok=True)
            for pid in _read(parent / "cgroup.procs").split():
                with suppress(ProcessLookupError):  # it ended meanwhile
                    write(leaf / "cgroup.procs", pid)
            write(parent / "cgroup.subtree_control", "+memory +pids")
    except OSError as error:
        return f"v2 at {parent}: cannot enable memory and pids for job cgroups ({error.strerror})"
    return None


@dataclass(frozen=True)
class Cgroup:
    """One job's cgroup (one directory in v2, one per hierarchy in v1)."""

    version: int
    dirs: tuple[Path, ...]

    @property
    def procs(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for procs in self.procs:
            try:
                found.update(int(p) for p in _read(procs).split())
            except OSError:
                continue
        return found

    def remove(self, patience: float = 5.0) -> None:
        """Kill every process left in it, then remove the directories."""
        deadline = time.monotonic() + patience
        for directory in self.dirs:
            if not directory.exists():
                continue
            while True:
                kill = directory / "cgroup.kill"
                if kill.exists():
                    _write_if_present(kill, "1")
                for pid in self.pids():
                    with suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    # EBUSY while killed tasks are still being reaped.
                    if error.errno != errno.EBUSY or time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _write(path: Path, value: str) -> None:
    with open(path, "w", encoding="utf-8") as file:
        file.write(value)


def _write_if_present(path: Path, value: str) -> None:
    with suppress(FileNotFoundError):
        _write(path, value)


# -- the survey ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One piece of containment, tried: did it work, and what was seen."""

    ok: bool
    detail: str


@dataclass(frozen=True)
class Survey:
    """What this machine gave when each piece of containment was tried (`survey()`)."""

    root: bool
    bwrap: Probe
    cgroup: Probe
    setuid: Probe
    launcher: Mapping[Mode, Probe]  # the launcher's capability set for full and container
    landlock: int
    bounding: frozenset[str] = DOCKER_DEFAULT
    cgroups: Cgroups | None = None
    bwrap_path: str = BWRAP

    def missing(self, mode: Mode) -> list[str]:
        """What `mode` needs and this machine lacks (a missing cgroup only weakens full mode's
        limits, and every report then says so)."""
        gaps: list[str] = []
        if mode is Mode.FULL:
            if not self.root:
                gaps.append("root (to give each job its own uid and cgroup)")
            if not self.bwrap.ok:
                gaps.append(f"bubblewrap's namespaces ({self.bwrap.detail})")
        if mode is Mode.CONTAINER and self.landlock < 1:
            gaps.append(
                "Landlock (the kernel offers none, or a seccomp filter refuses its system "
                "calls): in container mode it keeps the solutions and hidden checks from the job"
            )
        if mode is not Mode.UNCONFINED and self.root:
            if not self.setuid.ok:
                gaps.append(f"setuid to a job uid ({self.setuid.detail})")
            probe = self.launcher.get(mode)
            if probe is not None and not probe.ok:
                gaps.append(f"the launcher's {mode} capability set ({probe.detail})")
        return gaps

    def render(self) -> str:
        """The survey as `labkit grade --check-containment` prints it."""

        def said(probe: Probe) -> str:
            return f"{'yes' if probe.ok else 'NO'}: {probe.detail}"

        rows = [
            ("grader", f"uid {os.geteuid()}" + (" (root)" if self.root else " (not root)")),
            ("capability bounding set", _capabilities(self.bounding)),
            ("bubblewrap namespaces", said(self.bwrap)),
            ("job cgroup", said(self.cgroup)),
            ("setuid to a job uid", said(self.setuid)),
            *((f"launcher, {mode} mode", said(p)) for mode, p in self.launcher.items()),
            ("Landlock", f"ABI {self.landlock}" if self.landlock >= 1 else "NO: not available"),
        ]
        width = max(len(name) for name, _ in rows)
        lines = ["containment survey (each piece tried on this machine):"]
        lines += [f"  {name:<{width}}  {value}" for name, value in rows]
        lines.append("modes:")
        for mode in Mode:
            gaps = self.missing(mode)
            state = "available" if not gaps else "UNAVAILABLE: lacks " + "; ".join(gaps)
            if mode is Mode.UNCONFINED:
                state += " (only when asked for: it contains nothing)"
            lines.append(f"  {mode:<10}  {state}")
        return "\n".join(lines) + "\n"


def _capabilities(names: frozenset[str]) -> str:
    if names == DOCKER_DEFAULT:
        return f"{len(names)}, Docker's default set"
    if "SYS_ADMIN" in names and len(names) > 30:
        return f"{len(names)}, SYS_ADMIN among them"
    return f"{len(names)}: {' '.join(sorted(names)) or 'none'}"


def bounding_set(status: Path = Path("/proc/self/status")) -> frozenset[str]:
    """The names of the capabilities in this process's bounding set."""
    try:
        line = next(x for x in _read(status).splitlines() if x.startswith("CapBnd:"))
    except (OSError, StopIteration):
        return frozenset()
    mask = int(line.split()[1], 16)
    return frozenset(name for bit, name in enumerate(launcher.CAPABILITY_NAMES) if mask >> bit & 1)


def require(mode: Mode, host: Survey) -> None:
    """Refuse a mode this machine cannot give, naming what is missing and the flags."""
    gaps = host.missing(mode)
    if not gaps:
        return
    hint = {
        Mode.FULL: "inside a platform's own container per submission or per job (Gradescope, "
        "a Kubernetes pod, a CI VM) pass `--containment container`; "
        "`--containment unconfined` grades without containment",
        Mode.CONTAINER: "`--containment unconfined` grades without containment",
    }
    raise ContainmentUnavailable(
        f"containment `{mode}` needs what this machine lacks: {'; '.join(gaps)}. "
        f"`labkit grade --check-containment` shows what each mode needs; {hint[mode]}"
    )


def survey(
    roots: CgroupRoots | None = None,
    bwrap: str = BWRAP,
    first_uid: int = FIRST_UID,
) -> Survey:
    """Try each piece of containment on the real machine (a second or less)."""
    root = os.geteuid() == 0
    cgroups, reasons = Cgroups.usable(roots or CgroupRoots())
    uid = next(u for u in range(first_uid, first_uid + SLOTS) if not _is_account(u))
    with tempfile.TemporaryDirectory(prefix="labkit-survey-") as scratch:
        os.chmod(scratch, 0o711)
        return Survey(
            root=root,
            bwrap=_probe_bwrap(bwrap, root),
            cgroup=_probe_cgroup(cgroups, reasons),
            setuid=_in_child(lambda: _switch(uid)),
            launcher={
                mode: _in_child(partial(_launch, uid, Path(scratch), KEEP[mode]))
                for mode in (Mode.FULL, Mode.CONTAINER)
            },
            landlock=max(0, landlockpy.abi_version()),
            bounding=bounding_set(),
            cgroups=cgroups,
            bwrap_path=bwrap,
        )


def _probe_bwrap(bwrap: str, root: bool) -> Probe:
    if not os.access(bwrap, os.X_OK):
        return Probe(False, f"{bwrap} not found (Debian and Ubuntu package `bubblewrap`)")
    argv = [bwrap, *_NAMESPACES, "--die-with-parent", "--new-session"]
    if root:
        argv += ["--cap-drop", "ALL", *(a for cap in CAPABILITIES for a in ("--cap-add", cap))]
    argv += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Probe(False, f"bwrap did not run: {error}")
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return Probe(False, said[-1] if said else f"bwrap exited {done.returncode}")
    return Probe(True, "network, PID, IPC, UTS and mount namespaces")


def _probe_cgroup(cgroups: Cgroups | None, reasons: Sequence[str]) -> Probe:
    if cgroups is None:
        return Probe(False, "; ".join(reasons) or "no usable hierarchy")
    try:
        cgroups.create(f"labkit-probe-{os.getpid()}", Limits()).remove()
    except OSError as error:
        where = " and ".join(map(str, cgroups.parents))
        return Probe(False, f"cgroup v{cgroups.version} at {where}: {error}")
    return Probe(True, f"v{cgroups.version} at {' and '.join(map(str, cgroups.parents))}")


def _in_child(action: Callable[[], str]) -> Probe:
    """Run `action` in a forked child (it may change its uid and capabilities for good)."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(reader)
        code = 0
        try:
            said = action()
        except BaseException as error:
            said, code = str(error) or type(error).__name__, 1
        os.write(writer, said.encode(errors="replace")[:4000])
        os._exit(code)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        said = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    return Probe(os.waitstatus_to_exitcode(status) == 0, said)


def _switch(uid: int) -> str:
    try:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    except OSError as error:
        raise RuntimeError(f"to uid {uid}: {error.strerror}") from None
    return f"uid {uid}"


def _launch(uid: int, scratch: Path, keep: tuple[str, ...]) -> str:
    """What the launcher does first in a job (as root: become the job's uid keeping `keep`),
    then read the interpreter and labkit as that uid, as the job's first process must."""
    if os.geteuid() != 0:
        return "not root: jobs run as the grader's own uid, no capability to keep"
    launcher.become(uid, scratch, keep)
    import labkit

    for path in (os.path.realpath(sys.executable), labkit.__file__):
        try:
            with open(path, "rb") as file:
                file.read(1)
        except OSError as error:
            raise RuntimeError(
                f"uid {uid} cannot read {path} ({error.strerror}): install labkit and its "
                "Python where every user may read them (a venv under /opt)"
            ) from None
    return f"keeps {', '.join(keep) or 'no capability'}; uid {uid} reads the interpreter"


# -- uids ----------------------------------------------------------------------------------------


@dataclass
class UidPool:
    """Uids `first .. first+size-1`, one per running job on this machine: a slot is held by an
    exclusive lock on its file in `locks` (released when its holder ends, even by a crash).
    Uids that name an account in the user database are never used. A uid is scrubbed
    (`labkit.grade.scrub`: its processes, keyrings, IPC objects and files in shared places)
    when a slot is given back, and when it is taken unless its lock file says it was given
    back clean (a holder that crashed did not), so no job passes anything to a later one."""

    first: int = FIRST_UID
    size: int = SLOTS
    locks: Path = LOCKS
    patience: float = 60.0
    is_account: Callable[[int], bool] = field(default=lambda uid: _is_account(uid))
    scrub: Callable[[int], object] = field(default=lambda uid: scrub.between_jobs(uid))

    def range(self) -> str:
        return f"{self.first}-{self.first + self.size - 1}"

    @contextmanager
    def slot(self) -> Iterator[int]:
        self.locks.mkdir(mode=0o755, parents=True, exist_ok=True)
        deadline = time.monotonic() + self.patience
        while True:
            for uid in range(self.first, self.first + self.size):
                if self.is_account(uid):
                    continue
                held = _try_lock(self.locks / f"uid-{uid}.lock")
                if held is None:
                    continue
                try:
                    if not scrub.marked_clean(held):  # an earlier holder may have crashed
                        self.scrub(uid)
                    scrub.mark(held, clean=False)
                    yield uid
                finally:
                    try:
                        self.scrub(uid)
                        scrub.mark(held, clean=True)
                    finally:
                        held.close()  # closing the file releases the lock
                return
            if time.monotonic() > deadline:
                raise ContainmentUnavailable(
                    f"all job uids {self.range()} stayed in use for {self.patience:g} s"
                )
            time.sleep(0.05)


def _is_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _try_lock(path: Path) -> IO[bytes] | None:
    handle = open(path, "a+b")  # noqa: SIM115 - held open for the job's lifetime
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


# -- the mount view ------------------------------------------------------------------------------


def mount_view(scratch: Path, python_roots: Sequence[Path]) -> list[str]:
    """bubblewrap's mount arguments: what the job sees of the file system."""
    # /tmp first: the scratch folder may live beneath it and is bound over it below.
    args = ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for entry in SYSTEM:
        path = Path(entry)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), entry]
        elif path.is_dir():
            args += ["--ro-bind", entry, entry]
    for entry in ETC:
        if os.path.lexists(entry):
            args += ["--ro-bind", entry, entry]
    package = GRADE.parent
    for root in _outermost(python_roots):
        if root.is_relative_to(package):
            continue  # labkit itself is bound below, without the hidden checks
        args += ["--ro-bind", str(root), str(root)]
    args += ["--ro-bind", str(package), str(package)]
    # labkit/grade/ is replaced by an empty read-only folder holding only what a job's first
    # process imports from it before Landlock closes it: the launcher.
    args += ["--tmpfs", str(GRADE)]
    for path in launcher_files():
        args += ["--ro-bind", str(path), str(path)]
    args += ["--remount-ro", str(GRADE)]
    args += ["--bind", str(scratch), str(scratch)]
    # Links beside the scratch folder that point into it (the grader's `../outputs`, as the
    # course lays it out) are made again in the view: they reach nothing but the scratch.
    beside = sorted(scratch.parent.iterdir()) if scratch.parent.is_dir() else []
    for link in beside:
        if link.is_symlink() and link.resolve().is_relative_to(scratch.resolve()):
            args += ["--symlink", os.readlink(link), str(link)]
    args += ["--chdir", str(scratch)]
    return args


def launcher_files() -> list[Path]:
    """The files of labkit/grade/ the launcher runs from: its module and its package's
    `__init__` (it imports nothing else of labkit/grade/)."""
    return [GRADE / "__init__.py", Path(launcher.__file__).resolve()]


def python_roots() -> list[Path]:
    """The interpreter's installation and the venv (real paths: a venv's python links out)."""
    candidates = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    candidates.append(os.path.dirname(os.path.realpath(sys.executable)))
    return [Path(os.path.realpath(p)) for p in candidates if os.path.isdir(p)]


def _outermost(paths: Sequence[Path]) -> list[Path]:
    system = [Path(s) for s in SYSTEM]
    ordered = list(dict.fromkeys(paths))
    return [
        p
        for p in ordered
        if not any(o != p and p.is_relative_to(o) for o in ordered)
        and not any(p.is_relative_to(s) for s in system)
    ]


# -- jobs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One running job: its uid, its scratch folder, the capabilities the launcher keeps, and
    how to start a process in it."""

    uid: int
    scratch: Path
    prefix: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` (a `launcher_argv`) for this job: uid and capabilities filled in, container
        around it."""
        fill = {UID_PLACEHOLDER: str(self.uid), KEEP_PLACEHOLDER: ",".join(self.keep)}
        filled = []
        for arg in argv:
            for placeholder, value in fill.items():
                arg = arg.replace(placeholder, value)
            filled.append(arg)
        return [*self.prefix, *filled]


_JOIN: Final = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; '
    'exec "$@"'
)


class Jobs:
    """Where a runner's jobs run: `job(scratch)` for a command of its own (the kernel),
    `start` for a process in one call (a check worker), `mode` and `description` for the
    report."""

    limits: Limits
    description: str
    mode: Mode

    def job(self, scratch: Path) -> AbstractContextManager[Job]:
        raise NotImplementedError

    @contextmanager
    def start(
        self,
        scratch: Path,
        module: str,
        args: Sequence[str] = (),
        *,
        sandbox: str = "required",
        **popen: Any,
    ) -> Iterator[subprocess.Popen[bytes]]:
        """`python -m module args...` in a fresh job (launcher first); on leaving, the job
        ends and every process of it is gone. `popen` goes to `subprocess.Popen` (pipes)."""
        with self.job(scratch) as job:
            argv = job.command(launcher_argv(self.limits, module, args, sandbox=sandbox))
            process = subprocess.Popen(argv, cwd=scratch, start_new_session=True, **popen)
            try:
                yield process
            finally:
                with suppress(ProcessLookupError):  # its session: all of it when unconfined
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                for stream in (process.stdin, process.stdout, process.stderr):
                    if stream is not None:
                        stream.close()


@dataclass
class Containment(Jobs):
    """Full mode: bubblewrap namespaces, a cgroup and a uid of its own per job."""

    limits: Limits
    host: Survey = field(default_factory=survey)
    pool: UidPool = field(default_factory=UidPool)
    landlock: str = "landlock"
    description: str = ""
    mode: Mode = Mode.FULL

    def __post_init__(self) -> None:
        require(Mode.FULL, self.host)
        limits = self.limits
        if self.host.cgroups is not None:
            cgroup = self.host.cgroups.describe(limits)
        else:
            cgroup = f"no-cgroup ({self.host.cgroup.detail})"
        described = (
            f"bubblewrap(net,pid,mount) {cgroup} uid-per-job({self.pool.range()}) "
            f"{self.landlock} {_rlimits(limits)}"
        )
        if self.host.cgroups is None:
            described = f"{NO_CGROUP}: memory and process limits are per process only: {described}"
        self.description = self.description or described

    @contextmanager
    def job(self, scratch: Path) -> Iterator[Job]:
        with self.pool.slot() as uid:
            group = self._cgroup(uid)
            try:
                bwrap = [self.host.bwrap_path, *_NAMESPACES, "--hostname", "labkit-job"]
                bwrap += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
                for cap in CAPABILITIES:
                    bwrap += ["--cap-add", cap]
                bwrap += mount_view(scratch, python_roots())
                procs = group.procs if group is not None else []
                join = ["/bin/sh", "-c", _JOIN, "sh", str(len(procs)), *map(str, procs)]
                yield Job(uid, scratch, (*join, *bwrap, "--"), KEEP[Mode.FULL])
            finally:
                # A cgroup that will not go (a task stuck in the kernel) stays behind; the
                # slot's next job removes it first, or refuses to start.
                if group is not None:
                    with suppress(OSError):
                        group.remove()

    def _cgroup(self, uid: int) -> Cgroup | None:
        if self.host.cgroups is None:
            return None
        try:
            return self.host.cgroups.create(f"labkit-job-{uid}", self.limits)
        except OSError as error:
            raise ContainmentUnavailable(f"could not create the job's cgroup: {error}") from error


def scattered_pool() -> UidPool:
    """A block of uids of its own for this grader, drawn at random: graders in containers on
    one host (without user namespaces) share the host's uids, and the kernel counts
    RLIMIT_NPROC over every task of a uid whatever its PID namespace, where this grader's
    count (`launcher.tasks_of`) sees only its own container. Two graders on the same uids
    would take each other's process budget; two random blocks of 2**31 uids seldom meet."""
    first = 1 << 20
    return UidPool(first=first + secrets.randbelow(((1 << 31) - first) // SLOTS) * SLOTS)


@dataclass
class ContainerJobs(Jobs):
    """Container mode: the platform's container holds the grading; each job gets a uid of its
    own through `setuid` (when the grader is root), the launcher's rlimits and Landlock, and no
    capability; every process of the job's uid is killed when the job ends."""

    limits: Limits
    host: Survey = field(default_factory=survey)
    pool: UidPool = field(default_factory=scattered_pool)
    landlock: str = "landlock"
    description: str = ""
    mode: Mode = Mode.CONTAINER

    def __post_init__(self) -> None:
        require(Mode.CONTAINER, self.host)
        if self.host.root:
            uids = f"uid-per-job({self.pool.range()}) via setuid, no capability"
        else:
            uids = f"{_who(os.getuid())}, the grader's own (not root: no uid per job)"
        self.description = self.description or (
            f"{uids} {self.landlock} {_rlimits(self.limits)}; no namespace and no "
            f"job cgroup: the platform's container (capability bounding set "
            f"{_capabilities(self.host.bounding)}) holds the grading"
        )

    @contextmanager
    def job(self, scratch: Path) -> Iterator[Job]:
        if not self.host.root:
            yield Job(os.getuid(), scratch, keep=KEEP[Mode.CONTAINER])
            return
        with self.pool.slot() as uid:
            try:
                yield Job(uid, scratch, keep=KEEP[Mode.CONTAINER])
            finally:
                end_processes_of(uid)


def end_processes_of(uid: int) -> None:
    """SIGKILL every process of `uid` (a job's own uid: its double-forked daemons included),
    until none is left. A child becomes `uid` and signals -1: that reaches exactly the
    processes `uid` may signal, which are its own."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's exit code is the answer
        code = 0
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            for _ in range(10_000):  # a fork bomb refills; each round kills what it sees
                os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass  # ESRCH: none left
        except BaseException:
            code = 1
        os._exit(code)
    os.waitpid(pid, 0)


@dataclass
class Unconfined(Jobs):
    """No namespaces, no cgroup, every job as one shared uid: only the launcher's own layers.
    Chosen explicitly (`labkit grade --containment unconfined`); the description says so in
    every report, with the uid that really ran (nobody when the grader is root, else the
    grader's own)."""

    limits: Limits
    landlock: str = "landlock"
    description: str = ""
    mode: Mode = Mode.UNCONFINED
    root: bool = field(default_factory=lambda: os.geteuid() == 0)
    bounding: frozenset[str] = field(default_factory=bounding_set)

    def __post_init__(self) -> None:
        uid = NOBODY if self.root else os.getuid()
        who = _who(uid) + ("" if self.root else ", the grader's own")
        self.description = self.description or (
            f"{UNCONFINED} (no network, PID or mount namespace, no cgroup, shared {who}): "
            f"{self.landlock} rlimits(as={_size(self.limits.memory)},nproc={self.limits.nproc})"
        )

    @contextmanager
    def job(self, scratch: Path) -> Iterator[Job]:
        # Read-search only where the bounding set still has it (not in Docker's default set).
        keep = KEEP[Mode.UNCONFINED] if "DAC_READ_SEARCH" in self.bounding else ()
        yield Job(NOBODY if self.root else os.getuid(), scratch, keep=keep)


def _who(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"
