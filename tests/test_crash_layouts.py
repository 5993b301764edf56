"""Crash safety of every two-step store layout, with real `labkit serve` processes and SIGKILL.

For each layout where the claim and the deletion cannot share one transaction (two SQLite
files, SQLite notes with PostgreSQL claims, filesystem notes with SQLite or PostgreSQL claims):

- deterministically between the claim and the deletion: the notes database (or the journal)
  is write-locked from outside, so the accepted retry is stuck after its claim committed
  pending; the server is killed, the lock released, the server restarted, and the same retry
  must then delete the note (nothing was deleted, so the claim must not stay consumed);
- deterministically between the deletion and the settling of the claim: the replay store is
  locked too, the notes lock released, the note disappears, the server is killed; after the
  restart the same retry must answer "already used" (the note really was deleted);
- at random moments while four clients drive accepted retries and declines.

After every run: no claim is left pending, every deleted note has exactly one consumed
claim naming it, every kept note none, and every retry re-sent after a restart answered what
really happened.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from helpers import KEY_A
from serve_harness import Served, ask, outcome, retry_message, write_config
from store_backends import require_postgres, unique_schema

from labkit.stores import Confirmation, Deletion, StoreUnavailable, commit_deletion
from labkit.stores.filesystem import FilesystemNoteStore
from labkit.stores.sqlite import SqliteStore

NOTES = 240
RANDOM_KILLS = 1
CLIENTS = 4
DATABASE_WORKSPACE = "file:///work/notes"


def title(i: int) -> str:
    return f"Note {i:04d}"


@dataclass
class Layout:
    """One deployment on disk: its specs, and how to look at its notes and claims from
    outside the server (as an operator with the files and the database would)."""

    name: str
    notes_spec: str
    replay_spec: str
    workspace: str
    schema: str
    present: Callable[[], set[str]]  # titles of the notes still there
    claims: Callable[[], list[tuple[str | None, str | None]]]  # (note_id, attempt) per claim
    lock_notes: Callable[[], Any]  # a context manager holding the notes' write lock
    lock_claims: Callable[[], Any]  # ... the replay store's lock on pending claims
    cleanup: list[Callable[[], None]] = field(default_factory=list)


@contextmanager
def sqlite_write_lock(path: Path) -> Iterator[None]:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def sqlite_claims(path: Path) -> list[tuple[str | None, str | None]]:
    with sqlite3.connect(path, timeout=30) as conn:
        return list(conn.execute("SELECT note_id, attempt FROM claims"))


def build_layout(kind: str, tmp_path: Path) -> Layout:
    notes_kind, replay_kind = kind.split("+")
    (tmp_path / "state").mkdir()
    schema = unique_schema()
    cleanup: list[Callable[[], None]] = []
    if notes_kind == "sqlite":
        notes_db = tmp_path / "notes.db"
        with SqliteStore(notes_db) as seed:
            seed.add_many(
                (f"note-{i}", f"{DATABASE_WORKSPACE}/n{i}.md", title(i)) for i in range(NOTES)
            )
        notes_spec, workspace = f"sqlite://{notes_db}", DATABASE_WORKSPACE

        def present() -> set[str]:
            with sqlite3.connect(notes_db, timeout=30) as conn:
                return {row[0] for row in conn.execute("SELECT title FROM notes")}

        lock_notes: Callable[[], Any] = lambda: sqlite_write_lock(notes_db)  # noqa: E731
    else:
        ws = tmp_path / "notes"
        ws.mkdir()
        for i in range(NOTES):
            (ws / f"n{i:04d}.md").write_text(f"# {title(i)}\n")
        journal = tmp_path / "state" / "intents.db"
        with FilesystemNoteStore([f"file://{ws}"], journal_path=journal):
            pass  # creates the journal, so it can be locked before the first start
        notes_spec, workspace = f"filesystem://{journal}", f"file://{ws}"

        def present() -> set[str]:
            return {title(int(p.stem[1:])) for p in ws.glob("n*.md")}

        lock_notes = lambda: sqlite_write_lock(journal)  # noqa: E731
    if replay_kind == "sqlite":
        replay_db = tmp_path / "state" / "replay.db"
        SqliteStore(replay_db).close()
        replay_spec = f"sqlite://{replay_db}"
        claims: Callable[[], list[tuple[str | None, str | None]]] = lambda: sqlite_claims(replay_db)  # noqa: E731
        lock_claims: Callable[[], Any] = lambda: sqlite_write_lock(replay_db)  # noqa: E731
    else:
        dsn = require_postgres()
        replay_spec = dsn

        def claims() -> list[tuple[str | None, str | None]]:
            with psycopg.connect(dsn, autocommit=True) as conn:
                return list(conn.execute(f"SELECT note_id, attempt FROM {schema}.claims"))

        @contextmanager
        def lock_claims() -> Iterator[None]:
            # The pending claim's row, locked: settling it waits until this ends.
            with psycopg.connect(dsn) as conn:
                conn.execute(f"SELECT 1 FROM {schema}.claims WHERE attempt IS NOT NULL FOR UPDATE")
                yield
                conn.rollback()

        def drop() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

        cleanup.append(drop)
    return Layout(
        kind,
        notes_spec,
        replay_spec,
        workspace,
        schema,
        present,
        claims,
        lock_notes,
        lock_claims,
        cleanup,
    )


LAYOUTS = ["sqlite+sqlite", "sqlite+postgres", "filesystem+sqlite", "filesystem+postgres"]


@pytest.fixture(params=LAYOUTS)
def layout(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Layout]:
    built = build_layout(request.param, tmp_path)
    yield built
    for step in built.cleanup:
        step()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def pending(layout: Layout) -> list[tuple[str | None, str | None]]:
    return [c for c in layout.claims() if c[1] is not None]


def check_invariants(layout: Layout, ids: dict[str, str]) -> None:
    """No pending claim; a deleted note has exactly one consumed claim, a kept note none."""
    claims = layout.claims()
    assert [c for c in claims if c[1] is not None] == []
    present = layout.present()
    for note_title, note_id in ids.items():
        consumed = sum(1 for c in claims if c[0] == note_id)
        assert consumed == (0 if note_title in present else 1), (note_title, consumed)


def test_a_kill_between_the_steps_is_resolved_and_every_retry_tells_the_truth(
    layout: Layout, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path, layout.notes_spec, layout.replay_spec, layout.workspace, layout.schema
    )
    served = Served(config, tmp_path / "server.log")
    ids: dict[str, str] = {}
    starts: list[float] = [served.start()]
    try:
        with httpx.Client(timeout=60) as http:
            # 1. Killed after the claim, before the deletion.
            note_id, state = ask(served, http, layout.workspace, title(0))
            ids[title(0)] = note_id
            message = retry_message(layout.workspace, title(0), state, note_id, "accept")
            with layout.lock_notes():
                sender = threading.Thread(target=lambda: _ignore(served.post, http, message))
                sender.start()
                wait_for(lambda: len(pending(layout)) == 1, "the pending claim")
                served.kill()
            sender.join()
            assert title(0) in layout.present()
            starts.append(served.start())
            assert pending(layout) == []  # released at start-up: nothing was deleted
            assert outcome(served.post(http, message)) == "deleted"
            assert title(0) not in layout.present()
            check_invariants(layout, ids)

            # 2. Killed after the deletion, before the claim is settled.
            note_id, state = ask(served, http, layout.workspace, title(1))
            ids[title(1)] = note_id
            message = retry_message(layout.workspace, title(1), state, note_id, "accept")
            with layout.lock_notes():
                sender = threading.Thread(target=lambda: _ignore(served.post, http, message))
                sender.start()
                wait_for(lambda: len(pending(layout)) == 1, "the pending claim")
                claims_lock = layout.lock_claims()
                claims_lock.__enter__()
            try:
                wait_for(lambda: title(1) not in layout.present(), "the deletion")
                served.kill()
            finally:
                claims_lock.__exit__(None, None, None)
            sender.join()
            starts.append(served.start())
            assert pending(layout) == []  # completed at start-up: the note was deleted
            assert outcome(served.post(http, message)) == "used"
            check_invariants(layout, ids)

            # 3. Killed at random moments under load.
            flows = random_kills(served, http, layout, ids, starts)
    finally:
        served.stop()
    check_invariants(layout, ids)
    assert max(starts) < 30
    print(f"{layout.name}: {2 + RANDOM_KILLS} kills, {flows} flows, starts {starts}")


def _ignore(post: Callable[..., httpx.Response], *args: Any) -> None:
    with contextlib.suppress(httpx.HTTPError):  # the server was killed under this request
        post(*args)


def random_kills(
    served: Served, http: httpx.Client, layout: Layout, ids: dict[str, str], starts: list[float]
) -> int:
    rng = random.Random(KEY_A)
    next_note = iter(range(2, NOTES))
    lock = threading.Lock()
    unanswered: list[tuple[str, Any]] = []  # (title, retry) sent when the server died
    answers: dict[str, str] = {}
    flows = 0
    cut = 0

    def client(stop: threading.Event) -> None:
        nonlocal flows
        while not stop.is_set():
            with lock:
                i = next(next_note, None)
            if i is None:
                return
            try:
                note_id, state = ask(served, http, layout.workspace, title(i))
            except (httpx.HTTPError, KeyError, ValueError):
                return  # killed before the form: nothing to retry
            action = "decline" if i % 4 == 0 else "accept"
            message = retry_message(layout.workspace, title(i), state, note_id, action)
            with lock:
                ids[title(i)] = note_id
            try:
                answer = outcome(served.post(http, message))
            except (httpx.HTTPError, ValueError):
                with lock:
                    unanswered.append((title(i), message))
                return
            with lock:
                answers[title(i)] = answer
                flows += 1

    for _ in range(RANDOM_KILLS):
        stop = threading.Event()
        workers = [threading.Thread(target=client, args=(stop,)) for _ in range(CLIENTS)]
        for worker in workers:
            worker.start()
        time.sleep(rng.uniform(0.4, 1.2))
        served.kill()
        stop.set()
        for worker in workers:
            worker.join()
        starts.append(served.start())
        assert pending(layout) == []
        # Every retry the kill cut off, sent again: it answers what really happened.
        cut += len(unanswered)
        for note_title, message in unanswered:
            answer = outcome(served.post(http, message))
            gone = note_title not in layout.present()
            action = message["params"]["inputResponses"]["delete_choice"]["action"]
            if action == "accept":
                assert answer in ("deleted", "used") and gone, (note_title, answer)
            else:
                assert answer in ("declined", "used") and not gone, (note_title, answer)
            answers[note_title] = answer
            flows += 1
        unanswered.clear()
    for note_title, answer in answers.items():
        assert answer in ("deleted", "declined", "used"), (note_title, answer)
        assert (note_title in layout.present()) == (
            answer == "declined" or (answer == "used" and int(note_title.split()[1]) % 4 == 0)
        ), (note_title, answer)
    print(f"{layout.name}: {cut} retries cut off by a random kill, each re-sent")
    return flows


# -- concurrent requests of one state: nothing wedges, every answer is the truth -------------

STATES = 30
ACCEPTS = 3


@contextmanager
def serving(layout: Layout, tmp_path: Path) -> Iterator[Served]:
    """A started server on the layout, stopped at the end."""
    config = write_config(
        tmp_path, layout.notes_spec, layout.replay_spec, layout.workspace, layout.schema
    )
    served = Served(config, tmp_path / "server.log")
    served.start()
    try:
        yield served
    finally:
        served.stop()


def test_concurrent_accepts_of_one_state_delete_once_and_all_tell_the_truth(
    layout: Layout, tmp_path: Path
) -> None:
    ids: dict[str, str] = {}
    violations: list[tuple[str, list[str], bool]] = []
    with (
        serving(layout, tmp_path) as served,
        httpx.Client(timeout=60) as http,
        ThreadPoolExecutor(CLIENTS * 2) as pool,
    ):
        for i in range(STATES):
            note_id, state = ask(served, http, layout.workspace, title(i))
            ids[title(i)] = note_id
            message = retry_message(layout.workspace, title(i), state, note_id, "accept")
            # The same accept sent ACCEPTS times at once, as a client retrying on a timeout or
            # a double click would.
            sent = [pool.submit(served.post, http, message) for _ in range(ACCEPTS)]
            answers = sorted(outcome(f.result()) for f in sent)
            gone = title(i) not in layout.present()
            # Every answer is "deleted" (this request, or one it waited for, deleted the note)
            # or "used" (it came once the deletion was over); never "used" for a deletion that
            # did not happen, never a refusal that wedges the state.
            if not gone or "deleted" not in answers or set(answers) - {"deleted", "used"}:
                violations.append((title(i), answers, gone))
            assert outcome(served.post(http, message)) == "used"
        log = served.log()
    check_invariants(layout, ids)
    assert violations == []
    assert "holder gone" not in log  # no claim of a live attempt was ever recovered
    print(f"{layout.name}: {STATES} states x {ACCEPTS} concurrent accepts, 0 violations")


def test_a_parked_accept_is_waited_for_never_recovered_and_its_state_answers_the_truth(
    layout: Layout, tmp_path: Path
) -> None:
    with (
        serving(layout, tmp_path) as served,
        httpx.Client(timeout=60) as http,
        ThreadPoolExecutor(4) as pool,
    ):
        note_id, state = ask(served, http, layout.workspace, title(0))
        messages = {
            action: retry_message(layout.workspace, title(0), state, note_id, action)
            for action in ("accept", "decline", "cancel")
        }
        with layout.lock_notes():
            # Parked between its claim and its deletion: the notes are write-locked.
            first = pool.submit(served.post, http, messages["accept"])
            wait_for(lambda: len(pending(layout)) == 1, "the pending claim")
            (parked,) = pending(layout)
            # The same state meanwhile: another accept, a decline, a cancel. Each waits for
            # the live holder, then says "in progress": none takes its claim.
            others = {a: pool.submit(served.post, http, m) for a, m in messages.items()}
            answers = {a: outcome(f.result()) for a, f in others.items()}
            assert answers == dict.fromkeys(messages, "in progress"), answers
            assert pending(layout) == [parked]
            assert title(0) in layout.present()
        assert outcome(first.result()) == "deleted"
        assert title(0) not in layout.present()
        for action, message in messages.items():
            assert outcome(served.post(http, message)) == "used", action
        log = served.log()
    check_invariants(layout, {title(0): note_id})
    assert "holder gone" not in log


def test_a_layout_that_cannot_recover_is_refused_at_start_naming_the_safe_ones(
    tmp_path: Path,
) -> None:
    notes_db = tmp_path / "notes.db"
    config = write_config(tmp_path, f"sqlite://{notes_db}", "memory", DATABASE_WORKSPACE, "x")
    served = Served(config, tmp_path / "server.log")
    with pytest.raises(AssertionError, match="exited 2"):
        served.start()
    log = served.log()
    assert "stores.replay" in log and "not crash-safe" in log
    assert "Safe layouts: notes and replay in one SQLite file" in log


# -- in process: the next retry of a state resolves its pending claim --------------------------


def failing_nth_write(failures: set[int]) -> Any:
    """A SQLite `connect` whose connections fail the n-th write transaction they begin (as
    a crash or an I/O error would at that point), counted across the store's connections."""
    begun = [0]

    class Connection(sqlite3.Connection):
        def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
            if sql == "BEGIN IMMEDIATE":
                begun[0] += 1
                if begun[0] in failures:
                    error = sqlite3.OperationalError("disk I/O error")
                    error.sqlite_errorcode = sqlite3.SQLITE_IOERR  # type: ignore[attr-defined]
                    raise error
            return super().execute(sql, parameters)

    def connect(path: str, timeout: float) -> sqlite3.Connection:
        return sqlite3.connect(
            path, timeout=timeout, isolation_level=None, check_same_thread=False, factory=Connection
        )

    return connect, begun


