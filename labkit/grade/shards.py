"""Sharded batches: which files shard I of N grades, and merging the shards' reports.

Owns: `Shard` (`--shard I/N`, I counted from 0 like a Kubernetes `JOB_COMPLETION_INDEX`), the
selection rule (sha256 of the file's name, modulo N: a file stays in its shard when others are
added or removed, and no shard needs to see the others' files), the marker a shard's reports
folder carries (`shard.json`: its I and N), and `merge`: one batch from shard batches, refusing
a submission graded in two shards, a report without a course version, reports of two course
versions, and a set of shard folders with a shard missing (named, so its pod can be rerun).

Must not import nbclient, nbval or the kernel runner.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from labkit.grade import report
from labkit.grade.report import BatchReport
from labkit.grade.version import VersionMismatch, describe

_SHARD = re.compile(r"(\d+)/(\d+)")


class MergeError(ValueError):
    """Shard reports that cannot be merged into one batch."""


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = _SHARD.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"--shard {text!r}: expected I/N, like 0/4 (I from 0 to N-1)")
        index, count = int(match[1]), int(match[2])
        if count < 1 or index >= count:
            raise ValueError(f"--shard {text!r}: I must be between 0 and N-1, and N at least 1")
        return cls(index, count)

    def holds(self, path: Path) -> bool:
        digest = hashlib.sha256(path.name.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index

    def select(self, files: Sequence[Path]) -> list[Path]:
        return [f for f in files if self.holds(f)]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


MARKER = "shard.json"


def write_marker(shard: Shard, folder: Path) -> None:
    """Mark `folder` (a `labkit grade --shard I/N --out` folder) as shard I of N."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = {"index": shard.index, "count": shard.count}
    (folder / MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")


def marker(folder: Path) -> Shard | None:
    """The shard a reports folder holds, or None for a folder graded without `--shard`."""
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        return Shard(int(data["index"]), int(data["count"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        raise MergeError(f"{folder / MARKER}: not a shard marker") from None


def complete(found: Sequence[tuple[str, Shard | None]]) -> None:
    """Refuse shard folders that do not make one whole class: every shard I of N once."""
    marked = [(name, s) for name, s in found if s is not None]
    if not marked:
        return
    unmarked = [name for name, s in found if s is None]
    if unmarked:
        raise MergeError(f"{', '.join(unmarked)}: not a shard's reports, unlike the others")
    counts = {s.count for _, s in marked}
    if len(counts) > 1:
        raise MergeError(f"shards of different counts: {', '.join(f'{n}: {s}' for n, s in marked)}")
    (count,) = counts
    missing = sorted(set(range(count)) - {s.index for _, s in marked})
    if missing:
        named = ", ".join(f"{i}/{count}" for i in missing)
        raise MergeError(
            f"shard {named} missing: no reports folder of it was given (its job failed or has "
            "not finished); rerun it, then merge again"
        )


def load(folder: Path) -> BatchReport:
    """The batch report a `labkit grade --out FOLDER` run wrote."""
    path = folder / "batch.json"
    try:
        return BatchReport.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise MergeError(f"{folder}: no batch.json (not a `labkit grade --out` folder)") from None
    except OSError as error:
        raise MergeError(f"{path}: {error.strerror}") from None
    except ValidationError as error:
        count = error.error_count()
        raise MergeError(f"{path}: not a labkit batch report ({count} errors)") from None


def merge(batches: Sequence[tuple[str, BatchReport]]) -> BatchReport:
    """One batch of every shard's submissions, sorted by file name. `seconds` is the sum of the
    shards' (grading time spent, not the wall time of parallel shards)."""
    if not batches:
        raise MergeError("nothing to merge: give at least one reports folder")
    versions = {b.course for _, b in batches}
    for name, batch in batches:
        if batch.course is None:
            raise MergeError(f"{name}: its reports carry no course version; regrade it")
    if len(versions) > 1:
        seen = "; ".join(f"{name}: {describe(b.course)}" for name, b in batches)
        raise VersionMismatch(f"reports of different course versions cannot be merged ({seen})")
    owner: dict[str, str] = {}
    for name, batch in batches:
        for sub in batch.submissions:
            if sub.file in owner:
                raise MergeError(
                    f"{sub.file} was graded in two shards ({owner[sub.file]} and {name}); "
                    "merge each shard once"
                )
            owner[sub.file] = name
    subs = sorted((s for _, b in batches for s in b.submissions), key=lambda s: s.file)
    stopped = "; ".join(f"{name}: {b.stopped}" for name, b in batches if b.stopped)
    merged = report.batch(subs, sum(b.seconds for _, b in batches), stopped=stopped)
    return merged.model_copy(update={"course": batches[0][1].course})
