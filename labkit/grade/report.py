"""What grading says: the JSON report models, the learner's feedback text and JUnit XML.

Owns: the pydantic models (`SubmissionReport`, `BatchReport`, with `SCHEMA_VERSION`), the
outcomes (the course's own `Outcome`: one vocabulary, in JSON its values "passed",
"incorrect", "error in your code", "not attempted", "did not run"), the plain feedback
file (the author's message for each lost point; never a check's source, never ANSI, never a
diff; "all checks passed" only when every check, hidden ones included, passed) and the JUnit
file (one testcase per check).

Nothing a submission supplies can forge or break a report: every text field is cleaned when a
model is made (`clean`: ANSI sequences dropped; control characters, lone surrogates, XML's
forbidden characters, bidirectional overrides and line separators written as visible hex
escapes; single-line fields keep no newline), so the JSON, the feedback, the JUnit XML and the
class view all carry the same safe text; and in the feedback every message and notice is
quoted on its own indented lines (`    | ...`), so no text from a submission can ever begin a
line the way the report's own lines do ("Score:", an exercise, a check).

Must not import nbclient, nbval or the kernel runner.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict

from labkit.course.exercises.trial import Outcome
from labkit.grade.containment import WARNINGS

SCHEMA_VERSION: Final = 2
OUTPUTS_SECTION: Final = "outputs"  # the checked outputs: a section, not an exercise
_ANSI: Final = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)?")
# Everything that is not plain printable text: C0 and C1 controls (tab and newline aside), DEL,
# lone surrogates, the XML non-characters, bidirectional overrides, line/paragraph separators.
_UNSAFE: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
    "\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str) -> str:
    """Learner-supplied text made safe to show anywhere; newlines and tabs are kept."""
    return _UNSAFE.sub(_escape, _ANSI.sub("", text))


def clean_line(text: str) -> str:
    """As `clean`, on one line: a newline or a tab is shown as an escape too."""
    return clean(text).replace("\n", "\\n").replace("\t", "\\t")


Text = Annotated[str, AfterValidator(clean)]
Line = Annotated[str, AfterValidator(clean_line)]


class CheckScore(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Line
    title: Line
    hidden: bool
    outcome: Outcome
    points: float
    max_points: float
    message: Text


class ExerciseScore(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Line
    points: float
    max_points: float
    checks: list[CheckScore]


# Course version (labkit/grade/version.py computes it): which labkit and which course material
# graded a report, so merging shards or regrading never mixes two versions.
class CourseVersion(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    package: str  # labkit's version
    digest: str  # sha256 of the solutions, the released learner copies and the hidden checks


class SubmissionReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[2] = SCHEMA_VERSION
    file: Line
    status: Literal["graded", "error"]
    error: Text = ""
    # The solution notebook graded against, and a sentence when the file name disagrees.
    solution: Line | None = None
    mismatch: Line = ""
    points: float = 0.0
    max_points: float = 0.0
    percent: float = 0.0
    exercises: list[ExerciseScore] = []
    notices: list[Text] = []
    sandbox: Line = ""
    # The containment mode the jobs ran in (labkit/grade/containment.py: full, container,
    # unconfined); "" in a report made without jobs.
    containment: Literal["full", "container", "unconfined", ""] = ""
    # Not graded because grading itself failed (no job could start, the course's own setup
    # imports failed, a check worker died before the learner's code ran): not the learner's 0.
    infrastructure: bool = False
    seconds: float = 0.0
    course: CourseVersion | None = None  # course version (labkit/grade/version.py)

    @classmethod
    def not_graded(
        cls, file: str, error: str, seconds: float = 0.0, *, infrastructure: bool = False
    ) -> SubmissionReport:
        return cls(
            file=file, status="error", error=error, seconds=seconds, infrastructure=infrastructure
        )


class BatchReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[2] = SCHEMA_VERSION
    submissions: list[SubmissionReport]
    graded: int
    errors: int
    mean_percent: float
    seconds: float
    course: CourseVersion | None = None  # course version (labkit/grade/version.py)
    # Why the run ended before every submission was graded (an interrupt, SIGTERM); "" when
    # it did not. The submissions it did not reach say "did not run".
    stopped: Line = ""


def batch(reports: Sequence[SubmissionReport], seconds: float, stopped: str = "") -> BatchReport:
    graded = [r for r in reports if r.status == "graded"]
    mean = sum(r.percent for r in graded) / len(graded) if graded else 0.0
    return BatchReport(
        submissions=list(reports),
        graded=len(graded),
        errors=len(reports) - len(graded),
        mean_percent=round(mean, 1),
        seconds=round(seconds, 2),
        stopped=stopped,
    )


def exercise_score(exercise: str, checks: Sequence[CheckScore]) -> ExerciseScore:
    return ExerciseScore(
        id=exercise,
        points=sum(c.points for c in checks),
        max_points=sum(c.max_points for c in checks),
        checks=list(checks),
    )


def _points(value: float) -> str:
    return f"{value:g}"


def sandbox_warning(report: SubmissionReport) -> bool:
    """Graded without job containment (`--unconfined`) or without a job cgroup."""
    return report.sandbox.startswith(WARNINGS)


def _quote(text: str, indent: str) -> list[str]:
    """Text from a submission, one quoted line per line: it never starts a report line."""
    return [f"{indent}| {line}".rstrip() for line in clean(text).split("\n")]


def feedback(report: SubmissionReport) -> str:
    """The learner's plain-text feedback."""
    lines = [f"labkit grade: {report.file}"]
    if report.containment:
        lines.append(f"Containment: {report.containment}")
    if sandbox_warning(report):
        lines.append(f"Sandbox: {report.sandbox}")
    if report.status == "error":
        heading = "Not graded"
        if report.infrastructure:
            heading += ": grading itself failed (not your notebook)"
        lines += ["", f"{heading}:", *_quote(report.error, "    "), ""]
        return "\n".join(lines)
    lines[0] += f" (solution {report.solution})"
    if report.mismatch:
        lines += ["", "Check the file name:", *_quote(report.mismatch, "    ")]
    lines += [
        "",
        f"Score: {_points(report.points)}/{_points(report.max_points)} ({report.percent:g}%)",
    ]
    if report.notices:
        lines += ["", "What changed in your notebook:"]
        for notice in report.notices:
            first, *rest = clean(notice).split("\n")
            lines.append(f"  - {first}")
            lines += _quote("\n".join(rest), "    ") if rest else []
    for exercise in report.exercises:
        lines += ["", f"{exercise.id}: {_points(exercise.points)}/{_points(exercise.max_points)}"]
        for check in exercise.checks:
            mark = "hidden, " if check.hidden else ""
            lines.append(
                f"  [{check.outcome.value}] {check.title} "
                f"({mark}{_points(check.points)}/{_points(check.max_points)})"
            )
            if check.outcome is not Outcome.PASSED and check.message:
                lines += _quote(check.message, "      ")
    checks = [c for e in report.exercises for c in e.checks]
    hidden = [c for c in checks if c.hidden]
    lines.append("")
    if checks and all(c.outcome is Outcome.PASSED for c in checks):
        lines.append("All checks passed, hidden checks included.")
    else:
        passed = sum(c.outcome is Outcome.PASSED for c in hidden)
        lines.append(
            f"Hidden checks (run only at grading): {passed} of {len(hidden)} passed. "
            "Each quoted line above says what was expected and what your code did."
        )
    return "\n".join(lines) + "\n"


