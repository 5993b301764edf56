"""What grading says: the JSON report models, the learner's feedback text and JUnit XML.

Owns: the pydantic models (`SubmissionReport`, `BatchReport`, with `SCHEMA_VERSION`), the
outcomes, the plain feedback file (the author's message for each lost point; never a check's
source, never ANSI, never a diff; "all checks passed" only when every check, hidden ones
included, passed) and the JUnit file (one testcase per check).

Must not import nbclient, nbval or the kernel runner.
"""

from __future__ import annotations

import enum
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION: Final = 1


class GradedOutcome(enum.StrEnum):
    PASSED = "passed"
    INCORRECT = "incorrect"
    ERROR = "error in your code"
    NOT_ATTEMPTED = "not attempted"
    DID_NOT_RUN = "did not run"


class CheckScore(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    title: str
    hidden: bool
    outcome: GradedOutcome
    points: float
    max_points: float
    message: str


class ExerciseScore(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
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

    schema_version: Literal[1] = SCHEMA_VERSION
    file: str
    status: Literal["graded", "error"]
    error: str = ""
    solution: str | None = None
    points: float = 0.0
    max_points: float = 0.0
    percent: float = 0.0
    exercises: list[ExerciseScore] = []
    notices: list[str] = []
    sandbox: str = ""
    seconds: float = 0.0
    course: CourseVersion | None = None  # course version (labkit/grade/version.py)

    @classmethod
    def failed(cls, file: str, error: str, seconds: float = 0.0) -> SubmissionReport:
        return cls(file=file, status="error", error=error, seconds=seconds)


class BatchReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    submissions: list[SubmissionReport]
    graded: int
    errors: int
    mean_percent: float
    seconds: float
    course: CourseVersion | None = None  # course version (labkit/grade/version.py)


def batch(reports: Sequence[SubmissionReport], seconds: float) -> BatchReport:
    graded = [r for r in reports if r.status == "graded"]
    mean = sum(r.percent for r in graded) / len(graded) if graded else 0.0
    return BatchReport(
        submissions=list(reports),
        graded=len(graded),
        errors=len(reports) - len(graded),
        mean_percent=round(mean, 1),
        seconds=round(seconds, 2),
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


def feedback(report: SubmissionReport) -> str:
    """The learner's plain-text feedback."""
    lines = [f"labkit grade: {report.file}"]
    if report.status == "error":
        lines += ["", f"Not graded: {report.error}", ""]
        return "\n".join(lines)
    lines[0] += f" (solution {report.solution})"
    lines += [
        "",
        f"Score: {_points(report.points)}/{_points(report.max_points)} ({report.percent:g}%)",
    ]
    if report.notices:
        lines += ["", "What changed in your notebook:"]
        lines += [f"  - {notice}" for notice in report.notices]
    for exercise in report.exercises:
        lines += ["", f"{exercise.id}: {_points(exercise.points)}/{_points(exercise.max_points)}"]
        for check in exercise.checks:
            mark = "hidden, " if check.hidden else ""
            line = (
                f"  [{check.outcome.value}] {check.title} "
                f"({mark}{_points(check.points)}/{_points(check.max_points)})"
            )
            if check.outcome is not GradedOutcome.PASSED and check.message:
                line += f": {check.message}"
            lines.append(line)
    checks = [c for e in report.exercises for c in e.checks]
    hidden = [c for c in checks if c.hidden]
    lines.append("")
    if checks and all(c.outcome is GradedOutcome.PASSED for c in checks):
        lines.append("All checks passed, hidden checks included.")
    else:
        passed = sum(c.outcome is GradedOutcome.PASSED for c in hidden)
        lines.append(
            f"Hidden checks (run only at grading): {passed} of {len(hidden)} passed. "
            "Each line above says what was expected and what your code did."
        )
    return "\n".join(lines) + "\n"


def junit(reports: Sequence[SubmissionReport]) -> str:
    """One testsuite per submission, one testcase per check."""
    suites = ET.Element("testsuites", name="labkit grade")
    for report in reports:
        suite = ET.SubElement(suites, "testsuite", name=report.file)
        cases = failures = errors = 0
        if report.status == "error":
            case = ET.SubElement(suite, "testcase", classname=report.file, name="grading")
            ET.SubElement(case, "error", message=report.error)
            cases, errors = 1, 1
        for exercise in report.exercises:
            for check in exercise.checks:
                cases += 1
                case = ET.SubElement(
                    suite,
                    "testcase",
                    classname=f"{report.file}.{exercise.id}",
                    name=check.title,
                )
                if check.outcome is not GradedOutcome.PASSED:
                    failures += 1
                    ET.SubElement(
                        case, "failure", message=f"{check.outcome.value}: {check.message}".strip()
                    )
        suite.set("tests", str(cases))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("time", f"{report.seconds:.2f}")
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
