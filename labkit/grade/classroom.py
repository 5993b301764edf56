"""GitHub Classroom: the template repository (`labkit course package github-classroom`) and the
Markdown job summary (`labkit grade --summary-md`).

Owns: the template's files (`.github/workflows/classroom.yml`, the learner copies in
`notebooks/`, a README for the learner), the private course bundle the workflow downloads
(labkit's wheel, the solutions and the learner copies, as a .tar.gz the instructor keeps out of
the template), the Markdown rendering of a batch (scores and each notebook's feedback), and
the result GitHub Classroom's reporter reads (`classroom_result`: the payload of GitHub's
autograding graders, one test per check, points in `score`; status "error" only when grading
itself failed, "fail" only under a `--fail-under` that was asked for).

The solutions never enter the template: the job fetches the bundle into the runner's temporary
folder, outside the checkout, with a token the instructor sets as a secret, and the grading
kernel is confined to its scratch folder and the Python installation.

Must not import nbclient, nbval or the kernel runner.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import tarfile
import tempfile
from pathlib import Path
from typing import Final

from labkit.course.exercises.trial import Outcome
from labkit.grade import report
from labkit.grade.report import BatchReport
from labkit.grade.wheel import build_wheel

WORKFLOW: Final = """\
# labkit grading: every push that changes a notebook is graded against the course's solutions,
# and the points go to GitHub Classroom (education/autograding-grading-reporter, as GitHub's
# own autograding template sends them).
# Set, in the classroom organization or the template repository:
#   variable LABKIT_COURSE_URL: an HTTPS URL of the private course bundle (a release asset's API
#     URL in a private instructor repository works: it is fetched as application/octet-stream);
#   secret LABKIT_COURSE_TOKEN: a token that may read it.
# The job is red only when grading itself failed; a low score is a score. To make a score
# under a threshold fail the job as well, set FAIL_UNDER below (a percentage).
name: Autograding Tests

on:
  push:
    paths: ["notebooks/**", ".github/workflows/classroom.yml"]
  repository_dispatch:
  workflow_dispatch:

permissions:
  checks: write
  actions: read
  contents: read

jobs:
  run-autograding-tests:
    name: Autograding Tests
    runs-on: ubuntu-24.04
    timeout-minutes: 30
    # GitHub Classroom's own first commit (the template, copied for the learner) is no hand-in.
    if: github.actor != 'github-classroom[bot]'
    env:
      FAIL_UNDER: "{fail_under}"
    steps:
      - uses: actions/checkout@v4

      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
          cache: pip
          cache-dependency-path: .github/workflows/classroom.yml

      - name: Fetch the course bundle (kept outside the checkout)
        env:
          LABKIT_COURSE_URL: ${{{{ vars.LABKIT_COURSE_URL }}}}
          LABKIT_COURSE_TOKEN: ${{{{ secrets.LABKIT_COURSE_TOKEN }}}}
        run: |
          mkdir -p "$RUNNER_TEMP/course"
          curl -fsSL -H "Authorization: Bearer $LABKIT_COURSE_TOKEN" \\
            -H "Accept: application/octet-stream" "$LABKIT_COURSE_URL" \\
            | tar -xz -C "$RUNNER_TEMP/course"

      - name: Install labkit and the sandbox
        run: |
          sudo apt-get update -q
          sudo apt-get install -y -q bubblewrap
          wheel="$(ls "$RUNNER_TEMP"/course/labkit-*-py3-none-any.whl)"
          python -m pip install --quiet "labkit[grade] @ file://$wheel"

      - name: Grade
        id: labkit
        run: |
          # Full containment (a uid, a cgroup and namespaces per notebook) needs root: the
          # runner user has passwordless sudo, and bubblewrap started by root needs no user
          # namespace (which ubuntu-24.04 refuses to unprivileged users through AppArmor).
          code=0
          sudo env "PATH=$PATH" labkit grade notebooks --containment full \\
            --solutions "$RUNNER_TEMP/course/solutions" \\
            --learner-copies "$RUNNER_TEMP/course/notebooks" \\
            --out grades --junit grades/junit.xml ${{FAIL_UNDER:+--fail-under "$FAIL_UNDER"}} \\
            --summary-md "$GITHUB_STEP_SUMMARY" --classroom-output "$GITHUB_OUTPUT" || code=$?
          # 1 from labkit (it wrote its reports): graded, and a notebook scored under
          # FAIL_UNDER or could not be read: the learner's score, red only when FAIL_UNDER is
          # set. Anything else (2 or 3, or sudo failing): grading itself failed.
          if [ "$code" -eq 1 ] && [ -z "$FAIL_UNDER" ] && [ -s grades/batch.json ]; then
            code=0
          fi
          exit "$code"

      - name: Send the points to GitHub Classroom
        uses: education/autograding-grading-reporter@v1
        env:
          LABKIT_RESULTS: "${{{{ steps.labkit.outputs.result }}}}"
        with:
          runners: labkit

      - name: Upload the report
        if: ${{{{ always() }}}}
        uses: actions/upload-artifact@v4
        with:
          name: labkit-grades
          path: grades/
          if-no-files-found: warn
"""

README: Final = """\
# Your course notebooks

