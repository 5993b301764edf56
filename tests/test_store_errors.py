"""Every store error is the store error: -32001 (HTTP 503 with Retry-After), never an empty
listing ("no note found"), an internal error or a replay; and nothing is consumed by it.

Faults are injected through the stores' collaborators: the SQLite store's `connect` (a
connection that fails the way SQLite does when the process has no descriptors left, or the
disk fails) and the filesystem store's directory resolver (an `openat`/`open` that fails
with EMFILE, ENFILE or EIO). After each fault the very same request succeeds.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    CANCEL,
    DECLINE,
    KEY_A,
    CountingNonces,
    accept,
    call,
    error_of,
    offered,
    state_of,
    structured,
)

from labkit.clock import FakeClock
from labkit.deployment import create_server
from labkit.errors import SERVER_BUSY, http_status
from labkit.fsroot import Parts, WalkResolver
from labkit.notes_delete import STORE_UNAVAILABLE_ERROR
from labkit.notes_export import MemoryReportService
from labkit.scope import AllowlistAuthorizer
from labkit.server import Server
from labkit.state import KeyRing
from labkit.stores.consent import MemoryConsentStore
from labkit.stores.filesystem import FilesystemNoteStore
from labkit.stores.sqlite import SqliteStore
from labkit.url_mode import ConsentService

UNAVAILABLE = {"code": SERVER_BUSY, "message": STORE_UNAVAILABLE_ERROR}
ERRNOS = [errno.EMFILE, errno.ENFILE, errno.EIO]
# How SQLite reports each: a spent descriptor table fails the open of a file
# ("unable to open database file"); an I/O error is SQLITE_IOERR.
SQLITE_ERRORS = {
    errno.EMFILE: (sqlite3.SQLITE_CANTOPEN, "unable to open database file"),
    errno.ENFILE: (sqlite3.SQLITE_CANTOPEN, "unable to open database file"),
    errno.EIO: (sqlite3.SQLITE_IOERR, "disk I/O error"),
}


class Faults:
    """The errno the stores' collaborators fail with while set; None means healthy."""

    def __init__(self) -> None:
        self.errno: int | None = None
        self.hits = 0

    def check(self) -> None:
        if self.errno is not None:
            self.hits += 1
            raise OSError(self.errno, os.strerror(self.errno))

    def check_sqlite(self) -> None:
        if self.errno is not None:
            self.hits += 1
            code, text = SQLITE_ERRORS[self.errno]
            error = sqlite3.OperationalError(text)
            error.sqlite_errorcode = code  # type: ignore[attr-defined]
            raise error


def faulty_connect(faults: Faults) -> Any:
    class Connection(sqlite3.Connection):
        def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
            if sql != "ROLLBACK":  # a rollback is what SQLite itself still manages
                faults.check_sqlite()
            return super().execute(sql, parameters)

    def connect(path: str, timeout: float) -> sqlite3.Connection:
        faults.check_sqlite()
        return sqlite3.connect(
            path,
            timeout=timeout,
            isolation_level=None,
            check_same_thread=False,
            factory=Connection,
        )

    return connect


class FaultyResolver:
    """The walk resolver, failing every directory open while a fault is set."""

    name = "faulty-walk"

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self.inner = WalkResolver()

    def open_dir(self, root_fd: int, root_dev: int, parts: Parts) -> int:
        self.faults.check()
        return self.inner.open_dir(root_fd, root_dev, parts)


@dataclass
class Deployment:
    server: Server
    faults: Faults
    workspace: str
    notes: Any

    def ask(self, id: int = 1) -> dict[str, Any]:
        return call(self.server, id, arguments={"workspaceUri": self.workspace, "title": "TPS"})

    def retry(self, id: int, state: str, responses: Any) -> dict[str, Any]:
        arguments = {"workspaceUri": self.workspace, "title": "TPS"}
        return call(self.server, id, arguments=arguments, state=state, responses=responses)


