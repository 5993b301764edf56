"""`labkit grade` end to end: a batch of synthetic submissions through the CLI, with real kernels.

One module-scoped batch (solutions, fresh copies, a partial answer, renamed and reshaped
notebooks, an infinite loop, a 6 GB allocation, `os._exit`, a killed kernel, a corrupt file
and a non-notebook) is graded with `--jobs 2`; each test reads what it wrote.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from nbformat.v4 import new_code_cell

from grade.grade_helpers import (
    CASE_FOLDED,
    FIXTURES,
    SORTED_KEYS,
    TIDIES_TEXT,
    learner,
    solved,
    with_cell,
    with_source,
    write,
)
from labkit import cli
from labkit.course.exercises.trial import Outcome
from labkit.grade import report
from labkit.grade.graded_exercises import GRADED
from labkit.grade.report import BatchReport, SubmissionReport

ANSI = re.compile(r"\x1b\[")
Graded = tuple[int, Path, Path]


def _reshaped() -> Any:
    """Replay with a copied answer cell, a deleted cell, a retyped cell and an added cell."""
    nb = solved("replay")
    answer = next(c for c in nb.cells if c.get("id") == "ex1-answer")
    copied = new_code_cell(answer.source, metadata={"tags": ["answer"]})
    copied["id"] = "pasted-copy"
    nb.cells.append(copied)
    nb.cells = [c for c in nb.cells if c.get("id") != "address"]
    intro = next(c for c in nb.cells if c.get("id") == "intro")
    intro["cell_type"] = "code"
    intro["outputs"], intro["execution_count"] = [], None
    intro.source = "# a markdown cell turned into code"
    return with_cell(nb, "scratch-work", "x = 41 + 1", after="ex1-answer")


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    subs = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("grades")
    for name in ("replay", "paths", "elicitation"):
        write(subs / "solved", f"{name}.ipynb", solved(name))
        write(subs / "fresh", f"{name}.ipynb", learner(name))
    write(subs / "more", "partial.ipynb", with_source(solved("replay"), "ex1-answer", CASE_FOLDED))
    write(subs / "more", "my-paths-final.ipynb", solved("paths"))
    both = with_source(solved("elicitation"), "ex2-answer", TIDIES_TEXT)
    write(subs / "more", "partial-elicitation.ipynb", with_source(both, "ex5-answer", SORTED_KEYS))
    write(subs / "more", "reshaped.ipynb", _reshaped())
    broken = {
        "loop": "while True:\n    pass",
        "memory": "big = bytearray(6 * 1024**3)",
        "exit": "import os\nos._exit(1)",
        "crash": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
        "shadows": "compile = exec = globals = display = inspect = None",
    }
    for name, source in broken.items():
        write(
            subs / "more", f"{name}.ipynb", with_cell(solved("replay"), name, source, "ex1-answer")
        )
    (subs / "more" / "corrupt.ipynb").write_text('{"cells": [{"cell_type": "code", "sou')
    (subs / "more" / "essay.txt").write_text("Dear grader,\n")
    (subs / "more" / "data.ipynb").write_text('{"rows": [1, 2, 3]}')
    junit = out / "junit.xml"
    code = cli.main(
        [
            "grade",
            str(subs / "solved"),
            str(subs / "fresh"),
            str(subs / "more"),
            str(subs / "more" / "essay.txt"),
            "--solutions",
            str(FIXTURES),
            "--out",
            str(out),
            "--junit",
            str(junit),
            "--jobs",
            "2",
            "--timeout",
            "10",
        ]
    )
    return code, out, junit


def _batch(out: Path) -> BatchReport:
    return BatchReport.model_validate_json((out / "batch.json").read_text())


def _report(out: Path, stem: str) -> SubmissionReport:
    return SubmissionReport.model_validate_json((out / "submissions" / f"{stem}.json").read_text())


def _checks(sub: SubmissionReport, exercise: str) -> dict[str, Outcome]:
    section = next(e for e in sub.exercises if e.id == exercise)
    return {c.name: c.outcome for c in section.checks}


def test_exit_code_is_non_zero_when_a_file_could_not_be_graded(
    graded: Graded,
) -> None:
    code, out, _ = graded
    batch = _batch(out)
    assert code == 1
    errors = {s.file: s.error for s in batch.submissions if s.status == "error"}
    assert set(errors) == {"corrupt.ipynb", "essay.txt", "data.ipynb"}
    assert "corrupt" in errors["corrupt.ipynb"] and "corrupt.ipynb" in errors["corrupt.ipynb"]
    assert "not a notebook" in errors["essay.txt"] and "essay.txt" in errors["essay.txt"]
    assert "not a notebook" in errors["data.ipynb"]
    assert batch.graded == len(batch.submissions) - 3  # the rest graded normally


def test_solutions_score_full_marks(graded: Graded) -> None:
    _, out, _ = graded
    solved_reports = [
        s for s in _batch(out).submissions if s.status == "graded" and s.percent == 100
    ]
    files = {s.file for s in solved_reports}
    assert {"replay.ipynb", "paths.ipynb", "elicitation.ipynb", "my-paths-final.ipynb"} <= files
    for sub in solved_reports:
        assert all(c.outcome is Outcome.PASSED for e in sub.exercises for c in e.checks)


def test_fresh_learner_copies_score_zero_on_the_exercises(graded: Graded) -> None:
    _, out, _ = graded
    fresh = [
        s
        for s in _batch(out).submissions
        if s.percent < 100 and s.file in ("replay.ipynb", "paths.ipynb", "elicitation.ipynb")
    ]
    assert len(fresh) == 3
    for sub in fresh:
        for exercise in sub.exercises:
            if exercise.id in GRADED:
                assert exercise.points == 0
                assert {c.outcome for c in exercise.checks} <= {
                    Outcome.NOT_ATTEMPTED,
                    Outcome.INCORRECT,
                }


def test_partial_submission_gets_exactly_its_partial_score(graded: Graded) -> None:
    _, out, _ = graded
    sub = _report(out, "partial")
    ex1 = next(e for e in sub.exercises if e.id == "ex1")
    hidden = {c.name: c.outcome for c in ex1.checks if c.hidden}
    assert hidden == {
        "ex1/claims in sequence": Outcome.INCORRECT,
        "ex1/a rival between your statements": Outcome.INCORRECT,
        "ex1/six racing processes": Outcome.PASSED,
        "ex1/no safety fault": Outcome.PASSED,
    }
    # The course's public checks all pass: the flaw shows only on a hidden check's inputs.
    public = [c for c in ex1.checks if not c.hidden]
    assert public  # labkit.course.exercises.checks is present: its public checks run at grading
    assert all(c.outcome is Outcome.PASSED for c in public)
    public_points = sum(c.max_points for c in public)
    assert (ex1.points, ex1.max_points) == (6.0 + public_points, 12.0 + public_points)
    # ex1-demo shows claim_and_delete at work and declares no checks of its own, so its output
    # counts only once every check of ex1 passed: the hidden checks did not.
    demo = next(c for e in sub.exercises for c in e.checks if c.name == "outputs/ex1-demo")
    assert demo.outcome is Outcome.NOT_ATTEMPTED and "claims in sequence" in demo.message
    assert (sub.points, sub.max_points) == (7.0 + public_points, 14.0 + public_points)


def test_ex2_and_ex5_hidden_checks_see_what_the_public_ones_cannot(graded: Graded) -> None:
    _, out, _ = graded
    sub = _report(out, "partial-elicitation")
    sections = {e.id: e for e in sub.exercises}
    for exercise, failing, said in (
        ("ex2", "generated requests", "it should have done what the reference does"),
        ("ex5", "generated maps", "it should have done what the reference does"),
    ):
        checks = sections[exercise].checks
        assert [c for c in checks if not c.hidden]  # the public checks ran too
        wrong = {c.name: c for c in checks if c.outcome is not Outcome.PASSED}
        assert list(wrong) == [f"{exercise}/{failing}"]
        check = wrong[f"{exercise}/{failing}"]
        assert check.hidden and check.outcome is Outcome.INCORRECT
        assert check.message.startswith(f"{exercise} · {failing}: ") and said in check.message
        assert ", but " in check.message and "Next: " in check.message
    fresh = next(
        s for s in _batch(out).submissions if s.file == "elicitation.ipynb" and s.percent < 100
    )
    for section in fresh.exercises:
        if section.id in ("ex2", "ex5"):
            assert {c.outcome for c in section.checks} == {Outcome.NOT_ATTEMPTED}
            assert any(c.hidden for c in section.checks)


def test_renamed_notebook_is_matched_by_its_metadata(graded: Graded) -> None:
    _, out, _ = graded
    sub = _report(out, "my-paths-final")
    assert sub.solution == "paths" and sub.percent == 100
    assert any("matched by its metadata" in n for n in sub.notices)


def test_changed_cells_are_named_in_the_feedback(graded: Graded) -> None:
    _, out, _ = graded
    text = (out / "submissions" / "reshaped.feedback.txt").read_text()
    assert "copy of an answer cell" in text
    assert "cell `address` was deleted" in text
    assert "cell `intro` was changed from markdown to code" in text
    assert "was added" in text
    reshaped = _checks(_report(out, "reshaped"), "ex1")
    assert reshaped["ex1/six racing processes"] is Outcome.PASSED


def test_a_loop_a_memory_bomb_and_shadowed_builtins_do_not_stop_grading(
    graded: Graded,
) -> None:
    _, out, _ = graded
    loop, memory = _report(out, "loop"), _report(out, "memory")
    assert any("did not finish within the time limit" in n for n in loop.notices)
    assert any("ran out of memory: MemoryError" in n for n in memory.notices)
    for sub in (loop, memory, _report(out, "shadows")):
        assert set(_checks(sub, "ex1").values()) == {Outcome.PASSED}


@pytest.mark.parametrize("stem", ["exit", "crash"])
def test_a_dead_kernel_fails_the_outputs_after_it_and_not_the_checks(
    graded: Graded, stem: str
) -> None:
    _, out, _ = graded
    sub = _report(out, stem)
    assert sub.status == "graded"
    outputs = {c.name: c.outcome for e in sub.exercises if e.id == "outputs" for c in e.checks}
    assert set(outputs.values()) == {Outcome.DID_NOT_RUN}
    # The checks run in a worker of their own, from the answer cells: the kernel's death does
    # not reach them.
    assert set(_checks(sub, "ex1").values()) == {Outcome.PASSED}
    assert any("the kernel died" in n for n in sub.notices)
    text = (out / "submissions" / f"{stem}.feedback.txt").read_text()
    assert "did not run" in text and "All checks passed" not in text


def test_feedback_has_no_ansi_no_hidden_source_and_no_false_all_passed(
    graded: Graded,
) -> None:
    _, out, junit = graded
    # Every function the hidden checks define, as their source writes it.
    secrets = [
        line.split("(")[0]
        for exercise in GRADED.values()
        for line in exercise.source().splitlines()
        if line.startswith("def ")
    ]
    assert len(secrets) > 10
    for path in [*out.rglob("*.*"), junit]:
        text = path.read_text()
        assert not ANSI.search(text), path.name
        for secret in secrets:
            assert secret not in text, (path.name, secret)
    for sub in _batch(out).submissions:
        feedback = report.feedback(sub)
        hidden_failed = any(
            c.hidden and c.outcome is not Outcome.PASSED for e in sub.exercises for c in e.checks
        )
        if hidden_failed:
            assert "all" not in feedback.lower().split("passed")[0][-20:]
            assert "All checks passed" not in feedback


def test_reports_validate_and_junit_has_one_testcase_per_check(
    graded: Graded,
) -> None:
    _, out, junit = graded
    batch = _batch(out)
    assert batch.schema_version == report.SCHEMA_VERSION
    for sub in batch.submissions:
        assert SubmissionReport.model_validate(json.loads(sub.model_dump_json())) == sub
    root = ET.parse(junit).getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    partial = _report(out, "partial")
    cases = suites["partial.ipynb"].findall("testcase")
    assert len(cases) == sum(len(e.checks) for e in partial.exercises)
    failed = [
        c.find("failure").get("message") or "" for c in cases if c.find("failure") is not None
    ]
    # The two hidden checks, and the demo output they hold back.
    assert len(failed) == 3 and "'Alice'" in failed[0]
    assert "counts once the checks of what it shows pass" in failed[2]
    assert suites["corrupt.ipynb"].find("testcase/error") is not None


def test_class_view_opens_offline(graded: Graded) -> None:
    _, out, _ = graded
    page = (out / "class.html").read_text()
    assert "<svg" in page and "Checks most often failed" in page
    assert not re.search(r"<(script|link)[^>]*(src|href)=[\"']?https?:", page, re.I)
    assert "http://" not in page and "https://" not in page
    assert "claims in sequence" in page  # a check the class failed


def test_fail_under(tmp_path: Path) -> None:
    write(tmp_path / "subs", "replay.ipynb", solved("replay"))
    args = [
        "grade",
        str(tmp_path / "subs"),
        "--solutions",
        str(FIXTURES),
        "--out",
        str(tmp_path / "o"),
    ]
    assert cli.main(args) == 0
    write(
        tmp_path / "subs", "partial.ipynb", with_source(solved("replay"), "ex1-answer", CASE_FOLDED)
    )
    assert cli.main([*args, "--fail-under", "95"]) == 1  # 14/21 with the public checks
    assert cli.main([*args, "--fail-under", "60"]) == 0


def test_an_out_that_is_a_file_is_refused_before_grading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "subs", "replay.ipynb", solved("replay"))
    taken = tmp_path / "grades"
    taken.write_text("not a folder")
    args = ["grade", str(tmp_path / "subs"), "--solutions", str(FIXTURES), "--out", str(taken)]
    assert cli.main(args) == 2
    said = capsys.readouterr()
    assert f"--out {taken}: exists and is not a folder" in said.err
    assert "containment" not in said.out  # refused before anything was graded
    assert taken.read_text() == "not a folder"


@pytest.mark.parametrize(
    "option", ["--junit", "--summary-md", "--gradescope-results", "--classroom-output"]
)
def test_an_output_file_that_cannot_be_written_is_refused_before_grading(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "subs", "replay.ipynb", solved("replay"))
    taken = tmp_path / "taken"
    taken.mkdir()
    under_a_file = tmp_path / "notes.txt"
    under_a_file.write_text("a file, not a folder")
    base = ["grade", str(tmp_path / "subs"), "--solutions", str(FIXTURES)]
    base += ["--out", str(tmp_path / "grades")]
    for path, said in [
        (taken, f"{option} {taken}: exists and is a folder"),
        (under_a_file / "x", f"{option} {under_a_file / 'x'}: {under_a_file} is not a folder"),
    ]:
        assert cli.main([*base, option, str(path)]) == 2
        out = capsys.readouterr()
        assert said in out.err
        assert "containment" not in out.out  # refused before anything was graded
        assert not (tmp_path / "grades").exists()


def test_an_out_in_a_folder_the_grader_cannot_write_is_refused(tmp_path: Path) -> None:
    """As an unprivileged user: the reports' folder would be made where it may not write."""
    notebook = write(tmp_path / "subs", "replay.ipynb", solved("replay"))
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    user += ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    labkit_cli = [sys.executable, "-m", "labkit.cli", "grade", str(notebook), "--solutions"]
    labkit_cli += [str(FIXTURES), "--out", str(locked / "out"), "--containment", "unconfined"]
    done = subprocess.run([*user, *labkit_cli], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"--out {locked / 'out'}: {locked} is not writable" in done.stderr
    assert not (locked / "out").exists()
