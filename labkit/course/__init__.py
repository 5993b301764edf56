"""The course toolkit: what the notebooks stand on (live forms, the MRTR host, public checks,
quizzes, the skill file).

Owns: everything a notebook imports besides `labkit` itself. The only part of labkit that
imports ipywidgets. Must not be imported by the protocol core, a transport or a store: the
dependency points one way, from the course down to the core.
"""

from labkit.course.consent import UrlConsent as UrlConsent
from labkit.course.forms import ElicitationForm as ElicitationForm
from labkit.course.live import LiveCall as LiveCall
from labkit.course.live import start_tool as start_tool
from labkit.course.quiz import Option as Option
from labkit.course.quiz import Quiz as Quiz
from labkit.course.quiz import QuizWidget as QuizWidget
from labkit.course.quiz import quiz as quiz
from labkit.course.skill import export_skill as export_skill
from labkit.course.skill import skill_text as skill_text