Work in `notebooks/`. Every push that changes a notebook is graded: open the **Actions** tab,
then the latest "Autograding Tests" run. Its summary shows your score and, for each check, what was
expected and what your code did; the full report is the `labkit-grades` artifact. Hidden checks
run only there.
"""


def package(
    source: Path,
    solutions: Path,
    notebooks: Path,
    out: Path,
    bundle: Path,
    fail_under: float | None = None,
) -> list[Path]:
    """Write the template repository into `out` and the private bundle to `bundle`."""
    solution_files = sorted(solutions.glob("*.ipynb"))
    if not solution_files:
        raise ValueError(f"{solutions}: holds no .ipynb solution notebooks")
    learner_files = sorted(notebooks.glob("*.ipynb")) if notebooks.is_dir() else []
    if not learner_files:
        raise ValueError(f"{notebooks}: holds no learner copies (run `labkit course build`)")
    if bundle.resolve().is_relative_to(out.resolve()):
        raise ValueError(f"{bundle}: the course bundle holds the solutions; keep it out of {out}")
    workflow = out / ".github" / "workflows" / "classroom.yml"
    workflow.parent.mkdir(parents=True, exist_ok=True)
    threshold = "" if fail_under is None else f"{fail_under:g}"
    workflow.write_text(WORKFLOW.format(fail_under=threshold), encoding="utf-8")
    (out / "README.md").write_text(README, encoding="utf-8")
    (out / "notebooks").mkdir(exist_ok=True)
    written = [workflow, out / "README.md"]
    for path in learner_files:
        target = out / "notebooks" / path.name
        target.write_bytes(path.read_bytes())
        written.append(target)
    bundle.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="labkit-wheel-") as directory:
        wheel = build_wheel(source, Path(directory))
        with tarfile.open(bundle, "w:gz") as archive:
            archive.add(wheel, arcname=wheel.name)
            for path in solution_files:
                archive.add(path, arcname=f"solutions/{path.name}")
            for path in learner_files:
                archive.add(path, arcname=f"notebooks/{path.name}")
    written.append(bundle)
    return written


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


# The characters Markdown (GitHub's included) gives a meaning to inside a line (the text is
# never at a line's start), but those HTML escaping turns into entities first (`&`, `<`, `>`).
_MARKDOWN: Final = re.compile(r"([\\`*_{}\[\]()#!|~:])")


def markdown_text(text: str) -> str:
    """Text from a submission (a file name, an error) as inert Markdown on one line: HTML's
    characters become entities and Markdown's are escaped, so a name such as
    `<img src=x onerror=...>.ipynb` shows as those characters, never as an image or a link."""
    return _MARKDOWN.sub(r"\\\1", html.escape(report.clean_line(text), quote=True))


def markdown(batch: BatchReport) -> str:
    """The job summary: one table of scores, then each notebook's feedback (in code blocks,
    where nothing is Markdown or HTML)."""
    out = io.StringIO()
    out.write(
        f"## labkit grade: {batch.graded} graded, {batch.errors} not graded, "
        f"mean {batch.mean_percent:g}%\n\n"
    )
    if batch.stopped:
        out.write(f"**Stopped:** {markdown_text(batch.stopped)}\n\n")
    if not batch.submissions:
        out.write("No notebook was graded.\n")
        return out.getvalue()
    out.write("| notebook | score | % |\n|---|---|---|\n")
    for sub in batch.submissions:
        name = markdown_text(sub.file)
        if sub.status == "graded":
            row = f"| {name} | {sub.points:g}/{sub.max_points:g} | {sub.percent:g} |"
        else:
            row = f"| {name} | not graded | {markdown_text(sub.error)} |"
        out.write(row + "\n")
    for sub in batch.submissions:
        text = report.feedback(sub)
        fence = _fence(text)
        out.write(f"\n### {markdown_text(sub.file)}\n\n{fence}text\n{text}{fence}\n")
    return out.getvalue()


def append_summary(batch: BatchReport, path: Path) -> None:
    """Append to `path` (GitHub's `$GITHUB_STEP_SUMMARY` is one file per step, appended to)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as summary:
        summary.write(markdown(batch))


def classroom_result(batch: BatchReport, status: str) -> dict[str, object]:
    """What `education/autograding-grading-reporter` reads from a grader step's `result`
    output: the reporter sums `tests[].score` over `max_score` for Classroom, and fails the job
    on `status` "fail" (a `--fail-under` that was asked for and missed) or "error" (grading
    itself failed); "pass" otherwise, whatever the score."""
    tests: list[dict[str, object]] = []
    for sub in batch.submissions:
        if sub.status != "graded":
            tests.append(_test(f"{sub.file}: grading", "error", 0.0, f"not graded: {sub.error}"))
            continue
        for exercise in sub.exercises:
            for check in exercise.checks:
                passed = check.outcome is Outcome.PASSED
                said = check.message or check.outcome.value
                name = f"{sub.file} / {exercise.id}: {check.title}"
                tests.append(_test(name, "pass" if passed else "fail", check.points, said))
    most = sum(s.max_points for s in batch.submissions if s.status == "graded")
    return {"version": 1, "status": status, "max_score": most, "tests": tests}


def _test(name: str, status: str, score: float, message: str) -> dict[str, object]:
    return {
        "name": report.clean_line(name),
        "status": status,
        "score": score,
        "message": report.clean(message),
        "test_code": "",
        "filename": "",
        "line_no": 0,
        "duration": 0,
    }


def append_output(batch: BatchReport, status: str, path: Path) -> None:
    """Append `result=<base64 JSON>` to `path` (`$GITHUB_OUTPUT`), as GitHub's graders do."""
    payload = json.dumps(classroom_result(batch, status), separators=(",", ":"))
    encoded = base64.b64encode(payload.encode("utf-8")).decode("ascii")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as output:
        output.write(f"result={encoded}\n")