@pytest.fixture(params=["sqlite", "filesystem"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    faults = Faults()
    clock = FakeClock()
    replay = SqliteStore(tmp_path / "replay.db", clock=clock, connect=faulty_connect(faults))
    notes: Any
    if request.param == "sqlite":
        workspace = "file:///work/notes"
        notes = replay  # one file: notes and claims in one transaction
        notes.add_many(
            [
                ("note-3", f"{workspace}/tps-2023.md", "TPS report 2023"),
                ("note-7", f"{workspace}/tps-2024.md", "TPS report 2024"),
            ]
        )
    else:
        ws = tmp_path / "notes"
        ws.mkdir()
        (ws / "tps-2023.md").write_text("# TPS report 2023\n")
        (ws / "tps-2024.md").write_text("# TPS report 2024\n")
        workspace = f"file://{ws}"
        notes = FilesystemNoteStore(
            [workspace], journal_path=tmp_path / "journal.db", resolver=FaultyResolver(faults)
        )
    server = create_server(
        keys=KeyRing([KEY_A]),
        notes=notes,
        replay=replay,
        authorizer=AllowlistAuthorizer({"alice": [workspace]}),
        clock=clock,
        nonce_source=CountingNonces(),
    )
    yield Deployment(server, faults, workspace, notes)
    if notes is not replay:
        notes.close()
    replay.close()


def titles(deployment: Deployment) -> list[str]:
    return sorted(title for _, title in offered(deployment.ask(99)))


@pytest.mark.parametrize("code", ERRNOS, ids=errno.errorcode.get)
def test_a_listing_that_fails_is_the_store_error_not_no_match(
    deployment: Deployment, code: int
) -> None:
    deployment.faults.errno = code
    error = error_of(deployment.ask())
    assert error == UNAVAILABLE  # not {"status": "no_match"}: the notes are there
    assert http_status(error["code"]) == 503
    assert deployment.faults.hits > 0
    deployment.faults.errno = None
    assert titles(deployment) == ["TPS report 2023", "TPS report 2024"]


@pytest.mark.parametrize("code", ERRNOS, ids=errno.errorcode.get)
@pytest.mark.parametrize(
    ("answer", "outcome"),
    [("accept", "deleted"), ("decline", "declined"), ("cancel", "cancelled")],
)
def test_a_retry_that_fails_consumes_nothing_and_the_same_retry_then_works(
    deployment: Deployment, code: int, answer: str, outcome: str
) -> None:
    first = deployment.ask()
    state = state_of(first)
    note_id = offered(first)[0][0]
    responses = {"accept": accept(note_id), "decline": DECLINE, "cancel": CANCEL}[answer]
    deployment.faults.errno = code
    assert error_of(deployment.retry(2, state, responses)) == UNAVAILABLE
    deployment.faults.errno = None
    assert titles(deployment) == ["TPS report 2023", "TPS report 2024"]  # nothing deleted
    # Nothing was consumed: the very same answer goes through now.
    assert structured(deployment.retry(3, state, responses))["status"] == outcome
    remaining = (
        ["TPS report 2024"] if outcome == "deleted" else ["TPS report 2023", "TPS report 2024"]
    )
    assert titles(deployment) == remaining


def test_a_connection_that_cannot_be_opened_in_a_new_thread_is_the_store_error(
    tmp_path: Path,
) -> None:
    # Descriptors spent: the worker thread's first connection cannot open the file.
    faults = Faults()
    store = SqliteStore(tmp_path / "s.db", connect=faulty_connect(faults))
    store.add("n1", "file:///work/notes/a.md", "TPS a")
    faults.errno = errno.EMFILE
    server = create_server(
        keys=KeyRing([KEY_A]),
        notes=store,
        replay=store,
        authorizer=AllowlistAuthorizer({"alice": ["file:///work/notes"]}),
        nonce_source=CountingNonces(),
    )
    answers: list[dict[str, Any]] = []
    arguments = {"workspaceUri": "file:///work/notes", "title": "TPS"}
    worker = threading.Thread(target=lambda: answers.append(call(server, 1, arguments=arguments)))
    worker.start()
    worker.join()
    assert error_of(answers[0]) == UNAVAILABLE
    faults.errno = None
    assert store.ids() == ["n1"]
    store.close()


def test_a_lasting_condition_is_logged_once_and_its_end_once_a_write_succeeds(
    deployment: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="labkit")
    caplog.clear()
    state = state_of(deployment.ask(1))
    deployment.faults.errno = errno.EIO
    for id in range(10):
        assert error_of(deployment.ask(id)) == UNAVAILABLE
    deployment.faults.errno = None

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if "store " in r.getMessage()]

    # Reads succeed again, but only a write ends the condition (hysteresis): no flapping.
    deployment.ask(20)
    deployment.ask(21)
    assert len(lines()) == 1, lines()
    assert lines()[0].startswith("store unavailable: ")
    assert "I/O error" in lines()[0] or "Input/output error" in lines()[0]
    note_id = offered(deployment.ask(22))[0][0]
    assert structured(deployment.retry(23, state, accept(note_id)))["status"] == "deleted"
    assert len(lines()) == 2, lines()
    assert lines()[1].startswith("store available again")
    assert not any(r.exc_info for r in caplog.records)  # no traceback per request


@pytest.mark.parametrize("code", ERRNOS, ids=errno.errorcode.get)
def test_an_export_whose_store_fails_is_the_store_error_not_an_internal_one(
    deployment: Deployment, code: int
) -> None:
    consent = ConsentService(MemoryConsentStore(), KeyRing([KEY_A]), base_url="http://x")
    link = consent.issue("alice", "digest", "notes_export", deployment.workspace)
    consent.grant(link.id, "alice")  # already connected: the export reads the notes at once
    reports = MemoryReportService()
    server = create_server(
        keys=KeyRing([KEY_A]),
        notes=deployment.notes,
        replay=deployment.server.tools["notes_delete"].replay,  # type: ignore[attr-defined]
        authorizer=AllowlistAuthorizer({"alice": [deployment.workspace]}),
        nonce_source=CountingNonces(),
        consent=consent,
        reports=reports,
    )
    arguments = {"workspaceUri": deployment.workspace}
    deployment.faults.errno = code
    assert error_of(call(server, 1, "notes_export", arguments)) == UNAVAILABLE
    assert reports.published == []  # never an empty export
    deployment.faults.errno = None
    exported = structured(call(server, 2, "notes_export", arguments))
    assert exported["status"] == "exported" and len(exported["noteIds"]) == 2
