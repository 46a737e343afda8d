"""The import graph of ``src/gpucomm``: no cycles, and comm's private modules stay private.

The graph is built from the source with :mod:`ast`, without importing anything: a node is a module
(a package is its ``__init__``), an edge is an import executed when the module is loaded — a
statement at module level, including inside module-level ``if``/``try`` blocks, but not one inside
a function (deferred: it runs on first use) or under ``if TYPE_CHECKING:`` (never runs).
``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "gpucomm"

KNOWN_CYCLES: list[set[str]] = [
    # Owned by others and being fixed now (issue 10); listed so that any *other* cycle fails at once.
    {"gpucomm.advisor.calibrate", "gpucomm.advisor.plan"},
    {"gpucomm.train.config", "gpucomm.train.strategies"},
    {"gpucomm.dist", "gpucomm.dist.launch"},
]


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


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.Import | ast.ImportFrom):
                found.append(s)
            elif isinstance(s, ast.If):
                if not _type_checking(s.test):
                    walk(s.body)
                walk(s.orelse)
            elif isinstance(s, ast.Try):
                walk(s.body)
                for h in s.handlers:
                    walk(h.body)
                walk(s.orelse)
                walk(s.finalbody)
            elif isinstance(s, ast.With):
                walk(s.body)

    walk(tree.body)
    return found


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if _is_package(path) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    """Module -> the gpucomm modules it imports when loaded."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in _module_level_imports(ast.parse(path.read_text(), str(path))):
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
    new = [c for c in cycles(graph) if not any(set(c) <= known for known in KNOWN_CYCLES)]
    assert not new, "import cycles in src/gpucomm:\n" + "\n".join(
        f"  {_path(graph, c)}   (modules: {', '.join(c)})" for c in new)


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
    tree = ast.parse("import x\nif TYPE_CHECKING:\n    import y\ndef f():\n    import z\ntry:\n    import w\n"
                     "except ImportError:\n    pass\n")
    assert [n.names[0].name for n in _module_level_imports(tree)] == ["x", "w"]
    graph = import_graph()
    assert "gpucomm.communicator.base" in graph["gpucomm.communicator.local"]
    assert "gpucomm.communicator.local" not in graph["gpucomm.communicator.base"]
