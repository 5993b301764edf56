"""The course in real JupyterLab, driven through a real browser (Debian's Chromium, Playwright).

One `jupyter lab` (from this environment) serves a tmp copy of `notebooks/` for the whole module,
and one browser drives it. Two tests:

- Notebook 02's live form: Run All, fill the rendered form of the cell with id "live-form" (a
  note picked by its title, the confirm box ticked), click Accept and re-run the cell
  "live-notes": its line no longer lists the note, so the kernel saw the deletion. Then a kernel
  restart, a second Run All and Decline: the note is still listed.
- Every one of the eight notebooks, opened and Run All in turn: it opens unmodified (no dirty
  mark before the learner did anything), each Mermaid diagram became an SVG image no taller
  than a screen, with no parse error, each quiz renders with label boxes that do not overlap
  (and a choice shows its reason), every button of every form and consent panel is clicked
  once and the next state is what the text says, a failed check message is said once with its
  code as code, and every document link opens the document, rendered. Screenshots of every
  diagram, one quiz and one failed check go to `outputs/` (ignored by git, like the form
  screenshots).

Nothing is written into the checkout except the screenshots under outputs/.
Needs `/usr/bin/chromium` (`make test` installs it with apt); never downloads a browser.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from labkit.deployment import DEMO_NOTES

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
# The notebook under test, relative to the repository; everything else follows from it.
NOTEBOOK = Path("notebooks/02-elicitation-mrtr.ipynb")
IN_ROOT = NOTEBOOK.relative_to(NOTEBOOKS.relative_to(REPO))  # its path under the server root
SCREENSHOTS = REPO / "outputs"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

FORM_CELL = "live-form"
NOTES_CELL = "live-notes"
NOTE_ID = "note-14"
NOTE_TITLE = {note_id: title for note_id, _uri, title in DEMO_NOTES}[NOTE_ID]

SERVER_START_SECONDS = 60
NOTEBOOK_OPEN_SECONDS = 60
RUN_ALL_SECONDS = 240  # a whole notebook: seconds alone, minutes beside the grading tests
FORM_SECONDS = 60
ANSWER_SECONDS = 60
CELL_SECONDS = 60
# Tracebacks and stderr lines as JupyterLab renders them.
ERROR_OUTPUTS = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"

# User settings of the test server: what `make lab` installs as JupyterLab's overrides (no news
# or update toasts, Markdown documents open rendered), and every cell kept in the page (no
# windowing), so the n-th cell element is the n-th cell of the file.
LAB_OVERRIDES = REPO / "labkit" / "course" / "jupyterlab-overrides.json"
USER_SETTINGS = {
    **{
        plugin.replace(":", "/"): settings
        for plugin, settings in json.loads(LAB_OVERRIDES.read_text()).items()
    },
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}


# -- the JupyterLab server -------------------------------------------------------------------


@dataclass
class Lab:
    url: str
    root: Path
    log: Path
    process: subprocess.Popen[bytes]

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    # SIGTERM lets the server shut its kernels down; kernels also exit when their parent dies.
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp_path = tmp_path_factory.mktemp("lab")
    notebook = REPO / NOTEBOOK
    if not notebook.is_file():
        pytest.fail(f"{NOTEBOOK} is missing: the browser test drives that notebook")
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.fail("jupyterlab is not installed here: pip install -e '.[test,grade,lab]'")
    root = tmp_path / "root"
    shutil.copytree(NOTEBOOKS, root)
    # As in the checkout, an outputs/ folder beside the notebooks (notebook 08 writes there).
    (tmp_path / "outputs").mkdir()
    jupyter = {name: tmp_path / name for name in ("config", "data", "runtime", "ipython")}
    for name, settings in USER_SETTINGS.items():
        path = jupyter["config"] / "lab" / "user-settings" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(jupyter["config"]),
        "JUPYTER_DATA_DIR": str(jupyter["data"]),
        "JUPYTER_RUNTIME_DIR": str(jupyter["runtime"]),
        "IPYTHONDIR": str(jupyter["ipython"]),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        # An empty token: this throwaway server listens on loopback for this test only.
        "--IdentityProvider.token=",
        f"--ServerApp.root_dir={root}",
        # Nothing reaches the network: no news feed, no update check, no extension catalogue.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    log = tmp_path / "jupyterlab.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    server = Lab(f"http://127.0.0.1:{port}", root, log, process)
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while not answers(f"{server.url}/api/status"):
            if process.poll() is not None:
                pytest.fail(
                    f"jupyter lab exited with status {process.returncode} before answering; "
                    f"its log ends:\n{server.log_tail()}"
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"jupyter lab did not answer on {server.url} within {SERVER_START_SECONDS} s; "
                    f"its log ends:\n{server.log_tail()}"
                )
            time.sleep(0.25)
        yield server
    finally:
        stop(process)


# -- the browser -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    tmp_path = tmp_path_factory.mktemp("browser")
    if not CHROMIUM.is_file():
        pytest.fail(
            f"Chromium is missing at {CHROMIUM}: install it with `apt-get install -y chromium` "
            "(`make test` does); this test never downloads a browser"
        )
    with sync_playwright() as playwright:
        context: BrowserContext = playwright.chromium.launch_persistent_context(
            tmp_path / "chromium-profile",
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 1000},
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


# -- driving the notebook ------------------------------------------------------------------------


class Notebook:
    """The open notebook in the page: its cells by id, menus, waits that fail with a reason."""

    def __init__(
        self, page: Page, lab: Lab, path: Path, required: tuple[str, ...] = (FORM_CELL, NOTES_CELL)
    ) -> None:
        self.page = page
        self.lab = lab
        self.path = path
        self.in_root = path.relative_to(lab.root)
        self.cells = json.loads(path.read_text())["cells"]
        self.ids: list[str | None] = [cell.get("id") for cell in self.cells]
        self.sources = {cell.get("id"): "".join(cell["source"]) for cell in self.cells}
        self.required = required
        for cell_id in required:
            if cell_id not in self.ids:
                pytest.fail(f"{self.in_root} has no cell with id {cell_id!r}, which this test uses")

    def cell(self, cell_id: str) -> Locator:
        return self.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(
            self.ids.index(cell_id)
        )

    def output(self, cell_id: str) -> Locator:
        return self.cell(cell_id).locator(".jp-OutputArea")

    def wait(self, what: str, seconds: float, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                if ready():
                    return
            except PlaywrightTimeout:
                pass
            if time.monotonic() > deadline:
                self.fail(f"{what} within {seconds:g} s")
            self.page.wait_for_timeout(200)

    def fail(self, why: str) -> NoReturn:
        SCREENSHOTS.mkdir(exist_ok=True)
        shot = SCREENSHOTS / "browser-failure.png"
        self.page.screenshot(path=shot)
        errors = self.page.locator(ERROR_OUTPUTS).all_inner_texts()
        shown = "\n".join(errors)[-2000:] or "(none)"
        pytest.fail(
            f"{why}\nerror outputs in the notebook:\n{shown}\nscreenshot: {shot}\n"
            f"jupyter lab log ends:\n{self.lab.log_tail(20)}"
        )

    def open(self) -> None:
        # `reset`: a fresh workspace, so no notebook opened earlier is restored beside this one.
        self.page.goto(f"{self.lab.url}/lab/tree/{self.in_root.as_posix()}?reset")
        cells = self.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
        self.wait(
            f"the notebook did not show its {len(self.ids)} cells",
            NOTEBOOK_OPEN_SECONDS,
            lambda: cells.count() == len(self.ids),
        )
        self.wait("the kernel did not become idle", NOTEBOOK_OPEN_SECONDS, self.kernel_idle)
        # The n-th cell element must be the n-th cell of the file.
        code = [c.get("id") for c in self.cells if c["cell_type"] == "code"]
        for cell_id in self.required or (code[:1] + code[-1:]):
            first_line = self.sources[cell_id].strip().splitlines()[0].strip()
            text = self.cell(cell_id).locator(".jp-InputArea-editor").inner_text()
            if first_line not in text:
                self.fail(f"the cell shown at {cell_id!r}'s place starts {text[:80]!r}")

    def kernel_idle(self) -> bool:
        indicator = self.page.locator(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator")
        return indicator.get_attribute("data-status", timeout=1000) == "idle"

    def menu(self, menu: str, item: str) -> None:
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
        entry = self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$"))
        entry.click()

    def run_all(self, restart: bool) -> None:
        if restart:
            self.menu("Kernel", "Restart Kernel and Clear Outputs of All Cells…")
            self.page.locator(".jp-Dialog .jp-mod-accept").click()
            self.wait(
                "the restart dialog did not close",
                CELL_SECONDS,
                lambda: self.page.locator(".jp-Dialog").count() == 0,
            )
        else:
            self.menu("Edit", "Clear Outputs of All Cells")
        self.wait(
            "the outputs were not cleared",
            CELL_SECONDS,
            lambda: self.page.locator(".jp-NotebookPanel .jp-OutputArea-output").count() == 0,
        )
        self.menu("Run", "Run All Cells")
        # Finished when every code cell shows an execution count ("[ ]" not run, "[*]" queued):
        # the form is then answered by an idle kernel, not queued behind later cells.
        prompts = self.page.locator(".jp-NotebookPanel .jp-CodeCell .jp-InputPrompt")

        def finished() -> bool:
            if "Traceback" in "\n".join(self.page.locator(ERROR_OUTPUTS).all_inner_texts()):
                self.fail("a cell raised during Run All")
            counts = [t.strip() for t in prompts.all_inner_texts()]
            return all(re.fullmatch(r"\[\d+\]:", count) for count in counts)

        self.wait("Run All did not finish", RUN_ALL_SECONDS, finished)

    def form(self) -> Locator:
        """The rendered form in live-form's output, once its fields and buttons are shown."""
        output = self.output(FORM_CELL)
        accept = output.get_by_role("button", name="Accept", exact=True)

        self.wait(
            f"the form did not render in the output of {FORM_CELL!r}",
            FORM_SECONDS,
            lambda: accept.is_visible() and output.locator(".widget-dropdown select").count() == 1,
        )
        return output

    def answer(self, form: Locator, button: str, status: str) -> str:
        """Click `button`, wait for the form's status and the call's outcome; its text."""
        form.get_by_role("button", name=button, exact=True).click()
        self.wait(
            f"the form did not say {status!r} after {button}",
            ANSWER_SECONDS,
            lambda: status in form.inner_text(),
        )
        self.wait(
            f"the call showed no outcome after {button}",
            ANSWER_SECONDS,
            lambda: re.search(r"\b(Result|Tool error|Error)\b", form.inner_text()) is not None,
        )
        text = form.inner_text()
        if "Result:" not in text:
            self.fail(f"{button} did not end in a result: {text!r}")
        return text

    def prompt(self, cell_id: str) -> str:
        return self.cell(cell_id).locator(".jp-InputPrompt").inner_text().strip()

    def notes_left(self, run: bool) -> list[str]:
        """The note ids live-notes prints; re-run the cell first when `run`."""
        cell = self.cell(NOTES_CELL)
        if run:
            before = self.prompt(NOTES_CELL)
            cell.locator(".jp-InputArea-editor").click()
            self.page.keyboard.press("Control+Enter")
            self.wait(
                f"{NOTES_CELL!r} did not run again (prompt still {before!r})",
                CELL_SECONDS,
                lambda: (
                    re.fullmatch(r"\[\d+\]:", self.prompt(NOTES_CELL)) is not None
                    and self.prompt(NOTES_CELL) != before
                ),
            )
        else:
            self.wait(
                f"{NOTES_CELL!r} printed nothing after Run All",
                CELL_SECONDS,
                lambda: "notes left:" in self.output(NOTES_CELL).inner_text(),
            )
        text = self.output(NOTES_CELL).inner_text().strip()
        match = re.fullmatch(r"notes left:\s*(.*)", text)
        if match is None:
            self.fail(f"{NOTES_CELL!r} printed {text!r}, not one line 'notes left: ...'")
        return [note for note in re.split(r",\s*", match.group(1)) if note]

    def screenshot(self, name: str) -> None:
        self.cell(FORM_CELL).scroll_into_view_if_needed()
        SCREENSHOTS.mkdir(exist_ok=True)
        self.page.screenshot(path=SCREENSHOTS / name)


