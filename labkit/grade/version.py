"""The course version a report was graded with: labkit's version and a digest of the material.

Owns: the digest (sha256 over the solution notebooks, the released learner copies and the
hidden-check modules' source, each named and hashed, in a fixed order), stamping a batch with
it, and the rule that a reports folder holds one course version only (a regrade into a folder
graded with other material is refused, not mixed).

Must not import nbclient, nbval or the kernel runner.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from labkit._version import __version__
from labkit.grade.graded_exercises import GradedExercise
from labkit.grade.report import BatchReport, CourseVersion


class VersionMismatch(ValueError):
    """Reports of two course versions would be mixed."""


def course_version(
    solutions: Path,
    learner_copies: Path | None,
    registry: Mapping[str, GradedExercise],
    *,
    package: str = __version__,
) -> CourseVersion:
    """The version of the material in `solutions/*.ipynb`, `learner_copies/*.ipynb` (when the
    folder exists) and the hidden checks of `registry`."""
    entries: list[tuple[str, bytes]] = []
    entries += [(f"solutions/{p.name}", p.read_bytes()) for p in sorted(solutions.glob("*.ipynb"))]
    if learner_copies is not None and learner_copies.is_dir():
        entries += [
            (f"notebooks/{p.name}", p.read_bytes()) for p in sorted(learner_copies.glob("*.ipynb"))
        ]
    for exercise_id in sorted(registry):
        exercise = registry[exercise_id]
        entries.append((f"hidden/{exercise.module}", exercise.source().encode("utf-8")))
    whole = hashlib.sha256()
    for name, data in entries:
        whole.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return CourseVersion(package=package, digest=f"sha256:{whole.hexdigest()}")


def stamp(result: BatchReport, version: CourseVersion) -> BatchReport:
    """The batch and every submission in it, carrying `version`."""
    subs = [s.model_copy(update={"course": version}) for s in result.submissions]
    return result.model_copy(update={"submissions": subs, "course": version})


def describe(version: CourseVersion | None) -> str:
    if version is None:
        return "no course version"
    return f"labkit {version.package}, course {version.digest[:19]}"


def check_reports_folder(out: Path, version: CourseVersion) -> None:
    """Refuse to write reports of `version` where `out/batch.json` holds another version."""
    existing = out / "batch.json"
    if not existing.exists():
        return
    try:
        previous = BatchReport.model_validate_json(existing.read_bytes())
    except (OSError, ValidationError) as error:
        raise VersionMismatch(
            f"{existing}: not a readable labkit batch report ({type(error).__name__}); "
            "choose an empty --out folder"
        ) from None
    if previous.course != version:
        raise VersionMismatch(
            f"{out}: holds reports graded with {describe(previous.course)}, not "
            f"{describe(version)}; grade into an empty --out folder"
        )
