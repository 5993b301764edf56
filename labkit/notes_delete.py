"""The `notes_delete` tool: explicit scope, form elicitation over MRTR, exactly-once deletion.

Owns: the descriptor, argument and capability checks, the first round (candidates, form,
signed state) and the retry (verify state, validate the answer, re-authorize, re-check the live
note, claim and delete atomically). Pure: stores, authorizer, signer and nonce source are
injected. Every state failure answers one fixed -32602 message; the reason goes to the log.
Must not import a transport, the course toolkit or the grader.
"""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Callable
from typing import Any, Final, NamedTuple, NoReturn

import orjson

from labkit import forms
from labkit.errors import INVALID_PARAMS, MISSING_CAPABILITY, SERVER_BUSY, ProtocolError
from labkit.messages import ACTIONS
from labkit.refusals import RefusalLog
from labkit.scope import (
    Authorizer,
    Path,
    ScopeError,
    authorize,
    contains,
    format_file_uri,
    parse_file_uri,
    strictly_contains,
)
from labkit.server import Request
from labkit.state import Binding, InvalidState, StateSigner, digest
from labkit.stores import (
    HOLDER,
    Claim,
    ClaimHolder,
    ClaimInProgress,
    Confirmation,
    Deletion,
    Note,
    NoteStore,
    ReplayStore,
    StoreBusy,
    StoreError,
    commit_deletion,
)

log = logging.getLogger("labkit.notes_delete")

NAME: Final = "notes_delete"
INPUT_KEY: Final = "delete_choice"
MAX_CANDIDATES: Final = 20
MAX_TITLE_CHARS: Final = 200
PHASE: Final = "confirm-delete"

_ACTIONS: Final = frozenset(ACTIONS)
_ARGUMENT_NAMES: Final = frozenset({"workspaceUri", "title"})
STATE_ERROR: Final = "Invalid, expired or already used requestState"
STORE_BUSY_ERROR: Final = "The note store is busy; nothing was done. Try again shortly."
STORE_UNAVAILABLE_ERROR: Final = (
    "The note store is unavailable for now (its disk or database failed); try the same "
    "request again shortly: it completes, or reports what happened."
)
IN_PROGRESS_ERROR: Final = (
    "This confirmation is being carried out by another request right now; this one did "
    "nothing. Send the same request again shortly: it reports what happened."
)
FULL_ERROR: Final = (
    "Too many pending confirmations for this principal; nothing was done. "
    "Try again once earlier confirmations expire."
)
# Refusals at the replay store's bounds: counted, a line per minute at most.
REFUSALS: Final = RefusalLog(log)


def store_error(exc: StoreError) -> ProtocolError:
    """The -32001 a store failure answers (HTTP 503 with Retry-After): never an internal
    error, an empty result or a replay. The store logged its condition (`stores.FAULTS`)."""
    if isinstance(exc, ClaimInProgress):
        log.info("%s", exc)
        return ProtocolError(SERVER_BUSY, IN_PROGRESS_ERROR)
    message = STORE_BUSY_ERROR if isinstance(exc, StoreBusy) else STORE_UNAVAILABLE_ERROR
    return ProtocolError(SERVER_BUSY, message)


OUTSIDE_ERROR: Final = "workspaceUri is not a workspace this principal may use"

