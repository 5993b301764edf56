"""Nothing one job leaves reaches a later job of the same uid, in this grader run or the next
(`labkit.grade.scrub`, run by the uid pool whenever a uid is taken and given back).

An earlier job plants what a uid can keep: keys in its user, user-session and persistent
keyrings, System V shared memory, a semaphore set and a message queue, files in /tmp,
/var/tmp and /dev/shm, and a daemon in a session of its own. A later job of the same uid, run
by another grader process (its own pool and containment), looks for each, by name and by the
ids the earlier job printed. Two kinds of job: bubblewrap containment, and a job with no
namespace at all (the launcher's setuid and rlimits, Landlock off so that it can write
anywhere: the worst case of a container mode), where only the scrub stands between jobs. A
pool that does not scrub is the control: the same later job then finds what was planted.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from labkit.grade.containment import KEEP, LOCKS, Containment, Job, Jobs, Limits, Mode, UidPool
from labkit.grade.scrub import Kept, between_jobs, scrub

UID = 61950  # outside the default pool: this test's own slot, one uid for every job
LIMITS = Limits(memory=512 * 1024**2, nproc=32)

# A session keyring of the job's own, holding the uid's keyrings (so the job possesses them:
# the persistent keyring takes keys only from a possessor).
KEYRINGS = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def keyctl(*args):
    return libc.syscall(250, *(ctypes.c_long(a) if isinstance(a, int) else a for a in args))
keyctl(1, 0)
for ring in (-4, -5):
    keyctl(8, ring, -3)
persistent = keyctl(22, -1, -3)
"""
PLANT = (
    KEYRINGS
    + """import os, time
def add(ring, name):
    return libc.syscall(248, b"user", name.encode(), b"the answer", 10, ctypes.c_long(ring))
keys = [add(-4, "in-user"), add(-5, "in-user-session"), add(persistent, "in-persistent")]
ipc = [libc.shmget(0x6C61626B, 4096, 0o1666), libc.semget(0x6C61626B, 1, 0o1666),
       libc.msgget(0x6C61626B, 0o1666)]
for place in ("/tmp", "/var/tmp", "/dev/shm"):
    try:
        open(f"{place}/labkit-left-behind", "w").write("the answer")
    except OSError:
        pass
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 256)  # a daemon: nothing of its job's pipes kept
        time.sleep(300)
    os._exit(0)
os.wait()
print("RESULT", os.getuid(), *keys, *ipc)"""
)

FIND = (
    KEYRINGS
    + """import os
found = []
for ring, name in ((-4, "in-user"), (-5, "in-user-session"), (persistent, "in-persistent")):
    if keyctl(10, ring, b"user", name.encode(), 0) > 0:
        found.append("key:" + name)
buffer = ctypes.create_string_buffer(64)
for serial in SERIALS:
    if keyctl(11, serial, buffer, 64) > 0:
        found.append(f"key-by-id:{serial}")
for kind, get in (("shm", lambda: libc.shmget(0x6C61626B, 0, 0)),
                  ("sem", lambda: libc.semget(0x6C61626B, 0, 0)),
                  ("msg", lambda: libc.msgget(0x6C61626B, 0))):
    if get() >= 0:
        found.append("ipc:" + kind)
for place in ("/tmp", "/var/tmp", "/dev/shm"):
    if os.path.exists(f"{place}/labkit-left-behind"):
        found.append("file:" + place)
for entry in os.scandir("/proc"):
    if entry.name.isdigit() and int(entry.name) != os.getpid():
        try:
            status = open(f"/proc/{entry.name}/status").read()
        except OSError:
            continue
        uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
        if str(os.getuid()) in uids and "State:\\tZ" not in status:
            found.append(f"process:{entry.name}")
print("RESULT", os.getuid(), *found)"""
)


class Bare(Jobs):
    """Jobs with no namespace and no cgroup: each job a uid of the pool, the launcher's rlimits
    and drop to that uid, nothing else (Landlock is off in these tests)."""

    def __init__(self, pool: UidPool) -> None:
        self.limits = LIMITS
        self.description = "no namespaces"
        self.pool = pool

    @contextmanager
    def job(self, scratch: Path) -> Iterator[Job]:
        with self.pool.slot() as uid:
            # as unconfined grading: the job reads what root's read-search lets it (this
            # machine's Python may live under /root)
            yield Job(uid, scratch, keep=KEEP[Mode.UNCONFINED])


