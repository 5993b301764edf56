"""Builders for grading tests and the grading bench: solution fixtures, learner copies made by
`build.learner_copy`, solved and broken variants, and a configured runner; the setup an answer
cell gets, the check worker's argv, the course's reference answers and the catalogued
answers, judging an answer with given checks in this process or through the worker, and
check workers in this process for the grader's scoring tests.

Owns nothing the grader uses: tests and `bench/bench_grade.py` import it (one module, not two
copies of the same builders).
"""

from __future__ import annotations

import copy
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell

from labkit.course import build
from labkit.course.exercises.checks import CheckReport, InProcessRunner, run_checks
from labkit.course.exercises.registry import EXERCISES as COURSE_CHECKS
from labkit.course.exercises.registry import graded
from labkit.course.exercises.trial import Check, CheckSettings
from labkit.grade import answer_view, notebooks
from labkit.grade.deadline import Deadline
from labkit.grade.graded_exercises import GRADED
from labkit.grade.worker import WorkerGone, WorkerRunner, plain_spawn, worker_argv

FIXTURES = Path(__file__).parent / "fixtures" / "solutions"
# The real course: its solution notebooks and the five that hold an exercise.
COURSE = Path(__file__).resolve().parents[2] / "solutions"
COURSE_EXERCISES = {e.notebook: e.id for e in graded()}
NAMES = ("paths", "replay")
MISTAKES = Path(__file__).resolve().parents[1] / "course" / "mistakes"
# What the notebooks' setup cells give an answer cell.
SETUP = (
    "import copy, itertools, os, sqlite3\n"
    "from pathlib import Path\n"
    "from labkit import ProtocolError, ScopeError, authorize, contains, parse_file_uri\n"
    "from labkit.errors import MISSING_CAPABILITY\n"
)
WORKER_ARGV = worker_argv(
    memory=2 * 1024**3, cpu=60, nproc=64, fsize=64 * 1024**2, sandbox="off", python=sys.executable
)
# As the grader starts a worker: on labkit's view (`answer_view`), the real package hidden.
VIEW_ARGV = worker_argv(
    memory=2 * 1024**3,
    cpu=60,
    nproc=64,
    fsize=64 * 1024**2,
    sandbox="off",
    python=sys.executable,
    hide=answer_view.REAL,
)

# ex1 with the principal folded to lower case: every public check passes (they spell each
# principal one way), a hidden check's generated principals ('Alice' beside 'alice') do not.
CASE_FOLDED = """def claim_and_delete(conn, principal, nonce, note_id, expires_at):
    conn.execute("BEGIN IMMEDIATE")
    try:
        is_new = conn.execute(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT (principal, nonce) DO NOTHING",
            (principal.lower(), nonce, expires_at),
        ).rowcount == 1
        if is_new and conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount == 1:
            conn.execute("COMMIT")
            return True
        conn.execute("ROLLBACK")
        return False
    except BaseException:
        conn.execute("ROLLBACK")
        raise"""

# ex2 that tidies the text it was given: right for the public message and URL (nothing to strip
# or lower), wrong for a hidden check's generated ones.
TIDIES_TEXT = """def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ProtocolError(
            -32021, "URL mode needed", {"requiredCapabilities": {"elicitation": {"url": {}}}}
        )
    params = {"mode": "url", "message": message.strip(), "url": url.lower()}
    return {"method": "elicitation/create", "params": params}"""

# ex5 walking the keys sorted: the public checks' keys are already sorted, a hidden check's not.
SORTED_KEYS = """def to_legacy_requests(input_requests, next_id, new_elicitation_id):
    requests = []
    for key in sorted(input_requests):
        entry = input_requests[key]
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        if "params" in entry:
            params = dict(entry["params"])
            if params.get("mode") == "url":
                params["elicitationId"] = new_elicitation_id()
            request["params"] = params
        requests.append((key, request))
    return requests"""


def solution(name: str) -> NotebookNode:
    return build.read_notebook(FIXTURES / f"{name}.ipynb")


def learner(name: str) -> NotebookNode:
    return build.learner_copy(solution(name), name)


def solved(name: str, solutions: Path = FIXTURES) -> NotebookNode:
    """A learner copy whose answer cells hold the solution's code (a perfect hand-in)."""
    source = build.read_notebook(solutions / f"{name}.ipynb")
    nb = build.learner_copy(source, name)
    answers = {c.id: c.source for c in source.cells if c.get("id")}
    for cell in nb.cells:
        if build.ANSWER_TAG in cell.metadata.get("tags", []):
            cell.source = answers[cell.id]
    return nb