# Encoded once: the server builds its `tools/list` from it once per deployment, and each
# `descriptor()` call is a fresh parse, so no caller can change what another one sees.
_DESCRIPTOR: Final = orjson.dumps(
    {
        "name": NAME,
        "title": "Delete a note",
        "description": (
            "Delete one note from an explicit workspace. Finds the notes inside workspaceUri "
            "whose title contains `title` (case-insensitive), then asks the user, through a "
            "form, which note to delete and to confirm. Nothing is deleted without that "
            "confirmation. Requires form elicitation."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "workspaceUri": {
                    "type": "string",
                    "description": "The workspace to search, as a file: URI "
                    "(for example file:///work/notes). It must be one the caller may use.",
                },
                "title": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_TITLE_CHARS,
                    "description": "Text the note's title contains (case-insensitive).",
                },
            },
            "required": ["workspaceUri", "title"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "deleted": {"type": "boolean"},
                "status": {
                    "type": "string",
                    "enum": [
                        "deleted",
                        "declined",
                        "not_confirmed",
                        "cancelled",
                        "no_match",
                        "stale",
                    ],
                },
                "noteId": {"type": "string"},
            },
            "required": ["deleted", "status"],
            "additionalProperties": False,
        },
        "annotations": {
            "title": "Delete a note",
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    }
)


def has_form_elicitation(capabilities: dict[str, Any]) -> bool:
    """`elicitation: {}` (backward compatible) or an explicit `form` key means form support."""
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, dict) and (not elicitation or "form" in elicitation)


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _complete(text: str, structured: dict[str, Any], *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
    }
    if is_error:
        result["isError"] = True
    return result


class _Retry(NamedTuple):
    """What a verified retry knows: the binding and scope of this request, and what the signed
    state carried (the offered candidates with their identities, the nonce, the expiry)."""

    binding: Binding
    root: Path
    workspace: Path
    title: str
    ws_uri: str
    candidates: dict[str, str]
    nonce: str
    expires_at: float


def _read_answer(params: dict[str, Any]) -> dict[str, Any] | None:
    """The `delete_choice` answer, None when absent; -32602 when it is no elicitation result."""
    responses = params.get("inputResponses", {})
    if not isinstance(responses, dict):
        raise ProtocolError(INVALID_PARAMS, "inputResponses must be an object")
    answer = responses.get(INPUT_KEY)  # extra unknown keys are ignored (docs/protocol.md)
    if answer is not None and (
        not isinstance(answer, dict) or answer.get("action") not in _ACTIONS
    ):
        raise ProtocolError(
            INVALID_PARAMS,
            f"inputResponses.{INPUT_KEY} must be an elicitation result "
            "with action accept, decline or cancel",
        )
    return answer


