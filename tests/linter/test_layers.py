"""swacheck's modules import only downward: no import circles.

Ruff has no rule for import cycles, so the graph is built here with ``ast`` from the
source: the linter packages (``swacheck`` and ``swacheck.rules``) and, each a layer of its
own, the runtime sanitizer and the reference implementation. Every import counts: module
level, ``if TYPE_CHECKING:`` blocks and imports inside functions alike, since each is a
dependency a reader has to follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"swacheck": ROOT / "swacheck", "swacheck.rules": ROOT / "rules"}
LAYERS = {"swacheck.runtime": ROOT / "runtime", "swacheck.reference_impl": ROOT / "reference_impl"}
# Circles known and tracked by their owner; this list may only shrink (it is empty: the
# engine's audit <-> passes and the reporters' package <-> formats circles are gone).
KNOWN_CYCLES: set[frozenset[str]] = set()


def linter_modules(packages: dict[str, Path] = PACKAGES) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package, folder in packages.items():
        for path in folder.rglob("*.py"):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            name = ".".join([package, *parts])
            if packages is not PACKAGES or not name.startswith(tuple(LAYERS)):
                modules[name] = path
    return modules


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports anywhere."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import module`` depends on the submodule (a package's facade
            # importing its modules is no circle); ``from pkg import name`` on the package.
            submodules = {f"{base}.{alias.name}" for alias in node.names} & known
            found.update(submodules or {base})
    return {module for module in found if module in known and module != name}


def import_graph(packages: dict[str, Path] = PACKAGES) -> dict[str, set[str]]:
    modules = linter_modules(packages)
    known = set(modules)
    return {name: imported(name, path, known) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read_from_the_real_sources() -> None:
    graph = import_graph()
    assert "swacheck.engine.passes" in graph["swacheck.engine.workspace"]  # in a function
    # Spot checks that the reader sees every kind of import.
    assert "swacheck.analysis.skeletons" in graph["swacheck.analysis.index"]  # module level
    assert "swacheck.rule" in graph["swacheck.order_rule"]
    assert "swacheck.analysis.index" in graph["swacheck.rule"]  # under TYPE_CHECKING
    assert "swacheck.rules" in graph["swacheck.catalogue"]  # inside a function


def test_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_in_the_linter() -> None:
    found = set(cycles(import_graph()))
    new = found - KNOWN_CYCLES
    assert not new, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in new)


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_no_import_circles_in_the_runtime_layers(layer: str) -> None:
    graph = import_graph({layer: LAYERS[layer]})
    assert len(graph) > 5, "the layer's modules were not found"
    found = cycles(graph)
    assert not found, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


@pytest.mark.parametrize(
    "layer",
    ["swacheck.analysis", "swacheck.context", "swacheck.rule", "swacheck.order_rule"],
)
def test_shared_analysis_never_imports_a_rule(layer: str) -> None:
    graph = import_graph()
    for module, deps in graph.items():
        if module == layer or module.startswith(layer + "."):
            rules = sorted(d for d in deps if d.startswith("swacheck.rules."))
            assert not rules, f"{module} imports {rules}"
