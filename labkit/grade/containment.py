"""One grading job's container: its own network, PID and mount namespaces, cgroup and uid.

Owns: what surrounds a job (one submission's kernel, or a process the grader starts for it):

- **bubblewrap** (`/usr/bin/bwrap`): a new network namespace (no TCP, UDP or abstract Unix
  socket reaches anything), a PID namespace whose end kills every process of the job (double-
  forked daemons included; `--die-with-parent` ends it with the grader), and a private mount
  view: read-only binds of the Python installation, the venv, the labkit package without
  `labkit/grade/` (only the launcher's and the check worker's files are shown there), the
  system libraries and a few /etc files; the scratch folder read-write; a private /tmp, a
  minimal /dev and the new namespace's /proc. No pathname Unix socket outside the scratch
  folder is reachable.
- **a cgroup per job** (v2 when the grader's own v2 cgroup already delegates `memory` and
  `pids` to its children, else v1's `memory` and `pids` hierarchies, beneath the grader's own
  place in each): the memory and task limits hold for the job's whole process tree; the job
  joins it before bubblewrap starts, and the cgroup is emptied (SIGKILL) and removed when the
  job ends. Without a usable hierarchy the limits stay per process (rlimits) and the
  description starts with `NO_CGROUP`, a notice every report shows.
- **a uid of its own per concurrent job** (`UidPool`: a slot of uids, each held with a lock
  file), so RLIMIT_NPROC, a kill or a limit never touches another job.

The launcher (`labkit.grade.launcher`) still runs first inside: rlimits, the drop to the
job's uid, Landlock. `launcher_argv` builds its command; `Job.command` wraps any such command
for one job; `Containment.start` starts a process in a fresh job in one call. Grading refuses
to run without all of this (`ContainmentUnavailable` names what is missing) unless the caller
asks for `Unconfined`, whose description says so.

The machine (`Machine`) and the cgroup roots are injected; `survey()` reads the real ones.
Must not import nbclient, the kernel runner, the report models or the hidden checks.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from labkit.grade import launcher, scrub

BWRAP: Final = "/usr/bin/bwrap"
FIRST_UID: Final = 61000
SLOTS: Final = 64
LOCKS: Final = Path("/run/lock/labkit-grade")
NOBODY: Final = 65534
UID_PLACEHOLDER: Final = "{job_uid}"
UNCONFINED: Final = "UNCONFINED"  # how an unconfined job's description starts
NO_CGROUP: Final = "NOTICE no cgroup"  # how a description without a job cgroup starts
WARNINGS: Final = (UNCONFINED, NO_CGROUP)  # descriptions every report shows to its reader
LAUNCHER: Final = "labkit.grade.launcher"
KERNEL_MODULE: Final = "ipykernel_launcher"
# Tasks the container itself adds to the job's cgroup: the shell that joins it, bubblewrap
# and its init in the new PID namespace.
CONTAINER_TASKS: Final = 4
GRADE: Final = Path(__file__).resolve().parent  # labkit/grade: the hidden checks live here
# What a job's first process imports from labkit/grade before Landlock closes it (see the
# mount view): the launcher, and the check worker, which holds the learner's answer cells.
LAUNCHER_FILES: Final = ("__init__.py", "launcher.py", "worker.py")
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
# The launcher needs these (as root) to become the job's uid and keep read-search; every
# other capability is gone before it runs.
CAPABILITIES: Final = (
    "CAP_CHOWN",
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_SETPCAP",
    "CAP_DAC_READ_SEARCH",
)
GIB: Final = 1024**3


class ContainmentUnavailable(RuntimeError):
    """This machine cannot contain a job the way grading requires; says what is missing."""


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
    """The launcher's command for `python -m module args...`; `user` stays a placeholder that
    `Job.command` fills with the job's uid."""
    sizes = {"memory": limits.memory, "cpu": limits.cpu, "nproc": limits.nproc}
    options = launcher.flags(**sizes, fsize=limits.fsize, sandbox=sandbox, user=user)
    return [python, "-P", "-m", LAUNCHER, *options, f"--module={module}", "--", *args]


