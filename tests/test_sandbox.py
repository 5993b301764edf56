"""labkit.sandbox: Landlock confines the server process (layer 3).

Restriction is irreversible, so every test that applies it runs in a child process. Landlock
is available on this project's kernels (ABI 7); if it is missing these tests fail loudly.
Root bypasses permission bits, so nothing here relies on chmod: only Landlock can produce
the EACCES results.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import landlockpy
import pytest

from labkit.sandbox import SandboxReport, SandboxUnavailable, apply_sandbox, interpreter_paths

CHILD = textwrap.dedent(
    """
    import dataclasses, errno, json, logging, os, sys, threading
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    from labkit.fsroot import Refused, unlink_at
    from labkit.sandbox import SandboxUnavailable, apply_sandbox
    from labkit.stores import Confirmation
    from labkit.stores.filesystem import FilesystemNoteStore
    from labkit.stores.memory import MemoryReplayStore

    args = json.loads(sys.argv[1])
    ws, state, outside = args["ws"], args["state"], args["outside"]
    result = {}

    def attempt(action):
        try:
            action()
            return "ok"
        except Refused as exc:
            return errno.errorcode.get(exc.errno, exc.kind)
        except OSError as exc:
            return errno.errorcode[exc.errno]

    store = FilesystemNoteStore(["file://" + ws], journal_path=os.path.join(state, "j.db"))
    # The trick descriptors cannot stop: a directory opened inside the root, then moved out.
    moved = os.open(os.path.join(ws, "sub"), os.O_DIRECTORY)
    os.rename(os.path.join(ws, "sub"), os.path.join(outside, "sub"))

    if args["extra_thread"]:
        gate = threading.Event()
        threading.Thread(target=gate.wait, daemon=True).start()
    try:
        report = apply_sandbox(args["mode"], read_write=[ws, state])
        result["report"] = dataclasses.asdict(report)
    except SandboxUnavailable as exc:
        result["unavailable"] = str(exc)
    if args["extra_thread"]:
        gate.set()

    secret = os.path.join(outside, "secret.md")
    result["read_outside"] = attempt(lambda: open(secret).read())
    result["list_outside"] = attempt(lambda: os.listdir(outside))
    result["write_outside"] = attempt(lambda: open(os.path.join(outside, "new.md"), "w").close())
    result["read_moved"] = attempt(
        lambda: os.close(os.open("victim.md", os.O_RDONLY, dir_fd=moved))
    )
    result["unlink_moved"] = attempt(lambda: unlink_at(moved, "victim.md", None))
    result["unlink_outside"] = attempt(lambda: os.unlink(secret))

    # Inside the workspace and the state directory everything still works.
    import decimal  # a module imported for the first time after the restriction
    notes = store.find(tuple(p for p in ws.split("/") if p), "", 10)
    result["found"] = [n.title for n in notes]
    outcome, _ = store.claim_and_delete(
        MemoryReplayStore(), Confirmation(principal="alice", nonce="n1", expires_at=4e9,
        note_id=notes[0].id, recheck=lambda live: True),
    )
    result["deleted"] = outcome.value
    store.close()
    print(json.dumps(result))
    """
)


def make_tree(tmp_path: Path) -> dict[str, str]:
    ws = tmp_path / "notes"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "victim.md").write_text("# victim\n")
    (ws / "keep.md").write_text("# A note inside\n")
    state = tmp_path / "state"
    state.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# secret\n")
    return {"ws": str(ws), "state": str(state), "outside": str(outside)}


def run_child(tmp_path: Path, mode: str, *, extra_thread: bool = False) -> tuple[Any, str]:
    args = {**make_tree(tmp_path), "mode": mode, "extra_thread": extra_thread}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout), child.stderr


def test_landlock_is_available_here() -> None:
    # A hard requirement: the sandbox is part of this project's deployment target.
    assert landlockpy.abi_version() >= 1


def test_required_sandbox_confines_the_process(tmp_path: Path) -> None:
    result, log = run_child(tmp_path, "required")
    report = result["report"]
    assert report["applied"] is True
    assert report["mode"] == "required"
    assert report["abi"] == landlockpy.abi_version()
    assert report["threads_at_apply"] == 1  # /proc/self/task and threading agree: one thread
    assert f"Landlock ABI {report['abi']} applied" in log
    # outside the workspaces: EACCES, even through a directory moved out after it was opened
    assert result["read_outside"] == "EACCES"
    assert result["list_outside"] == "EACCES"
    assert result["write_outside"] == "EACCES"
    assert result["unlink_outside"] == "EACCES"
    assert result["read_moved"] == "EACCES"
    assert result["unlink_moved"] == "EACCES"
    assert (tmp_path / "outside" / "sub" / "victim.md").exists()
    assert (tmp_path / "outside" / "secret.md").read_text() == "# secret\n"
    assert not (tmp_path / "outside" / "new.md").exists()
    # inside: listing, the journal in the state directory and the deletion all work
    assert result["found"] == ["A note inside"]
    assert result["deleted"] == "deleted"
    assert not (tmp_path / "notes" / "keep.md").exists()


def test_without_the_sandbox_the_moved_directory_trick_deletes_outside(tmp_path: Path) -> None:
    # The control: the same child, sandbox off. This is the gap Landlock closes.
    result, log = run_child(tmp_path, "off")
    assert result["report"]["applied"] is False
    assert "sandbox off by configuration" in log
    assert result["read_moved"] == "ok"
    assert result["unlink_moved"] == "ok"
    assert not (tmp_path / "outside" / "sub" / "victim.md").exists()
    assert result["read_outside"] == "ok"
    assert result["unlink_outside"] == "ok"


def test_required_refuses_when_a_thread_already_runs(tmp_path: Path) -> None:
    result, log = run_child(tmp_path, "required", extra_thread=True)
    assert "report" not in result
    assert "threads already run" in result["unavailable"]
    assert "sandbox required but not applied" in log
    assert result["unlink_moved"] == "ok"  # nothing was restricted, as reported


def test_best_effort_goes_on_unrestricted_when_a_thread_already_runs(tmp_path: Path) -> None:
    result, log = run_child(tmp_path, "best_effort", extra_thread=True)
    report = result["report"]
    assert (report["applied"], report["threads_at_apply"]) == (False, 2)
    assert "threads already run" in report["reason"]
    assert "sandbox not applied" in log
    assert result["read_outside"] == "ok"


# -- decisions that restrict nothing: safe to run in this process ----------------------------


def test_required_refuses_to_start_without_landlock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.INFO, "labkit.sandbox"),
        pytest.raises(SandboxUnavailable) as caught,
    ):
        apply_sandbox("required", read_write=[str(tmp_path)], landlock_abi=lambda: 0)
    assert "Landlock is not available" in str(caught.value)
    assert "Landlock ABI 0" in caplog.text


def test_best_effort_and_off_report_without_landlock(tmp_path: Path) -> None:
    best = apply_sandbox("best_effort", read_write=[str(tmp_path)], landlock_abi=lambda: 0)
    assert (best.mode, best.abi, best.applied) == ("best_effort", 0, False)
    assert "not available" in best.reason
    off = apply_sandbox("off", read_write=[str(tmp_path)], landlock_abi=lambda: 0)
    assert (off.mode, off.applied, off.reason) == ("off", False, "sandbox off by configuration")
    assert isinstance(off, SandboxReport)
    with pytest.raises(AttributeError):
        off.applied = True  # type: ignore[misc]


def test_configuration_errors_are_not_sandbox_failures(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        apply_sandbox("strict", read_write=[str(tmp_path)])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        apply_sandbox("required", read_write=[str(tmp_path / "missing")], landlock_abi=lambda: 0)


def test_interpreter_paths_cover_the_running_python() -> None:
    paths = interpreter_paths()
    assert sys.base_prefix in paths
    assert sys.prefix in paths
    assert any(p.endswith("/labkit") for p in paths)
    assert "/usr" in paths
    assert all(Path(p).exists() for p in paths)
