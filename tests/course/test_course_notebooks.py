"""The course as shipped: the eight solution notebooks, their learner copies and the rules
both keep.

The solutions are run under nbval by `make notebooks` (Restart & Run All, checked outputs
compared); this file checks what nbval does not: the learner copies are up to date, run top to
bottom without an error and leave every exercise "not attempted"; every notebook has the
course's structure (framing questions, objectives, time, assumptions, key points; a quiz and a
predict-before-you-run question per exercise; a saved rendered form; diagrams where the issue
names them); imports stay inside labkit; the saved runs were clean and fast.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from labkit.course import build
from labkit.grade.execute import cell_times, execute
from labkit.grade.graded_exercises import GRADED

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CHECK_TAG = "nbval-check-output"

COURSE = {
    "01-scope-three-layers.ipynb": None,
    "02-elicitation-mrtr.ipynb": None,
    "03-ex1-sqlite-replay-store.ipynb": "ex1",
    "04-ex2-url-mode.ipynb": "ex2",
    "05-ex3-sqlite-notes.ipynb": "ex3",
    "06-ex4-symlink-policy.ipynb": "ex4",
    "07-ex5-legacy-adapter.ipynb": "ex5",
    "08-ship-it.ipynb": None,
}
# The pictures the course promises, by notebook.
DIAGRAMS = ("01-", "02-", "06-", "07-")
TROUBLESHOOTING = "TROUBLESHOOTING.md"


def load(path: Path) -> Any:
    return nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]


def solutions() -> Iterator[tuple[str, Any]]:
    for name in COURSE:
        yield name, load(SOLUTIONS / name)


def code_cells(nb: Any) -> list[Any]:
    return [c for c in nb.cells if c.cell_type == "code"]


def markdown(nb: Any) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


def text_of(outputs: list[Any]) -> str:
    parts: list[str] = []
    for out in outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            data = out.get("data", {})
            parts.append(str(data.get("text/markdown", data.get("text/plain", ""))))
    return "".join(parts)


def test_the_course_is_exactly_these_files() -> None:
    found = sorted(p.name for p in SOLUTIONS.iterdir() if not p.name.startswith("."))
    assert found == sorted([*COURSE, TROUBLESHOOTING])


def test_learner_copies_are_up_to_date() -> None:
    built = build.build(SOLUTIONS)
    assert build.stale(built, NOTEBOOKS) == [], "run `make solutions` (or `labkit course build`)"


@pytest.mark.parametrize("name", list(COURSE))
def test_notebook_opens_and_closes_the_course_way(name: str) -> None:
    nb = load(SOLUTIONS / name)
    first = nb.cells[0]
    assert first.cell_type == "markdown"
    for heading in ("Questions", "Objectives", "Time", "Assumes"):
        assert re.search(rf"\*\*{heading}\b|#+ *{heading}\b", first.source), (name, heading)
    assert re.search(r"\d+\s*min", first.source), f"{name}: no estimated minutes"
    last = nb.cells[-1]
    assert last.cell_type == "markdown" and "Key points" in last.source, name
    assert nb.cells[1].cell_type == "code" and nb.cells[1].get("id") == "setup", name


@pytest.mark.parametrize("name", list(COURSE))
def test_saved_solution_ran_clean_and_fast(name: str) -> None:
    nb = load(SOLUTIONS / name)
    cells = code_cells(nb)
    assert all(c.execution_count is not None for c in cells), f"{name}: a cell never ran"
    counts = [c.execution_count for c in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{name}: not a Restart & Run All"
    for cell in cells:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{name}: cell {cell.get('id')} saved an error"
    times = cell_times(nb)
    assert len(times) == len(cells), f"{name}: run it with `labkit course execute`"
    slow = [(t.cell_id, round(t.seconds, 1)) for t in times if t.seconds > 10]
    assert not slow, f"{name}: cells over 10 s in the saved run: {slow}"
    assert sum(t.seconds for t in times) < 60, f"{name}: over a minute in the saved run"


@pytest.mark.parametrize("name", list(COURSE))
def test_saved_solution_keeps_a_rendered_form(name: str) -> None:
    nb = load(SOLUTIONS / name)
    views = [
        o["data"][WIDGET_VIEW]["model_id"]
        for c in code_cells(nb)
        for o in c.outputs
        if o.output_type in ("display_data", "execute_result") and WIDGET_VIEW in o.get("data", {})
    ]
    assert views, f"{name}: no widget in the saved outputs"
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    models = state.get("state", {})
    assert any(m in models for m in views), f"{name}: the widget state was not saved"
    names = {m.get("model_name") for m in models.values()}
    # A form: buttons to answer and at least one field to fill.
    assert "ButtonModel" in names, f"{name}: no form buttons in the saved widget state"
    assert names & {"DropdownModel", "CheckboxModel", "TextModel", "HTMLModel"}, name


@pytest.mark.parametrize("name", list(COURSE))
def test_checked_cells_exist_and_print_something(name: str) -> None:
    nb = load(SOLUTIONS / name)
    checked = [c for c in code_cells(nb) if CHECK_TAG in c.metadata.get("tags", [])]
    assert checked, f"{name}: no cell tagged {CHECK_TAG}"
    for cell in checked:
        assert text_of(cell.outputs).strip(), f"{name}: checked cell {cell.get('id')} is empty"
    # The learner copy carries the same tags: the grader and nbval read them there too.
    learner = {c.get("id"): c for c in code_cells(load(NOTEBOOKS / name))}
    for cell in checked:
        assert CHECK_TAG in learner[cell.get("id")].metadata.get("tags", []), cell.get("id")


@pytest.mark.parametrize("folder", [SOLUTIONS, NOTEBOOKS])
def test_no_nbval_comment_reaches_a_cell(folder: Path) -> None:
    """nbval markers are cell tags, never a comment line in the learner's code."""
    for path in sorted(folder.glob("*.ipynb")):
        for cell in code_cells(load(path)):
            assert "NBVAL_" not in cell.source, f"{path.name} {cell.get('id')}"