def _size(value: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= scale and value % scale == 0:
            return f"{value // scale}{unit}"
    return f"{value}B"


# -- the machine ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CgroupRoots:
    """Where the hierarchies are mounted and this process's place in each."""

    unified: Path = Path("/sys/fs/cgroup/unified")
    memory: Path = Path("/sys/fs/cgroup/memory")
    pids: Path = Path("/sys/fs/cgroup/pids")
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


@dataclass(frozen=True)
class Machine:
    """What this machine offers a job container."""

    bwrap: str | None
    root: bool
    cgroups: Cgroups | None
    reasons: tuple[str, ...] = ()

    def missing(self) -> list[str]:
        """What grading cannot do without (a missing cgroup only weakens the limits)."""
        gaps = []
        if self.bwrap is None:
            gaps.append(f"bubblewrap ({BWRAP}; Debian package `bubblewrap`, `make` installs it)")
        if not self.root:
            gaps.append("root (to give each job its own uid and cgroup)")
        return gaps


def survey(roots: CgroupRoots | None = None, bwrap: str = BWRAP) -> Machine:
    """Look at the real machine: bubblewrap, root, and which cgroup version can hold a job."""
    roots = roots or CgroupRoots()
    cgroups, reasons = Cgroups.find(roots)
    return Machine(
        bwrap=bwrap if os.access(bwrap, os.X_OK) else None,
        root=os.geteuid() == 0,
        cgroups=cgroups,
        reasons=tuple(reasons),
    )


# -- cgroups -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cgroups:
    """Where job cgroups are made: one v2 parent, or the v1 memory and pids parents."""

    version: int
    parents: tuple[Path, ...]

    @classmethod
    def find(cls, roots: CgroupRoots) -> tuple[Cgroups | None, list[str]]:
        place = roots.placement()
        reasons: list[str] = []
        if "" in place:
            parent = _beneath(roots.unified, place[""])
            try:
                offered = set(_read(parent / "cgroup.controllers").split())
                enabled = set(_read(parent / "cgroup.subtree_control").split())
            except OSError:
                offered = enabled = set()
            if {"memory", "pids"} <= enabled and os.access(parent, os.W_OK):
                return cls(2, (parent,)), reasons
            reasons.append(
                f"v2 at {parent} offers {' '.join(sorted(offered)) or 'no controller'}"
                f" to its children ({' '.join(sorted(enabled)) or 'none enabled'})"
            )
        memory = _beneath(roots.memory, place.get("memory", "/"))
        pids = _beneath(roots.pids, place.get("pids", "/"))
        usable = [
            p for p in (memory, pids) if (p / "cgroup.procs").exists() and os.access(p, os.W_OK)
        ]
        if len(usable) == 2:
            return cls(1, (memory, pids)), reasons
        reasons.append(f"v1 memory and pids not writable at {memory} and {pids}")
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


def _beneath(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _write(path: Path, value: str) -> None:
    with open(path, "w", encoding="utf-8") as file:
        file.write(value)


def _write_if_present(path: Path, value: str) -> None:
    with suppress(FileNotFoundError):
        _write(path, value)


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
    # labkit/grade/ is replaced by an empty read-only folder holding only the launcher and
    # the check worker.
    args += ["--tmpfs", str(GRADE)]
    for name in LAUNCHER_FILES:
        args += ["--ro-bind", str(GRADE / name), str(GRADE / name)]
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
    """One running job: its uid, its scratch folder and how to start a process in it."""

    uid: int
    scratch: Path
    prefix: tuple[str, ...] = ()

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` (a `launcher_argv`) for this job: uid filled in, container around it."""
        return [*self.prefix, *(a.replace(UID_PLACEHOLDER, str(self.uid)) for a in argv)]


_JOIN: Final = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; '
    'exec "$@"'
)


class Jobs:
    """Where a runner's jobs run: `job(scratch)` for a command of its own (the kernel),
    `start` for a process in one call (a check worker), `description` for the report."""

    limits: Limits
    description: str

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
    """Confined jobs: bubblewrap namespaces, a cgroup and a uid of its own per job."""

    limits: Limits
    host: Machine = field(default_factory=survey)
    pool: UidPool = field(default_factory=UidPool)
    landlock: str = "landlock"
    description: str = ""

    def __post_init__(self) -> None:
        missing = self.host.missing()
        if missing:
            raise ContainmentUnavailable(
                "grading needs job containment, and this machine lacks: " + "; ".join(missing)
            )
        limits = self.limits
        if self.host.cgroups is not None:
            cgroup = self.host.cgroups.describe(limits)
        else:
            reasons = f" ({'; '.join(self.host.reasons)})" if self.host.reasons else ""
            cgroup = f"no-cgroup{reasons}"
        described = (
            f"bubblewrap(net,pid,mount) {cgroup} uid-per-job({self.pool.range()}) "
            f"{self.landlock} "
            f"rlimits(as={_size(limits.memory)},nproc={limits.nproc},cpu={limits.cpu}s)"
        )
        if self.host.cgroups is None:
            described = f"{NO_CGROUP}: memory and process limits are per process only: {described}"
        self.description = self.description or described

    @contextmanager
    def job(self, scratch: Path) -> Iterator[Job]:
        assert self.host.bwrap is not None
        with self.pool.slot() as uid:
            group = self._cgroup(uid)
            try:
                bwrap = [self.host.bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc"]
                bwrap += ["--unshare-uts", "--unshare-cgroup-try", "--hostname", "labkit-job"]
                bwrap += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
                for cap in CAPABILITIES:
                    bwrap += ["--cap-add", cap]
                bwrap += mount_view(scratch, python_roots())
                procs = group.procs if group is not None else []
                join = ["/bin/sh", "-c", _JOIN, "sh", str(len(procs)), *map(str, procs)]
                yield Job(uid, scratch, (*join, *bwrap, "--"))
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


@dataclass
class Unconfined(Jobs):
    """No namespaces, no cgroup, every job as `nobody`: only the launcher's own layers.
    Chosen explicitly (`labkit grade --unconfined`); the description says so in every report."""

    limits: Limits
    landlock: str = "landlock"
    description: str = ""

    def __post_init__(self) -> None:
        self.description = self.description or (
            f"{UNCONFINED} (no network, PID or mount namespace, no cgroup, shared uid nobody): "
            f"{self.landlock} rlimits(as={_size(self.limits.memory)},nproc={self.limits.nproc})"
        )

    @contextmanager
    def job(self, scratch: Path) -> Iterator[Job]:
        yield Job(NOBODY, scratch)
