"""Store throughput: replay-store claims per second and full confirm-and-delete transactions
per second, for the memory, SQLite and PostgreSQL backends, with 1 and 8 processes.

    .venv/bin/python bench/bench_stores.py [--seconds 2] [--processes 1,8]
                                           [--backends memory,sqlite,postgres]

* claim: `replay.claim(principal, fresh nonce, now + 300 s)`: one transaction.
* delete: `commit_deletion(notes, replay, ...)` with a containment re-check: claim the nonce
  and delete the note, one transaction where both live in one database (SQLite, PostgreSQL).

Every cell starts on a fresh database (a new SQLite file, a new PostgreSQL schema). Each
process opens its own store and runs for `--seconds` after a common start barrier; a cell's
figure is the sum of the processes' own rates (the median of `--repeat` runs). Processes never
share a nonce or a note, so this is throughput, not contention (tests/test_contention.py proves
exactly-once). Memory stores live inside one process, so "memory x 8" is eight independent
stores, not a shared one. Refilling notes (a bulk import, outside the timed calls) is excluded.
Replay bounds are set out of reach so no claim is refused as FULL; the claims table grows during
a cell, and each claim counts the live claims (exact bounds), so longer cells read lower.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from labkit.scope import parse_file_uri, strictly_contains
from labkit.stores import (
    Claim,
    Confirmation,
    Deletion,
    Note,
    NoteStore,
    ReplayStore,
    commit_deletion,
)
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore

POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
BACKENDS = ("memory", "sqlite", "postgres")
OPERATIONS = ("claim", "delete")
UNBOUNDED = 10**9
TTL = 300.0
FIRST_BATCH = 2_000


@dataclass(frozen=True)
class Cell:
    backend: str
    operation: str
    processes: int
    seconds: float
    target: str  # SQLite file or PostgreSQL DSN ("" for memory)
    schema: str


def open_stores(cell: Cell) -> tuple[Any, NoteStore, ReplayStore]:
    """(what to close, notes, replay) for one process of a cell."""
    if cell.backend == "memory":
        replay = MemoryReplayStore(capacity=UNBOUNDED, per_principal=UNBOUNDED)
        return None, MemoryNoteStore(), replay
    if cell.backend == "sqlite":
        from labkit.stores.sqlite import SqliteStore

        lite = SqliteStore(cell.target, capacity=UNBOUNDED, per_principal=UNBOUNDED)
        return lite, lite, lite
    from labkit.stores.postgres import PostgresStore

    pg = PostgresStore(cell.target, schema=cell.schema, capacity=UNBOUNDED, per_principal=UNBOUNDED)
    return pg, pg, pg


def worker(cell: Cell, index: int, barrier: Any, results: Any) -> None:
    """One process: open, wait for the others, run the operation until time is up."""
    try:
        closer, notes, replay = open_stores(cell)
        try:
            run = run_claims if cell.operation == "claim" else run_deletes
            results.put((index, run(cell, index, notes, replay, barrier.wait)))
        finally:
            if closer is not None:
                closer.close()
    except BaseException as exc:
        barrier.abort()
        results.put((index, exc))


def run_claims(
    cell: Cell, index: int, notes: NoteStore, replay: ReplayStore, start: Callable[[], Any]
) -> tuple[int, float]:
    principal = f"bench-{index}"
    start()
    began = time.perf_counter()
    deadline = began + cell.seconds
    done = 0
    while time.perf_counter() < deadline:
        for _ in range(10):
            if replay.claim(principal, f"{index}-{done}", time.time() + TTL) is not Claim.CLAIMED:
                raise RuntimeError("a fresh nonce was not claimed")
            done += 1
    return done, time.perf_counter() - began


def run_deletes(
    cell: Cell, index: int, notes: NoteStore, replay: ReplayStore, start: Callable[[], Any]
) -> tuple[int, float]:
    principal = f"bench-{index}"
    workspace_uri = f"file:///bench/w{index}"
    workspace = parse_file_uri(workspace_uri)
    pending: list[str] = []
    made = 0

    def refill(count: int) -> None:
        nonlocal made
        rows = [
            (f"w{index}-{made + i}", f"{workspace_uri}/{made + i}.md", "n") for i in range(count)
        ]
        add_many = getattr(notes, "add_many", None)
        if add_many is not None:
            add_many(rows)
        else:
            for row in rows:
                notes.add(*row)  # type: ignore[attr-defined]
        pending.extend(r[0] for r in rows)
        made += count

    def recheck(live: Note) -> bool:
        return strictly_contains(workspace, live.path)

    refill(FIRST_BATCH)
    start()
    busy = 0.0
    done = 0
    began = time.perf_counter()
    deadline = began + cell.seconds
    while time.perf_counter() < deadline:
        if not pending:
            busy += time.perf_counter() - began
            refill(max(done, FIRST_BATCH))
            began = time.perf_counter()
        note_id = pending.pop()
        outcome, _ = commit_deletion(
            notes,
            replay,
            Confirmation(
                principal=principal,
                nonce=f"{index}-{done}",
                expires_at=time.time() + TTL,
                note_id=note_id,
                recheck=recheck,
            ),
        )
        if outcome is not Deletion.DELETED:
            raise RuntimeError(f"{note_id}: {outcome}")
        done += 1
    return done, busy + time.perf_counter() - began


def run_cell(cell: Cell) -> float:
    """Operations per second summed over the cell's processes."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(cell.processes)
    results = context.Queue()
    procs = [
        context.Process(target=worker, args=(cell, i, barrier, results))
        for i in range(cell.processes)
    ]
    try:
        for proc in procs:
            proc.start()
        outcomes = [results.get(timeout=cell.seconds + 120) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=30)
        results.close()
        results.join_thread()
    total = 0.0
    for index, outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise RuntimeError(f"process {index} of {cell} failed: {outcome!r}") from outcome
        done, elapsed = outcome
        total += done / elapsed
    return total