# -- the test -------------------------------------------------------------------------------------


def test_accept_deletes_the_note_and_decline_keeps_it(page: Page, lab: Lab) -> None:
    notebook = Notebook(page, lab, lab.root / IN_ROOT)
    notebook.open()

    notebook.run_all(restart=False)
    form = notebook.form()
    assert NOTE_ID in notebook.notes_left(run=False)
    form.locator(".widget-dropdown select").select_option(label=NOTE_TITLE)
    confirm = form.locator(".widget-checkbox input[type='checkbox']")
    assert confirm.count() == 1, "the form should show one checkbox, the confirm field"
    confirm.check()
    result = notebook.answer(form, "Accept", "Accepted.")
    assert NOTE_ID in result, result
    left = notebook.notes_left(run=True)
    notebook.screenshot("browser-accept.png")
    assert NOTE_ID not in left, f"after Accept the kernel still lists {NOTE_ID}: {left}"
    assert left, "Accept deleted more than the chosen note"

    notebook.run_all(restart=True)
    form = notebook.form()
    assert NOTE_ID in notebook.notes_left(run=False), "a restart should bring every note back"
    form.locator(".widget-dropdown select").select_option(label=NOTE_TITLE)
    notebook.answer(form, "Decline", "Declined.")
    left = notebook.notes_left(run=True)
    notebook.screenshot("browser-decline.png")
    assert NOTE_ID in left, f"after Decline the kernel no longer lists {NOTE_ID}: {left}"


