"""`make bench`: every benchmark, side by side in one run, then one combined table.

    .venv/bin/python bench/run.py [--skip-http] [--skip-stores]

Starts with `bench_floor` (labkit against its floors and the SDK, per server CPU-second, over
HTTP, stdio and in process: the table of bench/README.md) and `bench_instructions` (callgrind's
instructions per `tools/list` request on five paths), then runs `bench_inprocess`
(labkit's core against the SDK 2.3.0 low-level server, in-process),
`bench_http` (the same over Streamable HTTP on loopback, driven by wrk, which is installed
with apt-get when missing and running as root) and `bench_stores` (store throughput) when that
module is present. Goals: in-process at least 10x the SDK, HTTP at least 3x per server
CPU-second. The figures are measured in this run on this machine; `bench/results/latest.json`
keeps them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent


def combined(rows: list[dict[str, Any]]) -> str:
    from common import format_table, rate

    def per_cpu(value: Any) -> float:
        return float(getattr(value, "per_cpu", value))

    return format_table(
        ["cell", "labkit", "SDK", "labkit/SDK", "goal", "verdict"],
        [
            [
                r["cell"],
                rate(per_cpu(r["labkit"])),
                rate(per_cpu(r["sdk"])),
                f"{r['ratio']:.1f}x",
                f">= {r['goal']:.0f}x",
                "met" if r["ratio"] >= r["goal"] else "MISSED",
            ]
            for r in rows
        ],
    )


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.__dict__ if hasattr(v, "__dict__") else v) for k, v in row.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="labkit benchmarks against the MCP SDK")
    parser.add_argument("--skip-http", action="store_true", help="in-process cells only")
    parser.add_argument("--skip-stores", action="store_true", help="leave out bench_stores")
    parser.add_argument("--skip-grade", action="store_true", help="leave out bench_grade")
    parser.add_argument(
        "--skip-floors", action="store_true", help="leave out bench_floor and bench_instructions"
    )
    args = parser.parse_args(argv)
    # Warnings from the sanity checks (refused states, the demo key) are expected: keep the
    # output to the figures.
    logging.basicConfig(level=logging.ERROR)
    sys.path.insert(0, str(BENCH))
    import bench_inprocess

    started = time.monotonic()
    failed = ""
    print(
        f"# labkit bench: Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{platform.machine()}, {time.strftime('%Y-%m-%d %H:%M')}",
        flush=True,
    )
    if not args.skip_floors:
        import bench_floor

        print("\n## Floors (labkit, its floors and the SDK, per server CPU-second)", flush=True)
        bench_floor.main(["--skip-http"] if args.skip_http else [])
    if not args.skip_floors:
        import bench_instructions

        print("\n## Instructions per tools/list request (callgrind)", flush=True)
        bench_instructions.main([])
    print("\n## Protocol (in-process)", flush=True)
    rows = bench_inprocess.main()
    if not args.skip_http:
        import bench_http

        print("\n## HTTP", flush=True)
        rows += bench_http.main()
    if not args.skip_stores and (BENCH / "bench_stores.py").exists():
        print("\n## Stores", flush=True)
        try:
            importlib.import_module("bench_stores").main([])
        except Exception as exc:  # the other sections' figures still get their summary
            failed = f"bench_stores failed: {exc!r}"
            print(failed, flush=True)
    if not args.skip_grade and (BENCH / "bench_grade.py").exists():
        print("\n## Grading (labkit grade beside plain nbval)", flush=True)
        try:
            importlib.import_module("bench_grade").main([])
        except Exception as exc:  # the other sections' figures still get their summary
            failed = f"bench_grade failed: {exc!r}"
            print(failed, flush=True)
    if not args.skip_grade and (BENCH / "bench_grade_memory.py").exists():
        print("\n## Grader memory (peak RSS of labkit grade, honest and hostile)", flush=True)
        try:
            importlib.import_module("bench_grade_memory").main([])
        except Exception as exc:  # the other sections' figures still get their summary
            print(f"bench_grade_memory failed: {exc!r}", flush=True)
    if not args.skip_grade and (BENCH / "bench_shards.py").exists():  # 4 shards merged vs one
        print("\n## Sharded grading (4 shards merged beside one batch)", flush=True)
        try:
            importlib.import_module("bench_shards").main([])
        except Exception as exc:  # the other sections' figures still get their summary
            print(f"bench_shards failed: {exc!r}", flush=True)
    print(f"\n## Summary (per CPU-second; {time.monotonic() - started:.0f} s in all)")
    print(combined(rows))
    results = BENCH / "results"
    results.mkdir(exist_ok=True)
    (results / "latest.json").write_text(
        json.dumps([_jsonable(r) for r in rows], indent=2, default=str) + "\n"
    )
    if failed:
        print(failed)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
