"""`labkit course build`: learner copies made from solution notebooks, and the authoring rules."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from labkit.course import build

SOLUTION_CELL = '''def claim_and_delete(conn, nonce):
    """Claim `nonce` and delete the note in one transaction.

    >>> claim_and_delete(conn, "n-1")
    True
    """
    conn.execute("BEGIN IMMEDIATE")
    # BEGIN SOLUTION: claim the nonce, then delete the note
    inserted = conn.execute("INSERT OR IGNORE INTO claims VALUES (?)", (nonce,)).rowcount
    if not inserted:
        conn.execute("ROLLBACK")
        return False
    # END SOLUTION
    conn.execute("COMMIT")
    return True'''


def notebook(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = new_notebook(cells=list(cells))
    for number, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{number}"
    return nb


def executed(source: str, text: str = "out\n") -> nbformat.NotebookNode:
    cell = new_code_cell(source)
    cell.execution_count = 3
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    cell.metadata["execution"] = {"iopub.status.busy": "2026-12-03T10:00:00"}
    return cell


def write(directory: Path, name: str, nb: nbformat.NotebookNode) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    nbformat.write(nb, path)
    return path


def test_region_becomes_one_stub_line_at_its_indentation() -> None:
    source, regions = build.strip_regions(SOLUTION_CELL, "nb, cell 1")
    assert regions == 1
    assert "INSERT OR IGNORE" not in source
    assert (
        "    raise NotImplementedError()  # learner: claim the nonce, then delete the note"
        in source.split("\n")
    )
    # The contract, its example and the scaffolding around the gap stay.
    assert '>>> claim_and_delete(conn, "n-1")' in source
    assert 'conn.execute("BEGIN IMMEDIATE")' in source
    assert source.endswith('conn.execute("COMMIT")\n    return True')


def test_region_without_prompt_gets_the_default_prompt() -> None:
    source, _ = build.strip_regions(
        "def f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION", "x"
    )
    assert source == f"def f():\n    raise NotImplementedError()  # learner: {build.DEFAULT_PROMPT}"


def test_learner_copy_strips_outputs_tags_answers_and_stamps_metadata() -> None:
    solution = notebook(
        new_markdown_cell("# Exercise 1"),
        executed(SOLUTION_CELL),
        executed("print(check('ex1'))", "ex1: public checks passed (4/4)\n"),
    )
    solution.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    learner = build.learner_copy(solution, "03-ex1-sqlite-replay")

    code = [cell for cell in learner.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)
    assert all("execution" not in cell.metadata for cell in code)
    assert code[0].metadata["tags"] == ["answer"]
    assert "tags" not in code[1].metadata
    assert "widgets" not in learner.metadata
    assert learner.metadata["labkit"] == {
        "format": 1,
        "notebook": "03-ex1-sqlite-replay",
        "role": "learner",
        "solution_digest": build.digest(solution),
        "answer_cells": ["cell-1"],
    }
    # Ids survive, so the grader finds answers by id; the solution itself is untouched.
    assert [cell.id for cell in learner.cells] == ["cell-0", "cell-1", "cell-2"]
    assert solution.cells[1].outputs and "INSERT" in solution.cells[1].source


def test_nbval_comment_markers_become_cell_tags() -> None:
    nb = notebook(
        executed("# NBVAL_CHECK_OUTPUT\nprint('out')"),
        executed("#NBVAL_IGNORE_OUTPUT\n# NBVAL_SKIP\nx = 1"),
        executed("print('# NBVAL_CHECK_OUTPUT stays: it is not a leading marker line')"),
    )
    nb.cells[0].metadata["tags"] = ["nbval-check-output", "keep-me"]
    learner = build.learner_copy(nb, "nb")
    first, second, third = learner.cells
    assert first.source == "print('out')"
    assert first.metadata["tags"] == ["nbval-check-output", "keep-me"]  # each tag once
    assert second.source == "x = 1"
    assert second.metadata["tags"] == ["nbval-ignore-output", "nbval-skip"]
    assert third.source == nb.cells[2].source and "tags" not in third.metadata
    # The solution itself is left as authored.
    assert nb.cells[0].source.startswith("# NBVAL_CHECK_OUTPUT")


def test_tagged_cells_keep_their_tags_and_source() -> None:
    cell = executed("print('out')")
    cell.metadata["tags"] = ["nbval-check-output"]
    learner = build.learner_copy(notebook(cell), "nb")
    assert learner.cells[0].source == "print('out')"
    assert learner.cells[0].metadata["tags"] == ["nbval-check-output"]


def test_an_unknown_nbval_marker_is_refused() -> None:
    with pytest.raises(build.BuildError, match="unknown nbval marker NBVAL_CHECK_OUTPUTS"):
        build.learner_copy(notebook(executed("# NBVAL_CHECK_OUTPUTS\nx = 1")), "nb")


def test_digest_follows_sources_and_ids_not_outputs() -> None:
    a = notebook(executed("x = 1", "one\n"))
    b = notebook(executed("x = 1", "two\n"))
    c = notebook(executed("x = 2", "one\n"))
    assert build.digest(a) == build.digest(b) != build.digest(c)


LONG_REGION = "def f():\n    # BEGIN SOLUTION\n" + "    x = 1\n" * 26 + "    # END SOLUTION"


@pytest.mark.parametrize(
    ("source", "complaint"),
    [
        ("def f():\n    # BEGIN SOLUTION\n    return 1", "never closed"),
        ("def f():\n    return 1\n    # END SOLUTION", "without a matching BEGIN"),
        (
            "def f():\n    # BEGIN SOLUTION\n    # BEGIN SOLUTION\n    x = 1\n"
            "    # END SOLUTION\n    # END SOLUTION",
            "cannot nest",
        ),
        ("def f():\n    # BEGIN SOLUTION\n    # END SOLUTION", "empty solution region"),
        (LONG_REGION, "26 lines (at most 25)"),
        ("# BEGIN SOLUTION\nanswer = 42\n# END SOLUTION", "not inside a function"),
        (
            "def f(\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION",
            "does not parse",
        ),
    ],
)
def test_authoring_mistakes_are_refused_naming_the_cell(source: str, complaint: str) -> None:
    with pytest.raises(build.BuildError, match=re.escape(complaint)) as caught:
        build.learner_copy(notebook(new_code_cell(source)), "05-ex3")
    assert "05-ex3, cell 1 (id cell-0)" in str(caught.value)


def test_more_than_three_regions_per_notebook_are_refused() -> None:
    cells = [
        new_code_cell(f"def f{i}():\n    # BEGIN SOLUTION\n    return {i}\n    # END SOLUTION")
        for i in range(4)
    ]
    with pytest.raises(build.BuildError, match="4 solution regions"):
        build.learner_copy(notebook(*cells), "nb")


def test_markers_in_markdown_are_refused() -> None:
    with pytest.raises(build.BuildError, match="code cells only"):
        build.learner_copy(notebook(new_markdown_cell("# BEGIN SOLUTION\nx")), "nb")


def test_ipython_magics_do_not_break_the_placement_check() -> None:
    source = "%%time\ndef f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n!echo hi"
    learner = build.learner_copy(notebook(new_code_cell(source)), "nb")
    assert learner.cells[0].source.startswith("%%time\ndef f():\n    raise NotImplementedError()")


def test_build_write_and_check_round_trip(tmp_path: Path) -> None:
    solutions, out = tmp_path / "solutions", tmp_path / "notebooks"
    write(solutions, "01-scope.ipynb", notebook(executed(SOLUTION_CELL)))
    (solutions / "TROUBLESHOOTING.md").write_text("# When things go wrong\n")
    (solutions / "scratch.txt").write_text("ignored")

    built = build.build(solutions)
    assert [b.name for b in built] == ["01-scope.ipynb", "TROUBLESHOOTING.md"]
    assert build.stale(built, out) == ["01-scope.ipynb: missing", "TROUBLESHOOTING.md: missing"]
    assert build.write(built, out) == ["01-scope.ipynb", "TROUBLESHOOTING.md"]
    assert build.stale(built, out) == []
    assert build.write(built, out) == []  # nothing changed, nothing written

    learner = json.loads((out / "01-scope.ipynb").read_text())
    assert learner["metadata"]["labkit"]["notebook"] == "01-scope"
    assert not list(out.glob(".*.tmp"))

    (out / "01-scope.ipynb").write_text((out / "01-scope.ipynb").read_text() + " ")
    (out / "99-old.ipynb").write_text("{}")
    assert build.stale(built, out) == [
        "01-scope.ipynb: out of date",
        "99-old.ipynb: not made from any solution (remove it)",
    ]
    assert build.write(built, out) == ["01-scope.ipynb", "99-old.ipynb"]
    assert not (out / "99-old.ipynb").exists()


def test_build_refuses_a_corrupt_notebook_and_an_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(build.BuildError, match="holds no .ipynb"):
        build.build(tmp_path / "empty")
    with pytest.raises(build.BuildError, match="no such directory"):
        build.build(tmp_path / "missing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "02-broken.ipynb").write_text('{"cells": [')
    with pytest.raises(build.BuildError, match=r"02-broken.ipynb: not a readable notebook"):
        build.build(tmp_path / "bad")


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labkit.cli", "course", "build", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_builds_checks_and_reports_staleness(tmp_path: Path) -> None:
    write(tmp_path / "solutions", "01-scope.ipynb", notebook(executed(SOLUTION_CELL)))

    stale = run_cli("--check", cwd=tmp_path)
    assert stale.returncode == 1
    assert "stale: notebooks/01-scope.ipynb: missing" in stale.stderr
    assert not (tmp_path / "notebooks").exists()  # --check writes nothing

    made = run_cli(cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "1 of 1 files written" in made.stdout

    fresh = run_cli("--check", cwd=tmp_path)
    assert fresh.returncode == 0
    assert "up to date" in fresh.stdout


def test_cli_names_an_authoring_mistake_and_exits_non_zero(tmp_path: Path) -> None:
    write(tmp_path / "s", "03-ex1.ipynb", notebook(new_code_cell("# BEGIN SOLUTION\nx = 1")))
    result = run_cli("--solutions", "s", "--out", "n", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("labkit course build: 03-ex1, cell 1")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "n").exists()


def test_linked_documents_are_copied_beside_the_learner_copies(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "LESSON.md").write_text("# The lesson\n")
    cite = new_markdown_cell("Read [docs/LESSON.md](../docs/LESSON.md), section 3.")
    write(tmp_path / "solutions", "01.ipynb", notebook(cite, executed("x = 1")))
    built = {b.name: b.text for b in build.build(tmp_path / "solutions")}
    assert built["docs/LESSON.md"] == "# The lesson\n"
    learner = json.loads(built["01.ipynb"])
    assert "".join(learner["cells"][0]["source"]) == (
        "Read [docs/LESSON.md](docs/LESSON.md), section 3."
    )
    out = tmp_path / "notebooks"
    assert sorted(build.write(list(build.build(tmp_path / "solutions")), out)) == [
        "01.ipynb",
        "docs/LESSON.md",
    ]
    (out / "docs" / "old.md").write_text("x")
    assert build.stale(build.build(tmp_path / "solutions"), out) == [
        "docs/old.md: not made from any solution (remove it)"
    ]


def test_a_link_to_a_missing_document_is_refused(tmp_path: Path) -> None:
    cite = new_markdown_cell("See [docs/gone.md](../docs/gone.md).")
    write(tmp_path / "solutions", "01.ipynb", notebook(cite))
    with pytest.raises(build.BuildError, match=r"01.ipynb: links to ../docs/gone.md"):
        build.build(tmp_path / "solutions")


def test_learner_copies_carry_the_kernelspec_jupyterlab_writes() -> None:
    nb = build.learner_copy(notebook(executed("x = 1")), "01")
    assert nb.metadata["kernelspec"] == {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }
