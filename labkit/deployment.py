"""Assembling a server from its collaborators, and the demo deployment of the lesson.

Owns: `create_server` (production defaults for everything but the secret key ring) and
`demo_deployment` (principals alice and mallory, the TPS reports, an ephemeral key).
`notes_export` is registered when a consent service is given (its page must be served).
Must not import a transport, the course toolkit or the grader.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from labkit.clock import Clock, system_clock
from labkit.notes_delete import MAX_CANDIDATES, NotesDelete
from labkit.notes_export import MemoryReportService, NotesExport, ReportService
from labkit.scope import AllowlistAuthorizer, Authorizer
from labkit.server import Server, Tool
from labkit.state import DEFAULT_TTL_SECONDS, KeyRing, StateSigner
from labkit.stores import NoteStore, ReplayStore
from labkit.stores.consent import MemoryConsentStore
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.url_mode import ConsentService

DEMO_ALLOWLIST = {
    "alice": ["file:///work/notes"],
    "mallory": ["file:///work/mallory"],
}
DEMO_NOTES = [
    ("note-3", "file:///work/notes/tps-report-2023.md", "TPS report 2023"),
    ("note-7", "file:///work/notes/tps-report-2024.md", "TPS report 2024"),
    ("note-14", "file:///work/notes/tps-report-2025.md", "TPS report 2025"),
    ("note-99", "file:///work/notes/shopping-list.md", "shopping list"),
    ("note-100", "file:///work/private/outside.md", "outside root"),
]


def create_server(
    *,
    keys: KeyRing,
    notes: NoteStore | None = None,
    replay: ReplayStore | None = None,
    authorizer: Authorizer | None = None,
    clock: Clock = system_clock,
    nonce_source: Callable[[], bytes] = lambda: secrets.token_bytes(16),
    audience: str = "labkit",
    state_ttl_seconds: float = DEFAULT_TTL_SECONDS,
    max_candidates: int = MAX_CANDIDATES,
    consent: ConsentService | None = None,
    reports: ReportService | None = None,
) -> Server:
    """A labkit server. The key ring has no default: a signing secret is never a constant.
    Without an authorizer nobody may use any workspace (deny by default). With `consent`,
    `notes_export` is offered too (publishing to `reports`, a memory stand-in by default)."""
    notes = notes if notes is not None else MemoryNoteStore()
    replay = replay if replay is not None else MemoryReplayStore(clock=clock)
    authorizer = authorizer if authorizer is not None else AllowlistAuthorizer({})
    signer = StateSigner(keys, audience=audience, clock=clock, ttl_seconds=state_ttl_seconds)
    tools: list[Tool] = [
        NotesDelete(
            notes=notes,
            replay=replay,
            authorizer=authorizer,
            signer=signer,
            nonce_source=nonce_source,
            max_candidates=max_candidates,
        )
    ]
    if consent is not None:
        tools.append(
            NotesExport(
                notes=notes,
                replay=replay,
                authorizer=authorizer,
                signer=signer,
                consent=consent,
                reports=reports if reports is not None else MemoryReportService(),
                nonce_source=nonce_source,
            )
        )
    return Server(tools)


@dataclass
class Deployment:
    server: Server
    notes: MemoryNoteStore
    replay: MemoryReplayStore
    authorizer: AllowlistAuthorizer
    keys: KeyRing
    consent: ConsentService | None = None
    reports: MemoryReportService = field(default_factory=MemoryReportService)


def demo_notes() -> MemoryNoteStore:
    notes = MemoryNoteStore()
    for note_id, uri, title in DEMO_NOTES:
        notes.add(note_id, uri, title)
    return notes


def demo_deployment(
    *,
    clock: Clock = system_clock,
    keys: KeyRing | None = None,
    notes: MemoryNoteStore | None = None,
    replay: MemoryReplayStore | None = None,
) -> Deployment:
    """The lesson's deployment: alice may use file:///work/notes, mallory file:///work/mallory."""
    keys = keys if keys is not None else KeyRing.ephemeral()
    notes = notes if notes is not None else demo_notes()
    replay = replay if replay is not None else MemoryReplayStore(clock=clock)
    authorizer = AllowlistAuthorizer(DEMO_ALLOWLIST)
    # The consent page's address is known once its listener is bound (`consent.base_url`).
    consent = ConsentService(MemoryConsentStore(), keys, clock=clock)
    reports = MemoryReportService()
    server = create_server(
        keys=keys,
        notes=notes,
        replay=replay,
        authorizer=authorizer,
        clock=clock,
        consent=consent,
        reports=reports,
    )
    return Deployment(server, notes, replay, authorizer, keys, consent, reports)