def with_source(nb: NotebookNode, cell_id: str, source: str) -> NotebookNode:
    nb = copy.deepcopy(nb)
    next(c for c in nb.cells if c.get("id") == cell_id).source = source
    return nb


def with_cell(nb: NotebookNode, cell_id: str, source: str, after: str) -> NotebookNode:
    nb = copy.deepcopy(nb)
    cell = new_code_cell(source)
    cell["id"] = cell_id
    index = next(i for i, c in enumerate(nb.cells) if c.get("id") == after)
    nb.cells.insert(index + 1, cell)
    return nb


def write(directory: Path, filename: str, nb: NotebookNode) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    nbformat.write(nb, path)
    return path


def reference_answers(exercise_id: str) -> list[str]:
    """The answer cells of the course's solution notebook for `exercise_id`."""
    return notebooks.answer_sources(course_solution(exercise_id))


def course_solution(exercise_id: str) -> NotebookNode:
    """The course's solution notebook for `exercise_id` (the differential checks' reference)."""
    return build.read_notebook(COURSE / f"{COURSE_CHECKS[exercise_id].notebook}.ipynb")


def reference_runner(exercise_id: str) -> InProcessRunner | None:
    """The reference answer of `exercise_id` in this process (None for an exercise without
    one: the checkpoints)."""
    exercise = COURSE_CHECKS[exercise_id]
    if not exercise.notebook:
        return None
    return InProcessRunner(GRADED[exercise_id].reference(course_solution(exercise_id)))


def quick(scratch: Path) -> CheckSettings:
    """Bounds for tests: fewer generated inputs than grading uses (the explicit examples, each
    catalogued mistake's input, always run)."""
    return CheckSettings(call_timeout=10, tmp_parent=scratch, examples=12)


def judge_in_worker(
    exercise_id: str,
    checks: Sequence[Check],
    sources: Sequence[str],
    scratch: Path,
    settings: CheckSettings | None = None,
) -> CheckReport:
    """`checks` against the answer `sources` (after SETUP) in a check worker, on labkit's view
    as the grader's workers see it."""
    runner = view_runner([SETUP, *sources], scratch)
    try:
        defined = runner.start()
        return run_checks(
            COURSE_CHECKS[exercise_id],
            checks,
            runner,
            defined.__contains__,
            settings or quick(scratch),
            reference_runner(exercise_id),
        )
    finally:
        runner.close()


def view_runner(sources: Sequence[str], scratch: Path, **kw: Any) -> WorkerRunner:
    """A worker runner (no job) whose workers run on a fresh view of labkit, as the grader's."""
    view = answer_view.build(Path(tempfile.mkdtemp(dir=scratch, prefix="view-")) / "labkit")

    def spawn(argv: Sequence[str], where: Path) -> subprocess.Popen[bytes]:
        return plain_spawn(argv, where, answer_view.env(view))

    return WorkerRunner(sources, argv=VIEW_ARGV, scratch=scratch, spawn=spawn, **kw)


def judge_in_process(
    exercise_id: str,
    checks: Sequence[Check],
    sources: Sequence[str],
    scratch: Path,
    settings: CheckSettings | None = None,
) -> CheckReport:
    """`checks` against the answer `sources` (after SETUP) run in this process."""
    exercise = COURSE_CHECKS[exercise_id]
    namespace: dict[str, Any] = {"__name__": "__learner__"}
    exec(compile("\n".join([SETUP, *sources]), "<answer>", "exec"), namespace)
    runner = InProcessRunner({n: namespace[n] for n in exercise.contracts if n in namespace})
    return run_checks(
        exercise,
        checks,
        runner,
        namespace.__contains__,
        settings or quick(scratch),
        reference_runner(exercise_id),
    )


class InProcessWorker(InProcessRunner):
    """A check worker without a process, for scoring tests: the sources ran in this one."""

    def __init__(self, namespace: dict[str, Any], start_error: str, died: bool) -> None:
        super().__init__({k: v for k, v in namespace.items() if callable(v)})
        self.defined = frozenset(k for k, v in namespace.items() if callable(v))
        self.start_error = start_error
        self.died = died
        self.problem = ""

    def start(self) -> frozenset[str]:
        if self.start_error:
            raise WorkerGone(self.start_error)
        return self.defined

    def call(self, name: str, args: Sequence[Any], timeout: float) -> Any:
        if self.died:
            self.problem = "the check worker died during the call (it exited)"
            return None
        return super().call(name, args, timeout)