def fresh_target(backend: str, directory: str, dsn: str) -> tuple[str, str, Callable[[], None]]:
    """(target, schema, cleanup) for a cell: a new SQLite file or PostgreSQL schema."""
    if backend == "memory":
        return "", "", lambda: None
    name = f"bench_{uuid.uuid4().hex[:12]}"
    if backend == "sqlite":
        from labkit.stores.sqlite import SqliteStore

        path = os.path.join(directory, f"{name}.db")
        SqliteStore(path).close()  # create the schema once, before the processes race to

        def remove() -> None:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)

        return path, "", remove
    from labkit.stores.postgres import PostgresStore

    with PostgresStore(dsn, schema=name):
        pass

    def drop() -> None:
        with PostgresStore(dsn, schema=name) as store:
            store.drop_schema()

    return dsn, name, drop


def format_rate(value: float) -> str:
    return f"{value:,.0f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per cell")
    parser.add_argument("--processes", default="1,8", help="comma-separated process counts")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where SQLite files go")
    parser.add_argument("--dsn", default=POSTGRES_DSN, help="PostgreSQL connection URI")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each cell N times and print the median"
    )
    args = parser.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backend(s) {unknown}; choose from {list(BACKENDS)}")
    counts = [int(n) for n in args.processes.split(",") if n]

    python = sys.version.split()[0]
    print(f"# stores: {args.seconds:g} s per cell, {os.cpu_count()} CPUs, Python {python}")
    header = f"{'backend':<10} {'processes':>9} {'claims/s':>12} {'confirm+delete/s':>17}"
    print(header)
    print("-" * len(header))
    for backend in backends:
        for processes in counts:
            rates = []
            for operation in OPERATIONS:
                runs = []
                for _ in range(max(args.repeat, 1)):
                    target, schema, cleanup = fresh_target(backend, args.dir, args.dsn)
                    try:
                        cell = Cell(backend, operation, processes, args.seconds, target, schema)
                        runs.append(run_cell(cell))
                    finally:
                        cleanup()
                rates.append(statistics.median(runs))
            print(
                f"{backend:<10} {processes:>9} {format_rate(rates[0]):>12} "
                f"{format_rate(rates[1]):>17}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
