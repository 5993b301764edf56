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

The same batch holds the submissions that once ended a whole run or filled the grader
(`ATTACKS`): forged reply lines on the check worker's channel at definition time, replies
nested 100,000 deep (one while the check closes), a line of 400 MiB, a forged reply the
checks cannot read (its text an HTML payload), labkit's own implementation imported, wrapped,
loaded from its source file or found in `sys.modules`, a widget comm nbclient cannot read,
widget comms with 80 MiB of buffers and 80 MiB of display updates (each past the kernel's
bound for one run), one message of 30 MiB (past the bound for one message), and 400 MiB
written to disk. Every submission is graded, the run exits 0 with every report written, and
the untouched and solved copies beside them keep their grades. A file named as an HTML tag is
graded too: the Markdown summary shows it inert.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
from pathlib import Path

import pytest
from nbformat import NotebookNode

import labkit
from grade.grade_helpers import (
    CHANNEL,
    COURSE,
    IN_WORKER,
    comm_flood,
    disk_filler,
    display_flood,
    huge_line,
    in_worker,
    solved,
    stub_after,
    with_cell,
    write,
)
from labkit import cli
from labkit.course import build
from labkit.course.exercises.trial import Outcome
from labkit.grade.report import BatchReport, CheckScore, SubmissionReport

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

EVIL = "<script>alert('evil')</script>"
FORGED_REPLY = {
    "kind": "raised",
    "value": None,
    "effects": {},
    "error": {
        "type": "ProtocolError",
        "module": "labkit.errors",
        "classes": ["labkit.errors.ProtocolError"],
        "message": EVIL,
        "summary": EVIL,
        "traceback": EVIL,
        "code": -32021,
        "data": EVIL,
        "deliberate": True,
    },
}
REAL_URL_MODE = str(Path(labkit.__file__).resolve().parent / "url_mode.py")
ATTACKS = {
    "forged-reply-lines": CHANNEL
    + in_worker("""_channel_write(b'{"defined": ["url_elicitation"], "errors": []}\\n' * 300)""")
    + "#STUB\n",
    "deep-reply": CHANNEL
    + "import threading, time\n"
    + stub_after(
        """
deep = b"[" * 100000 + b"]" * 100000 + b"\\n"
_channel_write(deep)
def _while_the_check_closes():
    time.sleep(0.05)
    _channel_write(deep)
threading.Thread(target=_while_the_check_closes, daemon=True).start()
"""
    ),
    "huge-line": huge_line(400),
    # The forged reply instead of the worker's own: the worker ends right after writing it.
    "unreadable-reply": CHANNEL
    + "import json\n"
    + stub_after(f"_channel_write(json.dumps({FORGED_REPLY!r}).encode() + b'\\n')\n_os._exit(0)"),
    "reference-import": "from labkit.url_mode import url_elicitation\n",
    "reference-wrapper": """
import importlib
def url_elicitation(capabilities, message, url):
    reference = importlib.import_module("labkit.url_mode")
    return reference.url_elicitation(capabilities, message, url)
""",
    "reference-source": f"""
import sys
def url_elicitation(capabilities, message, url):
    for path in [{REAL_URL_MODE!r}, *(p + "/labkit/url_mode.py" for p in sys.path)]:
        try:
            source = open(path).read()
        except OSError:
            continue
        found = {{}}
        exec(compile(source, path, "exec"), found)
        return found["url_elicitation"](capabilities, message, url)
    raise NotImplementedError
""",
    "reference-sys-modules": """
import sys
def url_elicitation(capabilities, message, url):
    for module in list(sys.modules.values()):
        reference = getattr(module, "url_elicitation", None)
        if callable(reference) and reference is not url_elicitation:
            return reference(capabilities, message, url)
    raise NotImplementedError
""",
}
# Cells added after the answer cell: floods of the kernel's message stream, and a disk filler.
ADDED = {
    "comm-flood": comm_flood(40, 2),
    "one-big-message": "from comm import create_comm\n"
    "create_comm(target_name='labkit.flood', data={}, buffers=[b'x' * 3 * 1024**2] * 10)\n",
    # A widget's comm without the model its state must name: nbclient raised on it.
    "malformed-widget": "from comm import create_comm\n"
    "create_comm(target_name='jupyter.widget', data={'state': {}})\n",
    "display-flood": display_flood(640, 128),
    "disk-filler": disk_filler(5, 80),
}
# A partial answer (it offers URL mode right, but refuses with empty data) in the check
# worker, and the right answer in the notebook's kernel (so ex2-try prints the solution's
# text): the try cell's output point waits for the checks of what it shows.
WRONG_DATA = CORRECT.replace('{"requiredCapabilities": {"elicitation": {"url": {}}}}', "{}")
PARTIAL_WITH_HOOK = f"""
{IN_WORKER}    exec({WRONG_DATA!r})
else:
    exec({CORRECT!r})
"""
# A file name that is an HTML payload: graded like any other, shown inert everywhere.
HTML_NAME = "<img src=x onerror=alert(1)>"


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
    for name, attack in ATTACKS.items():
        nb = copy.deepcopy(learner)
        _cell(nb, ANSWER).source = _answer_cell(attack, stub)
        write(subs, f"{name}.ipynb", nb)
    for name, added in ADDED.items():
        write(subs, f"{name}.ipynb", with_cell(learner, name, added, after=ANSWER))
    nb = copy.deepcopy(learner)
    _cell(nb, ANSWER).source = PARTIAL_WITH_HOOK
    write(subs, "partial-with-hook.ipynb", nb)
    write(subs, f"{HTML_NAME}.ipynb", learner)
    code = cli.main(
        ["grade", str(subs), "--solutions", str(COURSE), "--as", STEM, "--out", str(out)]
        + ["--jobs", "2", "--timeout", "20", "--summary-md", str(out / "summary.md")]
    )
    assert code == 0  # every submission graded, every report written
    return BatchReport.model_validate_json((out / "batch.json").read_text()), out