def confirmation(note_id: str) -> Confirmation:
    return Confirmation("alice", "nonce-1", 4e9, note_id, lambda live: True)


def test_a_retry_after_a_failed_deletion_releases_the_pending_claim_and_deletes(
    tmp_path: Path,
) -> None:
    notes = SqliteStore(tmp_path / "notes.db")
    notes.add("n1", "file:///work/notes/a.md", "A")
    replay = SqliteStore(tmp_path / "replay.db")
    # The same file (current schema: opened without writing) through a connection whose
    # first write, the deletion, fails.
    notes_failing, begun_failing = failing_nth_write({1})
    broken = SqliteStore(tmp_path / "notes.db", connect=notes_failing)
    with pytest.raises(StoreUnavailable):
        commit_deletion(broken, replay, confirmation("n1"))
    assert [t.note_id for t in replay.pending_claims()] == ["n1"]
    assert notes.ids() == ["n1"]
    # The same confirmation again: the pending claim is fenced and released, then it deletes.
    assert commit_deletion(notes, replay, confirmation("n1"))[0] is Deletion.DELETED
    assert replay.pending_claims() == [] and notes.ids() == []
    assert commit_deletion(notes, replay, confirmation("n1")) == (Deletion.USED, None)
    for store in (notes, replay, broken):
        store.close()
    assert begun_failing[0] == 1


def test_a_retry_after_a_deletion_whose_claim_was_not_settled_is_already_used(
    tmp_path: Path,
) -> None:
    notes = SqliteStore(tmp_path / "notes.db")
    notes.add("n1", "file:///work/notes/a.md", "A")
    notes.add("n2", "file:///work/notes/b.md", "B")
    failures: set[int] = set()
    replay_failing, begun = failing_nth_write(failures)
    replay = SqliteStore(tmp_path / "replay.db", connect=replay_failing)
    failures.add(begun[0] + 2)  # after the claim, the settling write fails
    with pytest.raises(StoreUnavailable):
        commit_deletion(notes, replay, confirmation("n1"))
    assert notes.ids() == ["n2"] and len(replay.pending_claims()) == 1
    # Even offered another note, the retry of this state tells the truth: already used.
    assert commit_deletion(notes, replay, confirmation("n2")) == (Deletion.USED, None)
    assert replay.pending_claims() == [] and notes.ids() == ["n2"]
    assert replay.live_claims() == 1
    notes.close()
    replay.close()
