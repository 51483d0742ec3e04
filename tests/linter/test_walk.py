"""The fast walker against libcst's own traversal, on real source files."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from swacheck.analysis.walk import SKIPPED, walk

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