# -- every notebook renders --------------------------------------------------------------------

ALL_NOTEBOOKS = sorted(path.name for path in NOTEBOOKS.glob("*.ipynb"))
QUIZ_SHOT = ("07-ex5-legacy-adapter.ipynb", "quiz-retry")  # the longest labels
CHECK_SHOT = ("03-ex1-sqlite-replay-store.ipynb", "ex1-check")
# Narrow enough that long quiz labels and check messages wrap: what overlapped before.
NARROW = {"width": 900, "height": 1000}
RENDER_SECONDS = 60
MERMAID = re.compile(r"^```mermaid\s*$", re.M)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
FOLDED = ".jp-RenderedMarkdown details:not(.jp-RenderedMermaid-Details):not([open]) > summary"
# A failed check's message as the report renders it in JupyterLab (its HTML view).
CHECK_MESSAGE = ".labkit-check .labkit-check-failure"
# A diagram taller than this (at NARROW) cannot be read without scrolling past it.
MAX_DIAGRAM_HEIGHT = 900
DIRTY_TAB = ".lm-TabBar-tab.jp-mod-dirty"
DOC_LINK = re.compile(r"\[([^\]]+)\]\((docs/[\w.-]+\.md)\)")


def shut_down_kernels(page: Page, lab: Lab) -> None:
    """End every session of the server, so the next notebook runs on an idle machine (through
    the page's own cookies: the server wants its XSRF token on a DELETE)."""
    xsrf = next((c["value"] for c in page.context.cookies() if c["name"] == "_xsrf"), "")
    sessions = page.request.get(f"{lab.url}/api/sessions").json()
    for session in sessions:
        answer = page.request.delete(
            f"{lab.url}/api/sessions/{session['id']}", headers={"X-XSRFToken": xsrf}
        )
        assert answer.status == 204, f"could not end session {session['id']}: {answer.status}"


