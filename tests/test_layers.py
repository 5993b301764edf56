"""The dependency direction, enforced: what module docstrings say a module must not import
(and that every module docstring states such a rule), the floors of the package, no import
circle, notebooks on the public surface only, the layout table of docs/layout.md against the
tree, and one name per idea (module files, type names, public method names).

Read with `ast` (nothing is imported to check it), following labkit's own imports transitively,
so a core module cannot reach a transport through a module in between. Two sources of rules:
the core's fixed list (nothing below the core imports a transport, the
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
    "the checks": ("labkit.course.exercises.checks", "labkit.course.exercises.trial"),
    "the check engine": ("labkit.course.exercises.checks",),
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
    "the command line": ("labkit.cli",),
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
    "another labkit module": ("labkit",),
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


def modules_without_a_rule(modules: dict[str, Path] = MODULES) -> list[str]:
    """The modules whose docstring states no import rule: none that `docstring_rules` reads
    as the module's own, and no "Must not be imported by ..." about it."""
    stated = {name for name, _, _ in docstring_rules(modules)}
    for name, path in modules.items():
        doc = " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split())
        if _NOT_IMPORTED_BY.search(doc):
            stated.add(name)
    return sorted(set(modules) - stated)


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


def test_every_module_docstring_states_an_import_rule() -> None:
    """Each module says what it may import ("Imports only ...", "Imports nothing ...",
    "Must not import ...") or who may not import it ("Must not be imported by ...")."""
    assert modules_without_a_rule() == []


def test_control_a_module_stating_no_rule_is_found(tmp_path: Path) -> None:
    modules = _fake_package(
        tmp_path,
        {
            "labkit.silent": '"""Owns x; says nothing about imports."""\n',
            "labkit.low": '"""Owns y.\n\nImports nothing from labkit.\n"""\n',
            "labkit.top": '"""Owns z. Must not be imported by a store."""\n',
            "labkit.stores": '"""Stores. Must not import a transport."""\n',
        },
    )
    assert modules_without_a_rule(modules) == ["labkit.silent"]


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


# -- the floors: nothing imports from a floor above its own --------------------------------------

# Lowest first. A module sits on the floor of its longest matching prefix; `labkit` (the core)
# catches every module not named here, so a new module starts on the strictest floor.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("labkit",)),
    ("transports", ("labkit.transports", "labkit.config", "labkit.serve")),
    ("client", ("labkit.client", "labkit.walkthrough")),
    ("course rooms", ("labkit.course.exercises", "labkit.course.widgets", "labkit.course.lessons")),
    ("course tools", ("labkit.course.build", "labkit.course.skill")),
    ("course surface", ("labkit.course",)),
    ("grader", ("labkit.grade",)),
    ("command line", ("labkit.cli",)),
)


def floor_of(name: str) -> int:
    best, level = -1, -1
    for index, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if matches(name, (prefix,)) and len(prefix) > best:
                best, level = len(prefix), index
    if level < 0:
        raise AssertionError(f"{name} is on no floor")
    return level


def import_graph(modules: dict[str, Path] = MODULES) -> dict[str, set[str]]:
    """Module -> the labkit modules its import statements name (function bodies too)."""
    return {
        name: {m for m in imports_of(path.read_text(), modules) if m in modules}
        for name, path in modules.items()
    }


