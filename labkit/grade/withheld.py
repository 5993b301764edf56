"""What a check worker's answer cells get for the parts of labkit it withholds.

Owns: `Withheld` stand-ins and `ReferenceWithheld`. In a check worker, labkit is the view
`labkit.grade.answer_view` builds: labkit's errors and `labkit.scope` (the building blocks the
exercises hand out), and nothing that implements a graded contract. Every other name a setup
cell or an answer imports from labkit (`from labkit import legacy`, `import labkit.url_mode`,
`from labkit.course import memory_claim_and_delete`) is a stand-in: importing it works (the
setup cell's imports are the same as in the notebook), and using it raises `ReferenceWithheld`,
which names what was withheld and why. The check then fails as an error in the learner's code,
with that message.

The stand-ins are only the messenger: nothing else of labkit is in the worker's process or
readable from it (the view, and the worker's own Landlock layer), so taking them away gains
nothing.

Imports nothing from labkit: the view's `labkit/__init__` imports it first.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

PACKAGE = "labkit"


class ReferenceWithheld(Exception):
    """labkit's own code was used where the learner's answer must stand on its own. No
    built-in exception type is among its bases, so no check takes it for a refusal the
    contract names (PermissionError, RuntimeError, ...)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name} is labkit's own code, which your answer cannot use when it is graded: "
            "at grading, answer cells see only labkit.errors and labkit.scope, so the graded "
            "answer is your own implementation"
        )


class _WithheldType(type):
    """A withheld name: a class, so that subclassing and annotations still work where the
    notebook's setup uses them; calling, iterating or indexing it, or what it holds, raises
    `ReferenceWithheld`."""

    _labkit_name: str

    def __call__(cls, *args: Any, **kw: Any) -> Any:
        raise ReferenceWithheld(cls._labkit_name)

    def __iter__(cls) -> Any:
        raise ReferenceWithheld(cls._labkit_name)

    def __len__(cls) -> int:
        raise ReferenceWithheld(cls._labkit_name)

    def __getitem__(cls, key: Any) -> Any:
        raise ReferenceWithheld(cls._labkit_name)

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return withheld(f"{cls._labkit_name}.{name}")

    def __repr__(cls) -> str:
        return f"<withheld {cls._labkit_name}>"


def withheld(name: str) -> type:
    """The stand-in for labkit's `name` (a qualified name)."""
    return _WithheldType(name.rsplit(".", 1)[-1], (), {"_labkit_name": name})


def module_getattr(module: str) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562): a name the module does not define is its submodule
    when the view holds one (`from labkit.grade import launcher`), else withheld."""

    def attribute(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        full = f"{module}.{name}"
        where = getattr(sys.modules.get(module), "__path__", None)
        if where and importlib.machinery.PathFinder.find_spec(full, where) is not None:
            return importlib.import_module(full)
        return withheld(full)

    return attribute


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__getattr__ = module_getattr(spec.name)  # type: ignore[method-assign]
        module.__path__ = []  # a package, so its submodules come here too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _Finder(importlib.abc.MetaPathFinder):
    """Last on `sys.meta_path`: a labkit module the view does not hold is a withheld one."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PACKAGE + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)


def install() -> None:
    """Right after the path finder (which finds the view's own modules), before any other
    finder (an editable install's would point at the real package)."""
    if any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    after = next(
        (n + 1 for n, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
        len(sys.meta_path),
    )
    sys.meta_path.insert(after, _Finder())