# Words Mermaid's flowchart grammar reserves: as a node id they break the diagram's parse.
MERMAID_RESERVED = {
    "end",
    "call",
    "class",
    "classDef",
    "click",
    "style",
    "linkStyle",
    "default",
    "subgraph",
    "graph",
    "flowchart",
    "direction",
    "href",
    "callback",
    "interpolate",
}
_NODE_ID = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*(?:[\[({>]|-->|---|-- |==>|-\.)", re.M)


@pytest.mark.parametrize("name", list(COURSE))
def test_flowchart_node_ids_are_not_reserved_words(name: str) -> None:
    """The browser test parses every diagram for real; this catches the commonest mistake
    without a browser."""
    for text in markdown(load(SOLUTIONS / name)):
        for diagram in re.findall(r"```mermaid\n(.*?)```", text, re.S):
            if not diagram.lstrip().startswith(("flowchart", "graph")):
                continue
            ids = set(_NODE_ID.findall(diagram)) - {"subgraph"}
            assert not ids & MERMAID_RESERVED, f"{name}: node ids {ids & MERMAID_RESERVED}"


def test_the_reserved_word_check_finds_a_reserved_node_id() -> None:
    diagram = 'flowchart TD\n    call["x"] --> b{"y"}\n    b --> end2\n'
    assert set(_NODE_ID.findall(diagram)) & MERMAID_RESERVED == {"call"}


PREDICT = "Predict before you run"


@pytest.mark.parametrize("name", list(COURSE))
def test_predicted_answers_are_folded_until_opened(name: str) -> None:
    texts = markdown(load(SOLUTIONS / name))
    for index, text in enumerate(texts):
        if PREDICT not in text:
            continue
        assert "<details>" not in text, f"{name}: the answer sits in the question's own cell"
        later = texts[index + 1 : index + 3]
        folded = [t for t in later if re.search(r"<details>\s*<summary>.*?</summary>", t, re.S)]
        assert folded, f"{name}: the answer to the prediction is not in a <details> block"
        assert "</details>" in folded[0]
    assert not any(t.lstrip().startswith("**Answer:**") for t in texts), name


def test_notebook_07_shows_the_whole_requests_it_asks_about() -> None:
    nb = load(SOLUTIONS / "07-ex5-legacy-adapter.ipynb")
    cell = next(c for c in code_cells(nb) if c.get("id") == "try")
    shown = text_of(cell.outputs)
    assert '"elicitationId":"elicit-1"' in shown, shown
    assert "..." not in shown.replace('..."', ""), "a request is cut short"


def test_exercise_3_checks_containment_against_the_requested_workspace() -> None:
    nb = load(SOLUTIONS / "05-ex3-sqlite-notes.ipynb")
    task = next(t for t in markdown(nb) if "## The task" in t)
    assert "**requested** workspace" in task and "sibling" in task, task
    answer = next(c for c in code_cells(nb) if c.get("id") == "ex3-solution")
    assert "REQUESTED workspace (workspace_uri)" in answer.source


@pytest.mark.parametrize("prefix", DIAGRAMS)
def test_diagrams_where_a_picture_explains(prefix: str) -> None:
    name = next(n for n in COURSE if n.startswith(prefix))
    assert any("```mermaid" in text for text in markdown(load(SOLUTIONS / name))), name


@pytest.mark.parametrize("name", list(COURSE))
def test_notebooks_import_only_labkit_and_the_standard_library(name: str) -> None:
    for cell in code_cells(load(SOLUTIONS / name)):
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                assert top == "labkit" or top in sys.stdlib_module_names, (name, module)


EXERCISE_NOTEBOOKS = [(name, ex) for name, ex in COURSE.items() if ex]


@pytest.mark.parametrize(("name", "exercise"), EXERCISE_NOTEBOOKS)
def test_exercise_notebook_has_its_parts(name: str, exercise: str) -> None:
    nb = load(SOLUTIONS / name)
    sources = [c.source for c in code_cells(nb)]
    assert any(re.search(rf"check\(\s*['\"]{exercise}['\"]\s*\)", s) for s in sources), name
    assert any(f"def {GRADED[exercise].contract[0]}(" in s for s in sources), name
    assert any("quiz(" in s for s in sources), f"{name}: no quiz"
    assert any("Predict before you run" in m for m in markdown(nb)), f"{name}: no prediction"
    assert any(f'hint("{exercise}")' in m or f"hint('{exercise}')" in m for m in markdown(nb)), (
        f"{name}: the text never points to hint()"
    )
    solved = [c for c in code_cells(nb) if "# BEGIN SOLUTION" in c.source]
    assert solved, f"{name}: no solution region"
    assert all(build.ANSWER_TAG in c.metadata.get("tags", []) for c in solved), name


def _contract_body(nb: Any, function: str) -> list[ast.stmt]:
    for cell in code_cells(nb):
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.FunctionDef) and node.name == function:
                body = node.body
                if (
                    body
                    and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                ):
                    body = body[1:]  # the docstring
                return body
    raise AssertionError(f"no def {function}")


def test_scaffolding_fades_from_one_gap_to_a_blank_stub() -> None:
    first = load(NOTEBOOKS / "03-ex1-sqlite-replay-store.ipynb")
    given = _contract_body(first, "claim_and_delete")
    assert len(given) >= 2, "exercise 1 is a worked example with one gap: give the rest"
    last = load(NOTEBOOKS / "07-ex5-legacy-adapter.ipynb")
    body = _contract_body(last, "to_legacy_requests")
    assert len(body) == 1 and isinstance(body[0], ast.Raise), "exercise 5 is a blank stub"


def test_troubleshooting_page_maps_symptoms_to_fixes() -> None:
    text = (SOLUTIONS / TROUBLESHOOTING).read_text()
    for symptom in ("restart", "out of order", "not attempted"):
        assert symptom in text.lower(), symptom
    assert (NOTEBOOKS / TROUBLESHOOTING).read_text() == text


@pytest.fixture(scope="module")
def learner_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every learner copy, as generated, run top to bottom in a fresh kernel (a scratch copy:
    the runs write nothing into the checkout)."""
    scratch = tmp_path_factory.mktemp("learner")
    copy = scratch / "notebooks"
    shutil.copytree(NOTEBOOKS, copy)
    (scratch / "outputs").mkdir()
    runs: dict[str, Any] = {}
    for name in COURSE:
        execute(copy / name, cell_timeout=60)
        runs[name] = load(copy / name)
    return runs


@pytest.mark.parametrize("name", list(COURSE))
def test_learner_copy_runs_without_an_error(name: str, learner_runs: dict[str, Any]) -> None:
    nb = learner_runs[name]
    for cell in code_cells(nb):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{name}: cell {cell.get('id')} raised {errors[0].ename}"


@pytest.mark.parametrize(("name", "exercise"), EXERCISE_NOTEBOOKS)
def test_learner_copy_checks_say_not_attempted(
    name: str, exercise: str, learner_runs: dict[str, Any]
) -> None:
    nb = learner_runs[name]
    reports = [
        text_of(c.outputs)
        for c in code_cells(nb)
        if re.search(rf"check\(\s*['\"]{exercise}['\"]\s*\)", c.source)
    ]
    assert reports, name
    for report in reports:
        assert "not attempted" in report, f"{name}: the stub is not reported as not attempted"
        assert "public checks passed (" not in report, report


def test_solution_checks_pass_in_the_saved_outputs() -> None:
    for name, exercise in EXERCISE_NOTEBOOKS:
        nb = load(SOLUTIONS / name)
        reports = [
            text_of(c.outputs)
            for c in code_cells(nb)
            if re.search(rf"check\(\s*['\"]{exercise}['\"]\s*\)", c.source)
        ]
        assert reports and all("not attempted" not in r for r in reports), name
        assert all("public checks passed (" in r for r in reports), (name, reports)


def test_metadata_stamped_for_the_grader() -> None:
    for name in COURSE:
        meta = json.loads((NOTEBOOKS / name).read_text())["metadata"][build.METADATA_KEY]
        assert meta["notebook"] == name.removesuffix(".ipynb") and meta["role"] == "learner"


DOCUMENT = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.(?:md|txt|ipynb))(?![\w/])")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("name", list(COURSE))
def test_every_document_a_learner_copy_cites_is_a_link_inside_the_lab(name: str) -> None:
    """JupyterLab is rooted at notebooks/: a cited document is a link that opens there."""
    for text in markdown(load(NOTEBOOKS / name)):
        prose = re.sub(r"```.*?```", "", text, flags=re.S)  # diagrams name example files
        targets = LINK.findall(prose)
        for target in targets:
            if not target.startswith(("http://", "https://", "#")):
                assert (NOTEBOOKS / target).is_file(), f"{name}: the link {target} opens nothing"
        cited = {found for found in DOCUMENT.findall(LINK.sub("", prose))}
        documents = {c for c in cited if c.startswith("docs/") or c.endswith(".ipynb")}
        assert not documents, f"{name}: cited but not linked: {sorted(documents)}"
