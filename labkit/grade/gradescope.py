"""Gradescope: the autograder zip (`labkit course package gradescope`) and its results.json.

Owns: the model of Gradescope's results specification (`GradescopeResults`, `GradescopeTest`),
turning a batch report into results (one test per check; hidden checks `after_published`,
public checks and checked outputs `visible`; the submission-wide `output` counts and quotes
only what is visible before grades are published; how the submission was contained in a test
only staff see and in `extra_data`), the results for a submission without a notebook, and the
zip: `setup.sh`, `run_autograder`, labkit's wheel, `solutions/`, `notebooks/` and
`course.json`.

Gradescope runs each submission in a Docker container as root with Docker's defaults (no
namespaces, cgroupfs read-only, 14 capabilities): `run_autograder` grades in container mode
(`labkit.grade.containment`). When grading itself fails, no results.json is written at all:
Gradescope then shows staff "The autograder failed to execute correctly" and they can rerun
it, where a results.json would have given the learner a 0.

Where the solutions live in the container, and why the submission cannot read them: Gradescope
unpacks the zip into `/autograder/source`; `setup.sh` makes that tree, and the hidden checks in
the installed labkit, root's alone. The learner's code runs as a job uid of its own, under
Landlock, which grants its scratch folder and the Python installation (the venv in
`/opt/labkit` and the system's `/usr`) minus `labkit/grade/`, and nothing else. The hidden
checks reach the learner's process as calls, never as a file.

Must not import nbclient, nbval or the kernel runner.
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from labkit.course.exercises.trial import Outcome
from labkit.grade import report
from labkit.grade.report import BatchReport, CourseVersion, SubmissionReport
from labkit.grade.wheel import build_wheel

Visibility = Literal["hidden", "after_due_date", "after_published", "visible"]


class GradescopeTest(BaseModel):
    """One entry of `tests` (Gradescope's autograder specification)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    score: float = Field(ge=0)
    max_score: float = Field(ge=0)
    status: Literal["passed", "failed"]
    output: str = ""
    visibility: Visibility = "visible"
    number: str | None = None
    tags: list[str] | None = None
    output_format: Literal["text", "html", "simple_format", "md", "ansi"] | None = None
    name_format: Literal["text", "html", "simple_format", "md", "ansi"] | None = None
    extra_data: dict[str, object] | None = None


class GradescopeResults(BaseModel):
    """`/autograder/results/results.json`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: float = Field(ge=0)
    execution_time: float = Field(ge=0)
    output: str
    stdout_visibility: Visibility
    tests: list[GradescopeTest]
    visibility: Visibility | None = None
    output_format: Literal["text", "html", "simple_format", "md", "ansi"] | None = None
    extra_data: dict[str, object] | None = None


NO_NOTEBOOK: Final = (
    "No notebook (.ipynb) was found in your submission. Upload the course notebooks you "
    "worked on (for example 03-ex1-sqlite-replay-store.ipynb), not a PDF or a folder of "
    "other files."
)


def _test_output(outcome: Outcome, message: str) -> str:
    return outcome.value if not message else f"{outcome.value}: {message}"


def _tests(sub: SubmissionReport) -> list[GradescopeTest]:
    if sub.status != "graded":
        return [
            GradescopeTest(
                name=f"{sub.file}: grading",
                score=0.0,
                max_score=0.0,
                status="failed",
                output=f"not graded: {sub.error}",
                output_format="text",
            )
        ]
    tests = []
    for exercise in sub.exercises:
        for check in exercise.checks:
            kind = "hidden" if check.hidden else "public"
            tests.append(
                GradescopeTest(
                    name=f"{sub.file} / {exercise.id}: {check.title} ({kind})",
                    score=check.points,
                    max_score=check.max_points,
                    status="passed" if check.outcome is Outcome.PASSED else "failed",
                    output=_test_output(check.outcome, check.message),
                    output_format="text",  # learner text: shown as written, never as HTML
                    visibility="after_published" if check.hidden else "visible",
                )
            )
    return tests


def _summary(sub: SubmissionReport) -> list[str]:
    """What the learner sees before grades are published: the visible checks' points only."""
    if sub.status != "graded":
        return [f"{sub.file}: not graded: {sub.error}"]
    checks = [c for e in sub.exercises for c in e.checks]
    shown = [c for c in checks if not c.hidden]
    hidden = [c for c in checks if c.hidden]
    points, most = sum(c.points for c in shown), sum(c.max_points for c in shown)
    lines = [f"{sub.file}: {points:g}/{most:g} points on the checks shown now"]
    if report.sandbox_warning(sub):
        lines.append(f"  Sandbox: {sub.sandbox}")
    lines += [f"  - {notice}" for notice in sub.notices]
    if hidden:
        lines.append(
            f"  {len(hidden)} hidden checks ({sum(c.max_points for c in hidden):g} more points): "
            "their results appear when grades are published."
        )
    return lines


def _environment(batch: BatchReport) -> GradescopeTest:
    """How the submission was contained, for staff only (visibility "hidden")."""
    said = sorted({f"{s.containment or '-'}: {s.sandbox or '-'}" for s in batch.submissions})
    return GradescopeTest(
        name="labkit: grading environment",
        score=0.0,
        max_score=0.0,
        status="passed",
        output="containment " + "\n".join(said),
        visibility="hidden",
    )


def results(batch: BatchReport) -> GradescopeResults:
    if not batch.submissions:
        return problem(NO_NOTEBOOK, batch.seconds)
    lines = [line for sub in batch.submissions for line in _summary(sub)]
    return GradescopeResults(
        score=sum(s.points for s in batch.submissions if s.status == "graded"),
        execution_time=round(batch.seconds, 2),
        output="\n".join(lines) + "\n",
        stdout_visibility="hidden",
        tests=[*(t for sub in batch.submissions for t in _tests(sub)), _environment(batch)],
        extra_data={
            "containment": sorted({s.containment for s in batch.submissions if s.containment}),
            "sandbox": sorted({s.sandbox for s in batch.submissions if s.sandbox}),
        },
        output_format="text",
    )


def problem(message: str, seconds: float = 0.0) -> GradescopeResults:
    """Results for a submission that holds nothing to grade (no notebook): score 0 and why.
    Never for a failure of grading itself: then no results are written."""
    return GradescopeResults(
        score=0.0,
        execution_time=round(seconds, 2),
        output=message.rstrip() + "\n",
        stdout_visibility="hidden",
        tests=[],
    )


def write(result: GradescopeResults, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.model_dump_json(indent=2, exclude_none=True) + "\n", encoding="utf-8")


SETUP_SH: Final = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, on its Ubuntu base image, when it builds the autograder.
# labkit needs Python 3.11 or newer: on Ubuntu 22.04 (Gradescope's default, whose python3 is
# 3.10) it installs Ubuntu's python3.11 and python3.11-venv (universe); where python3 is 3.11 or
# newer (Ubuntu 24.04) it uses that. Then labkit (the wheel in this zip, with its `grade` extra:
# what every notebook's setup cell imports) goes into a venv in /opt/labkit, readable by every
# user, as each job's uid must run it; the course material and the hidden checks are root's.
set -euo pipefail
SOURCE="${AUTOGRADER_ROOT:-/autograder}/source"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends bubblewrap python3 python3-venv
PYTHON=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  apt-get install -y -q --no-install-recommends python3.11 python3.11-venv
  PYTHON=python3.11
fi
"$PYTHON" -m venv /opt/labkit
WHEEL="$(ls "$SOURCE"/labkit-*-py3-none-any.whl)"
/opt/labkit/bin/python -m pip install --quiet "labkit[grade] @ file://$WHEEL"
ln -sf /opt/labkit/bin/labkit /usr/local/bin/labkit
HIDDEN="$(/opt/labkit/bin/python -c 'import labkit.grade.hidden as h; print(h.__path__[0])')"
chmod -R go-rwx "$SOURCE" "$HIDDEN"
labkit --help > /dev/null
/opt/labkit/bin/python --version
"""

RUN_AUTOGRADER: Final = r"""#!/usr/bin/env bash
# Gradescope runs this once per submission, as root, in a fresh Docker container of its own
# (no namespaces, cgroupfs read-only, Docker's 14 capabilities): labkit grades in container
# mode there (a uid of its own per job, rlimits, Landlock). It grades every notebook of the
# submission against the packaged solutions and hidden checks into results.json. When grading
# itself fails, it writes no results.json and exits non-zero: Gradescope then shows staff "The
# autograder failed to execute correctly" and they can rerun it; the learner gets no 0 for it.
# AUTOGRADER_ROOT (default /autograder) is the root; `labkit` is found on PATH.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
RESULTS="$ROOT/results"
mkdir -p "$RESULTS"
rm -f "$RESULTS/results.json"
mapfile -d '' found < <(find "$ROOT/submission" -type f -name '*.ipynb' \
  -not -path '*/.ipynb_checkpoints/*' -print0 2>/dev/null | sort -z)
# No notebook at all: grading the folder itself reports that in results.json.
[ "${#found[@]}" -gt 0 ] || found=("$ROOT/submission")
work="$(mktemp -d)"
labkit grade "${found[@]}" --containment container --solutions "$SOURCE/solutions" \
  --learner-copies "$SOURCE/notebooks" --out "$work" --gradescope-results "$RESULTS/results.json"
code=$?
rm -rf "$work"
if [ ! -s "$RESULTS/results.json" ]; then
  echo "labkit grade wrote no results.json (exit $code): grading itself failed, see above." \
    "No score was written; rerun the autograder once the cause is fixed."
  [ "$code" -ne 0 ] || code=1
  exit "$code"
fi
exit 0
"""


def _add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
    info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def package(
    source: Path, solutions: Path, notebooks: Path, version: CourseVersion, out: Path
) -> Path:
    """Write `out/autograder.zip`; returns its path."""
    solution_files = sorted(solutions.glob("*.ipynb"))
    if not solution_files:
        raise ValueError(f"{solutions}: holds no .ipynb solution notebooks")
    if not notebooks.is_dir():
        raise ValueError(f"{notebooks}: no such folder of learner copies")
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory(prefix="labkit-wheel-") as directory:
        wheel = build_wheel(source, Path(directory))
        with zipfile.ZipFile(buffer, "w") as archive:
            _add(archive, "setup.sh", SETUP_SH.encode(), 0o755)
            _add(archive, "run_autograder", RUN_AUTOGRADER.encode(), 0o755)
            _add(archive, wheel.name, wheel.read_bytes())
            for path in solution_files:
                _add(archive, f"solutions/{path.name}", path.read_bytes())
            for path in sorted(notebooks.glob("*.ipynb")):
                _add(archive, f"notebooks/{path.name}", path.read_bytes())
            manifest = json.dumps(version.model_dump(), indent=2) + "\n"
            _add(archive, "course.json", manifest.encode())
    out.mkdir(parents=True, exist_ok=True)
    target = out / "autograder.zip"
    target.write_bytes(buffer.getvalue())
    return target
