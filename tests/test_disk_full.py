"""A full disk is a transient store error, on a real small tmpfs under a real `labkit serve`.

Filled after start-up: every accepted retry answers -32001 with HTTP 503 and Retry-After,
reads keep being served, nothing is consumed, the log has ONE line for the condition (no
traceback per request), and once space returns the very same retry deletes the note.
Started on a full disk: with the database's shared-memory file still there (a crash) it
serves reads; after a clean stop (SQLite must create that file again) it refuses, naming the
real cause, and leaves no stray -wal/-shm files.

Notes on the full disk and claims on another (two SQLite files, or filesystem notes with a
SQLite replay store), with tight replay bounds: each failed accept leaves a pending claim;
while the disk is full every accept, decline and cancel of those states, and another
principal's decline, answer -32001 (never "used", never "too many pending"), reads between
them never log an end of the condition; once space returns the background sweep resolves the
claims with no request, one line says the store is available again, and every state, and the
other principal, is answered.

The tests run as root (CI and the development container) so they can mount the tmpfs.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_harness import BOB_TOKEN, Served, ask, outcome, retry_message, write_config

from labkit.notes_delete import STORE_UNAVAILABLE_ERROR
from labkit.stores.sqlite import SqliteStore

WORKSPACE = "file:///work/notes"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(disk: Path) -> Path:
    """Fill the filesystem to the last byte; returns the file to delete to free it."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    assert os.statvfs(disk).f_bavail == 0
    return filler


@pytest.fixture(params=["one file", "two files"])
def served(request: pytest.FixtureRequest, disk: Path, tmp_path: Path) -> Iterator[Served]:
    notes_db = disk / "notes.db"
    replay_db = notes_db if request.param == "one file" else disk / "replay.db"
    with SqliteStore(notes_db) as seed:
        seed.add_many(
            [("n1", f"{WORKSPACE}/a.md", "Report A"), ("n2", f"{WORKSPACE}/b.md", "Report B")]
        )
    SqliteStore(replay_db).close()
    config = write_config(tmp_path, f"sqlite://{notes_db}", f"sqlite://{replay_db}", WORKSPACE, "x")
    server = Served(config, tmp_path / "server.log")
    yield server
    server.stop()


def claims(disk: Path) -> list[tuple[str, str | None]]:
    rows: list[tuple[str, str | None]] = []
    for name in ("notes.db", "replay.db"):
        if (disk / name).exists():
            with sqlite3.connect(f"file:{disk / name}?mode=ro", uri=True) as conn:
                rows += conn.execute("SELECT nonce, note_id FROM claims").fetchall()
    return rows


def test_a_disk_filled_while_serving_is_busy_consumes_nothing_and_logs_once(
    served: Served, disk: Path
) -> None:
    served.start()
    with httpx.Client(timeout=30) as http:
        note_id, state = ask(served, http, WORKSPACE, "Report A")
        retry = retry_message(WORKSPACE, "Report A", state, note_id, "accept")
        filler = fill(disk)
        for _ in range(20):
            response = served.post(http, retry)
            assert response.status_code == 503
            assert response.headers["retry-after"] == "1"
            assert response.json()["error"] == {"code": -32001, "message": STORE_UNAVAILABLE_ERROR}
        # Reads are served on the full disk.
        assert ask(served, http, WORKSPACE, "Report B")[0] == "n2"
        assert claims(disk) == []  # nothing consumed
        log = served.log()
        lines = [line for line in log.splitlines() if "store unavailable" in line]
        assert len(lines) == 1, log
        assert "no space left on device" in lines[0]
        assert "Traceback" not in log
        filler.unlink()
        assert outcome(served.post(http, retry)) == "deleted"
        assert len(claims(disk)) == 1  # exactly one nonce consumed, by that deletion
        assert "store available again" in served.log()


def test_started_on_a_full_disk_it_serves_reads_or_refuses_naming_the_cause(
    served: Served, disk: Path
) -> None:
    served.start()
    with httpx.Client(timeout=30) as http:
        note_id, state = ask(served, http, WORKSPACE, "Report A")
    served.kill()  # a crash: the -shm file stays, so SQLite needs no new space to read
    filler = fill(disk)
    served.start()
    with httpx.Client(timeout=30) as http:
        assert ask(served, http, WORKSPACE, "Report B")[0] == "n2"
        retry = retry_message(WORKSPACE, "Report A", state, note_id, "accept")
        assert served.post(http, retry).status_code == 503
    filler.unlink()
    served.stop()  # clean: the last connection removes -wal and -shm
    before = sorted(p.name for p in disk.iterdir())
    assert not any(name.endswith(("-wal", "-shm")) for name in before)
    filler = fill(disk)
    with pytest.raises(AssertionError, match="exited 1") as refused:
        served.start()
    message = str(refused.value)
    assert "no space left on device" in message
    assert "check that its directory exists" not in message.lower()
    filler.unlink()
    assert sorted(p.name for p in disk.iterdir()) == before  # no stray -wal or -shm files
    served.start()  # space is back: it serves again
    with httpx.Client(timeout=30) as http:
        assert outcome(served.post(http, retry)) == "deleted"


