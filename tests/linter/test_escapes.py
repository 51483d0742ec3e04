"""Where a local's value leaves its function (``swacheck.analysis.escapes``)."""

from __future__ import annotations

import sysconfig
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from swacheck.analysis.escapes import escape_of
from swacheck.analysis.walk import after_in_walk_order, memoized_children, walk


def _escape(source: str) -> str | None:
    function = cst.parse_module(textwrap.dedent(source)).body[0]
    assert isinstance(function, cst.FunctionDef)
    first = function.body.body[0]
    assert isinstance(first, cst.SimpleStatementLine)
    binding = first.body[0]
    escape = escape_of(function, binding, "x")
    return escape.how if escape is not None else None


@pytest.mark.parametrize(
    ("source", "how"),
    [
        ("def f(a):\n    x = a.long()\n    return x\n", "returned"),
        ("def f(a):\n    x = a.long()\n    return x[:4].contiguous(), a\n", "returned"),
        ("def f(self, a):\n    x = a.long()\n    self.buf = x\n", "stored in `self.buf`"),
        ("def f(b, a):\n    x = a.long()\n    b['swa_loc'] = x\n", "stored in `b['swa_loc']`"),
        ("def f(a):\n    x = a.long()\n    k[(1,)](x.view(-1))\n", "passed to the kernel `k`"),
        # ``x += 1`` keeps the same tensor
        ("def f(a):\n    x = a.long()\n    x += 1\n    return x\n", "returned"),
    ],
)
def test_escapes(source: str, how: str) -> None:
    assert _escape(source) == how


@pytest.mark.parametrize(
    "source",
    [
        # converted again before it leaves
        "def f(a):\n    x = a.long()\n    x = x.int()\n    return x\n",
        # rebound by a loop
        "def f(a, bs):\n    x = a.long()\n    for x in bs:\n        pass\n    return x\n",
        # only host-side use, a plain call, a list made of it
        "def f(a, alloc):\n    x = a.long()\n    alloc.free(x)\n    return x.tolist()\n",
        # a nested function's return is not this function's
        "def f(a):\n    x = a.long()\n    def g():\n        return x\n    return g\n",
    ],
)
def test_stays_local(source: str) -> None:
    assert _escape(source) is None


_REPO = Path(__file__).resolve().parents[2]
_STDLIB = Path(sysconfig.get_paths()["stdlib"])
_SOURCES = [
    *sorted((_REPO / "examples").glob("*.py")),
    *sorted((_REPO / "reference_impl").rglob("*.py")),
    *sorted((_REPO / "swacheck" / "analysis").glob("*.py")),
    *(_STDLIB / name for name in ("dataclasses.py", "argparse.py", "typing.py", "tempfile.py")),
]


def _searches(module: cst.Module) -> list[tuple[cst.CSTNode, cst.CSTNode, str]]:
    """(scope, statement, name) for every name every assignment of a file binds, with
    each function around it as the scope (nested functions' bindings from the outer
    one's scope too: never reached there), and one binding from another function."""
    found: list[tuple[cst.CSTNode, cst.CSTNode, str]] = []
    scopes: list[cst.FunctionDef] = []

    class Bindings(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            scopes.append(node)

        def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
            scopes.pop()

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                for name in _names(target.target):
                    found.extend((scope, node, name) for scope in scopes)
                    if len(found) % 7 == 0 and scopes:  # a statement of some other function
                        found.append((module.body[0], node, name))

        def visit_For(self, node: cst.For) -> None:
            for name in _names(node.target):
                found.extend((scope, node, name) for scope in scopes)

    walk(module, Bindings())
    return found


def _names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, cst.Tuple | cst.List):
        return [n for element in target.elements for n in _names(element.value)]
    return []


_OPAQUE = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def _walked_after(scope: cst.CSTNode, binding: cst.CSTNode) -> list[cst.CSTNode]:
    """The oracle: what a walk of ``scope`` meets after ``binding``'s subtree, not
    entering nested functions, classes and lambdas (none if it never meets it)."""
    met: list[cst.CSTNode] = []

    class Visitor(cst.CSTVisitor):
        started = False

        def on_visit(self, node: cst.CSTNode) -> bool:
            if node is binding:
                self.started = True
                return False
            if node is not scope and isinstance(node, _OPAQUE):
                return False
            if self.started:
                met.append(node)
            return True

    walk(scope, Visitor())
    return met


def test_the_search_from_the_layout_finds_what_the_walk_finds() -> None:
    """The search reads the nodes after the binding off the module's layout (inside a
    file's analysis) or off the function's own (outside one); for every assignment of
    real files and each function around it, those are the nodes a walk of the function
    meets after the binding (none for nested functions' bindings, nor for a binding
    outside the scope), and the search finds the same either way."""
    searched = escaped = 0
    for path in _SOURCES:
        module = cst.parse_module(path.read_bytes())
        searches = _searches(module)
        walked = [_walked_after(scope, statement) for scope, statement, _ in searches]
        alone = [list(after_in_walk_order(scope, s, _OPAQUE)) for scope, s, _ in searches]
        found = [
            (escape_of(scope, statement, name), escape_of(scope, statement, name, calls=True))
            for scope, statement, name in searches
        ]
        with memoized_children(module):
            laid_out = [list(after_in_walk_order(scope, s, _OPAQUE)) for scope, s, _ in searches]
            found_laid_out = [
                (escape_of(scope, statement, name), escape_of(scope, statement, name, True))
                for scope, statement, name in searches
            ]
        assert alone == walked, path.name
        assert laid_out == walked, path.name
        assert found_laid_out == found, path.name
        searched += len(searches)
        escaped += sum(one is not None for pair in found for one in pair)
    assert searched > 1000 and escaped > 100, (searched, escaped)
