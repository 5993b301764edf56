"""Submissions that try to forge their grade, graded for real (`labkit grade`, confined
kernels and check workers), beside the untouched learner copy of the same notebook.

Each forgery starts from the released learner copy of exercise 2's notebook (as shipped in
`notebooks/`) with its answer cell replaced (one also edits a locked cell): hooks that display
fake "passed" results before and after every cell, a patched display publisher, a replaced
`builtins.exec`, a planted `sys.modules` entry for the check engine, predefined grader
namespace objects, a patched `Checker`, always-equal objects returned, a function that reads
its caller's locals, a function correct only inside the notebook's kernel, a locked cell
edited to print the solution's saved output, a printed fake score, and a hook printing the
kernel's input history. None may score more than the untouched learner copy, none may be
told "All checks passed", and no text of the hidden checks' source may appear in any report.
A solved copy in the same batch scores more, so the comparison can fail.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
from pathlib import Path

import pytest
from nbformat import NotebookNode

from grade.grade_helpers import COURSE, solved, write
from labkit import cli
from labkit.course import build
from labkit.grade.report import BatchReport, SubmissionReport

STEM = "04-ex2-url-mode"
LEARNER_COPY = COURSE.parent / "notebooks" / f"{STEM}.ipynb"
ANSWER = "ex2-solution"
DEMO = "ex2-try"  # a checked cell that shows url_elicitation at work
MIME = "application/vnd.labkit.check+json"
PUBLIC_MIME = "application/vnd.labkit.public+json"
FAKE = f"""{{
    {MIME!r}: {{"key": "ex2", "outcome": "passed", "message": ""}},
    {PUBLIC_MIME!r}: {{"results": [
        {{"name": c.name, "outcome": "passed", "message": "", "points": c.points}}
        for c in __import__("labkit.course.exercises.registry", fromlist=["x"])
        .EXERCISES["ex2"].checks
    ]}},
}}"""
CORRECT = """
def url_elicitation(capabilities, message, url):
    from labkit import MISSING_CAPABILITY, ProtocolError
    if "url" not in (capabilities.get("elicitation") or {}):
        raise ProtocolError(
            MISSING_CAPABILITY, "URL mode needed",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    params = {"mode": "url", "message": message, "url": url}
    return {"method": "elicitation/create", "params": params}
"""

# Each forgery: the answer cell's code, holding the starter stub where it says `#STUB`. The
# two that define their own function stay a stub (NotImplementedError) wherever their trick
# does not apply, so the trick alone is what is measured.
FORGERIES = {
    "run-cell-hooks": f"""
from IPython import get_ipython
from IPython.display import display
def _forge(*args):
    display({FAKE}, raw=True)
get_ipython().events.register("pre_run_cell", _forge)
get_ipython().events.register("post_run_cell", _forge)
#STUB
""",
    "display-publisher": f"""
from IPython import get_ipython
_publisher = get_ipython().display_pub
_publish = _publisher.publish
def _forged_publish(data, metadata=None, **kw):
    return _publish({{**data, **{FAKE}}}, metadata, **kw)
_publisher.publish = _forged_publish
#STUB
""",
    "builtins-exec": f"""
import builtins
from IPython.display import display
def _forged_exec(*args, **kw):
    display({FAKE}, raw=True)
builtins.exec = _forged_exec
#STUB
""",
    "sys-modules": """
import sys, types
class _Report:
    passed = True
    results = ()
    outcome = None
    def to_dict(self):
        return {"outcome": "passed", "results": []}
class _Checker:
    def __init__(self, *args, **kw):
        pass
    def check(self, *args, **kw):
        return _Report()
_fake = types.ModuleType("labkit.course.exercises.checks")
_fake.Checker = _Checker
_fake.run_checks = lambda *args, **kw: _Report()
_fake.check = lambda *args, **kw: print("ex2: public checks passed (4/4)")
for _name in ("labkit.course.exercises.checks", "labkit.grade.probe", "labkit.grade.grader"):
    sys.modules[_name] = _fake
#STUB
""",
    "grader-namespace": f"""
from IPython.display import display
def _passed(*args, **kw):
    display({FAKE}, raw=True)
class _Everything(dict):
    def __missing__(self, key):
        return _passed
__labkit_checks__ = _Everything(ex2=_Everything(run=_passed, public=_passed))
__labkit_builtins__ = __import__("builtins")
#STUB
""",
    "patched-checker": """
import labkit.course.exercises.checks as _engine
from labkit.course.exercises.trial import Outcome
def _all_passed(exercise, check, *args, **kw):
    return _engine.CheckResult(
        check.name, Outcome.PASSED, "passed", check.points, check.points, check.hidden
    )
_engine.run_check = _all_passed
_engine.Checker.check = lambda self, exercise_id, /, **kw: _engine.CheckReport(
    exercise_id, "forged", ()
)
#STUB
""",
    "always-equal": """
class _Yes(dict):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = None
class _YesStr(str):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = str.__hash__
def url_elicitation(capabilities, message, url):
    if "url" not in (capabilities.get("elicitation") or {}):
        raise NotImplementedError  # the starter stub, but where an entry is expected
    params = _Yes(mode=_YesStr("url"), message=_YesStr(message), url=_YesStr(url))
    return _Yes(method=_YesStr("elicitation/create"), params=params)
""",
    "caller-locals": """
import sys
def url_elicitation(capabilities, message, url):
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("expected", "want", "wanted", "result", "entry"):
            if name in frame.f_locals:
                return frame.f_locals[name]
        frame = frame.f_back
    raise NotImplementedError  # the starter stub when nothing is found
""",
    "kernel-only-answer": f"""
#STUB
try:
    get_ipython
except NameError:
    pass  # the grader's check process: keep the stub below
else:
    exec({CORRECT!r})  # in the notebook's kernel only: a right answer for the outputs
""",
    "fake-score": """
import os
_TEXT = "Score: 100/100 (100%)\\nAll checks passed, hidden checks included.\\n"
print(_TEXT)
from IPython import get_ipython
get_ipython().events.register("post_run_cell", lambda *args: os.write(1, _TEXT.encode()))
#STUB
""",
    "input-history": """
import os
from IPython import get_ipython
def _leak(*args):
    ip = get_ipython()
    seen = list(ip.user_ns.get("In", [])) + list(ip.history_manager.input_hist_raw)
    wanted = [s for s in seen if "CHECKS" in s or "hidden" in s or "__labkit" in s]
    os.write(1, "\\n".join(wanted or seen).encode())
get_ipython().events.register("post_run_cell", _leak)
#STUB
""",
}


def _cell(nb: NotebookNode, cell_id: str) -> NotebookNode:
    return next(c for c in nb.cells if c.get("id") == cell_id)


def _answer_cell(forgery: str, stub: str) -> str:
    """The forgery with the starter stub where it says `#STUB` (none: it defines its own)."""
    return forgery.replace("#STUB", stub)


def _locked_edit(learner: NotebookNode) -> NotebookNode:
    """The demo cell edited to print what the solution's demo printed."""
    saved = _cell(build.read_notebook(COURSE / f"{STEM}.ipynb"), DEMO).outputs
    text = "".join(o.get("text", "") for o in saved if o.get("output_type") == "stream")
    nb = copy.deepcopy(learner)
    _cell(nb, DEMO).source = f"# NBVAL_CHECK_OUTPUT\nprint({text!r}, end='')"
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[BatchReport, Path]:
    subs = tmp_path_factory.mktemp("forgeries")
    out = tmp_path_factory.mktemp("forgery-grades")
    learner = build.read_notebook(LEARNER_COPY)
    stub = _cell(learner, ANSWER).source
    write(subs, "untouched.ipynb", learner)
    write(subs, "solved.ipynb", solved(STEM, COURSE))
    for name, forgery in FORGERIES.items():
        nb = copy.deepcopy(learner)
        _cell(nb, ANSWER).source = _answer_cell(forgery, stub)
        write(subs, f"{name}.ipynb", nb)
    write(subs, "locked-cell-edit.ipynb", _locked_edit(learner))
    code = cli.main(
        ["grade", str(subs), "--solutions", str(COURSE), "--as", STEM, "--out", str(out)]
        + ["--jobs", "2", "--timeout", "20"]
    )
    assert code == 0
    return BatchReport.model_validate_json((out / "batch.json").read_text()), out


def _by_file(batch: BatchReport) -> dict[str, SubmissionReport]:
    return {s.file.removesuffix(".ipynb"): s for s in batch.submissions}


@pytest.mark.parametrize("name", [*FORGERIES, "locked-cell-edit"])
def test_a_forgery_scores_no_more_than_the_untouched_learner_copy(
    graded: tuple[BatchReport, Path], name: str
) -> None:
    batch, out = graded
    reports = _by_file(batch)
    baseline, forged = reports["untouched"], reports[name]
    assert forged.status == "graded", forged.error
    assert forged.max_points == baseline.max_points > 0
    assert forged.points <= baseline.points, [
        (c.name, c.outcome.value) for e in forged.exercises for c in e.checks if c.points
    ]
    ex2 = next(e for e in forged.exercises if e.id == "ex2")
    assert ex2.points == 0 and any(c.hidden for c in ex2.checks)
    feedback = (out / "submissions" / f"{name}.feedback.txt").read_text()
    assert "All checks passed" not in feedback
    assert sum(line.startswith("Score:") for line in feedback.splitlines()) == 1


def test_a_solved_copy_scores_more_than_the_untouched_one(
    graded: tuple[BatchReport, Path],
) -> None:
    reports = _by_file(graded[0])
    assert reports["solved"].points > reports["untouched"].points
    ex2 = next(e for e in reports["solved"].exercises if e.id == "ex2")
    assert ex2.points == ex2.max_points > 0


def test_the_demo_output_counts_only_with_a_passing_check(
    graded: tuple[BatchReport, Path],
) -> None:
    """The kernel-only answer prints the right demo output, but the checks see the stub."""
    reports = _by_file(graded[0])
    demo = {
        name: next(
            c for e in reports[name].exercises for c in e.checks if c.name == f"outputs/{DEMO}"
        )
        for name in ("kernel-only-answer", "solved")
    }
    assert demo["solved"].points == 1
    assert demo["kernel-only-answer"].points == 0
    assert "counts once the checks of what it shows pass" in demo["kernel-only-answer"].message


def test_no_report_holds_the_hidden_checks_source(graded: tuple[BatchReport, Path]) -> None:
    _, out = graded
    source = inspect.getsource(importlib.import_module("labkit.grade.hidden.ex2"))
    secrets = [line.strip() for line in source.splitlines() if line.startswith("def ")]
    secrets += [line.strip() for line in source.splitlines() if len(line.strip()) > 60]
    assert secrets
    texts = [p.read_text() for p in out.rglob("*") if p.is_file()]
    assert texts
    for text in texts:
        for secret in secrets:
            assert secret not in text, secret
    history = json.loads((out / "submissions" / "input-history.json").read_text())
    assert history["status"] == "graded"
