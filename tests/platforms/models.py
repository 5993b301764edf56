"""Running a command under a platform model (`runtime.py`), and the submissions every model
grades: the real course's solutions handed in solved, the untouched learner copies, a wrong
answer, a forgery from tests/grade/test_forgery.py, and a notebook that tries to read the
solutions and the hidden checks.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from grade.grade_helpers import COURSE, TIDIES_TEXT, solved, with_cell, write
from grade.test_forgery import ANSWER, FORGERIES, STEM, _answer_cell, _cell

from labkit.course import build
from labkit.grade.report import BatchReport, SubmissionReport

RUNTIME = Path(__file__).with_name("runtime.py")
SYSTEM_PYTHON = "/usr/bin/python3"
# A container gets every namespace; a runner's step shares the VM's, the model only needs its
# own mount view and an init (a PID namespace) to set it up.
NAMESPACES = {
    "docker": ["--mount", "--pid", "--fork", "--uts", "--ipc", "--cgroup"],
    "restricted": ["--mount", "--pid", "--fork", "--uts", "--ipc", "--cgroup"],
    "runner": ["--mount", "--pid", "--fork"],
}
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NOTEBOOKS = COURSE.parent / "notebooks"
FORGERY = "patched-checker"
# The hidden checks of exercise 2, where setup.sh and the images install labkit.
HIDDEN_CHECK = "/opt/labkit/lib/python3.11/site-packages/labkit/grade/hidden/ex2.py"
# Where a read the job may not make fails: outside the mount view, or refused by Landlock or
# by the file's permissions.
REFUSED = ("PermissionError", "FileNotFoundError")


def tools_or_fail() -> None:
    """Every model needs these on the test machine (the Makefile installs them)."""
    missing = [t for t in ("unshare", "setpriv", "capsh", "sudo", "bwrap") if not shutil.which(t)]
    probe = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import seccomp"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        missing.append(f"{SYSTEM_PYTHON} with libseccomp's bindings (python3-seccomp)")
    if missing:
        pytest.fail(
            "the platform models cannot be set up on this machine: missing "
            + ", ".join(missing)
            + " (`make unit` installs them)"
        )


@dataclass
class Model:
    """One platform's confinement (`runtime.py`'s models), as a way to run commands."""

    name: str  # "docker", "restricted" or "runner"
    base: Path  # a folder of the test's for the model's root file system and spec
    binds: Mapping[str, Path] = field(default_factory=dict)
    extra: Mapping[str, object] = field(default_factory=dict)

    def run(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        cwd: str = "/",
        timeout: float = 600,
        prefix: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        """`command` in a fresh instance of the model; `prefix` runs first, outside it (such
        as a command that joins the platform's cgroup limits)."""
        self.base.mkdir(parents=True, exist_ok=True)
        rootfs = Path(tempfile.mkdtemp(dir=self.base, prefix="rootfs-"))
        spec = {
            "model": self.name,
            "rootfs": str(rootfs),
            "binds": {target: str(source) for target, source in self.binds.items()},
            "env": dict(env),
            "cwd": cwd,
            **self.extra,
        }
        path = rootfs.with_suffix(".json")
        path.write_text(json.dumps(spec))
        unshare = ["unshare", *NAMESPACES[self.name], "--propagation", "private"]
        argv = [*prefix, *unshare, SYSTEM_PYTHON, str(RUNTIME), str(path), "--", *command]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode == 125 and "could not be set up" in done.stderr:
            pytest.fail(f"the {self.name} model cannot be set up on this machine: {done.stderr}")
        return done


def untouched(stem: str) -> object:
    return build.read_notebook(NOTEBOOKS / f"{stem}.ipynb")


def adversarial(folder: Path, solutions: str) -> dict[str, Path]:
    """Three hand-ins of exercise 2's notebook, named so that only the notebook's metadata
    matches them: a wrong answer (right for every public check, wrong for a hidden one), a
    forgery, and an added cell per secret that tries to read it (the packaged solution at
    `solutions`, the hidden check in the installed labkit)."""
    learner = untouched(STEM)
    wrong = copy.deepcopy(learner)
    _cell(wrong, ANSWER).source = TIDIES_TEXT
    forged = copy.deepcopy(learner)
    stub = _cell(learner, ANSWER).source
    _cell(forged, ANSWER).source = _answer_cell(FORGERIES[FORGERY], stub)
    solution = f"{solutions}/{STEM}.ipynb"
    peek = with_cell(
        solved(STEM, COURSE), "peek-hidden", f"print(open({HIDDEN_CHECK!r}).read())", ANSWER
    )
    peek = with_cell(peek, "peek-solution", f"print(open({solution!r}).read())", ANSWER)
    return {
        "wrong": write(folder, "wrong-answer.ipynb", wrong),
        "forged": write(folder, f"forged-{FORGERY}.ipynb", forged),
        "peek": write(folder, "peek.ipynb", peek),
    }


def solved_course(folder: Path) -> list[Path]:
    """Every notebook of the course, handed in solved, under its own name."""
    return [write(folder, p.name, solved(p.stem, COURSE)) for p in sorted(COURSE.glob("*.ipynb"))]


def by_file(batch: BatchReport) -> dict[str, SubmissionReport]:
    return {s.file: s for s in batch.submissions}


def assert_full_marks(batch: BatchReport, files: Sequence[str]) -> None:
    subs = by_file(batch)
    for name in files:
        sub = subs[name]
        lost = [(c.name, c.message) for e in sub.exercises for c in e.checks if not c.points]
        assert sub.status == "graded" and sub.percent == 100 and sub.max_points > 0, (
            name,
            sub.error,
            lost,
        )


def assert_adversarial(batch: BatchReport, baseline: SubmissionReport, mode: str) -> None:
    """The wrong answer loses points, the forgery gains nothing over the untouched copy, the
    peeking cells could not read either secret, and every report names the mode."""
    subs = by_file(batch)
    wrong, forged, peek = (
        subs["wrong-answer.ipynb"],
        subs[f"forged-{FORGERY}.ipynb"],
        subs["peek.ipynb"],
    )
    assert wrong.status == "graded" and 0 < wrong.points < wrong.max_points, wrong
    hidden_lost = [c for e in wrong.exercises for c in e.checks if c.hidden and not c.points]
    assert hidden_lost, "the wrong answer must fail a hidden check"
    assert forged.status == "graded" and forged.max_points == baseline.max_points
    assert forged.points <= baseline.points, forged
    assert not any(e.points for e in forged.exercises if e.id == "ex2")
    refused = [n for n in peek.notices if n.startswith("a cell you added raised:")]
    assert len(refused) == 2, peek.notices  # the hidden check, then the solution
    assert all(any(f"raised: {error}" in n for error in REFUSED) for n in refused), refused
    for sub in batch.submissions:
        assert sub.containment == mode, (sub.file, sub.containment)
