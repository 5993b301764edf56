"""Who holds a pending claim: the name of this process instance, and whether another one has
exited.

Owns: the instance name written into every pending claim (`instance_name`) and the test of a
name read back from a store (`process_gone`). A name is `HOST/BOOT/PID/START/RANDOM`: the
host name and boot id say whether the holder ran on this machine since it last booted, the
process id and its start time (in clock ticks since boot, from /proc) say which process it was
even after the id is reused, and 64 random bits tell apart two instances in one process (tests)
or one process id reused within a tick. Standard library only; must not import a store.

`process_gone` answers True only with proof: a process of this host and boot that no longer
exists, or whose id now belongs to a process started at another time. Anything it cannot
check (another host, a process it may not signal, a /proc it may not read) is not proof, and
the claim's lease decides instead.
Imports nothing from labkit.
"""

from __future__ import annotations

import os
import secrets
import socket
from typing import Final

_UNKNOWN: Final = "-"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def _host() -> str:
    return socket.gethostname().replace("/", "_") or _UNKNOWN


def _boot_id() -> str:
    text = _read("/proc/sys/kernel/random/boot_id")
    return text.strip() if text else _UNKNOWN


def _start_ticks(pid: int) -> str | None:
    """When process `pid` started (field 22 of /proc/PID/stat), or None if unreadable."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from the last ")".
    fields = text[text.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def instance_name(pid: int | None = None) -> str:
    """A fresh name for an instance running as process `pid` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    start = _start_ticks(pid) or _UNKNOWN
    return f"{_host()}/{_boot_id()}/{pid}/{start}/{secrets.token_hex(8)}"


def process_gone(name: str) -> bool:
    """Whether the instance `name` provably no longer runs (see the module docstring)."""
    parts = name.split("/")
    if len(parts) != 5 or not parts[2].isdigit():
        return False
    host, boot, pid_text, start, _ = parts
    same_boot = boot != _UNKNOWN and boot == _boot_id()
    if host != _host() or not same_boot:
        return False
    pid = int(pid_text)
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # it exists, as another user's process or outside our sandbox's signal scope
    except OSError:
        return False
    now = _start_ticks(pid)
    return start != _UNKNOWN and now is not None and now != start
