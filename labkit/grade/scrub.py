"""What a job's uid keeps once its job is over, found and removed from the grader's side.

Owns: `scrub(uid)`, run when a job uid is given back to the pool and when it is taken again
after a holder that did not give it back (`containment.UidPool`), so nothing one job leaves
reaches a later job of the same uid, in this grader run or the next. Job uids are reused,
and much of what a process can leave behind is kept by the kernel per uid, not per process:
without this, a key added to the uid's keyring by one submission was read minutes later, by
another grader run, by a later submission's kernel (about 20 KB per uid: enough to pass on a
solved answer cell). By uid, so it holds with or without namespaces (a container mode has
none, and a user keyring is never per namespace here):

- every process of the uid (real, effective or saved), killed until none is left;
- the uid's keyrings (its user keyring, user-session keyring and persistent keyring) cleared,
  and every other key the uid owns and can see invalidated (or revoked);
- its System V shared memory, semaphores and message queues, removed;
- what it owns in the places anyone may write (`PLACES`: `/tmp`, `/var/tmp`, `/dev/shm`,
  `/run/lock`, and `/dev/mqueue`, where POSIX message queues show when that is mounted),
  removed.

The work is done by a short-lived process that becomes the uid itself (`_AS_THE_UID`, through
`python -I -S`): the kernel lets a uid's own process reach its keyrings and remove its IPC
objects without any capability (a grader in a container may have neither CAP_SYS_ADMIN nor
CAP_IPC_OWNER), and `kill(-1)` from it reaches every process of that uid and nothing else.
`scrub` returns what it found (`Kept`); `between_jobs` logs it too. A uid's lock file says
whether it was given back scrubbed (`mark`), so taking it again needs no second scrub unless
its holder crashed.

Imports nothing from labkit: containment calls it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import IO, Final

log = logging.getLogger("labkit.grade")

PLACES: Final = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
TIMEOUT: Final = 30.0

# Started as root with only the standard library (`-I -S`: nothing of the environment, no
# site packages); imports everything it uses, then becomes the uid for good (the interpreter
# may live where the uid cannot read, as under /root: it is loaded by then). Prints one JSON
# line: what it found of each kind.
_AS_THE_UID: Final = r"""
import ctypes, json, os, shutil, signal, stat, sys, time

