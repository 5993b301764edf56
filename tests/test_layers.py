"""The dependency direction, enforced: what module docstrings say a module must not import.

Read with `ast` (nothing is imported to check it), following labkit's own imports transitively,
so a core module cannot reach a transport through a module in between. Two sources of rules:
the core's fixed list (STYLE.md, "Layout": nothing below the core imports a transport, the
course toolkit, the grader, a widget toolkit or nbclient), and every "Must not import ...",
"Must not be imported by ..." and "Imports nothing ..." sentence of a module docstring, whose
phrases map to module prefixes through `PHRASES`. A phrase the table does not know fails the
test, so a new rule written in a docstring is enforced or noticed, never silently ignored.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

import labkit

ROOT = Path(labkit.__file__).parent

CORE = (
    "labkit.server",
    "labkit.notes_delete",
    "labkit.scope",
    "labkit.state",
    "labkit.forms",
    "labkit.stores",
    "labkit.wire",
    "labkit.errors",
    "labkit.messages",
)
ABOVE_THE_CORE = (
    "labkit.transports",
    "labkit.course",
    "labkit.grade",
    "ipywidgets",
    "nbclient",
    "nbformat",
    "starlette",
    "uvicorn",
)

# What a docstring phrase means, as module prefixes.
PHRASES: dict[str, tuple[str, ...]] = {
    "a transport": ("labkit.transports", "starlette", "uvicorn"),
    "the course toolkit": ("labkit.course", "ipywidgets", "nbclient", "nbformat"),
    "the grader": ("labkit.grade",),
    "a widget toolkit": ("ipywidgets",),
    "ipywidgets": ("ipywidgets",),
    "the checks": ("labkit.course.checks",),
    "the protocol core": CORE,
    "the server": ("labkit.server",),
    "the core": ("labkit.server", "labkit.notes_delete", "labkit.deployment"),
    "the stores": ("labkit.stores",),
    "a store": ("labkit.stores",),
    "the endpoint": ("labkit.transports.http",),
    "nbclient": ("nbclient",),
    "nbval": ("nbval",),
    "pydantic": ("pydantic",),
    "the report models": ("labkit.grade.report",),
    "the kernel runner": ("labkit.grade.kernel",),
    "the hidden checks": ("labkit.grade.hidden",),
    "anything that does I/O": (
        "socket",
        "subprocess",
        "urllib",
        "http",
        "httpx",
        "sqlite3",
        "psycopg",
        "starlette",
        "uvicorn",
    ),
}
# Who "Must not be imported by <phrase>" speaks about, as module-name prefixes.
IMPORTERS: dict[str, tuple[str, ...]] = {
    "the protocol core": CORE,
    "a transport": ("labkit.transports",),
    "a store": ("labkit.stores",),
}

_MUST_NOT = re.compile(r"Must not import ([^.:;]+)")
_NOT_IMPORTED_BY = re.compile(r"Must not be imported by ([^.:]+)")
_NOTHING_FROM_LABKIT = re.compile(r"Imports nothing from labkit")
_NOTHING = re.compile(r"Imports nothing\.")
_ONLY = re.compile(r"Imports only ((?:`[\w.]+`(?:, | and | or )?)+)")


# -- reading modules -----------------------------------------------------------------------------


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports_of(source: str, known: Iterable[str] = ()) -> set[str]:
    """Every module an import statement anywhere in `source` names (function bodies too).
    `from labkit import forms` names `labkit.forms` when that is one of the `known` modules."""
    known = set(known)
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "__future__":
                continue
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                names.add(submodule if submodule in known else node.module)
    return names


def reachable(name: str, modules: dict[str, Path] = MODULES) -> set[str]:
    """Every module `name` imports, following labkit's own modules transitively. The edges
    are the import statements as written: the package `__init__` that Python also runs on
    the way counts only where a module imports the package itself."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        for imported in imports_of(modules[current].read_text(), modules):
            if imported not in seen:
                seen.add(imported)
                if imported in modules and imported != name:
                    todo.append(imported)
    return seen


