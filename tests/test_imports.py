"""The import graph of ``src/gpucomm``: no cycles at all, and comm's private modules stay private.

The graph is built from the source with :mod:`ast`, without importing anything: a node is a module
(a package is its ``__init__``), an edge is any import the module can execute — at module level, inside
``if``/``try``/``with`` blocks and inside functions (a deferred import still runs, and a cycle through
it still means two modules that know each other) — but not one under ``if TYPE_CHECKING:`` (never
runs).  ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``.

Imports by string (``importlib.import_module``) are edges too: a literal argument names its module; a
computed one (a table of subcommands, lazy package attributes) gets an edge to every gpucomm module
named by a string literal in the calling module, and package discovery (``pkgutil.iter_modules`` over
the package's ``__path__``) to every module of the package.  A string load that reaches no gpucomm
module must be loading the user's own code and is listed in :data:`USER_CODE_LOADERS`; any other is a
failure, so no import can hide from this test.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "gpucomm"

USER_CODE_LOADERS = {
    "gpucomm.dist.launch": "imports the module of the user's worker function in each spawned rank",
    "gpucomm.train.models": "imports the user's model factory named by --model pkg.module:factory",
}
"""Modules whose string imports load the user's code, never a gpucomm module (checked: they do load)."""


def _modules() -> dict[str, Path]:
    mods = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement the module can execute, functions included, ``if TYPE_CHECKING:`` excluded."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            elif isinstance(child, ast.If) and _type_checking(child.test):
                for s in child.orelse:
                    walk_stmt(s)
            else:
                walk(child)

    def walk_stmt(s: ast.stmt) -> None:
        if isinstance(s, ast.Import | ast.ImportFrom):
            found.append(s)
        else:
            walk(s)

    walk(tree)
    return found


def _string_loads(tree: ast.Module) -> list[ast.Call]:
    """Every ``importlib.import_module(...)`` / ``import_module(...)`` call of the module."""
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name == "import_module":
                calls.append(node)
    return calls


def _discovers_package(tree: ast.Module) -> bool:
    """``pkgutil.iter_modules(__path__)``: the package imports each of its modules by name."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "iter_modules"
               and any(isinstance(a, ast.Name) and a.id == "__path__" for a in n.args) for n in ast.walk(tree))


def _string_targets(mod: str, path: Path, tree: ast.Module, mods: dict[str, Path]) -> set[str]:
    """The gpucomm modules the module's string imports can reach (see the module docstring)."""
    calls = _string_loads(tree)
    if not calls:
        return set()
    targets = set()
    for call in calls:
        arg = call.args[0] if call.args else None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            targets.add(arg.value)
            continue
        for node in ast.walk(tree):  # a computed name: every gpucomm module the module spells out
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                name = node.value.partition(":")[0]
                if name in mods:
                    targets.add(name)
    if _discovers_package(tree) and _is_package(path):
        targets |= {m for m in mods if m.rsplit(".", 1)[0] == mod}
    return {t for t in targets if t in mods and t != mod}


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if _is_package(path) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    """Module -> the gpucomm modules it can import (statements anywhere in it, and string loads)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                pkg = _resolve(mod, path, node)
                for a in node.names:
                    sub = f"{pkg}.{a.name}"
                    targets.append(sub if sub in mods else pkg)
            for t in targets:
                while t and t not in mods and "." in t:  # `import gpucomm.x.y` of a non-module: its package
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != mod:
                    graph[mod].add(t)
        graph[mod] |= _string_targets(mod, path, tree, mods)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _path(graph: dict[str, set[str]], comp: list[str]) -> str:
    """One cycle through the component, written out: a -> b -> ... -> a."""
    members, start = set(comp), comp[0]
    seen, trail, v = {start}, [start], start
    while True:
        nxt = sorted(graph[v] & members)
        back = start if start in nxt and len(trail) > 1 else None
        step = back or next((w for w in nxt if w not in seen), None) or nxt[0]
        trail.append(step)
        if step in seen:
            return " -> ".join(trail[trail.index(step):])
        seen.add(step)
        v = step


def test_no_import_cycles_in_src():
    graph = import_graph()
    assert "gpucomm.comm._kernels" in graph and "gpucomm.communicator.base" in graph
    found = cycles(graph)
    assert not found, "import cycles in src/gpucomm (function-level imports count):\n" + "\n".join(
        f"  {_path(graph, c)}   (modules: {', '.join(c)})" for c in found)


def test_every_string_import_is_known():
    mods = _modules()
    unknown = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        if _string_loads(tree) and not _string_targets(mod, path, tree, mods) and mod not in USER_CODE_LOADERS:
            unknown.append(mod)
    assert not unknown, ("string imports that reach no gpucomm module this test can name (import the module "
                         "directly, or list a user-code loader in USER_CODE_LOADERS): " + ", ".join(unknown))
    stale = [m for m in USER_CODE_LOADERS if m not in mods or not _string_loads(ast.parse(mods[m].read_text()))]
    assert not stale, f"USER_CODE_LOADERS lists modules that load nothing by string: {stale}"


def test_only_the_kernels_seam_of_comm_is_imported_from_outside_comm():
    mods = _modules()
    offenders = []
    for mod, path in mods.items():
        if mod == "gpucomm.comm" or mod.startswith("gpucomm.comm."):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):  # deferred imports count here too
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                pkg = _resolve(mod, path, node)
                names = [f"{pkg}.{a.name}" if pkg == "gpucomm.comm" else pkg for a in node.names]
            for name in names:
                if name.startswith("gpucomm.comm._") and name.split(".")[2] != "_kernels":
                    offenders.append(f"{mod} imports {name} (line {node.lineno})")
    assert not offenders, "only gpucomm.comm._kernels may be imported from outside gpucomm/comm/:\n" + "\n".join(
        offenders)


def test_the_graph_sees_what_it_should():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert _path(g, ["a", "b", "c"]) == "a -> b -> c -> a"
    tree = ast.parse("import x\nif TYPE_CHECKING:\n    import y\nelse:\n    import v\ndef f():\n    import z\n"
                     "try:\n    import w\nexcept ImportError:\n    pass\n")
    assert sorted(n.names[0].name for n in _imports(tree)) == ["v", "w", "x", "z"]
    graph = import_graph()
    assert "gpucomm.communicator.base" in graph["gpucomm.communicator.local"]
    assert "gpucomm.communicator.local" not in graph["gpucomm.communicator.base"]
    assert "gpucomm.bench.cli" in graph["gpucomm.cli"]  # a subcommand table loaded by string
    assert "gpucomm.collectives.all_reduce" in graph["gpucomm.collectives"]  # rows found at import
    assert "gpucomm.report.files" in graph["gpucomm.report"]  # a literal string load