class ViewWorkers:
    """`grader.Workers` as plain worker processes on labkit's view, without a job (tests of
    what crosses the channel and of the deadline, not of containment)."""

    def __init__(self, call_timeout: float = 5.0, start_timeout: float = 10.0) -> None:
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout

    @contextmanager
    def runner(
        self, scratch: Path, sources: Sequence[str], deadline: Deadline
    ) -> Iterator[WorkerRunner]:
        runner = view_runner(sources, scratch, start_timeout=self.start_timeout, deadline=deadline)
        try:
            yield runner
        finally:
            runner.close()


class InProcessWorkers:
    """`grader.Workers` in this process (no confinement: tests of the scoring only). Records
    the sources each exercise's worker was given."""

    call_timeout = 5.0

    def __init__(self, start_error: str = "", died: bool = False) -> None:
        self.start_error = start_error
        self.died = died
        self.sources: list[list[str]] = []

    @contextmanager
    def runner(
        self, scratch: Path, sources: Sequence[str], deadline: Deadline
    ) -> Iterator[InProcessWorker]:
        self.sources.append(list(sources))
        namespace: dict[str, Any] = {"__name__": "__learner__"}
        for source in sources:
            try:
                exec(compile(source, "<answer cell>", "exec"), namespace)
            except Exception:
                continue
        yield InProcessWorker(namespace, self.start_error, self.died)


# -- what a hostile class sends: floods of the kernel's messages and of the worker's channel -----

# The check worker's reply channel, from the learner's code in the worker: every pipe it may
# write to (its protocol descriptor). Used only in the worker (no `get_ipython` there).
CHANNEL = """
import os as _os, stat as _stat
def _channel_write(data):
    for _fd in range(3, 64):
        try:
            if _stat.S_ISFIFO(_os.fstat(_fd).st_mode):
                _os.write(_fd, data)
        except OSError:
            pass
"""
IN_WORKER = "try:\n    get_ipython\nexcept NameError:\n"


def in_worker(body: str) -> str:
    """`body` run only in the check worker, at definition time."""
    return IN_WORKER + textwrap.indent(body.strip("\n") + "\n", "    ")


def stub_after(body: str) -> str:
    """Exercise 2's `url_elicitation` that runs `body` in the worker, then is the stub."""
    return (
        "def url_elicitation(capabilities, message, url):\n"
        + textwrap.indent(in_worker(body), "    ")
        + "    raise NotImplementedError\n"
    )


def huge_line(mib: int) -> str:
    """An answer cell (exercise 2) writing one line of `mib` MiB, no newline, on each call."""
    return CHANNEL + stub_after(
        f"chunk = b'x' * 1024**2\nfor _ in range({mib}):\n    _channel_write(chunk)\n"
    )


def comm_flood(count: int, mib: int) -> str:
    """A cell opening `count` widget comms (state and a binary buffer of `mib` MiB each, as
    ipywidgets sends them: what a client that stores widget state keeps)."""
    return (
        "from comm import create_comm\n"
        f"for n in range({count}):\n"
        "    state = {'_model_module': 'flood', '_model_name': 'FloodModel', 'value': n}\n"
        "    create_comm(target_name='jupyter.widget', "
        "data={'state': state, 'buffer_paths': [['value']]}, "
        f"buffers=[b'x' * ({mib} * 1024**2)])\n"
    )


def display_flood(count: int, kib: int) -> str:
    """A cell updating one display `count` times with `kib` KiB of text each time."""
    return (
        "from IPython.display import display, update_display\n"
        'display("x", display_id="flood")\n'
        f"for n in range({count}):\n"
        f'    update_display({{"text/plain": "y" * ({kib} * 1024)}}, raw=True, '
        'display_id="flood")\n'
    )


def disk_filler(count: int, mib: int) -> str:
    """A cell writing `count` files of `mib` MiB each (each under the per-file limit)."""
    return (
        f"for n in range({count}):\n"
        "    try:\n"
        f'        open(f"filler-{{n}}", "wb").write(b"x" * ({mib} * 1024**2))\n'
        "    except OSError as error:\n"
        "        print(type(error).__name__)\n"
    )
