"""GitHub Classroom: the template repository (`labkit course package github-classroom`) and the
Markdown job summary (`labkit grade --summary-md`).

Owns: the template's files (`.github/workflows/classroom.yml`, the learner copies in
`notebooks/`, a README for the learner), the private course bundle the workflow downloads
(labkit's wheel, the solutions and the learner copies, as a .tar.gz the instructor keeps out of
the template), and the Markdown rendering of a batch (scores and each notebook's feedback).

The solutions never enter the template: the job fetches the bundle into the runner's temporary
folder, outside the checkout, with a token the instructor sets as a secret, and the grading
kernel is confined to its scratch folder and the Python installation.

Must not import nbclient, nbval or the kernel runner.
"""

from __future__ import annotations

import html
import io
import re
import tarfile
import tempfile
from pathlib import Path
from typing import Final

from labkit.grade import report
from labkit.grade.report import BatchReport
from labkit.grade.wheel import build_wheel

WORKFLOW: Final = """\
# labkit grading: every push that changes a notebook is graded against the course's solutions.
# Set, in the classroom organization or the template repository:
#   variable LABKIT_COURSE_URL: an HTTPS URL of the private course bundle (a release asset's API
#     URL in a private instructor repository works: it is fetched as application/octet-stream);
#   secret LABKIT_COURSE_TOKEN: a token that may read it.
name: labkit grading

on:
  push:
    paths: ["notebooks/**", ".github/workflows/classroom.yml"]
  workflow_dispatch:

permissions:
  contents: read

jobs:
  grade:
    runs-on: ubuntu-24.04
    timeout-minutes: 30
    env:
      FAIL_UNDER: "{fail_under}"
    steps:
      - uses: actions/checkout@v4

      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"

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
          sudo apt-get install -y -q bubblewrap
          wheel="$(ls "$RUNNER_TEMP"/course/labkit-*-py3-none-any.whl)"
          python -m pip install --quiet "labkit[grade] @ file://$wheel"

      - name: Grade
        run: |
          labkit grade notebooks --solutions "$RUNNER_TEMP/course/solutions" \\
            --learner-copies "$RUNNER_TEMP/course/notebooks" --out grades \\
            --junit grades/junit.xml --fail-under "$FAIL_UNDER" \\
            --summary-md "$GITHUB_STEP_SUMMARY"

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
then the latest "labkit grading" run. Its summary shows your score and, for each check, what was
expected and what your code did; the full report is the `labkit-grades` artifact. Hidden checks
run only there.
"""


def package(
    source: Path, solutions: Path, notebooks: Path, out: Path, bundle: Path, fail_under: float
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
    workflow.write_text(WORKFLOW.format(fail_under=f"{fail_under:g}"), encoding="utf-8")
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
