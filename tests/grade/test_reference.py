"""The graded answer is the learner's own: in the check worker, labkit's implementations of
the graded contracts are withheld (`labkit.grade.answer_view`), for every exercise and every
way an answer cell may reach for them.

Each answer below is judged by all of its exercise's checks, public and hidden, in a check
worker on labkit's view (as the grader starts it), and must score no more than the untouched
learner copy (the starter stub: nothing). The same answers judged in this process, where all
of labkit is importable, are the control: there the reference really answers (ex2 and ex5
score full marks, ex1's in-memory claim scores some), so the comparison can fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grade.grade_helpers import COURSE, SETUP, VIEW_ARGV, judge_in_process, judge_in_worker
from labkit.course.exercises.registry import EXERCISES as COURSE_CHECKS
from labkit.grade import answer_view, grader, notebooks
from labkit.grade.graded_exercises import GRADED
from labkit.grade.worker import WorkerGone, WorkerRunner

REAL = answer_view.REAL
STUBS = {
    "ex1": "def claim_and_delete(conn, principal, nonce, note_id, expires_at):\n",
    "ex2": "def url_elicitation(capabilities, message, url):\n",
    "ex3": "def delete_note(conn, authorizer, principal, workspace_uri, note_id):\n",
    "ex4": "def resolve_inside(root, relative):\n",
    "ex5": "def to_legacy_requests(input_requests, next_id, new_elicitation_id):\n",
}
# Per exercise: the ways an answer may use labkit's own implementation.
ANSWERS = {
    "ex1": {
        "course-helper": "from labkit.course import memory_claim_and_delete as claim_and_delete\n",
        "store": STUBS["ex1"]
        + "    from labkit.stores.sqlite import SqliteReplayStore\n"
        + "    return SqliteReplayStore(conn).claim_and_delete(principal, nonce, note_id)\n",
    },
    "ex2": {
        "import": "from labkit.url_mode import url_elicitation\n",
        "module": "import labkit.url_mode\nurl_elicitation = labkit.url_mode.url_elicitation\n",
    },
    "ex3": {
        "server": STUBS["ex3"]
        + "    from labkit import notes_delete\n"
        + "    return notes_delete.NotesDelete.delete(conn, authorizer, workspace_uri, note_id)\n",
    },
    "ex4": {
        "fsroot": STUBS["ex4"]
        + "    from labkit import Root\n"
        + "    with Root(str(root)) as confined:\n"
        + "        return confined.resolve(relative)\n",
    },
    "ex5": {
        "import": "from labkit.legacy import to_legacy_requests\n",
        "attribute": "import labkit\nto_legacy_requests = labkit.legacy.to_legacy_requests\n",
    },
}
# Ways around an import, each tried on exercise 5 (its whole contract is one function of
# labkit.legacy, which notebook 07 names).
BYPASSES = {
    "importlib": "import importlib\n"
    "to_legacy_requests = importlib.import_module('labkit.legacy').to_legacy_requests\n",
    "source-file": STUBS["ex5"]
    + f"    path = {str(REAL / 'legacy.py')!r}\n"
    + "    found = {}\n"
    + "    exec(compile(open(path).read(), path, 'exec'), found)\n"
    + "    return found['to_legacy_requests'](input_requests, next_id, new_elicitation_id)\n",
    "spec-from-file": STUBS["ex5"]
    + "    import importlib.util\n"
    + f"    spec = importlib.util.spec_from_file_location('copy', {str(REAL / 'legacy.py')!r})\n"
    + "    module = importlib.util.module_from_spec(spec)\n"
    + "    spec.loader.exec_module(module)\n"
    + "    return module.to_legacy_requests(input_requests, next_id, new_elicitation_id)\n",
    "cached-bytecode": STUBS["ex5"]
    + "    import glob, marshal\n"
    + f"    (path,) = glob.glob({str(REAL / '__pycache__' / 'legacy.*.pyc')!r})\n"
    + "    found = {}\n"
    + "    exec(marshal.loads(open(path, 'rb').read()[16:]), found)\n"
    + "    return found['to_legacy_requests'](input_requests, next_id, new_elicitation_id)\n",
    "sys-modules": STUBS["ex5"]
    + "    import sys\n"
    + "    for module in list(sys.modules.values()):\n"
    + "        found = vars(module).get('to_legacy_requests')\n"
    + "        if callable(found):\n"
    + "            return found(input_requests, next_id, new_elicitation_id)\n"
    + "    raise NotImplementedError\n",
    "garbage-collector": STUBS["ex5"]
    + "    import gc\n"
    + "    for found in gc.get_objects():\n"
    + "        if getattr(found, '__qualname__', '') == 'to_legacy_requests' and\\\n"
    + "                getattr(found, '__module__', '') == 'labkit.legacy':\n"
    + "            return found(input_requests, next_id, new_elicitation_id)\n"
    + "    raise NotImplementedError\n",
    "site-packages": STUBS["ex5"]
    + "    import sys, os\n"
    + "    for folder in sys.path:\n"
    + "        path = os.path.join(folder, 'labkit', 'legacy.py')\n"
    + "        if os.path.exists(path) and 'view' not in path:\n"
    + "            found = {}\n"
    + "            exec(compile(open(path).read(), path, 'exec'), found)\n"
    + "            reference = found['to_legacy_requests']\n"
    + "            return reference(input_requests, next_id, new_elicitation_id)\n"
    + "    raise NotImplementedError\n",
}
CASES = [(e, name, body) for e, answers in ANSWERS.items() for name, body in answers.items()]
CASES += [("ex5", name, body) for name, body in BYPASSES.items()]


def every_check(exercise_id: str) -> list[object]:
    return [*COURSE_CHECKS[exercise_id].checks, *GRADED[exercise_id].checks()]


def score(exercise_id: str, sources: list[str], scratch: Path, judge: object) -> float:
    report = judge(exercise_id, every_check(exercise_id), sources, scratch)  # type: ignore[operator]
    return float(report.score)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    tmp_path.chmod(0o777)
    return tmp_path


@pytest.mark.parametrize(("exercise_id", "name", "body"), CASES, ids=lambda v: str(v)[:20])
def test_labkits_implementation_scores_no_more_than_the_untouched_copy(
    exercise_id: str, name: str, body: str, scratch: Path
) -> None:
    untouched = STUBS[exercise_id] + "    raise NotImplementedError\n"
    assert score(exercise_id, [untouched], scratch, judge_in_worker) == 0
    report = judge_in_worker(exercise_id, every_check(exercise_id), [body], scratch)
    assert report.score == 0, [(r.name, r.outcome.value) for r in report.results if r.points]


@pytest.mark.parametrize(("exercise_id", "name"), [("ex2", "import"), ("ex5", "import")])
def test_in_this_process_the_same_import_is_a_full_answer(
    exercise_id: str, name: str, scratch: Path
) -> None:
    """The control: with all of labkit at hand, the import answers every check."""
    body = ANSWERS[exercise_id][name]
    report = judge_in_process(exercise_id, every_check(exercise_id), [body], scratch)
    assert report.score == report.possible > 0


def test_in_this_process_the_course_helper_runs_for_ex1(scratch: Path) -> None:
    """The control: with all of labkit at hand, the helper runs (it deletes the note and keeps
    its claim in this process's memory, which the checks see as no claim recorded)."""
    body = ANSWERS["ex1"]["course-helper"]
    report = judge_in_process("ex1", every_check("ex1"), [body], scratch)
    assert "the nonce was not recorded in claims" in report.results[0].message


def test_using_a_withheld_name_says_why(scratch: Path) -> None:
    report = judge_in_worker("ex5", every_check("ex5"), [ANSWERS["ex5"]["import"]], scratch)
    message = report.results[0].message
    assert "labkit.legacy.to_legacy_requests is labkit's own code" in message
    assert "the graded answer is your own implementation" in message


def test_the_notebooks_own_setup_imports_give_nothing_either(scratch: Path) -> None:
    """Notebook 07's setup cell imports `legacy`; its name is there in the worker, and empty."""
    course = grader.Course.load(COURSE)
    setup = notebooks.setup_imports(course.learner_copy("07-ex5-legacy-adapter"))
    assert "legacy" in setup
    report = judge_in_worker(
        "ex5",
        every_check("ex5"),
        [setup, "to_legacy_requests = legacy.to_legacy_requests\n"],
        scratch,
    )
    assert report.score == 0


def test_the_view_holds_the_building_blocks_and_no_implementation(tmp_path: Path) -> None:
    view = answer_view.build(tmp_path / "view")
    held = {p.relative_to(view).as_posix() for p in view.rglob("*.py")}
    assert {"labkit/errors.py", "labkit/scope.py", "labkit/course/exercises/answers.py"} <= held
    for implementation in (
        "labkit/legacy.py",
        "labkit/url_mode.py",
        "labkit/fsroot.py",
        "labkit/notes_delete.py",
        "labkit/server.py",
        "labkit/stores/sqlite.py",
        "labkit/course/lessons/replay_race.py",
        "labkit/grade/hidden/ex1.py",
        "labkit/grade/grader.py",
    ):
        assert implementation not in held
    assert all(p.stat().st_mode & 0o022 == 0 for p in view.rglob("*"))  # no job may change it


def test_a_worker_told_to_hide_the_package_does_not_start_without_the_view(
    scratch: Path,
) -> None:
    """Fail safe: a worker started with `--hide` whose labkit is not the view (a job launcher
    that did not put the view in place) refuses to start, so no check runs on the real one."""
    runner = WorkerRunner([SETUP], argv=VIEW_ARGV, scratch=scratch, start_timeout=30)
    with pytest.raises(WorkerGone, match="did not start"):
        runner.start()
    runner.close()
