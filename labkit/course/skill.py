"""The shipped design skill (docs/LESSON.md section 12) and `labkit export-skill`.

Owns: reading the packaged `skill-elicitation-form-designer.md` and writing it out without ever
silently replacing someone's edited copy. Plain files only: no widget, no kernel.
Imports nothing from labkit.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SKILL_FILE = "skill-elicitation-form-designer.md"
DEFAULT_OUT = Path("outputs")


class ExportError(Exception):
    """Why the skill file was not written (a message for the command line)."""


def skill_text() -> str:
    """The packaged skill file, exactly as shipped."""
    return resources.files("labkit.course").joinpath(SKILL_FILE).read_text(encoding="utf-8")


def export_skill(out_dir: Path = DEFAULT_OUT, *, force: bool = False) -> tuple[Path, bool]:
    """Write the skill file into `out_dir`; (path, whether it was written).

    An identical file is left alone (a no-op success); a different one is replaced only with
    `force`, so an edited copy is never lost by accident.
    """
    text = skill_text()
    if not out_dir.is_dir():
        what = "is not a directory" if out_dir.exists() else "does not exist"
        raise ExportError(f"output directory {out_dir} {what}")
    target = out_dir / SKILL_FILE
    if target.is_dir():
        raise ExportError(f"{target} is a directory")
    try:
        if target.exists():
            if target.read_bytes() == text.encode("utf-8"):
                return target, False
            if not force:
                raise ExportError(
                    f"{target} exists and differs from the packaged skill; "
                    "use --force to overwrite it"
                )
        target.write_bytes(text.encode("utf-8"))
    except OSError as exc:
        raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target, True
