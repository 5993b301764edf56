"""The reference walkthrough: every checkpoint passes, and the CLI reports it."""

from __future__ import annotations

import io
import subprocess
import sys

from labkit.walkthrough import run_walkthrough


def test_walkthrough_passes_all_eleven_checkpoints() -> None:
    out = io.StringIO()
    assert run_walkthrough(out=out) == 0
    text = out.getvalue()
    assert text.count("PASS") == 11
    assert "FAIL" not in text
    assert "11/11 checkpoints passed" in text


def test_labkit_demo_command_exits_zero_and_prints_requests() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"method":"tools/call"' in proc.stdout
    assert "random per-process key" in proc.stderr


def test_labkit_help_explains_commands() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert "demo" in proc.stdout