def _by_file(batch: BatchReport) -> dict[str, SubmissionReport]:
    return {s.file.removesuffix(".ipynb"): s for s in batch.submissions}


@pytest.mark.parametrize("name", [*FORGERIES, "locked-cell-edit", *ATTACKS, *ADDED])
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


def _checks(report: SubmissionReport, exercise: str = "ex2") -> list[CheckScore]:
    return next(e.checks for e in report.exercises if e.id == exercise)


def _messages(report: SubmissionReport) -> str:
    return "\n".join(c.message for e in report.exercises for c in e.checks)


def test_the_controls_keep_their_grades_beside_every_attack(
    graded: tuple[BatchReport, Path],
) -> None:
    batch, out = graded
    reports = _by_file(batch)
    assert batch.errors == 0 and not batch.stopped
    assert {s.status for s in batch.submissions} == {"graded"}
    for name in reports:
        assert (out / "submissions" / f"{name}.json").exists() or name == HTML_NAME
    solved_ex2 = _checks(reports["solved"])
    assert all(c.outcome is Outcome.PASSED for c in solved_ex2)
    assert reports["solved"].points == reports["solved"].max_points
    assert reports[HTML_NAME].points == reports["untouched"].points


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("forged-reply-lines", "wrote to the check worker's channel"),
        ("huge-line", "wrote a line longer than 2 MiB on its channel"),
        ("deep-reply", "could not be read: RecursionError"),
    ],
)
def test_what_breaks_the_channel_is_that_submissions_did_not_run(
    graded: tuple[BatchReport, Path], name: str, said: str
) -> None:
    checks = _checks(_by_file(graded[0])[name])
    assert all(c.outcome is not Outcome.PASSED for c in checks)
    assert any(c.outcome is Outcome.DID_NOT_RUN and said in c.message for c in checks)


