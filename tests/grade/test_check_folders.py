"""The learner's side against the check folders, as the grader runs them: the check worker as
another user, in a scratch folder of the grader's (`launcher.KEPT_MODE`), the judge as root.

The attacks: swapping the check database (and its `-wal`) for a link to a host file at every
call, a thread started when the answer cell runs that keeps trying the same swap and a chmod,
and overwriting the database's bytes (which the learner's side may write). None of them
reaches a host file (contents, mode, owner, and no file planted where a link pointed), no
check "itself failed", and the overwrite is reported as the submission's own fault.

And racers that would serialise themselves without a transaction, through an `O_EXCL` file
beside the database (or in any other place they share), find no place to make it: the
check-then-act mistake still loses its races.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from grade.grade_helpers import MISTAKES, SETUP, judge_in_worker, quick
from labkit.course.exercises.checks import SAFETY_CHECK, CheckReport, run_checks
from labkit.course.exercises.registry import EXERCISES
from labkit.course.exercises.trial import Outcome
from labkit.grade.graded_exercises import GRADED
from labkit.grade.launcher import KEPT_MODE
from labkit.grade.worker import WorkerRunner, worker_argv

CORRECT = (MISTAKES / "ex1" / "correct_integrity_error.py").read_text()

SWAP = """
def _swap(conn, secret, planted):
    database = conn.execute("PRAGMA database_list").fetchone()[2]
    for name, target in ((database, secret), (database + "-wal", planted)):
        for attempt in (os.unlink, lambda p: os.rename(p, p + ".away")):
            try:
                attempt(name)
                os.symlink(target, name)
            except OSError:
                pass
    try:
        os.chmod(database, 0o777)
    except OSError:
        pass
"""

PER_CALL = (
    SWAP
    + CORRECT.replace("def claim_and_delete(", "def _honest(")
    + """

def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    _swap(conn, SECRET, PLANTED)
    return _honest(conn, principal, nonce, note_id, expires_at)
"""
)

WATCHER = (
    SWAP
    + """
import glob
import threading


def _watch():
    while True:
        for database in glob.glob("labkit-check-*/*.db") + glob.glob("*/labkit-check-*/*.db"):
            try:
                os.unlink(database)
            except OSError:
                pass
            try:
                os.symlink(SECRET, database)
            except OSError:
                pass


threading.Thread(target=_watch, daemon=True).start()
"""
    + CORRECT
)

OVERWRITE = (
    CORRECT.replace("def claim_and_delete(", "def _honest(")
    + """

def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    answer = _honest(conn, principal, nonce, note_id, expires_at)
    database = conn.execute("PRAGMA database_list").fetchone()[2]
    for name in (database, database + "-wal"):
        with open(name, "r+b") as file:
            file.write(b"not a database any more" * 64)
    return answer
"""
)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A root-only host file and a path where nothing may appear."""
    folder = tmp_path / "host"
    folder.mkdir(mode=0o755)
    secret = folder / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    yield secret, folder / "planted"


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """The check worker's folder as the grader makes it."""
    folder = tmp_path / "checks-ex1"
    folder.mkdir()
    folder.chmod(KEPT_MODE)
    return folder


def judged(answer: str, host: tuple[Path, Path], scratch: Path) -> CheckReport:
    secret, planted = host
    targets = f"SECRET = {str(secret)!r}\nPLANTED = {str(planted)!r}\n"
    checks = (*EXERCISES["ex1"].checks, *GRADED["ex1"].checks())
    return judge_in_worker("ex1", checks, [targets + answer], scratch)


def assert_host_untouched(host: tuple[Path, Path]) -> None:
    secret, planted = host
    info = os.lstat(secret)
    assert secret.read_text() == "root only\n"
    assert (info.st_mode & 0o7777, info.st_uid) == (0o600, 0)
    assert not os.path.lexists(planted)
    assert sorted(p.name for p in secret.parent.iterdir()) == ["secret"]


def assert_no_check_failed_itself(report: CheckReport) -> None:
    for result in report.results:
        assert "the check itself failed" not in result.message, result.message
        assert result.outcome is not Outcome.DID_NOT_RUN, result.message


@pytest.mark.parametrize("answer", [PER_CALL, WATCHER], ids=["swap-per-call", "watcher-thread"])
def test_a_swap_for_a_link_reaches_no_host_file(
    answer: str, host: tuple[Path, Path], scratch: Path
) -> None:
    report = judged(answer, host, scratch)
    assert_host_untouched(host)
    assert_no_check_failed_itself(report)
    # The swaps never happened: the answer's own logic is graded, and it is correct.
    assert report.passed, str(report)


def test_overwriting_the_database_is_the_submissions_fault(
    host: tuple[Path, Path], scratch: Path
) -> None:
    report = judged(OVERWRITE, host, scratch)
    assert_host_untouched(host)
    assert_no_check_failed_itself(report)
    tampered = [r for r in report.results if "only your function's own connection" in r.message]
    assert tampered and all(r.outcome is Outcome.INCORRECT for r in tampered), str(report)
    safety = next(r for r in report.results if r.name == SAFETY_CHECK)
    assert safety.outcome is Outcome.INCORRECT and "tampered with" in safety.message


MUTEX = (
    """
import time


def _mutex(database):
    for folder in (os.path.dirname(database), os.getcwd(), "/tmp", "/dev/shm", "/var/tmp"):
        path = os.path.join(folder, "labkit-race.mutex")
        try:
            return path, os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            while os.path.exists(path):
                time.sleep(0.001)
            return _mutex(database)
        except OSError:
            continue
    return None, None

"""
    + (MISTAKES / "ex1" / "check_then_act.py")
    .read_text()
    .replace("def claim_and_delete(", "def _unguarded(")
    + """

def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    path, fd = _mutex(conn.execute("PRAGMA database_list").fetchone()[2])
    try:
        return _unguarded(conn, principal, nonce, note_id, expires_at)
    finally:
        if path is not None:
            os.close(fd)
            os.unlink(path)
"""
)
RACES = ("two processes race", "six racing processes")


def raced(scratch: Path, sandbox: str) -> dict[str, Outcome]:
    argv = worker_argv(memory=2 * 1024**3, cpu=60, nproc=64, fsize=64 * 1024**2, sandbox=sandbox)
    exercise = EXERCISES["ex1"]
    checks = tuple(c for c in (*exercise.checks, *GRADED["ex1"].checks()) if c.name in RACES)
    runner = WorkerRunner([SETUP, MUTEX], argv=argv, scratch=scratch)
    try:
        defined = runner.start()
        report = run_checks(exercise, checks, runner, defined.__contains__, quick(scratch))
    finally:
        runner.close()
    assert_no_check_failed_itself(report)
    return {r.name: r.outcome for r in report.results if r.name in RACES}


def test_racers_find_no_place_to_share_a_mutex(scratch: Path) -> None:
    # The grader's own confinement of the worker: its uid, Landlock (read-write on its
    # folder only), so a mutex could only live beside the database, and cannot.
    assert raced(scratch, "required") == dict.fromkeys(RACES, Outcome.INCORRECT)
    for folder in ("/tmp", "/dev/shm", "/var/tmp"):
        assert not os.path.lexists(os.path.join(folder, "labkit-race.mutex"))


def test_control_a_shared_writable_folder_lets_the_mutex_win_the_races(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)  # writable by the worker's user, and no Landlock
    assert raced(tmp_path, "off") == dict.fromkeys(RACES, Outcome.PASSED)
    assert not os.path.lexists(tmp_path / "labkit-race.mutex")
