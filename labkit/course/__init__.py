"""The course toolkit: what the notebooks stand on (live forms, public checks, quizzes, the
lesson helpers, the skill file), over the MRTR client of `labkit.client`.

Owns: the public surface of the course, in three rooms: `exercises` (the check engine, the
registry, fixtures, one module per exercise), `widgets` (forms, the consent panel, the live
call, quizzes) and `lessons` (helpers a notebook uses to show something), plus `build` and
`skill`. A notebook imports from `labkit` and `labkit.course` only; every name it uses is in
`__all__` here or there. The two lessons that load the official SDK (`run_legacy_session`,
`sdk_compare`) load on first use, so `import labkit.course` stays quick. Must not be imported
by the protocol core, a transport or a store: the dependency points one way, from the course
down to the core.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from labkit.client import Host, McpError, Pending, TooManyRounds, TransportError, render_message
from labkit.course.exercises.checks import CheckReport, CheckResult, check, hint
from labkit.course.exercises.fixtures import (
    EXAMPLE_NOTES,
    WORKSPACE_URI,
    SymlinkTree,
    add_notes,
    claimed,
    connect,
    create_ex1_schema,
    create_ex3_schema,
    example_authorizer,
    make_symlink_tree,
    note_ids,
    note_uri,
)
from labkit.course.exercises.trial import Outcome
from labkit.course.lessons.jail import compare, landlock_abi, sandbox_trial
from labkit.course.lessons.peek import encode_claims, server_log, state_parts, transcript
from labkit.course.lessons.replay_race import memory_claim_and_delete, race_one_nonce
from labkit.course.skill import export_skill, skill_text
from labkit.course.widgets.approval_page import ApprovalPage
from labkit.course.widgets.consent_panel import UrlConsent
from labkit.course.widgets.elicitation_form import ElicitationForm
from labkit.course.widgets.live_call import LiveCall, start_tool
from labkit.course.widgets.quiz import Option, Quiz, QuizWidget, quiz

__all__ = [
    "EXAMPLE_NOTES",
    "WORKSPACE_URI",
    "ApprovalPage",
    "CheckReport",
    "CheckResult",
    "ElicitationForm",
    "Host",
    "LiveCall",
    "McpError",
    "Option",
    "Outcome",
    "Pending",
    "Quiz",
    "QuizWidget",
    "SymlinkTree",
    "TooManyRounds",
    "TransportError",
    "UrlConsent",
    "add_notes",
    "check",
    "claimed",
    "compare",
    "connect",
    "create_ex1_schema",
    "create_ex3_schema",
    "encode_claims",
    "example_authorizer",
    "export_skill",
    "hint",
    "landlock_abi",
    "make_symlink_tree",
    "memory_claim_and_delete",
    "note_ids",
    "note_uri",
    "quiz",
    "race_one_nonce",
    "render_message",
    "run_legacy_session",
    "sandbox_trial",
    "sdk_compare",
    "server_log",
    "skill_text",
    "start_tool",
    "state_parts",
    "transcript",
]


def __getattr__(name: str) -> Any:
    """The lessons over the official SDK, imported on first use (the SDK is slow to load)."""
    if name == "run_legacy_session":
        from labkit.course.lessons.legacy_sdk import run_legacy_session

        return run_legacy_session
    if name == "sdk_compare":
        from labkit.course.lessons import sdk_compare

        module: ModuleType = sdk_compare
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
