"""Real `labkit serve --transport http` processes for crash and disk tests: started from a
config file, their stderr kept in a file (read at any time, never a pipe that fills up),
killed with SIGKILL, started again.

Owns: `write_config`, `Served` (start, kill, stop, the log so far) and the two calls a
deletion flow makes (`ask`, `retry`), over one `httpx.Client`.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from helpers import call_message
from test_http import routing_headers

from labkit.auth import hash_token

TOKEN = "alice-crash-harness-token"
BOB_TOKEN = "bob-crash-harness-token"
AUTH = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}


def write_config(
    directory: Path,
    notes: str,
    replay: str,
    workspace: str,
    schema: str,
    stores: str = "",
    sandbox: str = "off",
) -> Path:
    """alice (and bob, on the same workspace) on these stores; `stores` adds `[stores]`
    settings (the replay bounds); `sandbox` is the server's sandbox mode."""
    keys = directory / "keys"
    keys.mkdir(exist_ok=True)
    key = keys / "current.key"
    key.write_bytes(hashlib.sha256(b"crash harness key").hexdigest().encode())
    key.chmod(0o600)
    config = directory / "labkit.toml"
    config.write_text(
        f"""
[server]
signing_key_files = ["keys/current.key"]
sandbox = "{sandbox}"
state_dir = "{directory / "state"}"

[stores]
notes = "{notes}"
replay = "{replay}"
schema = "{schema}"
{stores}

[[principals]]
name = "alice"
token_sha256 = "{hash_token(TOKEN)}"
workspaces = ["{workspace}"]

[[principals]]
name = "bob"
token_sha256 = "{hash_token(BOB_TOKEN)}"
workspaces = ["{workspace}"]
"""
    )
    return config


class Served:
    """One server process at a time on a config; `start` again after `kill`."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config = config
        self.log_path = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self._log_from = 0

    def start(self, timeout: float = 60.0) -> float:
        """Start and wait until it serves; returns the seconds that took."""
        began = time.monotonic()
        self._log_from = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "labkit.cli", "serve", "--config", str(self.config)]
                + ["--transport", "http", "--port", "0"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        while time.monotonic() - began < timeout:
            found = re.search(r"at (http://\S+:\d+/mcp)", self.log())
            if found:
                self.url = found.group(1)
                return time.monotonic() - began
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}: {self.log()}")
            time.sleep(0.02)
        raise AssertionError(f"server did not start: {self.log()}")

    def log(self) -> str:
        """What this run of the server has logged so far."""
        with self.log_path.open("rb") as log:
            log.seek(self._log_from)
            return log.read().decode(errors="replace")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def post(
        self, http: httpx.Client, message: dict[str, Any], token: str = TOKEN
    ) -> httpx.Response:
        headers = {**AUTH, "authorization": f"Bearer {token}", **routing_headers(message)}
        return http.post(self.url, content=json.dumps(message).encode(), headers=headers)


def arguments(workspace: str, title: str) -> dict[str, str]:
    return {"workspaceUri": workspace, "title": title}


def ask(
    served: Served, http: httpx.Client, workspace: str, title: str, token: str = TOKEN
) -> tuple[str, str]:
    """Round one for the one note titled `title`: (its id, the signed state)."""
    message = call_message(1, arguments=arguments(workspace, title))
    response = served.post(http, message, token)
    result = response.json()["result"]
    (choice,) = result["inputRequests"]["delete_choice"]["params"]["requestedSchema"]["properties"][
        "note_id"
    ]["oneOf"]
    return str(choice["const"]), str(result["requestState"])


def retry_message(workspace: str, title: str, state: str, note_id: str, action: str) -> Any:
    answer: dict[str, Any] = {"action": action}
    if action == "accept":
        answer["content"] = {"note_id": note_id, "confirm": True}
    return call_message(
        2,
        arguments=arguments(workspace, title),
        state=state,
        responses={"delete_choice": answer},
    )


def outcome(response: httpx.Response) -> str:
    """ "deleted", "declined", "cancelled", "stale", "used" (the state was used before),
    "in progress" (another request carries out the same confirmation), "full" (the replay
    store's bounds) or "busy" (the store failed: try again)."""
    body = response.json()
    if "error" in body:
        code, message = body["error"]["code"], body["error"]["message"]
        if code == -32602 and "already used" in message:
            return "used"
        if code == -32001:
            if "carried out by another request" in message:
                return "in progress"
            return "full" if "Too many pending" in message else "busy"
        return f"error {body['error']}"
    return str(body["result"]["structuredContent"]["status"])
