"""The course toolkit: what the notebooks stand on (live forms, the MRTR host, public checks,
quizzes, the skill file).

Owns: everything a notebook imports besides `labkit` itself. The only part of labkit that
imports ipywidgets. Must not be imported by the protocol core, a transport or a store: the
dependency points one way, from the course down to the core.
"""

from labkit.course.checks import CheckReport, CheckResult, Outcome, check, hint
from labkit.course.host import Host, McpError, Pending, TooManyRounds, TransportError

__all__ = [
    "CheckReport",
    "CheckResult",
    "Host",
    "McpError",
    "Outcome",
    "Pending",
    "TooManyRounds",
    "TransportError",
    "check",
    "hint",
]
