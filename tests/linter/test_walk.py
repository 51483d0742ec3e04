"""The fast walker against libcst's own traversal, on real source files."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from swacheck.analysis.walk import SKIPPED, children, memoized_children, walk

REPO = Path(__file__).resolve().parents[2]
STDLIB = Path(sysconfig.get_paths()["stdlib"])
# Files with a wide spread of syntax: decorators, async, match, comprehensions, f-strings.
SOURCES = [
    *sorted((REPO / "rules").glob("swa00*.py")),
    *sorted((REPO / "examples").rglob("*.py")),
    *(STDLIB / name for name in ("dataclasses.py", "argparse.py", "ast.py", "typing.py")),
]


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) not in SKIPPED:
            self.events.append(("visit", id(node)))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if type(original_node) not in SKIPPED:
            self.events.append(("leave", id(original_node)))


class _Typed(cst.BatchableCSTVisitor):
    """Only typed hooks, as the rules write them."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.seen.append(f"def {node.name.value}")

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.seen.append(f"end {original_node.name.value}")

    def visit_Name(self, node: cst.Name) -> None:
        self.seen.append(node.value)


def _modules() -> list[tuple[str, cst.Module]]:
    return [(path.name, cst.parse_module(path.read_bytes())) for path in SOURCES if path.exists()]


@pytest.mark.parametrize(("name", "module"), _modules())
def test_walk_visits_what_libcst_visits_in_the_same_order(name: str, module: cst.Module) -> None:
    expected, got = _Recorder(), _Recorder()
    module.visit(expected)
    walk(module, got)
    assert got.events == expected.events

    typed_expected, typed_got = _Typed(), _Typed()
    MetadataWrapper(module, unsafe_skip_copy=True).visit_batched([typed_expected])
    walk(module, [typed_got])
    assert typed_got.seen == typed_expected.seen


def test_visit_returning_false_skips_children_for_a_single_visitor() -> None:
    module = cst.parse_module("def f():\n    def g():\n        pass\nx = y\n")

    class Outer(cst.CSTVisitor):
        def __init__(self) -> None:
            self.names: list[str] = []

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            self.names.append(node.name.value)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            self.names.append(node.value)

    visitor = Outer()
    walk(module, visitor)
    assert visitor.names == ["f", "x", "y"]


class _Scoped(cst.CSTVisitor):
    """Typed hooks that skip nested functions and leave classes, as the analyses do."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.events.append(f"def {node.name.value}")
        return len(self.events) % 3 != 0  # some subtrees skipped, some not

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.events.append(f"class {node.name.value}")

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.events.append(f"end class {original_node.name.value}")

    def leave_If(self, original_node: cst.If) -> None:
        self.events.append("end if")

    def visit_Call(self, node: cst.Call) -> None:
        self.events.append("call")

    def visit_Name(self, node: cst.Name) -> None:
        self.events.append(node.value)


def _events(root: cst.CSTNode, module: cst.Module | None, make: type) -> list[str]:
    visitor = make()
    if module is None:
        walk(root, visitor)
    else:
        with memoized_children(module):
            walk(root, visitor)
    return visitor.events


@pytest.mark.parametrize(("name", "module"), _modules())
def test_a_walk_over_the_module_in_preorder_makes_the_same_calls(
    name: str, module: cst.Module
) -> None:
    """Inside ``memoized_children(module)`` a walk reads only the handled node classes'
    positions; its calls, visits and leaves, are the plain traversal's, in order, from
    the module and from each function and class inside it."""
    assert _events(module, module, _Scoped) == _events(module, None, _Scoped)
    roots: list[cst.CSTNode] = []

    class Roots(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            roots.append(node)

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            roots.append(node)

        def visit_If(self, node: cst.If) -> None:
            roots.append(node)

    walk(module, Roots())
    assert roots
    with memoized_children(module):
        for root in roots:
            fast = _Scoped()
            walk(root, fast)
            assert fast.events == _events(root, None, _Scoped)
    # A batch: return values ignored, each visitor's calls as when it walks alone.
    batch = [_Scoped(), _Typed()]
    with memoized_children(module):
        walk(module, batch)
    alone = _Typed()
    walk(module, [alone])
    assert batch[1].seen == alone.seen
    assert batch[0].events == _events(module, None, _NoSkip)


class _NoSkip(_Scoped):
    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.events.append(f"def {node.name.value}")
        return True


def test_a_node_outside_the_module_is_walked_plainly() -> None:
    module = cst.parse_module("def f():\n    return g(x)\n")
    other = cst.parse_module("class C:\n    def h(self):\n        pass\n")
    plain = _events(other, None, _Scoped)
    with memoized_children(module):
        visitor = _Scoped()
        walk(other, visitor)
    assert visitor.events == plain
    assert plain == ["class C", "C", "def h", "end class C"]  # the third event skips


def test_a_visitor_with_generic_hooks_sees_every_node_in_the_module() -> None:
    module = cst.parse_module(Path(__file__).read_text())
    expected = _Recorder()
    module.visit(expected)
    got = _Recorder()
    with memoized_children(module):
        walk(module, got)
    assert got.events == expected.events


@pytest.mark.parametrize(("name", "module"), _modules()[:6])
def test_children_read_from_the_preorder_are_the_nodes_children(
    name: str, module: cst.Module
) -> None:
    nodes: list[cst.CSTNode] = []

    class Every(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nodes.append(node)
            return True

    walk(module, Every())
    expected = [children(node) for node in nodes]
    with memoized_children(module):
        walk(module, _Typed())  # lays the module out
        assert [children(node) for node in nodes] == expected
    assert any(expected)


def test_a_kept_layout_serves_the_next_pass_over_the_same_tree() -> None:
    """The check's walks read the preorder the first pass laid out for a kept tree
    (built once), with the calls of a walk that lays it out anew; a layout of another
    module is not used."""
    from swacheck.analysis.walk import TreeLayout

    module = cst.parse_module((REPO / "examples" / "swa_memory_pool.py").read_bytes())
    layout = TreeLayout(module)
    with memoized_children(module, layout):
        first = _Scoped()
        walk(module, first)
    built = layout.built
    assert built is not None
    with memoized_children(module, layout):
        again = _Scoped()
        walk(module, again)
    assert layout.built is built
    assert again.events == first.events == _events(module, None, _Scoped)
    other = TreeLayout(cst.parse_module("x = 1\n"))
    with memoized_children(module, other):
        walk(module, _Scoped())
    assert other.built is None
    layout.drop()
    assert layout.built is None