def overlaps(boxes: list[dict[str, float]]) -> list[tuple[int, int]]:
    """Pairs of boxes (by index) whose areas intersect; touching edges do not count."""
    found = []
    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            b = boxes[j]
            width = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
            height = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
            if width > 0.5 and height > 0.5:
                found.append((i, j))
    return found


def test_overlap_measure_finds_overlapping_boxes() -> None:
    line = {"x": 0.0, "y": 0.0, "width": 100.0, "height": 20.0}
    assert overlaps([line, {**line, "y": 20.0}]) == []
    assert overlaps([line, {**line, "y": 12.0}]) == [(0, 1)]
    assert overlaps([line, {**line, "y": 40.0}, {**line, "y": 50.0}]) == [(1, 2)]


def mermaid_cells(notebook: Notebook) -> list[tuple[str, int]]:
    return [
        (str(cell.get("id")), len(MERMAID.findall("".join(cell["source"]))))
        for cell in notebook.cells
        if cell["cell_type"] == "markdown" and MERMAID.search("".join(cell["source"]))
    ]


def check_diagrams(notebook: Notebook, stem: str) -> int:
    diagrams = 0
    for cell_id, count in mermaid_cells(notebook):
        cell = notebook.cell(cell_id)
        figures = cell.locator(".jp-RenderedMermaid")
        failed = cell.locator(".jp-RenderedMermaid.jp-mod-warning")

        def rendered(figures: Locator = figures, failed: Locator = failed, n: int = count) -> bool:
            done = figures.locator("img[src^='data:image/svg+xml']").count()
            return figures.count() == n and (done == n or failed.count() > 0)

        notebook.wait(
            f"{stem}: the diagram in {cell_id!r} did not render", RENDER_SECONDS, rendered
        )
        # A diagram folded in a <details> block (a predicted answer) is shown by opening it.
        folded = cell.locator(FOLDED)
        while folded.count():
            folded.first.click()
        for n in range(count):
            figure = figures.nth(n)
            classes = figure.get_attribute("class") or ""
            if "jp-mod-warning" in classes:
                error = figure.locator(".jp-RenderedMermaid-Details").inner_text()
                notebook.fail(f"{stem}: the diagram in {cell_id!r} does not parse:\n{error}")
            image = figure.locator("img[src^='data:image/svg+xml']")
            assert image.count() == 1, f"{stem} {cell_id}: no SVG image"
            image.scroll_into_view_if_needed()
            box = image.bounding_box()
            assert box is not None and box["width"] > 50 and box["height"] > 20, (stem, box)
            assert box["height"] <= MAX_DIAGRAM_HEIGHT, f"{stem} {cell_id}: a diagram {box}"
            SCREENSHOTS.mkdir(exist_ok=True)
            # A tall diagram gets a tall window, so no toolbar covers part of its screenshot.
            tall = box["height"] + 400 > NARROW["height"]
            if tall:
                notebook.page.set_viewport_size({**NARROW, "height": int(box["height"]) + 400})
                image.scroll_into_view_if_needed()
            image.screenshot(path=SCREENSHOTS / f"diagram-{stem[:2]}-{cell_id}-{n + 1}.png")
            if tall:
                notebook.page.set_viewport_size(NARROW)
            diagrams += 1
    return diagrams


