"""Locked cells with real kernels: every released cell runs as released, whatever the
submission holds; only the answer cells (those the course build stubbed) carry the learner's
code. A notebook saved without cell ids grades exactly as with them, and a debug print in a
correct answer costs nothing."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from nbformat import NotebookNode

from grade.grade_helpers import learner, solution, solved, with_cell, with_source, write
from labkit.course.exercises.checks import SAFETY_CHECK
from labkit.course.exercises.trial import Outcome
from labkit.grade import grader
from labkit.grade.kernel import KernelRunner, Limits, sandbox_mode, write_kernelspec
from labkit.grade.report import SubmissionReport

DEBUG_ANSWER = (
    solved("replay")
    .cells[2]
    .source.replace('    """', '    print("debug: claiming", nonce, "for", principal)\n    """', 1)
    + '\nprint("debug: the answer cell ran")\n'
)


def saved_text(cell_id: str) -> str:
    cell = next(c for c in solution("replay").cells if c.get("id") == cell_id)
    return "".join(o.get("text", "") for o in cell.outputs)


def without_ids(nb: NotebookNode) -> NotebookNode:
    """As Colab and older tools save it: nbformat 4.4, no cell ids."""
    nb = copy.deepcopy(nb)
    nb.nbformat_minor = 4
    for cell in nb.cells:
        cell.pop("id", None)
    return nb


def forged(nb: NotebookNode) -> NotebookNode:
    """The try cell and the address cell edited to print the solution's saved output."""
    for cell_id in ("ex1-demo", "address"):
        nb = with_source(
            nb, cell_id, f"# NBVAL_CHECK_OUTPUT\nprint({saved_text(cell_id)!r}, end='')"
        )
    return nb


SUBMISSIONS = {
    "fresh": learner("replay"),
    "forged": forged(learner("replay")),
    "solved": solved("replay"),
    "solved-no-ids": without_ids(solved("replay")),
    "fresh-no-ids": without_ids(learner("replay")),
    "debug": with_source(solved("replay"), "ex1-answer", DEBUG_ANSWER),
    # A helper of the learner's own, defined in the answer cell, that prints.
    "helper": with_source(
        solved("replay"),
        "ex1-answer",
        "def note(nonce):\n    print('helper saw', nonce)\n\n\n"
        + solved("replay").cells[2].source.replace('    """', '    note(nonce)\n    """', 1),
    ),
    # The same helper in a cell the learner added: the notebook runs it, the checks never see
    # it (they hold the answer cells only), so the answer's calls to it fail.
    "helper-elsewhere": with_cell(
        with_source(
            solved("replay"),
            "ex1-answer",
            solved("replay").cells[2].source.replace('    """', '    note(nonce)\n    """', 1),
        ),
        "mine",
        "def note(nonce):\n    print('helper saw', nonce)",
        after="setup",
    ),
}


# Scores are compared between submissions: generous limits, so that a loaded machine cannot
# time out a check in one run and not in the other.
LIMITS = Limits(cell_timeout=60, total_timeout=300)


@pytest.fixture(scope="module")
def graded(
    tmp_path_factory: pytest.TempPathFactory, course: grader.Course, work: Path
) -> dict[str, SubmissionReport]:
    spec = write_kernelspec(work / "locked-spec", LIMITS, sandbox=sandbox_mode())
    runner = KernelRunner(spec, LIMITS)
    folder = tmp_path_factory.mktemp("locked")
    found = {}
    for name, nb in SUBMISSIONS.items():
        # Each file is named for its solution; one folder per submission.
        path = write(folder / name, "replay.ipynb", nb)
        if name.endswith("no-ids"):
            raw = json.loads(path.read_text())
            assert raw["nbformat_minor"] == 4 and all("id" not in c for c in raw["cells"])
        found[name] = grader.grade(path, course, runner, scratch_root=work)
    return found


def outputs(sub: SubmissionReport) -> dict[str, Outcome]:
    section = next(e for e in sub.exercises if e.id == "outputs")
    return {c.name: c.outcome for c in section.checks}


def test_editing_a_locked_cell_to_print_the_saved_output_gains_nothing(
    graded: dict[str, SubmissionReport],
) -> None:
    fresh, forged_ = graded["fresh"], graded["forged"]
    assert forged_.points <= fresh.points and forged_.percent <= fresh.percent
    assert outputs(forged_)["outputs/ex1-demo"] is not Outcome.PASSED
    edited = [n for n in forged_.notices if "was edited" in n]
    assert edited == [
        "cell `ex1-demo` (cell 4) was edited; the released version was graded",
        "cell `address` (cell 5) was edited; the released version was graded",
    ]
    assert not [n for n in fresh.notices if "edited" in n]


def test_a_notebook_without_cell_ids_grades_as_with_them(
    graded: dict[str, SubmissionReport],
) -> None:
    for with_ids, without in (("solved", "solved-no-ids"), ("fresh", "fresh-no-ids")):
        a, b = graded[with_ids], graded[without]
        assert (b.points, b.max_points) == (a.points, a.max_points)
        assert b.notices == a.notices
        assert not [n for n in b.notices if "added" in n or "deleted" in n or "edited" in n]
        assert [(c.name, c.outcome) for e in b.exercises for c in e.checks] == [
            (c.name, c.outcome) for e in a.exercises for c in e.checks
        ]
    assert graded["solved-no-ids"].percent == 100


def test_a_debug_print_in_a_correct_answer_costs_nothing(
    graded: dict[str, SubmissionReport],
) -> None:
    for name in ("debug", "helper"):
        sub = graded[name]
        assert sub.percent == 100, [
            (c.name, c.message) for e in sub.exercises for c in e.checks if c.points < c.max_points
        ]
    assert graded["helper"].notices == []


def test_the_checks_see_only_the_answer_cells(graded: dict[str, SubmissionReport]) -> None:
    sub = graded["helper-elsewhere"]
    assert sub.notices == [
        "cell 3 was added (it runs in the notebook; the checks see only the answer cells)"
    ]
    ex1 = next(e for e in sub.exercises if e.id == "ex1")
    assert ex1.points == 0
    *checks, safety = ex1.checks
    assert safety.title == SAFETY_CHECK and safety.outcome is Outcome.INCORRECT
    assert {c.outcome for c in checks} == {Outcome.ERROR}
    assert all("NameError" in c.message and "note" in c.message for c in checks)
