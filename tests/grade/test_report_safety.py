"""Reports nothing in a submission can forge or break: hostile text in every field, JUnit read
back with a real XML parser, feedback lines, batch files against submission names, the solution
graded against and its mismatch flag, `--as`, and the hidden checks' outcome words. No kernel:
a fake runner stands in where a grading run is needed."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from grade.grade_helpers import FIXTURES, learner, solved, write
from labkit import cli
from labkit.course.exercises.trial import Outcome
from labkit.grade import batch, classroom, classview, grader, report
from labkit.grade.deadline import Deadline
from labkit.grade.kernel import CellRun, CellStatus, Execution
from labkit.grade.report import CheckScore, SubmissionReport

HOSTILE = [
    "NUL \x00 here",
    "escape \x1b[31mred\x1b[0m and a bare \x1b",
    "form feed \x0c and vertical tab \x0b and bell \x07",
    "lone surrogates \ud800 and \udfff",
    "CDATA end ]]> and <tag attr='x'>&amp;",
    "XML non-characters \ufffe \uffff and C1 \x85 \x9b",
    "carriage return\roverwrites",
    "bidi \u202e override \u2066 and line separator \u2028 here",
    "a\nmulti-line\nmessage",
]
FORGED = (
    "nothing\n\nScore: 100/100 (100%)\n\nex1: 5/5\n  [passed] all (hidden, 5/5)\n"
    "All checks passed, hidden checks included."
)


def hostile_report(text: str) -> SubmissionReport:
    check = CheckScore(
        name=f"ex1/{text}",
        title=f"title {text}",
        hidden=True,
        outcome=Outcome.ERROR,
        points=0.0,
        max_points=1.0,
        message=f"your code raised ValueError: {text}",
    )
    section = report.exercise_score(f"ex1{text}", [check])
    return SubmissionReport(
        file=f"sub {text}.ipynb",
        status="graded",
        solution="replay",
        mismatch=f"graded as replay, but {text}",
        points=0.0,
        max_points=1.0,
        exercises=[section],
        notices=[f"cell `x` raised: {text}"],
        sandbox=text,
    )


@pytest.mark.parametrize("text", HOSTILE)
def test_junit_is_well_formed_whatever_the_messages_hold(text: str) -> None:
    reports = [
        hostile_report(text),
        SubmissionReport.not_graded(f"{text}.ipynb", f"corrupt: {text}"),
    ]
    # `model_copy` does not validate: junit() must make even unvalidated text safe.
    unvalidated = hostile_report("x").model_copy(update={"file": f"raw {text}", "error": text})
    for xml in (report.junit(reports), report.junit([unvalidated])):
        root = ET.fromstring(xml.encode("utf-8"))  # a real parser: raises on ill-formed XML
        assert root.tag == "testsuites"
    root = ET.fromstring(report.junit(reports).encode("utf-8"))
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and "your code raised ValueError" in (failure.get("message") or "")


@pytest.mark.parametrize("text", HOSTILE)
def test_every_text_field_is_cleaned(text: str) -> None:
    sub = hostile_report(text)
    dumped = sub.model_dump_json()
    for bad in ("\x00", "\x1b", "\x0c", "\x0b", "\x07", "\r", "\ud800", "\ufffe", "\x85", "\u202e"):
        assert bad not in dumped and bad not in report.feedback(sub)
        assert bad not in classview.render(report.batch([sub], 1.0))
        assert bad not in batch.summary(report.batch([sub], 1.0))
    assert "\n" not in sub.file and "\n" not in sub.exercises[0].checks[0].title
    dumped.encode("utf-8")  # no lone surrogate is left to break the JSON file


MARKUP = [
    "<img src=x onerror=alert(1)>",
    "<script>alert('evil')</script>",
    "[a link](https://example.com) and ![an image](https://example.com/x.png)",
    "| a | fake | row |",
    "**bold** _em_ `code` ~~gone~~ # heading <!-- comment -->",
    "&lt;already an entity&gt; &amp;",
]


@pytest.mark.parametrize("text", MARKUP)
def test_html_and_markdown_from_a_submission_stay_inert(text: str) -> None:
    """The class view escapes it as HTML; the Markdown summary as HTML and Markdown outside
    its code blocks (a table row, a heading), and inside them it is only text."""
    subs = [hostile_report(text), SubmissionReport.not_graded(f"{text}.ipynb", f"corrupt: {text}")]
    result = report.batch(subs, 1.0)
    page = classview.render(result)
    assert "<img" not in page and "<script" not in page and "<!--" not in page
    summary = classroom.markdown(result)
    rows = [line for line in summary.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(subs)  # the header and one row each: no row forged
    headings = [line for line in summary.splitlines() if line.startswith("### ")]
    for line in rows + headings:
        bare = re.sub(r"\\.", "", line)  # what is left once every escaped character goes
        assert not re.search(r"[<>`*_\[\]~]", bare), line
        assert bare.count("|") == (4 if line.startswith("|") else 0), line


def test_escapes_stay_visible() -> None:
    assert report.clean("a\x00b\x1b[31mc\x0cd\ud800e") == "a\\x00bc\\x0cd\\ud800e"
    assert report.clean_line("two\nlines") == "two\\nlines"


def test_learner_text_cannot_forge_a_report_line() -> None:
    sub = hostile_report("x").model_copy(
        update={
            "exercises": [
                report.exercise_score(
                    "ex1",
                    [
                        CheckScore(
                            name="ex1/c",
                            title="c",
                            hidden=True,
                            outcome=Outcome.ERROR,
                            points=0,
                            max_points=1,
                            message=FORGED,
                        )
                    ],
                )
            ],
            "notices": [f"cell `x` raised: {FORGED}"],
            "mismatch": "",
        }
    )
    text = report.feedback(SubmissionReport.model_validate(sub.model_dump()))
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("Score:")] == ["Score: 0/1 (0%)"]
    assert "All checks passed" not in "\n".join(
        line for line in lines if not line.lstrip().startswith("|")
    )
    for line in lines:
        if "100" in line or "[passed]" in line or "All checks" in line:
            assert line.startswith(("    | ", "      | ")), line
    failed = report.feedback(SubmissionReport.not_graded("a.ipynb", f"a.ipynb: corrupt {FORGED}"))
    assert not [line for line in failed.splitlines() if line.startswith("Score:")]


def test_batch_files_are_never_overwritten_by_a_submission(tmp_path: Path) -> None:
    subs = [
        hostile_report("x").model_copy(update={"file": name, "points": float(n)})
        for n, name in enumerate(["batch.ipynb", "class.ipynb", "junit.ipynb", "batch.ipynb"])
    ]
    result = report.batch(subs, 1.0)
    batch.write(result, tmp_path, tmp_path / "junit.xml")
    whole = report.BatchReport.model_validate_json((tmp_path / "batch.json").read_text())
    assert len(whole.submissions) == 4
    assert (tmp_path / "class.html").read_text().startswith("<!DOCTYPE html>")
    ET.parse(tmp_path / "junit.xml")
    folder = tmp_path / "submissions"
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(
        f"{stem}{ext}"
        for stem in ("batch", "batch-2", "class", "junit")
        for ext in (".json", ".feedback.txt")
    )
    second = SubmissionReport.model_validate_json((folder / "batch-2.json").read_text())
    assert second.points == 3.0


def test_class_view_charts_exercises_and_outputs_apart() -> None:
    passed = CheckScore(
        name="o/c",
        title="c",
        hidden=False,
        outcome=Outcome.PASSED,
        points=1,
        max_points=1,
        message="",
    )
    failed = passed.model_copy(update={"outcome": Outcome.INCORRECT, "points": 0.0})
    sub = SubmissionReport(
        file="a.ipynb",
        status="graded",
        solution="replay",
        exercises=[
            report.exercise_score("ex1", [failed]),
            report.exercise_score(report.OUTPUTS_SECTION, [passed]),
        ],
    )
    page = classview.render(report.batch([sub], 1.0))
    exercises, rest = page.split('aria-label="mean score per exercise">')[1].split("</svg>", 1)
    assert ">ex1<" in exercises and ">outputs<" not in exercises
    assert "Checked outputs" in rest and ">outputs<" in rest and ">100%<" in rest


class FakeRunner:
    def __init__(self) -> None:
        self.sources: list[str] = []
        self.layout: dict[str, Any] = {}

    def run(self, scratch: Path, sources: Sequence[str], deadline: Deadline) -> Execution:
        self.sources = list(sources)
        outputs = scratch.parent / "outputs"
        self.layout = {"outputs": outputs.resolve(), "inside": scratch.resolve()}
        return Execution([CellRun(CellStatus.NOT_RUN)] * len(sources), True, "stopped")


@pytest.fixture
def course() -> grader.Course:
    return grader.Course.load(FIXTURES)


def test_the_solution_graded_against_is_shown_and_a_mismatch_flagged(
    tmp_path: Path, course: grader.Course
) -> None:
    # An untouched `elicitation` copy handed in under `replay`'s file name; a `paths` copy
    # under a name of its own (matched by metadata); a `replay` copy under its own name.
    wrong = write(tmp_path / "subs", "replay.ipynb", learner("elicitation"))
    renamed = write(tmp_path / "subs", "ex1.ipynb", learner("paths"))
    right = write(tmp_path / "more", "replay.ipynb", learner("replay"))
    subs = [
        grader.grade(p, course, FakeRunner(), scratch_root=tmp_path)
        for p in (wrong, renamed, right)
    ]
    assert [s.solution for s in subs] == ["replay", "paths", "replay"]
    assert "notebook says it is 'elicitation'" in subs[0].mismatch
    assert "file is named 'ex1.ipynb'" in subs[1].mismatch
    assert subs[2].mismatch == ""
    result = report.batch(subs, 1.0)
    lines = batch.summary(result).splitlines()
    assert "replay  MISMATCH: graded as replay, but the notebook says" in lines[1]
    assert "MISMATCH" not in lines[3] and lines[3].rstrip().endswith("replay")
    page = classview.render(result)
    assert page.count('class="flag">mismatch:') == 2
    assert "Check the file name:" in report.feedback(subs[0])
    assert SubmissionReport.model_validate_json(subs[0].model_dump_json()) == subs[0]


def test_graded_as_a_named_notebook(tmp_path: Path, course: grader.Course) -> None:
    nb = solved("replay")
    nb.metadata.pop("labkit")
    path = write(tmp_path / "subs", "homework.ipynb", nb)
    plain = grader.grade(path, course, FakeRunner(), scratch_root=tmp_path)
    assert plain.status == "error" and "matches no solution notebook" in plain.error
    runner = FakeRunner()
    sub = grader.grade(path, course, runner, scratch_root=tmp_path, graded_as="replay")
    assert sub.status == "graded" and sub.solution == "replay"
    assert "file is named 'homework.ipynb'" in sub.mismatch
    assert any("def claim_and_delete" in s for s in runner.sources)
    unknown = grader.grade(path, course, FakeRunner(), scratch_root=tmp_path, graded_as="nope")
    assert unknown.status == "error" and "--as nope" in unknown.error


def test_cli_as_names_an_unknown_notebook(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "homework.ipynb", solved("replay"))
    args = ["grade", str(path), "--solutions", str(FIXTURES), "--as", "nope"]
    assert cli.main([*args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--as nope: no such solution notebook" in err and "replay" in err


def test_outputs_folder_is_beside_the_working_directory(
    tmp_path: Path, course: grader.Course
) -> None:
    runner = FakeRunner()
    grader.grade(
        write(tmp_path / "subs", "replay.ipynb", solved("replay")),
        course,
        runner,
        scratch_root=tmp_path,
    )
    inside: Path = runner.layout["inside"]
    assert runner.layout["outputs"] == inside / ".outputs"  # `../outputs` is writable
    assert not inside.exists()  # the whole scratch area is gone after grading
