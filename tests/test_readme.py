"""The README's runnable shell blocks run as written.

A block is runnable when the line before its ```` ```sh ```` fence is
`<!-- readme-test: run -->`. Each runs in `bash -euo pipefail` in an empty temporary directory,
with the test environment's `labkit` first on `PATH` (and, on a machine without curl, the small
stand-in in `tests/readme_bin/`) and a free port in `PORT`, and must exit 0
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

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = "<!-- readme-test: run -->"
TIMEOUT_SECONDS = 120


def runnable_blocks() -> list[tuple[str, str]]:
    """`(id, script)` of every marked block, named after the section it is in."""
    text = README.read_text()
    blocks: list[tuple[str, str]] = []
    for found in re.finditer(re.escape(MARKER) + r"\n```sh\n(.*?)```", text, re.DOTALL):
        headings = re.findall(r"^## (.+)$", text[: found.start()], re.MULTILINE)
        section = headings[-1].lower().replace(" ", "-") if headings else "top"
        blocks.append((f"{section}-{len(blocks) + 1}", found.group(1)))
    return blocks


BLOCKS = runnable_blocks()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_serving_and_configuration_sections_have_runnable_blocks() -> None:
    sections = {name.rsplit("-", 1)[0] for name, _ in BLOCKS}
    assert {"serving", "configuration"} <= sections, sections


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
