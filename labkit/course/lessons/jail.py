"""Layer 3 for a lesson: what Landlock adds, tried in a child process, never in the kernel.

Owns: `sandbox_trial` (build a small tree in a scratch folder, start a Python child that
opens it the way a server would, applies `labkit.sandbox.apply_sandbox` in the given mode,
then attempts a fixed list of file operations and reports each outcome), `ATTEMPTS` (that
list, in order), `SandboxTrial`, and `landlock_abi` (the kernel's Landlock ABI, 0 when absent).

Restriction is irreversible and per process, so it is applied only in the child: a notebook
kernel that restricted itself could no longer read its own files. The child is bounded by a
timeout and its scratch folder is removed afterwards. Must not import ipywidgets.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import landlockpy

from labkit.sandbox import SandboxMode

DEFAULT_TIMEOUT_SECONDS: Final = 30.0

ATTEMPTS: Final = (
    ("read_inside", "read a note inside (fsroot)"),
    ("symlink_escape", "read escape.md -> outside (fsroot)"),
    ("read_outside", "open() a file outside"),
    ("write_outside", "create a file outside"),
    ("unlink_moved", "unlink in a directory moved out"),
)

# The child: the tree is opened before the restriction (as `labkit serve` opens its roots),
# then every attempt runs after it. Outcomes: "allowed", "EACCES" (and other errno names),
# or "refused by fsroot (<kind>)" when labkit's descriptor layer said no before the kernel.
_CHILD: Final = textwrap.dedent(
    """
    import dataclasses, errno, json, os, sys
    from labkit.fsroot import Refused, Root, unlink_at
    from labkit.sandbox import SandboxUnavailable, apply_sandbox

    ws, outside, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    root = Root(ws)
    moved = os.open(os.path.join(ws, "sub"), os.O_DIRECTORY)
    os.rename(os.path.join(ws, "sub"), os.path.join(outside, "sub"))
    try:
        report = dataclasses.asdict(apply_sandbox(mode, read_write=[ws]))
    except SandboxUnavailable as exc:
        report = {"applied": False, "reason": str(exc)}

    def attempt(action):
        try:
            action()
            return "allowed"
        except Refused as exc:
            if exc.errno in (errno.EACCES, errno.EPERM):
                return errno.errorcode[exc.errno]
            return f"refused by fsroot ({exc.kind})"
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))

    secret = os.path.join(outside, "secret.md")
    results = {
        "read_inside": attempt(lambda: root.read_head(("keep.md",), 64)),
        "symlink_escape": attempt(lambda: root.read_head(("escape.md",), 64)),
        "read_outside": attempt(lambda: open(secret).read()),
        "write_outside": attempt(lambda: open(os.path.join(outside, "new.md"), "w").close()),
        "unlink_moved": attempt(lambda: unlink_at(moved, "victim.md", None)),
    }
    print(json.dumps({"report": report, "results": results}))
    """
)


@dataclass(frozen=True)
class SandboxTrial:
    """One child run: the sandbox `mode` asked for, whether it was `applied` (and why not, in
    `reason`), and the outcome of each attempt by its `ATTEMPTS` key."""

    mode: str
    applied: bool
    reason: str
    results: dict[str, str]
    victim_survived: bool


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers (0: no Landlock, or it is disabled)."""
    return max(landlockpy.abi_version(), 0)


def _make_tree(base: Path) -> tuple[Path, Path]:
    ws, outside = base / "notes", base / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (ws / "keep.md").write_text("# A note inside\n")
    (ws / "sub" / "victim.md").write_text("# A note that will be moved out\n")
    (outside / "secret.md").write_text("# Not yours\n")
    (ws / "escape.md").symlink_to(Path("..") / "outside" / "secret.md")
    return ws, outside


def sandbox_trial(mode: SandboxMode, *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> SandboxTrial:
    """Run the attempts in a fresh child process with the sandbox in `mode` ("off",
    "best_effort" or "required"); RuntimeError if the child fails or times out."""
    with tempfile.TemporaryDirectory(prefix="labkit-jail-") as scratch:
        ws, outside = _make_tree(Path(scratch))
        try:
            child = subprocess.run(
                [sys.executable, "-c", _CHILD, str(ws), str(outside), mode],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the sandbox child did not finish within {timeout:g} s") from None
        if child.returncode != 0:
            tail = child.stderr.strip().splitlines()[-1:] or ["(no message)"]
            raise RuntimeError(f"the sandbox child failed: {tail[0]}")
        found = json.loads(child.stdout.strip().splitlines()[-1])
        victim_survived = (outside / "sub" / "victim.md").exists()
    report = found["report"]
    return SandboxTrial(
        mode=mode,
        applied=bool(report["applied"]),
        reason=str(report["reason"]),
        results={key: str(found["results"][key]) for key, _ in ATTEMPTS},
        victim_survived=victim_survived,
    )


def compare(off: SandboxTrial, on: SandboxTrial) -> str:
    """A two-column table of the attempts: without the sandbox, then with it."""
    width = max(len(label) for _, label in ATTEMPTS)
    first = max(len(off.results[k]) for k, _ in ATTEMPTS)
    lines = [f"{'attempt':<{width}}  {'sandbox ' + off.mode:<{first}}  sandbox {on.mode}"]
    lines += [
        f"{label:<{width}}  {off.results[k]:<{first}}  {on.results[k]}" for k, label in ATTEMPTS
    ]
    return "\n".join(lines)
