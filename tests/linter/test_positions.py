"""Lazy positions against libcst's ``PositionProvider``: every node, on real files and on
each statement shape the pairing with CPython's ``ast`` handles."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from swacheck.analysis.positions import LazyPositions, _paired_starts
from swacheck.analysis.tree import parent_map

REPO = Path(__file__).resolve().parents[2]
STDLIB = Path(sysconfig.get_paths()["stdlib"])
SOURCES = [
    *sorted((REPO / "rules").glob("swa00*.py"))[:3],
    *(STDLIB / name for name in ("dataclasses.py", "argparse.py", "ast.py")),
]

# Each shape whose start the pairing works out: a header, decorators with comments
# between them, ``a; b`` (one libcst line, two ast statements), one-line suites, elif
# chains, try/except/else/finally, try/except*, match, async forms, nested classes.
SHAPES = '''\
# a header comment

import os; import sys


@decorator
# between decorators
@other(
    1,
)
async def f(x):
    # leading comment
    if x: return 1
    elif x > 1:
        y = x + 1  # the elif's body
    elif (
        x < 0
    ):
        pass
    else:
        y = 2
    async with a as b, c:
        async for i in b:
            await i
        else:
            pass
    try:
        z = 1
    except ValueError as exc:
        raise
    except (KeyError, IndexError):
        pass
    else:
        z = 2
    finally:
        z = 3
    return y


class A(Base):
    """Doc."""

    x: int = 0

    class B:
        def g(self):
            while True:
                break
            else:
                pass
            match self.x:
                case 1 | 2:
                    return "a"
                case {"k": v}:
                    return v
                case _:
                    return None


try:
    pass
except* ValueError:
    pass
'''


def _every_node(module: cst.Module) -> list[cst.CSTNode]:
    return list(parent_map(module))


def _assert_positions(module: cst.Module, text: str | None, fresh: bool) -> None:
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    parents = parent_map(module)
    shared = LazyPositions(module, lambda: parents, text)
    # Later statements first; with ``fresh``, each node asked first of its own positions,
    # so that no answer depends on which nodes were asked before.
    for node in reversed(_every_node(module)):
        lazy = LazyPositions(module, lambda: parents, text) if fresh else shared
        assert lazy[node] == expected[node], (type(node).__name__, expected[node])


@pytest.mark.parametrize("paired", [True, False], ids=["ast-paired", "codegen"])
@pytest.mark.parametrize("path", [p for p in SOURCES if p.exists()], ids=lambda p: p.name)
def test_lazy_positions_equal_libcst_positions(path: Path, paired: bool) -> None:
    module = cst.parse_module(path.read_bytes())
    _assert_positions(module, module.code if paired else None, fresh=False)


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_every_shape_pairs_and_each_node_alone_is_placed_as_libcst_places_it(
    newline: str,
) -> None:
    text = SHAPES.replace("\n", newline)
    module = cst.parse_module(text)
    assert _paired_starts(module, text) is not None  # the ast path is the one tested
    _assert_positions(module, text, fresh=True)


def test_an_elif_condition_is_placed_where_it_is_asked_first() -> None:
    # An elif alone generates as ``if``: its condition came out two columns short.
    text = "if a:\n    pass\nelif b == c:\n    pass\n"
    module = cst.parse_module(text)
    comparison = module.body[0].orelse.test  # type: ignore[attr-defined]
    parents = parent_map(module)
    for given in (text, None):
        lazy = LazyPositions(module, lambda: parents, given)
        assert (lazy[comparison].start.line, lazy[comparison].start.column) == (3, 5)


def test_text_that_does_not_pair_falls_back_to_code_generation() -> None:
    module = cst.parse_module("x = 1\ny = 2\n")
    # Text of another shape than the module (CPython reads one statement): no pairing.
    assert _paired_starts(module, "x = 1\n") is None
    parents = parent_map(module)
    lazy = LazyPositions(module, lambda: parents, "x = 1\n")
    target = module.body[1].body[0].targets[0].target  # type: ignore[attr-defined]
    assert lazy[target].start.line == 2