uid = int(sys.argv[1])
places = json.loads(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
os.setgroups([])
os.setresgid(uid, uid, uid)
os.setresuid(uid, uid, uid)
assert os.getresuid() == (uid, uid, uid)
found = {"processes": 0, "keys": 0, "ipc": 0, "files": 0}

def uids_of(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
    except OSError:
        return set(), "X"
    return {int(u) for u in fields["Uid"].split()[:3]}, fields["State"].split()[0]

def processes():
    mine = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            ids, state = uids_of(entry.name)
            if uid in ids and state not in ("Z", "X"):
                mine.append(int(entry.name))
    return mine

for _ in range(100):  # a process forked while the signal went round is killed next time
    left = processes()
    if not left:
        break
    found["processes"] = max(found["processes"], len(left))
    try:
        os.kill(-1, signal.SIGKILL)  # every process this uid may signal: its own
    except ProcessLookupError:
        pass
    time.sleep(0.02)

SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "i686": 288, "armv7l": 311}.get(os.uname().machine)
SESSION, USER, USER_SESSION = -3, -4, -5
GET_KEYRING_ID, JOIN_SESSION, REVOKE, CLEAR, LINK, SETPERM = 0, 1, 3, 7, 8, 5
INVALIDATE, GET_PERSISTENT = 21, 22
EVERYTHING = 0x3F3F0000  # possessor and owner: every permission

def keyctl(*args):
    return libc.syscall(SYS_KEYCTL, *(ctypes.c_long(a) for a in args))

if SYS_KEYCTL is not None:
    # A session keyring of this process's own, holding the uid's keyrings: what they hold is
    # then this process's (possessed), whatever the permissions its keys were given.
    keyctl(JOIN_SESSION, 0)
    own = set()
    for spec in (USER, USER_SESSION):
        serial = keyctl(GET_KEYRING_ID, spec, 1)
        if serial > 0:
            own.add(serial)
    persistent = keyctl(GET_PERSISTENT, -1, SESSION)
    if persistent > 0:
        own.add(persistent)
    for serial in own:
        keyctl(SETPERM, serial, EVERYTHING)  # the owner may always; a job may have closed them
        keyctl(LINK, serial, SESSION)
    try:
        with open("/proc/keys") as keys:
            lines = keys.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split()
        if len(fields) < 8 or int(fields[5]) != uid:
            continue
        serial = int(fields[0], 16)
        if serial in own or fields[8:9] == ["_ses:"]:
            continue
        if set(fields[1]) & set("RDi"):  # revoked, dead or invalidated: unusable, awaiting the
            continue  # kernel's garbage collector
        found["keys"] += 1
        keyctl(SETPERM, serial, EVERYTHING)
        if keyctl(INVALIDATE, serial) != 0:
            keyctl(REVOKE, serial)
    for serial in own:
        keyctl(CLEAR, serial)

IPC_RMID = 0
for kind, column in (("shm", "shmid"), ("sem", "semid"), ("msg", "msqid")):
    try:
        with open(f"/proc/sysvipc/{kind}") as table:
            header, *rows = [line.split() for line in table]
    except OSError:
        continue
    for row in rows:
        entry = dict(zip(header, row))
        if uid not in (int(entry.get("uid", -1)), int(entry.get("cuid", -1))):
            continue
        found["ipc"] += 1
        ident = int(entry[column])
        if kind == "shm":
            libc.shmctl(ident, IPC_RMID, None)
        elif kind == "sem":
            libc.semctl(ident, 0, IPC_RMID)
        else:
            libc.msgctl(ident, IPC_RMID, None)

budget = [20000]

def writable_again(function, path, error):
    try:
        os.chmod(os.path.dirname(path), 0o700)
        function(path)
    except OSError:
        pass

def remove(path, mode):
    if stat.S_ISDIR(mode):
        os.chmod(path, 0o700)
        shutil.rmtree(path, onerror=writable_again)
    else:
        os.unlink(path)

def sweep(folder, depth):
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        budget[0] -= 1
        if budget[0] < 0:
            return
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_uid == uid:
            found["files"] += 1
            try:
                remove(entry.path, info.st_mode)
            except OSError:
                pass
        elif stat.S_ISDIR(info.st_mode) and depth > 0:
            sweep(entry.path, depth - 1)

for place in places:
    sweep(place, 3)

print(json.dumps(found))
"""


@dataclass(frozen=True)
class Kept:
    """What a uid still had: processes, keys (other than its own keyrings, which are
    cleared), System V IPC objects and files in `PLACES`. `problem` says why a scrub could
    not finish."""

    processes: int = 0
    keys: int = 0
    ipc: int = 0
    files: int = 0
    problem: str = ""

    def __bool__(self) -> bool:
        return bool(self.processes or self.keys or self.ipc or self.files or self.problem)

    def __str__(self) -> str:
        counts = (
            f"{self.processes} processes, {self.keys} keys, {self.ipc} IPC objects, "
            f"{self.files} files"
        )
        return f"{counts} ({self.problem})" if self.problem else counts


def scrub(
    uid: int,
    *,
    places: tuple[str, ...] = PLACES,
    python: str = sys.executable,
    timeout: float = TIMEOUT,
) -> Kept:
    """Remove what `uid` keeps (see the module docstring); returns what was there. Never
    raises for what it finds: a scrub that cannot finish says so in `Kept.problem`."""
    if uid == 0:
        raise ValueError("uid 0 is never a job's")
    try:
        done = subprocess.run(
            [python, "-I", "-S", "-c", _AS_THE_UID, str(uid), json.dumps(places)],
            cwd="/",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        kept = Kept(**json.loads(done.stdout.strip().splitlines()[-1]))
    except (OSError, ValueError, IndexError, TypeError, subprocess.SubprocessError) as error:
        kept = Kept(problem=f"the scrub of uid {uid} did not finish: {type(error).__name__}")
    if kept.problem:
        log.warning("%s", kept.problem)
    return kept


_CLEAN: Final = b"scrubbed\n"


def marked_clean(lock: IO[bytes]) -> bool:
    """Whether a uid's lock file says its last holder gave it back scrubbed."""
    return os.pread(lock.fileno(), len(_CLEAN) + 1, 0) == _CLEAN


def mark(lock: IO[bytes], *, clean: bool) -> None:
    """Say in the uid's lock file (root's alone) whether it is scrubbed or in use."""
    os.ftruncate(lock.fileno(), 0)
    if clean:
        os.pwrite(lock.fileno(), _CLEAN, 0)


def between_jobs(uid: int) -> Kept:
    """`scrub`, with what was found logged (a job pool's default: see `UidPool`)."""
    kept = scrub(uid)
    if kept and not kept.problem:
        log.info("job uid %d kept %s: removed", uid, kept)
    return kept