def junit(reports: Sequence[SubmissionReport]) -> str:
    """One testsuite per submission, one testcase per check."""
    # Every attribute passes `clean` again here: a report made with `model_construct` (no
    # validation) must not break the XML either.
    suites = ET.Element("testsuites", name="labkit grade")
    for report in reports:
        suite = ET.SubElement(suites, "testsuite", name=clean_line(report.file))
        if report.containment:
            properties = ET.SubElement(suite, "properties")
            for name, value in (("containment", report.containment), ("sandbox", report.sandbox)):
                ET.SubElement(properties, "property", name=f"labkit.{name}", value=clean(value))
        cases = failures = errors = 0
        if report.status == "error":
            case = ET.SubElement(
                suite, "testcase", classname=clean_line(report.file), name="grading"
            )
            ET.SubElement(case, "error", message=clean(report.error))
            cases, errors = 1, 1
        for exercise in report.exercises:
            for check in exercise.checks:
                cases += 1
                case = ET.SubElement(
                    suite,
                    "testcase",
                    classname=clean_line(f"{report.file}.{exercise.id}"),
                    name=clean_line(check.title),
                )
                if check.outcome is not Outcome.PASSED:
                    failures += 1
                    said = clean(f"{check.outcome.value}: {check.message}".strip())
                    ET.SubElement(case, "failure", message=said)
        suite.set("tests", str(cases))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("time", f"{report.seconds:.2f}")
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