# -- notes on the full disk, claims elsewhere: pending claims never wedge -----------------------

BOUND = 6  # replay_capacity and replay_per_principal
SWEPT_WITHIN = 30.0  # seconds; the sweep runs every 5


@pytest.fixture(params=["sqlite notes", "filesystem notes"])
def split(
    request: pytest.FixtureRequest, disk: Path, tmp_path: Path
) -> Iterator[tuple[Served, str, Path]]:
    """A server whose notes are on the small disk and whose claims are not; yields it, its
    workspace and the replay database."""
    (tmp_path / "state").mkdir()
    replay_db = tmp_path / "state" / "replay.db"
    if request.param == "sqlite notes":
        notes_db = disk / "notes.db"
        with SqliteStore(notes_db) as seed:
            seed.add_many((f"n{i}", f"{WORKSPACE}/{i}.md", f"Report {i}") for i in range(10))
        notes, workspace = f"sqlite://{notes_db}", WORKSPACE
    else:
        (disk / "notes").mkdir()
        for i in range(10):
            (disk / "notes" / f"{i}.md").write_text(f"# Report {i}\n")
        notes, workspace = f"filesystem://{disk / 'intents.db'}", f"file://{disk / 'notes'}"
    bounds = f"replay_capacity = {BOUND}\nreplay_per_principal = {BOUND}"
    # Confined: the background sweep runs in a thread started after the sandbox, and must
    # still reach both stores.
    config = write_config(
        tmp_path, notes, f"sqlite://{replay_db}", workspace, "x", bounds, sandbox="required"
    )
    server = Served(config, tmp_path / "server.log")
    yield server, workspace, replay_db
    server.stop()


def pending_claims(replay_db: Path) -> int:
    with sqlite3.connect(f"file:{replay_db}?mode=ro", uri=True) as conn:
        return int(
            conn.execute("SELECT count(*) FROM claims WHERE attempt IS NOT NULL").fetchone()[0]
        )


def test_claims_left_by_a_full_disk_never_wedge_and_are_swept_once_space_returns(
    split: tuple[Served, str, Path], disk: Path
) -> None:
    served, workspace, replay_db = split
    served.start()
    with httpx.Client(timeout=60) as http:
        states = [ask(served, http, workspace, f"Report {i}") for i in range(BOUND + 2)]

        def retry(i: int, action: str) -> str:
            note_id, state = states[i]
            message = retry_message(workspace, f"Report {i}", state, note_id, action)
            return outcome(served.post(http, message))

        bob_id, bob_state = ask(served, http, workspace, "Report 9", BOB_TOKEN)
        bob_decline = retry_message(workspace, "Report 9", bob_state, bob_id, "decline")
        filler = fill(disk)
        for i in range(BOUND):
            assert retry(i, "accept") == "busy"
            assert ask(served, http, workspace, f"Report {i}")[0]  # a read in between
        assert pending_claims(replay_db) == BOUND  # alice's share, and the whole store
        # While the disk is full each of these needs the notes to settle a claim first: the
        # store's failure, the truth ("try again"); never "used", never "too many pending".
        assert retry(BOUND, "accept") == "busy"
        assert retry(0, "decline") == "busy"
        assert retry(1, "cancel") == "busy"
        assert outcome(served.post(http, bob_decline, BOB_TOKEN)) == "busy"
        lines = [line for line in served.log().splitlines() if "store unavailable" in line]
        assert len(lines) == 1, served.log()
        assert "available again" not in served.log()  # the reads ended nothing
        filler.unlink()
        # No request: the background sweep resolves every claim (nothing was deleted).
        deadline = time.monotonic() + SWEPT_WITHIN
        while pending_claims(replay_db) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pending_claims(replay_db) == 0
        log = served.log()
        assert log.count("store available again") == 1, log
        assert log.count("holder gone") == BOUND, log
        assert retry(0, "decline") == "declined"
        assert retry(1, "cancel") == "cancelled"
        assert retry(2, "accept") == "deleted"
        assert retry(BOUND, "accept") == "deleted"
        assert outcome(served.post(http, bob_decline, BOB_TOKEN)) == "declined"
    assert "Too many pending" not in served.log()
    assert "sandbox applied (mode required" in served.log()
