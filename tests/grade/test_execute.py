"""`labkit course execute`: Restart & Run All of a solution notebook, saved in place only when
every cell ran clean, with widget state and cell timings kept."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from labkit import cli
from labkit.grade.execute import ExecuteError, cell_times, execute, slow_cells


def _write(path: Path, *sources: str) -> Path:
    cells = [new_markdown_cell("# title", id="intro")]
    cells += [new_code_cell(s, id=f"c{i}") for i, s in enumerate(sources)]
    nbformat.write(new_notebook(cells=cells), path)
    return path


def test_a_clean_run_saves_outputs_widget_state_and_timings(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "ok.ipynb",
        "from pathlib import Path\nprint(Path.cwd().name)",
        "import ipywidgets\nipywidgets.Checkbox(description='confirm')",
    )
    done = execute(path)
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[1].outputs[0].text == f"{tmp_path.name}\n"  # runs in the notebook's folder
    assert [c.execution_count for c in nb.cells[1:]] == [1, 2]
    view = nb.cells[2].outputs[0].data["application/vnd.jupyter.widget-view+json"]
    state = nb.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
    assert state[view["model_id"]]["model_name"] == "CheckboxModel"
    assert nb.metadata.kernelspec.name == "python3"
    assert len(cell_times(nb)) == 2 and slow_cells(nb) == []
    assert done.slowest is not None and done.slowest.index in (1, 2)


def test_a_saved_notebook_keeps_its_permissions(tmp_path: Path) -> None:
    path = _write(tmp_path / "shared.ipynb", "print(1)")
    path.chmod(0o644)
    execute(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's 0600


def test_a_raising_cell_leaves_the_saved_notebook_unchanged(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.ipynb", "x = 1", "1 / 0", "print('after')")
    before = path.read_bytes()
    with pytest.raises(ExecuteError, match=r"bad\.ipynb: a cell raised ZeroDivisionError"):
        execute(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["bad.ipynb"]  # no temporary file left


def test_a_slow_cell_fails_at_the_cell_timeout(tmp_path: Path) -> None:
    path = _write(tmp_path / "slow.ipynb", "import time\ntime.sleep(30)")
    with pytest.raises(ExecuteError, match=r"slow\.ipynb: a cell ran over 1 s"):
        execute(path, cell_timeout=1)


def test_a_dead_kernel_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "dead.ipynb", "import os\nos._exit(3)")
    with pytest.raises(ExecuteError, match=r"dead\.ipynb: the kernel died"):
        execute(path)


def test_slow_cells_read_the_recorded_timings(tmp_path: Path) -> None:
    nb = new_notebook(cells=[new_code_cell("pass", id="a")])
    nb.cells[0].metadata["execution"] = {
        "iopub.execute_input": "2026-12-03T10:00:00.000Z",
        "shell.execute_reply": "2026-12-03T10:00:12.500Z",
    }
    assert [(t.cell_id, t.seconds) for t in slow_cells(nb, limit=10)] == [("a", 12.5)]


def test_cli_reports_each_notebook_and_exits_1_when_one_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path / "good.ipynb", "print('hi')")
    (tmp_path / "corrupt.ipynb").write_text('{"cells": [')
    code = cli.main(["course", "execute", str(good), str(tmp_path / "corrupt.ipynb")])
    out, err = capsys.readouterr()
    assert code == 1
    assert "good.ipynb: ran clean" in out
    assert "corrupt.ipynb: cannot be read as a notebook" in err
    assert json.loads(good.read_text())["cells"][1]["outputs"][0]["text"] == ["hi\n"]
    assert cli.main(["course", "execute", "--cell-timeout", "0", str(good)]) == 2
