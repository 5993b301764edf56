"""`labkit check NOTEBOOK`: a learner's practice score, run as the learner would (the CLI, in a
folder of their own), with the public checks and outputs only and nothing written unless
asked."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = "03-ex1-sqlite-replay-store.ipynb"


def labkit_check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labkit.cli", "check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def course_copy(tmp_path: Path, learner: Path) -> Path:
    """A learner's checkout: notebooks/ (one notebook, as given) and solutions/ beside it."""
    (tmp_path / "notebooks").mkdir()
    shutil.copytree(REPO / "solutions", tmp_path / "solutions")
    shutil.copyfile(learner, tmp_path / "notebooks" / NOTEBOOK)
    return tmp_path


def files_in(root: Path) -> set[Path]:
    return {path for path in root.rglob("*") if path.is_file()}


def test_a_fresh_learner_copy_gets_a_practice_score_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    root = course_copy(tmp_path, REPO / "notebooks" / NOTEBOOK)
    before = files_in(root)
    done = labkit_check(f"notebooks/{NOTEBOOK}", cwd=root)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "Practice score, not a grade:" in text
    assert "the hidden checks run only at grading" in text
    assert "[not attempted] fresh claim" in text and "hidden" not in text.split("\n", 4)[-1]
    assert text.count("still raises NotImplementedError") == 1  # said once, then "the same"
    assert files_in(root) == before  # nothing written into the project


def test_a_solved_notebook_scores_everything_and_out_keeps_the_reports(tmp_path: Path) -> None:
    root = course_copy(tmp_path, REPO / "solutions" / NOTEBOOK)
    done = labkit_check(f"notebooks/{NOTEBOOK}", "--out", "practice", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "(100%)" in done.stdout and "[passed] two processes race" in done.stdout
    written = sorted(path.name for path in (root / "practice").iterdir())
    assert written == [
        f"{Path(NOTEBOOK).stem}.practice.json",
        f"{Path(NOTEBOOK).stem}.practice.txt",
    ]


def test_a_missing_notebook_is_named(tmp_path: Path) -> None:
    done = labkit_check("nowhere.ipynb", cwd=tmp_path)
    assert done.returncode == 2
    assert "labkit check: nowhere.ipynb: no such notebook file" in done.stderr
