"""Sharded grading: 4 shards merged against one batch, on the same 40 submissions.

    .venv/bin/python bench/bench_shards.py [--submissions 40]

Both routes run `labkit grade` in child processes (one batch with --jobs 1; then shards 0/4 to
3/4 one after another, each --jobs 1, then `labkit grade merge`). Checked: the merged reports
equal the single batch's apart from timing fields; the shards' total CPU (the machine's busy
seconds while each route runs, see `_cpu`) within 10% of the single batch's. Prints seconds
per submission and submissions per hour per core. Bounded: each command has a 30-minute timeout.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "grade"))

from bench_grade import run_checked  # noqa: E402
from grade_helpers import COURSE, COURSE_EXERCISES, solved, write  # noqa: E402

from labkit.grade.report import BatchReport  # noqa: E402

LABKIT = str(Path(sys.executable).parent / "labkit")


def _cpu() -> float:
    """Busy CPU seconds of the whole machine (/proc/stat: user, nice, system, irq, softirq,
    steal). The kernels and check workers run in jobs of their own (other uids, PID namespaces,
    killed with their cgroup), so the grader's own rusage never sees their CPU; the machine's
    counters do, and the bench runs alone."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _timed(argv: list[str]) -> tuple[float, float]:
    """(seconds, machine CPU-seconds) of a command that must succeed."""
    cpu, wall = _cpu(), time.monotonic()
    run_checked(argv, timeout=1800)
    return time.monotonic() - wall, _cpu() - cpu


def _untimed(path: Path) -> dict[str, Any]:
    data = BatchReport.model_validate_json(path.read_text()).model_dump(exclude={"seconds"})
    for sub in data["submissions"]:
        sub.pop("seconds")
    return data


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--submissions", type=int, default=40)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as directory:
        base = Path(directory)
        names = list(COURSE_EXERCISES)
        for number in range(args.submissions):
            name = names[number % len(names)]
            write(base / "subs", f"{name}-{number:02d}.ipynb", solved(name, COURSE))
        grade = [LABKIT, "grade", str(base / "subs"), "--solutions", str(COURSE)]
        one_wall, one_cpu = _timed([*grade, "--out", str(base / "one")])
        shard_wall = shard_cpu = 0.0
        for index in range(4):
            out = str(base / f"shard-{index}")
            wall, cpu = _timed([*grade, "--shard", f"{index}/4", "--out", out])
            shard_wall, shard_cpu = shard_wall + wall, shard_cpu + cpu
        merge = [LABKIT, "grade", "merge", *(str(base / f"shard-{i}") for i in range(4))]
        wall, cpu = _timed([*merge, "--out", str(base / "merged")])
        shard_wall, shard_cpu = shard_wall + wall, shard_cpu + cpu
        same = _untimed(base / "one" / "batch.json") == _untimed(base / "merged" / "batch.json")
    per_sub = one_cpu / args.submissions
    row = {
        "submissions": args.submissions,
        "one_batch_s": round(one_wall, 1),
        "one_batch_cpu_s": round(one_cpu, 1),
        "shards_merged_s": round(shard_wall, 1),
        "shards_merged_cpu_s": round(shard_cpu, 1),
        "cpu_ratio": round(shard_cpu / one_cpu, 3) if one_cpu else 0.0,
        "identical_reports": same,
        "seconds_per_submission": round(one_wall / args.submissions, 2),
        "cpu_seconds_per_submission": round(per_sub, 2),
        "submissions_per_hour_per_core": round(3600 / per_sub) if per_sub else 0,
    }
    within = abs(row["cpu_ratio"] - 1) <= 0.10
    for key, value in row.items():
        print(f"  {key}: {value}")
    print(
        f"  verdict: reports {'identical' if same else 'DIFFER'}, CPU "
        f"{'within' if within else 'NOT within'} 10%",
        flush=True,
    )
    return row


if __name__ == "__main__":
    main()
