"""Reading, matching and comparing notebook structure (no kernel)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell

from grade.grade_helpers import learner, solution, solved, write
from labkit.course.exercises.registry import EXERCISES as COURSE
from labkit.grade import notebooks
from labkit.grade.graded_exercises import GRADED, exercises_in


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("half.ipynb", '{"cells": [', "corrupt"),
        ("binary.ipynb", b"\xff\xfe\x00garbage", "corrupt"),
        ("list.ipynb", "[1, 2, 3]", "not a notebook"),
        ("old.ipynb", '{"cells": [], "nbformat": 3}', "nbformat 3 is not supported: open and"),
        ("v3.ipynb", '{"worksheets": [{"cells": []}], "nbformat": 3}', "(nbformat 4)"),
        ("v5.ipynb", '{"cells": [], "nbformat": 5}', "not a notebook in format 4"),
        ("cellless.ipynb", '{"cells": [{"source": "x"}], "nbformat": 4}', "corrupt"),
        ("essay.md", "# my essay", "not a notebook"),
    ],
)
def test_unreadable_files_say_why_and_name_the_file(
    tmp_path: Path, name: str, content: str | bytes, words: str
) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(notebooks.Unreadable) as caught:
        notebooks.load(path)
    assert words in str(caught.value) and name in str(caught.value)


def test_duplicated_ids_survive_loading(tmp_path: Path) -> None:
    nb = solved("replay")
    raw = json.loads(write(tmp_path, "replay.ipynb", nb).read_text())
    raw["cells"].append(raw["cells"][2])  # the answer cell, pasted with its id
    (tmp_path / "replay.ipynb").write_text(json.dumps(raw))
    loaded = notebooks.load(tmp_path / "replay.ipynb")
    assert [c.get("id") for c in loaded.cells].count("ex1-answer") == 2
    notices = notebooks.structure(loaded, solution("replay"))
    assert notices == ["cell `ex1-answer` appears 2 times (cells 3 and 6); the last one wins"]


def test_match_by_name_then_by_metadata(tmp_path: Path) -> None:
    sols = {"replay": solution("replay"), "paths": solution("paths")}
    nb = learner("paths")
    assert notebooks.match(tmp_path / "paths.ipynb", nb, sols) == notebooks.Match("paths", "name")
    renamed = notebooks.match(tmp_path / "Copy of lab (2).ipynb", nb, sols)
    assert renamed == notebooks.Match("paths", "metadata")
    nb.metadata.pop("labkit")
    assert notebooks.match(tmp_path / "Copy of lab (2).ipynb", nb, sols) is None


def test_an_untouched_copy_has_no_notices() -> None:
    assert notebooks.structure(learner("replay"), solution("replay")) == []


def test_each_change_is_named_by_cell_id() -> None:
    nb = learner("paths")
    nb.cells = [c for c in nb.cells if c.get("id") != "ex3-answer"]
    answer = next(c for c in nb.cells if c.get("id") == "ex4-answer")
    answer["cell_type"] = "markdown"
    del answer["outputs"], answer["execution_count"]
    added = new_code_cell("print('trying things')")
    added["id"] = "mine"
    nb.cells.append(added)
    notices = notebooks.structure(nb, solution("paths"))
    assert notices == [
        "answer cell `ex4-answer` was changed from code to markdown (cell 3): it no longer runs "
        "as before",
        "cell 5 was added (it runs in the notebook; the checks see only the answer cells)",
        "answer cell `ex3-answer` was deleted: its exercise's checks cannot find your code",
    ]


def test_exercises_are_found_by_the_names_a_notebook_defines() -> None:
    assert [e.id for e in exercises_in(solution("replay"), GRADED)] == ["ex1"]
    assert [e.id for e in exercises_in(solution("paths"), GRADED)] == ["ex3", "ex4"]
    assert [e.id for e in exercises_in(solution("elicitation"), GRADED)] == ["ex2", "ex5"]


def test_hidden_check_tables_are_well_formed() -> None:
    for exercise in GRADED.values():
        checks = exercise.checks()
        assert checks and all(c.points > 0 and c.hidden for c in checks)
        assert len({c.name for c in checks}) == len(checks)
        assert exercise.contract and exercise.contract == COURSE[exercise.id].contracts


def test_an_id_that_is_not_an_id_is_dropped(tmp_path: Path) -> None:
    raw = json.loads(write(tmp_path, "replay.ipynb", learner("replay")).read_text())
    raw["cells"][1]["id"] = "setup\x1b[31m\nAll checks passed"
    (tmp_path / "replay.ipynb").write_text(json.dumps(raw))
    loaded = notebooks.load(tmp_path / "replay.ipynb")
    assert "id" not in loaded.cells[1]
    # Without its id the cell is still the release's `setup` cell: matched by its source.
    assert notebooks.structure(loaded, solution("replay")) == []
    assert notebooks.pair(loaded, solution("replay"))[1] == 1


def test_a_huge_file_is_refused_by_size(tmp_path: Path) -> None:
    path = tmp_path / "big.ipynb"
    with path.open("wb") as f:
        f.truncate(notebooks.MAX_BYTES + 1)
    with pytest.raises(notebooks.Unreadable, match=r"big\.ipynb: too large to grade"):
        notebooks.load(path)
