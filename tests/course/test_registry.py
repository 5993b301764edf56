"""The registry's derived views: the README's exercise table is the one the exercises declare,
and `labkit course table` writes it (or, with --check, says it is stale)."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit import cli
from labkit.course.exercises import registry

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_exercise_table_is_current() -> None:
    text = README.read_text(encoding="utf-8")
    assert registry.with_exercise_table(text) == text, "run `labkit course table`"
    for exercise in registry.graded():
        assert f"| {exercise.id}: {exercise.title} |" in text


def test_a_document_without_the_markers_is_refused() -> None:
    with pytest.raises(registry.NoTable):
        registry.with_exercise_table("# a README without the table\n")


def test_the_command_writes_a_stale_table_and_check_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    stale = f"# x\n\n{registry.TABLE_BEGIN}\n| old |\n{registry.TABLE_END}\nafter\n"
    readme.write_text(stale)
    assert cli.main(["course", "table", str(readme), "--check"]) == 1
    assert readme.read_text() == stale
    assert "stale" in capsys.readouterr().err
    assert cli.main(["course", "table", str(readme)]) == 0
    written = readme.read_text()
    assert "| old |" not in written and written.endswith(f"{registry.TABLE_END}\nafter\n")
    assert registry.exercise_table() in written
    assert cli.main(["course", "table", str(readme), "--check"]) == 0
    readme.write_text("no markers\n")
    assert cli.main(["course", "table", str(readme)]) == 1
    assert "markers" in capsys.readouterr().err