def test_a_reply_the_checks_cannot_read_is_quoted_as_the_submissions_own(
    graded: tuple[BatchReport, Path],
) -> None:
    batch, out = graded
    report = _by_file(batch)["unreadable-reply"]
    messages = _messages(report)
    assert "Quoted from your answer" in messages
    assert "report it to the course team" not in messages
    assert EVIL in messages  # kept as the learner's data in the JSON report...
    html = (out / "class.html").read_text()
    assert "<script" not in html and "<img" not in html  # ...and inert in HTML and Markdown
    summary = _outside_code_blocks((out / "summary.md").read_text())
    assert "<script" not in summary and "<img" not in summary
    assert "&lt;img src=x onerror=alert\\(1\\)&gt;" in summary


def _outside_code_blocks(markdown: str) -> str:
    """The Markdown without its fenced code blocks (where nothing is HTML or Markdown)."""
    kept, fence = [], ""
    for line in markdown.splitlines():
        if fence:
            fence = "" if line.strip() == fence else fence
        elif line.startswith("```"):
            fence = line[: len(line) - len(line.lstrip("`"))]
        else:
            kept.append(line)
    return "\n".join(kept)


@pytest.mark.parametrize("name", [n for n in ATTACKS if n.startswith("reference-")])
def test_labkits_own_implementation_is_not_the_graded_answer(
    graded: tuple[BatchReport, Path], name: str
) -> None:
    reports = _by_file(graded[0])
    report = reports[name]
    assert all(c.outcome is not Outcome.PASSED for c in _checks(report))
    demo = next(c for e in report.exercises for c in e.checks if c.name == f"outputs/{DEMO}")
    assert demo.points == 0  # the kernel has labkit: the demo printed the right text
    if name in ("reference-import", "reference-wrapper", "reference-sys-modules"):
        assert "labkit's own code, which your answer cannot use" in _messages(report)


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("comm-flood", "the kernel's messages passed the grader's bound for one notebook"),
        ("display-flood", "the kernel's messages passed the grader's bound for one notebook"),
        ("one-big-message", "a message of more than 4 MiB, the grader's bound for one message"),
    ],
)
def test_a_flood_of_kernel_messages_cuts_that_run_with_a_notice(
    graded: tuple[BatchReport, Path], name: str, said: str
) -> None:
    report = _by_file(graded[0])[name]
    assert any(
        n.startswith("grading stopped at a cell you added: ") and said in n for n in report.notices
    ), report.notices


def test_filling_the_disk_is_refused_and_said(graded: tuple[BatchReport, Path]) -> None:
    report = _by_file(graded[0])["disk-filler"]
    assert any("No space left on device" in n for n in report.notices), report.notices


def test_a_partial_answer_gains_no_output_point_from_a_kernel_only_right_answer(
    graded: tuple[BatchReport, Path],
) -> None:
    """Right in the kernel, refusing with the wrong data in the check worker: it passes the
    offering checks, and the try cell shows every case, so its output (the solution's text)
    waits for all of them."""
    report = _by_file(graded[0])["partial-with-hook"]
    passed = {c.name for c in _checks(report) if c.outcome is Outcome.PASSED}
    assert "ex2/public/url offered when declared" in passed
    assert "ex2/public/form only refused" not in passed
    demo = next(c for e in report.exercises for c in e.checks if c.name == f"outputs/{DEMO}")
    assert demo.outcome is Outcome.NOT_ATTEMPTED and demo.points == 0
    assert "'form only refused'" in demo.message


# -- exercises 4 and 5, and the total deadline: batches of their own ----------------------------

EX4, EX5 = "06-ex4-symlink-policy", "07-ex5-legacy-adapter"
# A thread started with the answer cells fills every check's folder as fast as it can, so a
# check's folder cannot be removed when the check ends (once, that ended the whole run).
FOLDER_FILLER = """
import os as _os, threading as _threading
def _fill():
    n = 0
    while True:
        for name in _os.listdir("."):
            if name.startswith("labkit-check-"):
                n += 1
                try:
                    open(_os.path.join(name, f"x{n % 50}"), "w").close()
                except OSError:
                    pass
try:
    get_ipython
except NameError:
    _threading.Thread(target=_fill, daemon=True).start()
"""


