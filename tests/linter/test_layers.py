"""Layers import only downward: no import circle runs through the engine, the reporters
or the command line (every import counts, those made inside functions or only for type
checking included: a circle there is still two modules that cannot be read apart)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Top-level folders and the names they install as (pyproject.toml's package-dir).
PACKAGES = {
    "swacheck": "swacheck",
    "rules": "swacheck.rules",
    "runtime": "swacheck.runtime",
    "reference_impl": "swacheck.reference_impl",
}
LAYERED = (
    "swacheck.engine",
    "swacheck.report",
    "swacheck.cli",
    "swacheck.config",
    "swacheck.discovery",
    "swacheck.finding",
    "swacheck.__main__",
)


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            found[".".join([package, *parts]).removesuffix(".__init__")] = path
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.update(
                    m
                    for m in (node.module, *(f"{node.module}.{a.name}" for a in node.names))
                    if m in modules
                )
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in modules)
        graph[name] = deps - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_no_import_circle_runs_through_the_engine_reporters_or_cli() -> None:
    graph = _graph()
    assert "swacheck.engine.workspace" in graph and "swacheck.engine.passes" in graph
    mine = [
        sorted(circle)
        for circle in _circles(graph)
        if any(m == p or m.startswith(p + ".") for m in circle for p in LAYERED)
    ]
    assert mine == []