GRAPH = import_graph()


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{name} ({FLOORS[floor_of(name)][0]}) imports {target} ({FLOORS[floor_of(target)][0]})"
        for name, targets in graph.items()
        for target in targets
        if floor_of(target) > floor_of(name)
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module, or a module importing
    itself (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(sorted(component))
    return found


def test_every_module_is_on_a_floor() -> None:
    assert all(floor_of(name) >= 0 for name in MODULES)
    assert floor_of("labkit.course.exercises.checks") > floor_of("labkit.client")
    assert floor_of("labkit.client") > floor_of("labkit.server")


def test_no_import_from_a_lower_floor_to_a_higher_one() -> None:
    assert upward_imports(GRAPH) == []


def test_the_package_has_no_import_circle() -> None:
    assert cycles(GRAPH) == []


def test_the_client_and_the_walkthrough_need_no_course() -> None:
    for name in ("labkit.client", "labkit.walkthrough"):
        assert violations(name, ("labkit.course", "labkit.grade")) == []


def test_control_an_import_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_control_an_upward_import_is_found() -> None:
    graph = {"labkit.server": {"labkit.course.exercises.checks"}, "labkit.cli": {"labkit"}}
    assert upward_imports(graph) == [
        "labkit.server (core) imports labkit.course.exercises.checks (course rooms)"
    ]
    assert upward_imports({"labkit.client": {"labkit.course"}}) != []


# -- notebooks import the public surface only -----------------------------------------------------

REPO = ROOT.parent
NOTEBOOKS = sorted((REPO / "solutions").glob("*.ipynb")) + sorted(
    (REPO / "notebooks").glob("*.ipynb")
)
PUBLIC = ("labkit", "labkit.course")


def notebook_imports(cells: Iterable[str]) -> list[tuple[str, str | None]]:
    """(module, name or None) for every import of every code cell; IPython syntax (magics,
    shell escapes) is translated to Python first, as the kernel does."""
    from IPython.core.inputtransformer2 import TransformerManager

    translate = TransformerManager()
    found: list[tuple[str, str | None]] = []
    for source in cells:
        for node in ast.walk(ast.parse(translate.transform_cell(source))):
            if isinstance(node, ast.Import):
                found.extend((alias.name, None) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                found.extend((module, alias.name) for alias in node.names)
    return found


def off_the_surface(imports: Iterable[tuple[str, str | None]]) -> list[str]:
    """The imports that reach labkit other than through `labkit` or `labkit.course`, or name
    something those two do not export."""
    import labkit.course

    exported = {"labkit": set(labkit.__all__), "labkit.course": set(labkit.course.__all__)}
    bad: list[str] = []
    for module, name in imports:
        if module.startswith("."):
            bad.append(f"relative import {module}")
        elif module.split(".")[0] != "labkit":
            continue
        elif name is None:
            if module not in PUBLIC:
                bad.append(f"import {module}")
        elif module not in PUBLIC:
            bad.append(f"from {module} import {name}")
        elif name != "*" and name not in exported[module]:
            bad.append(f"from {module} import {name} (not in __all__)")
    return bad


def code_cells(path: Path) -> list[str]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def test_the_notebooks_are_there() -> None:
    assert len(NOTEBOOKS) == 16


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[f"{p.parent.name}/{p.name}" for p in NOTEBOOKS])
def test_a_notebook_imports_only_the_public_surface(path: Path) -> None:
    imports = notebook_imports(code_cells(path))
    assert any(module in PUBLIC for module, _ in imports), "the notebook imports no labkit"
    assert off_the_surface(imports) == []


def test_control_an_internal_import_in_a_notebook_is_caught() -> None:
    cells = [
        "%load_ext autoreload\nimport json\nfrom labkit import KeyRing",
        "from labkit.scope import parse_file_uri\nimport labkit.course.lessons.peek",
        "from labkit.course import not_exported\nfrom labkit.course import check",
    ]
    assert off_the_surface(notebook_imports(cells)) == [
        "from labkit.scope import parse_file_uri",
        "import labkit.course.lessons.peek",
        "from labkit.course import not_exported (not in __all__)",
    ]


def missing_exports(package: object) -> list[str]:
    return [n for n in getattr(package, "__all__", ()) if not hasattr(package, n)]


def test_every_exported_name_exists() -> None:
    import labkit.course

    for package in (labkit, labkit.course):
        assert missing_exports(package) == [], package


def test_control_an_exported_name_that_is_not_there_is_caught() -> None:
    import types

    fake = types.ModuleType("fake")
    fake.__all__ = ["here", "gone"]  # type: ignore[attr-defined]
    fake.here = 1  # type: ignore[attr-defined]
    assert missing_exports(fake) == ["gone"]


# -- the layout table (docs/layout.md) against the tree --------------------------------------------


def layout_paths(page: str) -> list[str]:
    """Every path the layout table names. In a cell, a token with a `/` is a path from the
    repository root; a bare name is a file next to the token before it."""
    section = page.split("\n| path | what it holds |\n", 1)[1].split("\n\n", 1)[0]
    paths: list[str] = []
    for row in re.findall(r"^\| (.+?) \| .* \|$", section, re.MULTILINE):
        folder = ""
        for token in re.findall(r"`([^`]+)`", row):
            if "/" in token:
                path = token
                folder = token if token.endswith("/") else token.rsplit("/", 1)[0] + "/"
            else:
                path = folder + token
            paths.append(path)
    return paths


def modules_in_tree(root: Path) -> set[str]:
    """Every module file under `root`, but a package `__init__.py` that holds only a docstring."""
    found: set[str] = set()
    for path in root.rglob("*.py"):
        body = ast.parse(path.read_text()).body
        if (
            path.name == "__init__.py"
            and len(body) <= 1
            and ast.get_docstring(ast.Module(body, []))
        ):
            continue
        found.add(path.relative_to(root.parent).as_posix())
    return found


def layout_problems(page: str, repo: Path) -> list[str]:
    listed = layout_paths(page)
    problems = [f"listed but missing: {p}" for p in listed if not (repo / p).exists()]
    listed_modules = {p for p in listed if p.endswith(".py")}
    problems += [
        f"a module the table does not list: {m}"
        for m in sorted(modules_in_tree(repo / "labkit") - listed_modules)
    ]
    return problems


def test_the_layout_table_lists_every_module_and_nothing_else() -> None:
    assert layout_problems((REPO / "docs" / "layout.md").read_text(), REPO) == []


def test_control_the_layout_check_finds_a_missing_and_an_unlisted_module(tmp_path: Path) -> None:
    (tmp_path / "labkit" / "sub").mkdir(parents=True)
    (tmp_path / "labkit" / "__init__.py").write_text('"""Doc."""\nX = 1\n')
    (tmp_path / "labkit" / "sub" / "__init__.py").write_text('"""Only a docstring."""\n')
    (tmp_path / "labkit" / "a.py").write_text("")
    (tmp_path / "labkit" / "b.py").write_text("")
    page = (
        "# x\n\n| path | what it holds |\n|---|---|\n"
        "| `labkit/__init__.py`, `a.py`, `gone.py` | things |\n\n## Next\n"
    )
    assert layout_problems(page, tmp_path) == [
        "listed but missing: labkit/gone.py",
        "a module the table does not list: labkit/b.py",
    ]


# -- one name per concept ---------------------------------------------------------------------


def _type_alias(node: ast.stmt) -> str | None:
    """The name a module-level statement binds to a type, when it is a type alias: `X = Y`,
    `X = Y[...]`, `X = A | B` or `X: TypeAlias = ...` (a CapWords name bound to a name, an
    attribute, a subscript or a union; never a call such as `TypeVar("T")`)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    else:
        return None
    if not isinstance(target, ast.Name):
        return None
    name = target.id
    capwords = name[0].isupper() and not name.isupper()
    typed = isinstance(value, (ast.Name, ast.Attribute, ast.Subscript)) or (
        isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr)
    )
    return name if capwords and typed else None


def _public_methods(tree: ast.Module) -> Iterable[tuple[str, tuple[str, ...], str]]:
    """(name, positional parameters after the first, return annotation) of every public
    method of every top-level class."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                method = isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                if method and not item.name.startswith("_"):
                    args = item.args.posonlyargs + item.args.args
                    returns = ast.unparse(item.returns) if item.returns else ""
                    yield item.name, tuple(a.arg for a in args[1:]), returns


def name_clashes(modules: dict[str, Path]) -> list[str]:
    """Two module files with one name (packages aside), or one type name defined twice
    anywhere in the package: a top-level class and a module-level type alias (`_type_alias`)
    share one namespace, so a class, an alias or one of each under one name is a clash."""
    seen_files: dict[str, str] = {}
    seen_types: dict[str, str] = {}
    clashes: list[str] = []
    for name, path in sorted(modules.items()):
        if path.name != "__init__.py":
            if path.name in seen_files:
                clashes.append(f"module file {path.name}: {seen_files[path.name]} and {name}")
            seen_files.setdefault(path.name, name)
        for node in ast.parse(path.read_text()).body:
            kind, defined = "class", node.name if isinstance(node, ast.ClassDef) else None
            if defined is None:
                kind, defined = "alias", _type_alias(node)
            if defined is None:
                continue
            if defined in seen_types:
                clashes.append(f"{kind} {defined}: {seen_types[defined]} and {name}")
            seen_types.setdefault(defined, name)
    return clashes


def method_clashes(modules: dict[str, Path]) -> list[str]:
    """Public method names that say two things. Two definitions of one public method name,
    in classes of two different modules, clash when they differ both in their positional
    parameters (after `self`) and in their return annotation: neither the same call nor the
    same answer. Implementations of one protocol (every store's `claim_and_delete`) and a
    client and a server answering one request (`call_tool`) share a name and stay apart."""
    found: dict[str, list[tuple[str, tuple[str, ...], str]]] = {}
    for name, path in sorted(modules.items()):
        for method, params, returns in _public_methods(ast.parse(path.read_text())):
            found.setdefault(method, []).append((name, params, returns))
    return sorted(
        method
        for method, defs in found.items()
        if any(a[0] != b[0] and a[1] != b[1] and a[2] != b[2] for a in defs for b in defs)
    )


# Public method names that `method_clashes` still finds. Each is a plain verb used in its
# ordinary sense by unrelated classes (a store's `get` and a key ring's `get`, a kernel's `run`
# and a tool handler's `run`) or one request's two sides (`list_tools`); names that meant two
# ideas have been renamed. The set only shrinks: a new clash fails
# `test_no_public_method_name_says_two_things`, and a name renamed away must leave the set
# (`test_every_known_method_clash_is_still_one`).
KNOWN_METHOD_CLASHES = frozenset(
    {
        "add",
        "answer",
        "call",
        "delete",
        "get",
        "list_tools",
        "of",
        "read",
        "receive",
        "recover",
        "request",
        "run",
        "start",
        "stop",
    }
)


def test_no_two_modules_or_type_names_share_a_name() -> None:
    assert name_clashes(MODULES) == []


def test_no_public_method_name_says_two_things() -> None:
    assert sorted(set(method_clashes(MODULES)) - KNOWN_METHOD_CLASHES) == []


def test_every_known_method_clash_is_still_one() -> None:
    assert sorted(KNOWN_METHOD_CLASHES - set(method_clashes(MODULES))) == []


def test_control_a_second_exercise_class_and_a_second_forms_module_are_caught(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "forms.py").write_text("class Exercise:\n    pass\n")
    (tmp_path / "b" / "forms.py").write_text("class Exercise:\n    pass\nclass Other:\n    pass\n")
    modules = {"labkit.a.forms": tmp_path / "a" / "forms.py"}
    modules["labkit.b.forms"] = tmp_path / "b" / "forms.py"
    assert name_clashes(modules) == [
        "module file forms.py: labkit.a.forms and labkit.b.forms",
        "class Exercise: labkit.a.forms and labkit.b.forms",
    ]


def test_control_an_alias_naming_a_class_or_another_alias_is_caught(tmp_path: Path) -> None:
    files = {
        "labkit.a": "class Answer:\n    pass\nReply = dict[str, int]\nT = TypeVar('T')\n",
        "labkit.b": (
            "Answer = Callable[[dict], dict]\nReply: TypeAlias = A | B\nT = TypeVar('T')\n"
            "LIMIT = Answer\nlog = getLogger(x)\nOther: TypeAlias = int\n"
        ),
        "labkit.c": "Other = labkit.b.Other\nAlone = int\n",
    }
    modules = _fake_package(tmp_path, files)
    assert name_clashes(modules) == [
        "alias Answer: labkit.a and labkit.b",
        "alias Reply: labkit.a and labkit.b",
        "alias Other: labkit.b and labkit.c",
    ]


def test_control_a_method_name_saying_two_things_is_caught(tmp_path: Path) -> None:
    files = {
        "labkit.a": (
            "class Store:\n"
            "    def claim(self, nonce: str) -> bool: ...\n"
            "    def refused(self) -> bool: ...\n"
            "    def _private(self, x: int) -> int: ...\n"
        ),
        "labkit.b": (
            "class Other:\n"
            "    def claim(self, nonce: str) -> bool: ...\n"  # one protocol: same call
            "    def refused(self, limit: int, detail: str) -> None: ...\n"
            "    def _private(self) -> str: ...\n"
        ),
        "labkit.c": "class Third:\n    def claim(self, other: str) -> bool: ...\n",
    }
    assert method_clashes(_fake_package(tmp_path, files)) == ["refused"]