def _learner(stem: str) -> NotebookNode:
    return build.read_notebook(COURSE.parent / "notebooks" / f"{stem}.ipynb")


def _with_answer(nb: NotebookNode, cell_id: str, source: str) -> NotebookNode:
    nb = copy.deepcopy(nb)
    _cell(nb, cell_id).source = source
    return nb


@pytest.fixture(scope="module")
def others(tmp_path_factory: pytest.TempPathFactory) -> BatchReport:
    """Matched by their metadata (no `--as`): untouched and solved copies of exercises 4 and
    5 beside the folder filler (a right answer) and labkit's legacy adapter as the answer."""
    subs = tmp_path_factory.mktemp("others")
    out = tmp_path_factory.mktemp("others-grades")
    ex4, ex5 = _learner(EX4), _learner(EX5)
    solved4 = _cell(solved(EX4, COURSE), "ex4-solution").source
    write(subs, "ex4-untouched.ipynb", ex4)
    write(subs, "ex4-solved.ipynb", solved(EX4, COURSE))
    write(
        subs, "ex4-folder-filler.ipynb", _with_answer(ex4, "ex4-solution", FOLDER_FILLER + solved4)
    )
    write(subs, "ex5-untouched.ipynb", ex5)
    write(subs, "ex5-solved.ipynb", solved(EX5, COURSE))
    reference = "from labkit.legacy import to_legacy_requests\n"
    write(subs, "ex5-reference.ipynb", _with_answer(ex5, "ex5-solution", reference))
    from_setup = "to_legacy_requests = legacy.to_legacy_requests\n"  # `legacy`: the setup's
    write(subs, "ex5-from-setup.ipynb", _with_answer(ex5, "ex5-solution", from_setup))
    code = cli.main(
        ["grade", str(subs), "--solutions", str(COURSE), "--out", str(out)] + ["--jobs", "2"]
    )
    assert code == 0
    return BatchReport.model_validate_json((out / "batch.json").read_text())


def test_a_thread_filling_the_check_folders_ends_nothing(others: BatchReport) -> None:
    reports = _by_file(others)
    assert {s.status for s in others.submissions} == {"graded"}
    assert reports["ex4-solved"].points == reports["ex4-solved"].max_points
    filler = _checks(reports["ex4-folder-filler"], "ex4")
    assert {c.outcome for c in filler} == {Outcome.PASSED}  # a right answer, judged


@pytest.mark.parametrize("name", ["ex5-reference", "ex5-from-setup"])
def test_labkits_legacy_adapter_is_not_exercise_5s_answer(others: BatchReport, name: str) -> None:
    reports = _by_file(others)
    assert reports["ex5-solved"].points == reports["ex5-solved"].max_points
    assert reports[name].points <= reports["ex5-untouched"].points
    assert all(c.outcome is not Outcome.PASSED for c in _checks(reports[name], "ex5"))


SLOW_CALLS = """
import time
def url_elicitation(capabilities, message, url):
    time.sleep(2.8)
    raise NotImplementedError
"""


def test_one_total_deadline_covers_the_kernel_and_every_check(tmp_path: Path) -> None:
    """Every call sleeps just under the per-call bound (3 s): the checks past the total (20 s)
    did not run, and the solved copy in the same batch is graded in full within it."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    learner = build.read_notebook(LEARNER_COPY)
    write(subs, "solved.ipynb", solved(STEM, COURSE))
    write(subs, "slow.ipynb", _with_answer(learner, ANSWER, SLOW_CALLS))
    args = ["grade", str(subs), "--solutions", str(COURSE), "--as", STEM, "--out", str(out)]
    assert cli.main([*args, "--jobs", "2", "--timeout", "3", "--total-timeout", "20"]) == 0
    reports = _by_file(BatchReport.model_validate_json((out / "batch.json").read_text()))
    assert reports["solved"].points == reports["solved"].max_points
    slow = _checks(reports["slow"])
    notice = "the submission's total time limit (20 s) was reached"
    assert slow[-1].outcome is Outcome.DID_NOT_RUN and notice in slow[-1].message