def run(jobs: Jobs, work: Path, code: str) -> list[str]:
    """`code` in a fresh job of `jobs`; the words after its RESULT."""
    scratch = Path(tempfile.mkdtemp(dir=work, prefix="job-"))
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with jobs.start(scratch, "code", sandbox="off", **pipes) as process:
        out, err = process.communicate(f"exec({code!r})\n".encode(), timeout=60)
    text = out.decode()
    assert "RESULT" in text, err.decode()[-2000:]
    return text.split("RESULT", 1)[1].split("\n", 1)[0].split()


def pool(scrubbing: bool) -> UidPool:
    """A pool of this test's one uid, made afresh (what a new grader run makes)."""
    action: Callable[[int], object] = between_jobs if scrubbing else (lambda uid: None)
    return UidPool(first=UID, size=1, scrub=action)


KINDS: dict[str, Callable[[UidPool], Jobs]] = {
    "bubblewrap": lambda uids: Containment(LIMITS, pool=uids),
    "no-namespaces": Bare,
}


@pytest.fixture
def clean_uid() -> Iterator[None]:
    scrub(UID)
    yield
    scrub(UID)


# The later job, run by another grader process (its own pool, its own containment).
SECOND_RUN = """import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from grade.test_leftovers import FIND, KINDS, pool, run
kind, work, serials = sys.argv[2], Path(sys.argv[3]), sys.argv[4]
print(" ".join(run(KINDS[kind](pool(True)), work, FIND.replace("SERIALS", serials))))
"""


@pytest.mark.parametrize("kind", KINDS)
def test_a_later_job_finds_nothing_an_earlier_job_left(
    kind: str, work: Path, clean_uid: None
) -> None:
    planted = run(KINDS[kind](pool(True)), work, PLANT)
    uid, serials = int(planted[0]), [int(s) for s in planted[1:4]]
    assert uid == UID and all(s > 0 for s in serials) and all(int(i) >= 0 for i in planted[4:])
    tests = str(Path(__file__).resolve().parents[1])
    second = [sys.executable, "-c", SECOND_RUN, tests, kind, str(work), repr(serials)]
    done = subprocess.run(second, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(UID)]


@pytest.mark.parametrize("kind", KINDS)
def test_without_the_scrub_the_later_job_finds_them(kind: str, work: Path, clean_uid: None) -> None:
    planted = run(KINDS[kind](pool(False)), work, PLANT)
    serials = [int(s) for s in planted[1:4]]
    found = run(KINDS[kind](pool(False)), work, FIND.replace("SERIALS", repr(serials)))[1:]
    keys = {"key:in-user", "key:in-user-session", "key:in-persistent"}
    assert keys <= set(found)  # the kernel keeps a uid's keyrings across namespaces and runs
    if kind == "no-namespaces":
        assert {"ipc:shm", "ipc:sem", "ipc:msg", "file:/tmp", "file:/dev/shm"} <= set(found)
        assert any(f.startswith("process:") for f in found)  # the daemon


def test_a_uid_its_holder_did_not_give_back_is_scrubbed_when_taken(
    work: Path, clean_uid: None
) -> None:
    """As after a grader killed mid-job: the lock file does not say the uid was scrubbed."""
    planted = run(Bare(pool(False)), work, PLANT)
    (LOCKS / f"uid-{UID}.lock").write_bytes(b"")  # what a holder that crashed leaves
    serials = [int(s) for s in planted[1:4]]
    found = run(Bare(pool(True)), work, FIND.replace("SERIALS", repr(serials)))
    assert found == [str(UID)]


def test_the_scrub_says_what_it_found_and_leaves_nothing(work: Path, clean_uid: None) -> None:
    run(Bare(pool(False)), work, PLANT)
    first, second = scrub(UID), scrub(UID)
    assert first.processes >= 1 and first.keys >= 3 and first.ipc == 3 and first.files >= 2
    assert second == Kept()


def test_uid_zero_is_never_scrubbed() -> None:
    with pytest.raises(ValueError, match="uid 0"):
        scrub(0)
