"""The README and the docs/ pages it links to: their runnable shell blocks run as written, and
the README's first screen is the map a reader starts from.

A block (in README.md or a docs/*.md page) is runnable when the line before its ```` ```sh ````
fence is `<!-- readme-test: run -->`. Each runs in `bash -euo pipefail` in an empty temporary
directory, with the test environment's `labkit` first on `PATH` (and, on a machine without curl,
the small stand-in in `tests/readme_bin/`) and a free port in `PORT`, and must exit 0
within the timeout; the blocks check their own results (`grep` for the expected answer), and
the ones that start a server stop it themselves.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
MARKER = "<!-- readme-test: run -->"
TIMEOUT_SECONDS = 120
# The README stays readable in one sitting: the reference lives in docs/.
README_MAX_LINES = 200


def runnable_blocks() -> list[tuple[str, str]]:
    """`(id, script)` of every marked block, named after its page and the section it is in."""
    blocks: list[tuple[str, str]] = []
    for page in PAGES:
        text = page.read_text()
        for found in re.finditer(re.escape(MARKER) + r"\n```sh\n(.*?)```", text, re.DOTALL):
            headings = re.findall(r"^## (.+)$", text[: found.start()], re.MULTILINE)
            section = headings[-1].lower().replace(" ", "-") if headings else "top"
            blocks.append((f"{page.stem}-{section}-{len(blocks) + 1}", found.group(1)))
    return blocks


BLOCKS = runnable_blocks()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_serving_and_configuration_pages_have_runnable_blocks() -> None:
    pages = {name.split("-", 1)[0] for name, _ in BLOCKS}
    assert {"serving", "configuration"} <= pages, pages


def test_the_readme_starts_with_the_map_and_the_two_commands() -> None:
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"{len(lines)} lines: move reference text to docs/"
    first_screen = "\n".join(lines[:40])
    for reader in ("learner", "instructor", "operator", "contributor"):
        assert re.search(rf"^\| \*\*{reader}\*\*", first_screen, re.M | re.I), reader
    for command in ("make lab", "make test"):
        assert command in first_screen, command
    assert "make demo" in text
    assert first_screen.index("make lab") < first_screen.index("make test")


def test_every_docs_page_is_linked_from_the_readme() -> None:
    text = README.read_text()
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)(?:#[\w-]+)?\)", text))
    for name in linked:
        assert (REPO / name).is_file(), name
    pages = {f"docs/{page.name}" for page in PAGES if page != README}
    assert pages <= linked, f"not linked from the README: {sorted(pages - linked)}"


@pytest.mark.parametrize("script", [s for _, s in BLOCKS], ids=[n for n, _ in BLOCKS])
def test_a_readme_block_runs_as_written(script: str, tmp_path: Path) -> None:
    env = dict(os.environ)
    path = [str(Path(sys.executable).parent), env.get("PATH", "")]
    if shutil.which("curl") is None:
        path.append(str(Path(__file__).resolve().parent / "readme_bin"))
    env["PATH"] = os.pathsep.join(path)
    env["PORT"] = str(free_port())
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
    )
    logs = "".join(f"\n--- {p.name}\n{p.read_text()}" for p in tmp_path.rglob("*.log"))
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}{logs}"
