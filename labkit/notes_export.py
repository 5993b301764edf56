"""The `notes_export` tool: publish a workspace's notes to the report service, after the user
connected that service out of band through URL-mode elicitation.

Owns: the descriptor, the argument and scope checks (the same three layers as `notes_delete`),
the first round (a one-time consent link in a `mode: "url"` entry, and a signed state bound to
it) and the retry (verify the state, read the server's own consent record, export exactly
once, or ask again). `accept` only means the user agreed to open the URL (docs/LESSON.md section 7):
the server's record decides. The credential goes from the consent record to the report service
and nowhere else: never into a result, a state, an error or a log line.

Pure: the note store, replay store, authorizer, signer, consent service and report service are
injected. Must not import a transport.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, Protocol

import orjson

from labkit.errors import INTERNAL_ERROR, INVALID_PARAMS, SERVER_BUSY, ProtocolError
from labkit.notes_delete import (
    OUTSIDE_ERROR,
    REFUSALS,
    STATE_ERROR,
    parse_workspace,
    store_error,
)
from labkit.scope import Authorizer, authorize, format_file_uri
from labkit.server import Request
from labkit.state import Binding, InvalidState, StateSigner, digest
from labkit.stores import HOLDER, Claim, Note, NoteStore, ReplayStore, StoreError
from labkit.url_mode import ConsentService, require_url_elicitation, url_elicitation

log = logging.getLogger("labkit.notes_export")

NAME: Final = "notes_export"
INPUT_KEY: Final = "connect_report_service"
PHASE: Final = "connect-report"
MAX_EXPORTED: Final = 1000
_ACTIONS: Final = ("accept", "decline", "cancel")

# Encoded once (see `notes_delete`): each `descriptor()` call is a fresh parse.
_DESCRIPTOR: Final = orjson.dumps(
    {
        "name": NAME,
        "title": "Export notes to the report service",
        "description": (
            "Publish the notes of an explicit workspace to the external report service. The "
            "first time, the user connects the report service in their browser (URL-mode "
            "elicitation); the connection is kept by the server, never by the client. "
            "Requires URL elicitation until the report service is connected."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "workspaceUri": {
                    "type": "string",
                    "description": "The workspace to export, as a file: URI "
                    "(for example file:///work/notes). It must be one the caller may use.",
                }
            },
            "required": ["workspaceUri"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "exported": {"type": "boolean"},
                "status": {"type": "string", "enum": ["exported", "declined", "cancelled"]},
                "workspaceUri": {"type": "string"},
                "noteIds": {"type": "array", "items": {"type": "string"}},
                "reportId": {"type": "string"},
            },
            "required": ["exported", "status"],
            "additionalProperties": False,
        },
        "annotations": {
            "title": "Export notes to the report service",
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    }
)


class ReportService(Protocol):
    def publish(
        self, credential: str, principal: str, workspace_uri: str, notes: Sequence[Note]
    ) -> str:
        """Publish `notes` with the principal's credential; returns the report's id."""
        ...


@dataclass
class MemoryReportService:
    """A stand-in for the external service: remembers what was published, and with which
    credential, so tests can check the credential reached the service and nothing else."""

    published: list[tuple[str, str, str, tuple[str, ...]]] = field(default_factory=list)

    def publish(
        self, credential: str, principal: str, workspace_uri: str, notes: Sequence[Note]
    ) -> str:
        self.published.append((credential, principal, workspace_uri, tuple(n.id for n in notes)))
        return f"report-{len(self.published)}"


def _complete(text: str, structured: dict[str, Any]) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
    }


class NotesExport:
    name = NAME

    def __init__(
        self,
        *,
        notes: NoteStore,
        replay: ReplayStore,
        authorizer: Authorizer,
        signer: StateSigner,
        consent: ConsentService,
        reports: ReportService,
        nonce_source: Callable[[], bytes] = lambda: secrets.token_bytes(16),
    ) -> None:
        self.notes = notes
        self.replay = replay
        self.authorizer = authorizer
        self.signer = signer
        self.consent = consent
        self.reports = reports
        self.nonce_source = nonce_source

    def descriptor(self) -> dict[str, Any]:
        result: dict[str, Any] = orjson.loads(_DESCRIPTOR)
        return result

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            result = self._call(request, arguments)
        except StoreError as exc:
            # A note, replay or consent store that failed (a full disk, no descriptors, a
            # locked database): -32001, never -32603 with a traceback or an empty export.
            raise store_error(exc) from None
        return result

    def _call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        uri = self._workspace_argument(arguments)
        principal = request.context.principal
        workspace = parse_workspace(uri)
        if principal is None or authorize(self.authorizer, principal, workspace) is None:
            log.info("principal %r refused workspace %s", principal, format_file_uri(workspace))
            raise ProtocolError(INVALID_PARAMS, OUTSIDE_ERROR)
        binding = Binding(principal, request.method, NAME, digest({"workspaceUri": uri}))
        params = request.params
        if "requestState" in params or "inputResponses" in params:
            return self._retry(request, binding, workspace)
        if self.consent.credential(principal, format_file_uri(workspace)) is not None:
            # Already connected: nothing to ask, so no capability is needed.
            return self._export(principal, workspace)
        return self._ask(request, binding, workspace, link_id=None)

    @staticmethod
    def _workspace_argument(arguments: dict[str, Any]) -> str:
        if set(arguments) != {"workspaceUri"} or not isinstance(arguments["workspaceUri"], str):
            raise ProtocolError(
                INVALID_PARAMS, "notes_export needs exactly one argument, workspaceUri (a string)"
            )
        uri: str = arguments["workspaceUri"]
        return uri

    # -- round one: a one-time link ----------------------------------------------------------

    def _ask(
        self, request: Request, binding: Binding, workspace: tuple[str, ...], link_id: str | None
    ) -> dict[str, Any]:
        """`input_required` with the URL entry. A link still pending for this very request is
        offered again (the user may have the page open); otherwise a new one is minted."""
        # The gate comes first: a client that cannot open URLs is never handed a link.
        require_url_elicitation(request.capabilities)
        ws_uri = format_file_uri(workspace)
        request_digest = _request_digest(binding)
        link = None
        if link_id is not None:
            link = self.consent.usable_link(link_id, binding.principal, request_digest)
        if link is None:
            link = self.consent.issue(binding.principal, request_digest, NAME, ws_uri)
        url = self.consent.url(link)
        if url is None:
            log.error("notes_export needs the consent page, but it is not being served")
            raise ProtocolError(INTERNAL_ERROR, "Internal error")
        message = (
            f"Connect the report service to export the notes of {ws_uri}. Open the link, check "
            "the request, and approve it there; then continue here."
        )
        entry = url_elicitation(request.capabilities, message, url)
        nonce = self.nonce_source().hex()
        state = self.signer.mint(
            binding, {"phase": PHASE, "ws": ws_uri, "link": link.id, "nonce": nonce}
        )
        return {
            "resultType": "input_required",
            "inputRequests": {INPUT_KEY: entry},
            "requestState": state,
        }

    # -- round two: the server's own record decides ------------------------------------------

    def _retry(
        self, request: Request, binding: Binding, workspace: tuple[str, ...]
    ) -> dict[str, Any]:
        params = request.params
        ws_uri = format_file_uri(workspace)
        try:
            verified = self.signer.verify(params.get("requestState"), binding)
            payload = verified.payload
            if payload.get("phase") != PHASE or payload.get("ws") != ws_uri:
                raise InvalidState("phase or workspace does not match")
            link_id, nonce = str(payload["link"]), str(payload["nonce"])
        except (InvalidState, KeyError, TypeError) as exc:
            log.warning("requestState refused for %r: %s", binding.principal, exc)
            raise ProtocolError(INVALID_PARAMS, STATE_ERROR) from None
        responses = params.get("inputResponses", {})
        if not isinstance(responses, dict):
            raise ProtocolError(INVALID_PARAMS, "inputResponses must be an object")
        answer = responses.get(INPUT_KEY)
        if answer is not None and (
            not isinstance(answer, dict) or answer.get("action") not in _ACTIONS
        ):
            raise ProtocolError(
                INVALID_PARAMS,
                f"inputResponses.{INPUT_KEY} must be an elicitation result "
                "with action accept, decline or cancel",
            )
        if self.replay.used(binding.principal, nonce):
            self._refuse(binding.principal, full=False)
        action = None if answer is None else answer["action"]
        if action == "cancel":
            return _complete(
                "Cancelled: nothing was exported. The same link can still be used.",
                {"exported": False, "status": "cancelled"},
            )
        if action == "decline":
            # Terminal (docs/LESSON.md section 8): the state is used and the link is withdrawn.
            self._claim(binding.principal, nonce, verified.expires_at)
            self.consent.revoke(link_id)
            return _complete(
                "Declined: nothing was exported.", {"exported": False, "status": "declined"}
            )
        if action == "accept" and self.consent.credential(binding.principal, ws_uri) is not None:
            self._claim(binding.principal, nonce, verified.expires_at)
            return self._export(binding.principal, workspace)
        # No answer, or `accept` before the consent happened: ask again, never assume.
        return self._ask(request, binding, workspace, link_id=link_id)

    def _export(self, principal: str, workspace: tuple[str, ...]) -> dict[str, Any]:
        ws_uri = format_file_uri(workspace)
        credential = self.consent.credential(principal, ws_uri)
        if credential is None:  # expired between the check and now
            raise ProtocolError(INVALID_PARAMS, STATE_ERROR)
        notes = list(self.notes.find(workspace, "", MAX_EXPORTED))
        report_id = self.reports.publish(credential, principal, ws_uri, notes)
        log.info("exported %d notes of %s for %r", len(notes), ws_uri, principal)
        ids = [n.id for n in notes]
        return _complete(
            f"Exported {len(ids)} notes of {ws_uri} to the report service ({report_id}).",
            {
                "exported": True,
                "status": "exported",
                "workspaceUri": ws_uri,
                "noteIds": ids,
                "reportId": report_id,
            },
        )

    def _claim(self, principal: str, nonce: str, expires_at: float) -> None:
        expiry = expires_at + self.signer.skew_seconds
        # A full store first recovers claims whose holder is gone (HOLDER.claim).
        claim = HOLDER.claim(self.notes, self.replay, principal, nonce, expiry)
        if claim is not Claim.CLAIMED:
            self._refuse(principal, full=claim is Claim.FULL)

    def _refuse(self, principal: str, full: bool) -> NoReturn:
        if full:
            REFUSALS.refused("the replay store's bounds", f"replay store full for {principal!r}")
            raise ProtocolError(SERVER_BUSY, "Too many pending requests for this principal")
        log.warning("requestState replayed by %r", principal)
        raise ProtocolError(INVALID_PARAMS, STATE_ERROR)


def _request_digest(binding: Binding) -> str:
    """What a consent link is bound to: who asked, with which tool and arguments."""
    return digest(list(binding))