class NotesDelete:
    name = NAME

    def __init__(
        self,
        *,
        notes: NoteStore,
        replay: ReplayStore,
        authorizer: Authorizer,
        signer: StateSigner,
        nonce_source: Callable[[], bytes] = lambda: secrets.token_bytes(16),
        max_candidates: int = MAX_CANDIDATES,
        holder: ClaimHolder = HOLDER,
    ) -> None:
        self.notes = notes
        self.replay = replay
        self.authorizer = authorizer
        self.signer = signer
        self.nonce_source = nonce_source
        self.max_candidates = max_candidates
        self.holder = holder

    def descriptor(self) -> dict[str, Any]:
        result: dict[str, Any] = orjson.loads(_DESCRIPTOR)
        return result

    # -- one entry point for both rounds -----------------------------------------------------

    def call(self, request: Request, arguments: dict[str, Any]) -> dict[str, Any]:
        if not has_form_elicitation(request.capabilities):
            raise ProtocolError(
                MISSING_CAPABILITY,
                "notes_delete needs form elicitation to confirm the deletion",
                {"requiredCapabilities": {"elicitation": {"form": {}}}},
            )
        workspace, title = self._arguments(arguments)
        principal = request.context.principal
        root = authorize(self.authorizer, principal, workspace)
        if principal is None or root is None:
            log.info("principal %r refused workspace %s", principal, format_file_uri(workspace))
            raise ProtocolError(INVALID_PARAMS, OUTSIDE_ERROR)
        # `_arguments` admitted exactly these two strings, so this is digest(arguments).
        arguments_digest = _arguments_digest(arguments["workspaceUri"], title)
        binding = Binding(principal, request.method, NAME, arguments_digest)
        params = request.params
        try:
            if "requestState" in params or "inputResponses" in params:
                result = self._retry(params, binding, root, workspace, title)
            else:
                result = self._ask(binding, workspace, title)
        except StoreError as exc:
            # Nothing happened (or a pending claim records what was in flight), and the same
            # request may be sent again: the busy error, not an internal one (which would
            # read as a bug), not "no note found" and not a replay refusal.
            raise store_error(exc) from None
        return result

    def _arguments(self, arguments: dict[str, Any]) -> tuple[Path, str]:
        if not arguments.keys() <= _ARGUMENT_NAMES:
            extra = sorted(set(arguments) - _ARGUMENT_NAMES)
            raise ProtocolError(INVALID_PARAMS, f"notes_delete: unexpected argument(s) {extra}")
        uri, title = arguments.get("workspaceUri"), arguments.get("title")
        if not isinstance(uri, str) or not isinstance(title, str):
            raise ProtocolError(
                INVALID_PARAMS, "notes_delete needs workspaceUri and title, both strings"
            )
        if not title.strip() or len(title) > MAX_TITLE_CHARS:
            raise ProtocolError(
                INVALID_PARAMS, f"title must be 1 to {MAX_TITLE_CHARS} characters, not blank"
            )
        if not _is_unicode(title):
            # A lone surrogate (a legal JSON escape) has no RFC 8785 form: the peer's error.
            raise ProtocolError(INVALID_PARAMS, "title must be Unicode text")
        return parse_workspace(uri), title

    # -- round one: candidates, form, signed state ------------------------------------------

    def _ask(self, binding: Binding, workspace: Path, title: str) -> dict[str, Any]:
        found = list(self.notes.find(workspace, title, self.max_candidates + 1))
        shown = found[: self.max_candidates]
        ws_uri = format_file_uri(workspace)
        if not shown:
            return _complete(
                f"No note whose title contains {title!r} in the workspace {ws_uri}. "
                "Nothing was deleted.",
                {"deleted": False, "status": "no_match"},
            )
        nonce = self.nonce_source().hex()
        state = self.signer.mint(
            binding,
            {
                "phase": PHASE,
                "ws": ws_uri,
                "cands": [[n.id, n.identity] for n in shown],
                "nonce": nonce,
            },
        )
        message = (
            f"Choose the note to delete from {ws_uri} and confirm. The deletion cannot be undone."
        )
        if len(found) > len(shown):
            message += (
                f" More than {self.max_candidates} notes match {title!r}; only the first "
                f"{self.max_candidates} are listed. Cancel and use a more precise title if "
                "yours is missing."
            )
        return {
            "resultType": "input_required",
            "inputRequests": {
                INPUT_KEY: {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": message,
                        "requestedSchema": delete_choice_schema([(n.id, n.title) for n in shown]),
                    },
                }
            },
            "requestState": state,
        }

    # -- round two: verify, validate, then act -----------------------------------------------
    #
    # Small named steps: verify the state, read the answer's shape, then one handler per
    # action (`_ON_ACTION`), and for an accepted deletion one per store outcome
    # (`_ON_DELETION`). Security order (docs/LESSON.md section 9): the state is verified before the
    # answer is read; the answer is validated before any nonce is claimed; cancel and a missing
    # answer claim nothing.

    def _retry(
        self, params: dict[str, Any], binding: Binding, root: Path, workspace: Path, title: str
    ) -> dict[str, Any]:
        retry = self._verify(params, binding, root, workspace, title)
        answer = _read_answer(params)
        if answer is None:
            return self._on_missing(retry)
        return _ON_ACTION[answer["action"]](self, retry, answer)

    def _verify(
        self, params: dict[str, Any], binding: Binding, root: Path, workspace: Path, title: str
    ) -> _Retry:
        """The signed state, checked against this request, or the one fixed -32602."""
        ws_uri = format_file_uri(workspace)
        try:
            verified = self.signer.verify(params.get("requestState"), binding)
            payload = verified.payload
            if payload.get("phase") != PHASE or payload.get("ws") != ws_uri:
                raise InvalidState("phase or workspace does not match")
            candidates = {str(c[0]): str(c[1]) for c in payload["cands"]}
            nonce = str(payload["nonce"])
        except (InvalidState, KeyError, TypeError, IndexError) as exc:
            log.warning("requestState refused for %r: %s", binding.principal, exc)
            raise ProtocolError(INVALID_PARAMS, STATE_ERROR) from None
        return _Retry(
            binding, root, workspace, title, ws_uri, candidates, nonce, verified.expires_at
        )

    def _refuse_if_used(self, retry: _Retry) -> None:
        # Cancel and a missing answer claim nothing, so look first: a state already used
        # (declined or deleted) is over, and must not be re-asked or reported as answerable.
        # A deletion of this state still in progress is waited for (or recovered when its
        # holder is gone): a cancel is honoured once its claim is released, never "used".
        if self.holder.used(self.notes, self.replay, retry.binding.principal, retry.nonce):
            self._refuse_claim(retry.binding.principal, full=False)

    def _on_missing(self, retry: _Retry) -> dict[str, Any]:
        # A missing answer is re-asked, never treated as consent or as an error.
        self._refuse_if_used(retry)
        return self._ask(retry.binding, retry.workspace, retry.title)

    def _on_cancel(self, retry: _Retry, answer: dict[str, Any]) -> dict[str, Any]:
        self._refuse_if_used(retry)
        return _complete(
            "Cancelled: nothing was deleted. The same confirmation can still be answered.",
            {"deleted": False, "status": "cancelled"},
        )

    def _on_decline(self, retry: _Retry, answer: dict[str, Any]) -> dict[str, Any]:
        # Terminal: the nonce is consumed, so the same state can never delete later.
        self._consume(retry.binding.principal, retry.nonce, retry.expires_at)
        return _complete("Declined: nothing was deleted.", {"deleted": False, "status": "declined"})

    def _on_accept(self, retry: _Retry, answer: dict[str, Any]) -> dict[str, Any]:
        schema = _asked_schema(tuple(retry.candidates))
        try:
            content = forms.validate_content(schema, answer.get("content"))
        except forms.FormError as exc:
            raise ProtocolError(
                INVALID_PARAMS,
                f"inputResponses.{INPUT_KEY}.content does not answer the form: {exc}",
            ) from None
        if content["confirm"] is not True:
            # An accepted form without the confirmation is a refusal, not an error; terminal.
            self._consume(retry.binding.principal, retry.nonce, retry.expires_at)
            return _complete(
                "Not confirmed: nothing was deleted.",
                {"deleted": False, "status": "not_confirmed"},
            )
        note_id: str = content["note_id"]
        outcome, note = commit_deletion(
            self.notes,
            self.replay,
            Confirmation(
                principal=retry.binding.principal,
                nonce=retry.nonce,
                expires_at=retry.expires_at + self.signer.skew_seconds,
                note_id=note_id,
                recheck=functools.partial(self._recheck, retry, note_id),
            ),
            self.holder,
        )
        return _ON_DELETION[outcome](self, retry, note_id, note)

    def _recheck(self, retry: _Retry, note_id: str, live: Note) -> bool:
        """Layers 1 and 2 again, on the live record, right before the mutation."""
        return (
            live.identity == retry.candidates[note_id]
            and strictly_contains(retry.workspace, live.path)
            and contains(retry.root, live.path)
            and retry.root in self.authorizer.roots(retry.binding.principal)
        )

    def _deleted(self, retry: _Retry, note_id: str, note: Note | None) -> dict[str, Any]:
        # No record: another request carrying out this same confirmation deleted the note.
        what = note_id if note is None else f"{note_id} ({note.title!r})"
        return _complete(
            f"Deleted {what} from {retry.ws_uri}.",
            {"deleted": True, "status": "deleted", "noteId": note_id},
        )

    def _stale(self, retry: _Retry, note_id: str, note: Note | None) -> dict[str, Any]:
        return _complete(
            f"{note_id} changed, moved or disappeared since the form was shown; nothing was "
            "deleted. Call notes_delete again to see the current notes.",
            {"deleted": False, "status": "stale", "noteId": note_id},
            is_error=True,
        )

    def _used(self, retry: _Retry, note_id: str, note: Note | None) -> NoReturn:
        self._refuse_claim(retry.binding.principal, full=False)

    def _full(self, retry: _Retry, note_id: str, note: Note | None) -> NoReturn:
        self._refuse_claim(retry.binding.principal, full=True)

    def _consume(self, principal: str, nonce: str, expires_at: float) -> None:
        expiry = expires_at + self.signer.skew_seconds
        claim = self.holder.claim(self.notes, self.replay, principal, nonce, expiry)
        if claim is not Claim.CLAIMED:
            self._refuse_claim(principal, claim is Claim.FULL)

    def _refuse_claim(self, principal: str, full: bool) -> NoReturn:
        if full:
            REFUSALS.refused("the replay store's bounds", f"replay store full for {principal!r}")
            raise ProtocolError(SERVER_BUSY, FULL_ERROR)
        log.warning("requestState replayed by %r", principal)
        raise ProtocolError(INVALID_PARAMS, STATE_ERROR)