def check_quiz(notebook: Notebook, stem: str, cell_id: str, shoot: bool) -> bool:
    """The quiz renders, no two label boxes overlap; True when one of its labels wraps."""
    output = notebook.output(cell_id)
    labels = output.locator(".labkit-quiz .widget-radio-box label")
    want = notebook.sources[cell_id].strip()  # quiz("<id>")
    notebook.wait(
        f"{stem}: the quiz {want} did not render", RENDER_SECONDS, lambda: labels.count() >= 2
    )
    output.scroll_into_view_if_needed()
    boxes = [labels.nth(i).bounding_box() for i in range(labels.count())]
    assert all(box is not None for box in boxes), f"{stem} {cell_id}: a label is not shown"
    shown = [box for box in boxes if box is not None]
    assert not overlaps(shown), f"{stem} {cell_id}: label boxes overlap: {shown}"
    # Each label is as tall as its text: nothing is clipped, nothing runs into the next one.
    for i in range(labels.count()):
        clipped = labels.nth(i).evaluate("e => e.scrollHeight > e.clientHeight + 1")
        assert not clipped, f"{stem} {cell_id}: label {i} is cut off"
    line = float(labels.first.evaluate("e => parseFloat(getComputedStyle(e).lineHeight)"))
    wraps = any(box["height"] > 1.6 * line for box in shown)
    if shoot:
        labels.nth(0).locator("input").check()
        feedback = output.locator(".labkit-quiz-feedback")
        notebook.wait(
            f"{stem}: choosing an option showed no reason",
            RENDER_SECONDS,
            lambda: re.match(r"(Correct|Not quite)\. \S", feedback.inner_text()) is not None,
        )
        SCREENSHOTS.mkdir(exist_ok=True)
        output.screenshot(path=SCREENSHOTS / "browser-quiz.png")
    return wraps


def widget_outputs(name: str) -> list[str]:
    """The cells whose output in the executed solution is a widget (quizzes and forms)."""
    cells = json.loads((REPO / "solutions" / name).read_text())["cells"]
    return [
        str(cell.get("id"))
        for cell in cells
        if cell["cell_type"] == "code"
        and any(WIDGET_VIEW in output.get("data", {}) for output in cell.get("outputs", []))
    ]


def check_form(notebook: Notebook, stem: str, cell_id: str) -> None:
    output = notebook.output(cell_id)
    buttons = output.locator(".jupyter-widgets button")
    notebook.wait(
        f"{stem}: the form in {cell_id!r} did not render", FORM_SECONDS, lambda: buttons.count() > 0
    )
    assert buttons.first.is_visible(), f"{stem} {cell_id}: the form's buttons are hidden"
    assert output.locator(ERROR_OUTPUTS).count() == 0, f"{stem} {cell_id}: the form raised"


