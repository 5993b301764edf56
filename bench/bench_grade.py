"""Grading throughput: seconds per submission and submissions per minute, beside plain nbval.

    .venv/bin/python bench/bench_grade.py [--submissions 20] [--jobs 2]

* one: `labkit grade` on one solved submission (kernel start, the cells, the hidden checks),
  in a fresh process, so the fixed import cost is counted once.
* batch: `labkit grade --jobs 2` on 20 submissions (solved copies of the course's five
  exercise notebooks, four of each).
* nbval: `pytest -p nbval --nbval-lax --nbval-current-env` on the same 20 notebooks, one
  pytest process (what nbval alone costs; it grades nothing against a solution).

Targets on a 2-core machine: one submission under 8 s; a batch of 20 under 80 s (under 4 s per
submission; otter-grader takes 7.1 s and nbgrader 12.6 s per submission here).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "grade"))

from grade_helpers import COURSE, COURSE_EXERCISES, solved, write  # noqa: E402


def run_checked(argv: list[str], *, timeout: float | None = None) -> None:
    """Run a command that must succeed: a grading run that failed (no bubblewrap, a broken
    kernel) has no figure worth printing, so it raises with the command's last lines."""
    done = subprocess.run(argv, check=False, capture_output=True, cwd=ROOT, timeout=timeout)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(
            f"{' '.join(argv[1:4])} ... exited {done.returncode}: " + " | ".join(tail)
        )


def _timed(argv: list[str]) -> float:
    started = time.monotonic()
    run_checked(argv)
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--submissions", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as directory:
        base = Path(directory)
        names = list(COURSE_EXERCISES)
        one = write(base / "one", f"{names[0]}.ipynb", solved(names[0], COURSE))
        for number in range(args.submissions):
            name = names[number % len(names)]
            write(base / "batch", f"{name}-{number:02d}.ipynb", solved(name, COURSE))
        grade = [python, "-m", "labkit.cli", "grade", "--solutions", str(COURSE)]
        single = _timed([*grade, str(one), "--out", str(base / "out1")])
        batch = _timed(
            [*grade, str(base / "batch"), "--jobs", str(args.jobs), "--out", str(base / "out")]
        )
        nbval = _timed(
            [
                python, "-m", "pytest", "-q", "-p", "nbval", "--nbval-lax",
                "--nbval-current-env", "-p", "no:cacheprovider", "--color=no",
                "-o", "addopts=", str(base / "batch"),
            ]
        )  # fmt: skip
    n = args.submissions
    rows = [
        {"cell": "one submission", "seconds": single, "goal": "< 8 s"},
        {
            "cell": f"batch of {n}, --jobs {args.jobs}",
            "seconds": batch,
            "per_submission": batch / n,
            "per_minute": 60 * n / batch,
            "goal": "< 80 s (< 4 s each)",
        },
        {
            "cell": f"plain nbval, {n} notebooks",
            "seconds": nbval,
            "per_submission": nbval / n,
            "per_minute": 60 * n / nbval,
        },
    ]
    for row in rows:
        extra = ""
        if "per_submission" in row:
            extra = f", {row['per_submission']:.2f} s each, {row['per_minute']:.1f} per minute"
        goal = f" (goal {row['goal']})" if "goal" in row else ""
        print(f"{row['cell']}: {row['seconds']:.1f} s{extra}{goal}", flush=True)
    return rows


if __name__ == "__main__":
    main()
