"""The grader's own memory under a hostile class's floods, beside an honest batch: the peak
resident set (ru_maxrss) of the `labkit grade` process. Its kernels and check workers are
other processes, each under its job's limits; what is measured is what a submission can make
the grader itself hold.

    .venv/bin/python bench/bench_grade_memory.py [--source DIR] [--unconfined]

Each row is one `labkit grade` run, in a fresh process, of exercise 2's notebook (graded as
04-ex2-url-mode): the solved copy and the untouched learner copy, then one hostile copy per
row, the flood in a cell added after the answer cell or in the answer cell itself:

* comm flood: 75 widget comms with an 8 MiB binary buffer each (600 MiB), the hostile class's;
* one big message: one comm with 40 buffers of 15 MiB (600 MiB in one message);
* display flood: 600 updates of one display with 1 MiB of text each;
* print flood: 600 MiB printed;
* worker line: a 400 MiB line without a newline on the check worker's channel, on every call
  (the hostile class's);
* worker lines: 200,000 short lines on that channel, at definition time.

`--source DIR` measures another checkout's grader (a copy of an older labkit, put first on the
grader's import path; its jobs then run `--unconfined`, since a job's mount view shows only the
installed package). The stated bound is in bench/README.md ("Grader memory").
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "grade"))

from grade_helpers import (  # noqa: E402
    CHANNEL,
    COURSE,
    comm_flood,
    display_flood,
    huge_line,
    in_worker,
    solved,
    with_cell,
    write,
)

from labkit.course import build  # noqa: E402

STEM = "04-ex2-url-mode"
ANSWER = "ex2-solution"
MIB = 1024**2
ADDED = {
    "comm flood (75 x 8 MiB)": comm_flood(75, 8),
    "one big message (40 x 15 MiB buffers)": (
        "from comm import create_comm\n"
        "create_comm(target_name='labkit.flood', data={}, "
        "buffers=[b'x' * (15 * 1024**2) for _ in range(40)])\n"
    ),
    "display flood (600 x 1 MiB)": display_flood(600, 1024),
    "print flood (600 MiB)": "chunk = 'p' * 1024**2\nfor _ in range(600):\n    print(chunk)\n",
}
ANSWERS = {
    "worker line (400 MiB, no newline)": huge_line(400),
    "worker lines (200,000 short ones)": CHANNEL
    + in_worker("_channel_write(b'{\"ok\": true}\\n' * 200000)")
    + "def url_elicitation(capabilities, message, url):\n    raise NotImplementedError\n",
}
# Runs `labkit grade` in this process and prints its own peak resident set (kB on Linux).
MEASURE = (
    "import resource, sys\n"
    "from labkit import cli\n"
    "code = cli.main(sys.argv[1:])\n"
    "print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, code)\n"
)


def notebooks(folder: Path) -> dict[str, Path]:
    learner = build.read_notebook(COURSE.parent / "notebooks" / f"{STEM}.ipynb")
    made = {
        "honest: solved": write(folder / "solved", "solved.ipynb", solved(STEM, COURSE)),
        "honest: untouched learner copy": write(folder / "untouched", "untouched.ipynb", learner),
    }
    for n, (name, cell) in enumerate(ADDED.items()):
        made[name] = write(folder / f"k{n}", "k.ipynb", with_cell(learner, "flood", cell, ANSWER))
    for n, (name, answer) in enumerate(ANSWERS.items()):
        nb = copy.deepcopy(learner)
        next(c for c in nb.cells if c.get("id") == ANSWER).source = answer
        made[name] = write(folder / f"w{n}", "w.ipynb", nb)
    return made


def peak(notebook: Path, out: Path, source: Path | None, unconfined: bool) -> tuple[float, str]:
    """The grading process's peak resident set in MiB, and what it said of the submission."""
    argv = [sys.executable, "-c", MEASURE, "grade", str(notebook), "--solutions", str(COURSE)]
    argv += ["--learner-copies", str(COURSE.parent / "notebooks")]
    argv += ["--as", STEM, "--out", str(out), "--timeout", "30"]
    argv += ["--unconfined"] if unconfined else []
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    # Not in the checkout: `python -c` puts its working directory first on the import path.
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=900, cwd=out.parent
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("MAXRSS")), "")
    if not line:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return float("nan"), f"the grader ended without a report: {tail}"
    report = json.loads(next((out / "submissions").glob("*.json")).read_text())
    notices = [n for n in report.get("notices", []) if " was added " not in n]
    stopped = [
        c["message"]
        for e in report.get("exercises", [])
        for c in e["checks"]
        if c["outcome"] == "did not run"
    ]
    said = report.get("error") or "; ".join(notices or stopped[:1])[:160]
    return int(line.split()[1]) / 1024, said


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", type=Path, help="another labkit checkout's grader")
    parser.add_argument("--unconfined", action="store_true")
    args = parser.parse_args(argv)
    unconfined = args.unconfined or args.source is not None
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-grade-memory-") as directory:
        base = Path(directory)
        for n, (name, notebook) in enumerate(notebooks(base / "subs").items()):
            mib, said = peak(notebook, base / f"out{n}", args.source, unconfined)
            rows.append({"cell": name, "peak_rss_mib": round(mib, 1), "report": said})
            print(f"| {name} | {mib:.0f} | {said} |", flush=True)
    return rows


if __name__ == "__main__":
    main()
