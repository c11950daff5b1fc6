"""The package's import graph: no cycles, and no module importing a package above it.

Read from the sources (every import statement, those inside functions too, except under
``if TYPE_CHECKING:``), so a cycle that a lazy import hides at run time is still found. The
package root may import anything (its re-exports); nothing may import the root or any
package that contains it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "tfrec_fast"
SRC = Path(__file__).resolve().parent.parent / "src"


def _modules() -> dict:
    """{dotted module name: source path}, plus the native extension (no source)."""
    found: dict = {f"{PACKAGE}._core": None}
    for path in (SRC / PACKAGE).rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.AST) -> set:
    """The import nodes under ``if TYPE_CHECKING:`` (never run)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skipped


def _imports(name: str, path: Path, modules: dict) -> set:
    """The package's modules that ``name`` imports."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree)
    targets = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + is_package]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                targets.add(submodule if submodule in modules else module)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    return {t for t in targets if t in modules and t != name}


def _graph() -> dict:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items() if path}


def _cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    order, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        order[v] = low[v] = len(order)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in order:
            visit(v)
    return cycles


def test_the_graph_is_read():
    graph = _graph()
    assert f"{PACKAGE}.records" in graph[PACKAGE]
    assert f"{PACKAGE}._core" in graph[f"{PACKAGE}.records"]
    assert f"{PACKAGE}.storage.remote" in graph[f"{PACKAGE}.storage.locate"]  # a lazy import


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_no_module_imports_a_package_above_it():
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in _graph().items()
        for target in targets
        if name.startswith(target + ".")
    )
    assert upward == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