# What each answer does (docs/LESSON.md section 8), and what each outcome of the confirmed deletion
# answers: tables, so a new branch is one row, not another arm of an if-chain.
_ActionHandler = Callable[[NotesDelete, _Retry, dict[str, Any]], dict[str, Any]]
_ON_ACTION: Final[dict[str, _ActionHandler]] = {
    "accept": NotesDelete._on_accept,
    "decline": NotesDelete._on_decline,
    "cancel": NotesDelete._on_cancel,
}
_DeletionHandler = Callable[[NotesDelete, _Retry, str, Note | None], dict[str, Any]]
_ON_DELETION: Final[dict[Deletion, _DeletionHandler]] = {
    Deletion.DELETED: NotesDelete._deleted,
    Deletion.STALE: NotesDelete._stale,
    Deletion.USED: NotesDelete._used,
    Deletion.FULL: NotesDelete._full,
}


@functools.lru_cache(maxsize=1024)
def parse_workspace(uri: str) -> Path:
    """The `workspaceUri` argument parsed strictly, or the -32602 a peer gets for it (one
    fixed message when it names something outside; the reason goes to the log)."""
    try:
        return parse_file_uri(uri)
    except ScopeError as exc:
        log.info("workspaceUri %r refused: %s", uri[:200], exc.reason)
        if exc.kind == "outside":
            raise ProtocolError(INVALID_PARAMS, OUTSIDE_ERROR) from None
        raise ProtocolError(INVALID_PARAMS, f"workspaceUri {exc.reason}") from None


def _arguments_digest(workspace_uri: str, title: str) -> str:
    # Both rounds of one confirmation digest the same arguments: compute it once.
    return digest({"workspaceUri": workspace_uri, "title": title})


@functools.lru_cache(maxsize=1024)
def _asked_schema(note_ids: tuple[str, ...]) -> dict[str, Any]:
    """The schema the form was asked with, rebuilt from the signed candidate ids (labels do not
    matter to validation). Read-only: shared between calls."""
    return delete_choice_schema([(note_id, note_id) for note_id in note_ids])


def delete_choice_schema(candidates: list[tuple[str, str]]) -> dict[str, Any]:
    """The flat form: which note (titled single select) and an explicit confirmation."""
    return {
        "type": "object",
        "properties": {
            "note_id": forms.single_select(candidates, title="Note to delete"),
            "confirm": {
                "type": "boolean",
                "title": "Yes, delete this note permanently",
                "default": False,
            },
        },
        "required": ["note_id", "confirm"],
    }
