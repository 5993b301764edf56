"""The check worker's view of labkit: the building blocks and the worker's own modules, and
nothing that implements a graded contract.

Owns: which labkit modules a check worker can import and read (`OFFERED`, the building blocks
the exercises hand out: labkit's errors and `labkit.scope`; and the modules the worker's process
starts from, `RUNS_ON`: the launcher and the worker's loop; each with every labkit module it
imports), `build` (those files copied into a fresh
folder, with generated package `__init__`s whose every other name is a `withheld` stand-in),
and how a worker's job is pointed at it (`command`, `env`, `HIDE`).

Why: labkit ships the implementations its exercises teach (`labkit.legacy.to_legacy_requests`
is exercise 5's contract, `labkit.url_mode.url_elicitation` exercise 2's, the stores' claims
exercise 1's, `labkit.fsroot` resolves paths inside a root as exercise 4 asks), and the setup
cells import some of them for the lessons. An answer that imports one, wraps one, or loads its
source must not score more than the untouched learner copy.

How the real package stays out of reach, whatever the answer cells do: the worker imports labkit
from the view (first on `PYTHONPATH`; in a bubblewrap container the view is also bound over the real
package's path), so no other labkit module is ever loaded into its process (no `sys.modules` entry,
no object to find); and before it reads a request the worker adds a Landlock layer that refuses to
read any file under the real package (the launcher's `HIDE`), so neither `importlib` from a path,
nor `open()`, nor a cached `.pyc` reaches it.

Must not import the hidden checks, the kernel runner or nbclient.
"""

from __future__ import annotations

import ast
import functools
import importlib
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import labkit
from labkit.grade import syntax, withheld, worker
from labkit.grade.containment import Job

PACKAGE: Final = withheld.PACKAGE
REAL: Final = Path(labkit.__file__).resolve().parent
OFFERED: Final = ("labkit.errors", "labkit.scope")
# What a worker's process starts from: the launcher, the worker's loop it runs, and what the
# generated `__init__`s import; every labkit module these import follows (`modules`).
RUNS_ON: Final = (worker.LAUNCHER, worker.MODULE, withheld.__name__)
HIDE: Final = "--hide"  # the launcher's option naming the real package
MARK: Final = "_ANSWER_VIEW"  # set in the view's `labkit/__init__`, and nowhere else


class ViewError(RuntimeError):
    """A module the worker needs imports something the view would withhold."""


def _file(module: str) -> Path | None:
    parts = module.split(".")[1:]
    for candidate in (
        REAL.joinpath(*parts).with_suffix(".py"),
        REAL.joinpath(*parts, "__init__.py"),
    ):
        if parts and candidate.is_file():
            return candidate
    return None


def offered_names() -> dict[str, str]:
    """labkit's public names the view offers for real, each with its module."""
    found: dict[str, str] = {}
    for module in OFFERED:
        loaded = importlib.import_module(module)
        for name in labkit.__all__:
            if name not in found and hasattr(loaded, name):
                found[name] = module
    return found


@functools.cache
def modules() -> tuple[str, ...]:
    """`OFFERED`, `RUNS_ON` and every labkit module they import (at any depth, lazily
    imported ones included), in a stable order. Read once per process: the package does not
    change while it grades."""
    offered = offered_names()
    seen: dict[str, Path] = {}
    pending = [*OFFERED, *RUNS_ON]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        path = _file(module)
        if path is None:
            raise ViewError(f"{module}: no such module in {REAL}")
        seen[module] = path
        pending += _imports(module, path, offered)
    return tuple(sorted(seen))


def _imports(module: str, path: Path, offered: dict[str, str]) -> list[str]:
    """The labkit modules `module` imports, anywhere in its code."""
    found = []
    for node in ast.walk(syntax.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith(PACKAGE + ".")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module != PACKAGE and not node.module.startswith(PACKAGE + "."):
                continue
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                if _file(name) is not None:
                    found.append(name)
                elif node.module == PACKAGE and alias.name not in offered:
                    raise ViewError(f"{module} imports {name}, which the view withholds")
            if node.module != PACKAGE:
                found.append(node.module)
    return found


def _init(package: str, offered: dict[str, str]) -> str:
    """A generated package `__init__`: the offered names (top level only), every other name a
    stand-in."""
    lines = [
        f'"""{package} as a check worker sees it (labkit.grade.answer_view): only labkit.errors, '
        'labkit.scope and the worker\'s own modules are here."""',
        "from labkit.grade.withheld import install, module_getattr",
    ]
    if package == PACKAGE:
        lines += ["install()", f"{MARK} = True  # what the worker checks before it reads a request"]
        by_module: dict[str, list[str]] = {}
        for name, module in sorted(offered_names().items()):
            by_module.setdefault(module, []).append(name)
        lines += [f"from {m} import {', '.join(names)}" for m, names in sorted(by_module.items())]
    lines.append("__getattr__ = module_getattr(__name__)")
    return "\n".join(lines) + "\n"


def build(target: Path) -> Path:
    """The view under `target` (made here; it must not exist): `target/labkit/...`, readable by
    anyone, writable by no job. Returns `target`, the folder to put on `PYTHONPATH`."""
    target.mkdir(mode=0o755)
    packages = {PACKAGE}
    for module in modules():
        source = _file(module)
        assert source is not None
        if source.name == "__init__.py":
            continue  # a package: its `__init__` is generated below
        relative = source.relative_to(REAL.parent)
        (target / relative).parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        shutil.copyfile(source, target / relative)
        (target / relative).chmod(0o644)
        parts = module.split(".")
        packages.update(".".join(parts[:n]) for n in range(1, len(parts)))
    offered = offered_names()
    for package in packages:
        init = target.joinpath(*package.split("."), "__init__.py")
        init.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        init.write_text(_init(package, offered), encoding="utf-8")
        init.chmod(0o644)
    for folder in [target, *(p for p in target.rglob("*") if p.is_dir())]:
        folder.chmod(0o755)
    return target


def env(view: Path) -> dict[str, str]:
    """What a worker's environment adds: the view first on the import path."""
    return {"PYTHONPATH": str(view)}


def command(job: Job, view: Path, argv: Sequence[str]) -> list[str]:
    """`argv` as a process of `job`. In a bubblewrap container the view is also bound over the
    real package's path (read-only), so the real files are not even in the mount view."""
    prefix = list(job.prefix)
    full = job.command(argv)
    if prefix[-1:] == ["--"] and any(Path(p).name == "bwrap" for p in prefix):
        at = len(prefix) - 1
        full[at:at] = ["--ro-bind", str(view / PACKAGE), str(REAL)]
    return full