def matches(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations(
    name: str, forbidden: Iterable[str], modules: dict[str, Path] = MODULES
) -> list[str]:
    """What `name` reaches under the `forbidden` prefixes; a `!prefix` entry exempts."""
    banned = [f for f in forbidden if not f.startswith("!")]
    exempt = [f[1:] for f in forbidden if f.startswith("!")]
    return sorted(
        m for m in reachable(name, modules) if matches(m, banned) and not matches(m, exempt)
    )


def _phrases(text: str) -> list[str]:
    text = re.sub(r"\([^)]*\)", "", text)  # an aside in parentheses is not a phrase
    return [p.strip() for p in re.split(r",| or | and | nor ", text) if p.strip()]


def docstring_rules(
    modules: dict[str, Path] = MODULES,
) -> list[tuple[str, tuple[str, ...], str]]:
    """(module, forbidden prefixes, the sentence it comes from) for every docstring rule."""
    rules: list[tuple[str, tuple[str, ...], str]] = []
    for name, path in modules.items():
        doc = " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split())
        for found in _MUST_NOT.finditer(doc):
            for phrase in _phrases(found.group(1)):
                if phrase not in PHRASES:
                    raise AssertionError(f"{name}: teach test_layers {phrase!r}")
                rules.append((name, PHRASES[phrase], found.group(0)))
        for found in _NOT_IMPORTED_BY.finditer(doc):
            for phrase in _phrases(found.group(1)):
                if phrase not in IMPORTERS:
                    raise AssertionError(f"{name}: teach test_layers {phrase!r}")
                for importer in modules:
                    if matches(importer, IMPORTERS[phrase]):
                        rules.append((importer, (name,), found.group(0)))
        only = _ONLY.search(doc)
        if only is not None:
            allowed = tuple("!" + m for m in re.findall(r"`([\w.]+)`", only.group(1)))
            rules.append((name, ("labkit", *allowed), only.group(0)))
        if _NOTHING.search(doc):
            rules.append((name, ("",), "Imports nothing."))
        elif _NOTHING_FROM_LABKIT.search(doc):
            rules.append((name, ("labkit",), "Imports nothing from labkit"))
    return rules


def _violations_of_rule(
    name: str, forbidden: tuple[str, ...], modules: dict[str, Path] = MODULES
) -> list[str]:
    if forbidden == ("",):  # "Imports nothing."
        return sorted(imports_of(modules[name].read_text(), modules))
    return violations(name, forbidden, modules)


# -- the rules -------------------------------------------------------------------------------


def test_every_core_module_exists() -> None:
    assert all(any(matches(m, (c,)) for m in MODULES) for c in CORE)


@pytest.mark.parametrize("core", [m for m in MODULES if matches(m, CORE)])
def test_the_core_never_reaches_above_itself(core: str) -> None:
    assert violations(core, ABOVE_THE_CORE) == []


def test_import_labkit_stays_the_core() -> None:
    assert violations("labkit", ABOVE_THE_CORE) == []


RULES = docstring_rules()


def test_the_docstrings_state_rules() -> None:
    """The docstrings this test reads are really there (a rewording would empty the list)."""
    stated = {name for name, _, _ in RULES}
    assert {
        "labkit.server",
        "labkit.messages",
        "labkit.errors",
        "labkit.fsroot",
        "labkit.wire",
    } <= stated
    assert any(name.startswith("labkit.transports") for name in stated), "course rule"


@pytest.mark.parametrize(
    ("name", "forbidden", "sentence"),
    RULES,
    ids=[f"{n}:{s[:40]}:{','.join(f)[:30]}" for n, f, s in RULES],
)
def test_a_module_imports_nothing_its_docstring_forbids(
    name: str, forbidden: tuple[str, ...], sentence: str
) -> None:
    found = _violations_of_rule(name, forbidden)
    assert found == [], f"{name} says {sentence!r} yet imports {found}"


# -- controls: the checker catches what it guards against --------------------------------------


def _fake_package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for name, source in files.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        modules[name] = path
    return modules


def test_control_a_core_module_importing_a_transport_through_another_is_caught(
    tmp_path: Path,
) -> None:
    modules = _fake_package(
        tmp_path,
        {
            "labkit.server": '"""Core."""\nfrom labkit.helper import x\n',
            "labkit.helper": (
                '"""In between."""\ndef f():\n    from labkit.transports.http import create_app\n'
            ),
        },
    )
    assert "labkit.transports.http" in violations("labkit.server", ABOVE_THE_CORE, modules)


def test_control_a_docstring_rule_is_read_and_enforced(tmp_path: Path) -> None:
    modules = _fake_package(
        tmp_path,
        {
            "labkit.bad": '"""Owns x.\n\nMust not import a transport or the course toolkit.\n"""\n'
            "import ipywidgets\n",
            "labkit.bare": '"""Imports nothing."""\nimport os\n',
            "labkit.low": (
                '"""Imports only `labkit.errors`."""\nimport labkit.errors, labkit.server\n'
            ),
            "labkit.errors": '"""Errors."""\n',
            "labkit.server": '"""Server."""\n',
        },
    )
    rules = docstring_rules(modules)
    assert {(n, f) for n, f, _ in rules} == {
        ("labkit.bad", PHRASES["a transport"]),
        ("labkit.bad", PHRASES["the course toolkit"]),
        ("labkit.bare", ("",)),
        ("labkit.low", ("labkit", "!labkit.errors")),
    }
    found = [_violations_of_rule(n, f, modules) for n, f, _ in rules]
    assert ["ipywidgets"] in found and ["os"] in found and ["labkit.server"] in found


def test_control_an_unknown_phrase_fails_loudly(tmp_path: Path) -> None:
    modules = _fake_package(tmp_path, {"labkit.odd": '"""Must not import the moon."""\n'})
    with pytest.raises(AssertionError, match="the moon"):
        docstring_rules(modules)
