"""No import cycle among pysched's modules: the graph of their top-level imports, read from the
sources with :mod:`ast`, has no cycle, so every module imports what it uses at the top (an
import inside a function is left out of the graph and is never needed to break a cycle)."""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pysched

ROOT = Path(pysched.__file__).parent.parent


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (source file, whether it is a package)."""
    mods = {}
    for path in sorted((ROOT / "pysched").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        package = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if package else parts)] = (path, package)
    return mods


def _top_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements run when the module is imported: those of its body and of the
    ``if``, ``try`` and ``with`` blocks in it, not those in functions, classes or
    ``if TYPE_CHECKING:``."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                yield from _top_level(node.body)
                yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _top_level(block)
        elif isinstance(node, ast.With):
            yield from _top_level(node.body)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph() -> dict[str, set[str]]:
    """Module -> the pysched modules its top-level imports run.

    ``import a.b`` and ``from a.b import c`` run ``a.b`` and the packages above it (``c`` too
    when it is a module). A package the importer lies in is already being imported, so
    ``from . import sub`` is an edge to ``sub`` only; ``from . import name`` of a name the
    package's ``__init__`` defines is an edge to the package.
    """
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, (path, package) in mods.items():
        inside = set(_ancestors(name)) | ({name} if package else set())
        edges: set[str] = set()
        for node in _top_level(ast.parse(path.read_text()).body):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = name.split(".") if package else name.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in mods]
                names_from_source = len(subs) < len(node.names)
                targets = subs + ([source] if names_from_source or source not in inside else [])
            for t in targets:
                edges.update(m for m in [*_ancestors(t), t] if m in mods and m not in inside)
                if t in inside and t in mods and t != name:
                    edges.add(t)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or of one importing
    itself), each sorted: every import cycle lies in one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        # iterative Tarjan: (node, its successors still to visit)
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, succ = work[-1]
            w = next(succ, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph[v]:
                    found.append(sorted(comp))
    return found


def test_graph_sees_the_imports():
    g = import_graph()
    assert "pysched.evaluation.runner" in g["pysched.evaluation.report"]
    assert "pysched.constants" in g["pysched.trace.clock"]
    # relative imports of sibling modules, and of a sub-package's module
    assert {"pysched.models.caches.policies", "pysched.models.caches.simd"} <= \
        g["pysched.models.caches.kernels"]
    assert "pysched.models.caches.simd" in g["pysched.models.caches.policies.lru"]


def test_cycles_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, f"modules that import each other at the top level: {found}"