def check_failed_message(notebook: Notebook, stem: str, cell_id: str) -> None:
    """A fresh learner copy's check: one message for all its checks, code shown as code."""
    messages = notebook.output(cell_id).locator(CHECK_MESSAGE)
    notebook.wait(
        f"{stem}: {cell_id!r} showed no failed check message",
        RENDER_SECONDS,
        lambda: messages.count() >= 1 and messages.first.inner_text().strip() != "",
    )
    text = notebook.output(cell_id).inner_text()
    assert text.count("still raises NotImplementedError") == 1, text
    assert "`" not in text, f"{stem} {cell_id}: Markdown backticks shown raw: {text}"
    assert messages.first.locator("code").count() >= 1, f"{stem} {cell_id}: no code element"
    box = messages.first.bounding_box()
    area = notebook.output(cell_id).bounding_box()
    assert box is not None and area is not None and box["width"] <= area["width"] + 1
    messages.first.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(exist_ok=True)
    notebook.output(cell_id).screenshot(path=SCREENSHOTS / "browser-failed-check.png")


# -- every button of every form and panel -------------------------------------------------------

STILL_OPEN = "the request is still open"


def rerun(notebook: Notebook, cell_id: str) -> None:
    """Run one cell again (a fresh call: every note is back)."""
    before = notebook.prompt(cell_id)
    notebook.cell(cell_id).locator(".jp-InputArea-editor").click()
    notebook.page.keyboard.press("Control+Enter")
    notebook.wait(
        f"{cell_id!r} did not run again",
        CELL_SECONDS,
        lambda: (
            re.fullmatch(r"\[\d+\]:", notebook.prompt(cell_id)) is not None
            and notebook.prompt(cell_id) != before
        ),
    )


def click(notebook: Notebook, area: Locator, name: str, then: str, where: str) -> str:
    """Click the last button `name` in `area`; wait until `then` shows there; the text."""
    area.get_by_role("button", name=name, exact=True).last.click()
    notebook.wait(
        f"{where}: after {name} the text never said {then!r}",
        ANSWER_SECONDS,
        lambda: then in area.inner_text(),
    )
    return area.inner_text()


def enabled(area: Locator, name: str) -> bool:
    return area.get_by_role("button", name=name, exact=True).last.is_enabled()


def choose_and_confirm(area: Locator) -> None:
    select = area.locator(".widget-dropdown select").last
    select.select_option(index=1 if select.locator("option").first.inner_text() == "" else 0)
    for box in area.locator(".widget-checkbox input[type='checkbox']").all():
        box.check()


def check_form_buttons(notebook: Notebook, stem: str, cell_id: str) -> None:
    """Cancel keeps the request open (as the result says), Decline ends it; on a fresh call,
    Accept without a choice sends nothing and with one deletes the chosen note."""
    where = f"{stem} {cell_id}"
    output = notebook.output(cell_id)
    text = click(notebook, output, "Cancel", STILL_OPEN, where)
    assert re.search(r"Result:.*[Cc]ancel", text, re.S), text
    assert enabled(output, "Accept") and enabled(output, "Decline"), f"{where}: not answerable"
    text = click(notebook, output, "Decline", "Declined", where)
    assert not enabled(output, "Accept"), f"{where}: still answerable after Decline"
    rerun(notebook, cell_id)
    output = notebook.output(cell_id)
    click(notebook, output, "Accept", "need attention", where)  # nothing chosen yet
    choose_and_confirm(output)
    text = click(notebook, output, "Accept", "Result", where)
    assert re.search(r"[Dd]eleted", text), f"{where}: Accept deleted nothing: {text}"
    assert not enabled(output, "Accept"), f"{where}: still answerable after the deletion"


