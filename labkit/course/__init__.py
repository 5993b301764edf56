"""The course toolkit: what the notebooks stand on (live forms, the MRTR host, public checks,
quizzes, the skill file).

Owns: everything a notebook imports besides `labkit` itself. The only part of labkit that
imports ipywidgets. Must not be imported by the protocol core, a transport or a store: the
dependency points one way, from the course down to the core.
"""

from labkit.course.checks import CheckReport, CheckResult, Outcome, check, hint
from labkit.course.consent import UrlConsent
from labkit.course.forms import ElicitationForm
from labkit.course.host import Host, McpError, Pending, TooManyRounds, TransportError
from labkit.course.live import LiveCall, start_tool
from labkit.course.quiz import Option, Quiz, QuizWidget, quiz
from labkit.course.skill import export_skill, skill_text

__all__ = [
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
    "TooManyRounds",
    "TransportError",
    "UrlConsent",
    "check",
    "export_skill",
    "hint",
    "quiz",
    "skill_text",
    "start_tool",
]
