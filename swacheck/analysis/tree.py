"""What every pass over one parsed module shares: its parent map and its positions.

An audit walks the tree of a file asked about twice, for its facts and for the rules;
both passes need parents, and both ask for positions, each of which costs a code
generation of the top-level statement holding the node (a whole class). Neither
depends on the project, so they are built once per tree, on first use
(:attr:`swacheck.engine.parse.Parsed.maps`), and serve both passes.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from swacheck.analysis.positions import LazyPositions
from swacheck.analysis.walk import children


def parent_map(root: cst.CSTNode) -> dict[cst.CSTNode, cst.CSTNode]:
    """Every node's parent (layout nodes excepted, see :mod:`swacheck.analysis.walk`).

    libcst's ParentNodeProvider reaches children through ``node.children``, which
    rebuilds (and re-validates) every node; reading the fields directly is several
    times faster.
    """
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        for child in children(node):
            parents[child] = node
            stack.append(child)
    return parents


class TreeMaps:
    """``module``'s parent map and lazily computed positions, each built on first use."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module

    @cached_property
    def parents(self) -> dict[cst.CSTNode, cst.CSTNode]:
        return parent_map(self.module)

    @cached_property
    def positions(self) -> LazyPositions:
        return LazyPositions(self.module, lambda: self.parents)