def check_consent_panel(notebook: Notebook, stem: str, cell_id: str) -> None:
    """The URL panel and the consent page: Cancel, Open, Continue, Approve, Continue; then on a
    fresh call Open, Deny, Continue (a new link) and Decline."""
    where = f"{stem} {cell_id}"
    output = notebook.output(cell_id)
    assert not enabled(output, "Continue"), f"{where}: Continue before the page was opened"
    text = click(notebook, output, "Cancel", STILL_OPEN, where)
    assert "Cancelled: nothing was exported" in text and enabled(output, "Open")
    click(notebook, output, "Open", "finish on the page, then press Continue", where)
    page = output.locator(".labkit-consent-page")
    assert page.count() == 1 and "file:///work/notes" in page.inner_text()
    text = click(notebook, output, "Continue", "has no record yet", where)
    assert "Round 2" not in text, f"{where}: a second panel for the same link: {text}"
    click(notebook, page, "Approve", "Approved", where)
    text = click(notebook, output, "Continue", "Exported", where)
    assert not enabled(output, "Continue"), f"{where}: still answerable after the export"
    rerun(notebook, cell_id)
    output = notebook.output(cell_id)
    click(notebook, output, "Open", "press Continue", where)
    click(notebook, output.locator(".labkit-consent-page"), "Deny", "Denied", where)
    click(notebook, output, "Continue", "Round 2", where)  # the link was withdrawn: a new one
    text = click(notebook, output, "Decline", "Declined: nothing was exported", where)
    assert not enabled(output, "Open"), f"{where}: still answerable after Decline"


def check_doc_links(notebook: Notebook, stem: str) -> int:
    """Each link to a document (as the notebook's Markdown writes it) opens that document in
    JupyterLab, rendered: its first heading shows."""
    page = notebook.page
    sources = [
        "".join(cell["source"]) for cell in notebook.cells if cell["cell_type"] == "markdown"
    ]
    targets = sorted({found for text in sources for found in DOC_LINK.findall(text)})
    # A link may sit in a folded answer: unfold them all, as a learner would to follow it.
    page.evaluate(
        "document.querySelectorAll('.jp-RenderedMarkdown details').forEach(d => d.open = true)"
    )
    for label, href in targets:
        heading = (notebook.lab.root / href).read_text().splitlines()[0].lstrip("# ").strip()
        anchors = page.locator(".jp-MarkdownCell .jp-RenderedMarkdown a", has_text=label)
        link = anchors.filter(visible=True).first
        link.scroll_into_view_if_needed()
        link.click()
        shown = page.locator(".jp-MarkdownViewer .jp-RenderedMarkdown h1")
        notebook.wait(
            f"{stem}: the link to {href} did not open the document rendered",
            RENDER_SECONDS,
            lambda shown=shown, heading=heading: (
                shown.count() > 0 and heading in shown.last.inner_text()
            ),
        )
        page.locator(".lm-TabBar-tab", has_text=notebook.in_root.name).first.click()
    return len(targets)


def test_every_notebook_renders_its_diagrams_quizzes_and_forms(page: Page, lab: Lab) -> None:
    page.set_viewport_size(NARROW)
    diagrams = quizzes = panels = links = 0
    wrapped = False
    try:
        for name in ALL_NOTEBOOKS:
            stem = name.removesuffix(".ipynb")
            notebook = Notebook(page, lab, lab.root / name, required=())
            notebook.open()
            dirty = page.locator(DIRTY_TAB).count()
            assert dirty == 0, f"{stem}: opened already marked modified (kernelspec or metadata)"
            links += check_doc_links(notebook, stem)
            notebook.run_all(restart=False)
            diagrams += check_diagrams(notebook, stem)
            widget_cells = [
                str(cell.get("id"))
                for cell in notebook.cells
                if cell["cell_type"] == "code"
                and re.fullmatch(r'quiz\("[\w-]+"\)', "".join(cell["source"]).strip())
            ]
            assert widget_cells, f"{stem}: no quiz"
            for cell_id in widget_cells:
                wrapped |= check_quiz(notebook, stem, cell_id, (name, cell_id) == QUIZ_SHOT)
                quizzes += 1
            forms = [cell_id for cell_id in widget_outputs(name) if cell_id not in widget_cells]
            assert forms, f"{stem}: no form"
            for cell_id in forms:
                check_form(notebook, stem, cell_id)
                if notebook.output(cell_id).get_by_role("button", name="Open").count():
                    check_consent_panel(notebook, stem, cell_id)
                else:
                    check_form_buttons(notebook, stem, cell_id)
                panels += 1
            if name == CHECK_SHOT[0]:
                check_failed_message(notebook, stem, CHECK_SHOT[1])
            shut_down_kernels(page, lab)
    finally:
        page.set_viewport_size({"width": 1280, "height": 1000})
    assert diagrams >= 8 and quizzes >= 8 and panels >= 8 and links >= 8, (
        diagrams,
        quizzes,
        panels,
        links,
    )
    assert wrapped, "no quiz label wrapped at this width: the overlap check measured nothing"
