"""What every pass over one parsed module shares: its parent map, its positions, and the
analyses of the tree alone.

An audit walks the tree of a file asked about twice, for its facts and for the rules;
both passes need parents, and both ask for positions, each of which costs a code
generation of the top-level statement holding the node (a whole class). Neither
depends on the project, so they are built once per tree, on first use
(:attr:`swacheck.engine.parse.Parsed.maps`), and serve both passes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import cached_property
from typing import Any, TypeVar

import libcst as cst

from swacheck.analysis.positions import LazyPositions
from swacheck.analysis.walk import TreeLayout, children

T = TypeVar("T")


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


class _Parents:
    """A module's parent map, built on first call."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.found: dict[cst.CSTNode, cst.CSTNode] | None = None

    def __call__(self) -> dict[cst.CSTNode, cst.CSTNode]:
        if self.found is None:
            self.found = parent_map(self.module)
        return self.found


class TreeMaps:
    """``module``'s parent map, lazily computed positions and walk layout, each built on
    first use (``text``: the module's source, see :class:`LazyPositions`).

    No reference cycle runs through them (the positions reach the parent map through
    :class:`_Parents`, not through this object), so the tree is freed as soon as the
    audit lets go of it, not at the next garbage collection.
    """

    def __init__(self, module: cst.Module, text: str | None = None) -> None:
        self.module = module
        self.text = text
        self._parents = _Parents(module)
        self._memo: dict[Hashable, Any] = {}
        # The preorder both passes' walks read (``analysis.walk.memoized_children``).
        self.layout = TreeLayout(module)

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Compute ``compute()`` once per tree for ``key``: analyses of the tree alone
        (no project, the same configuration), which both passes over it then share."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    @property
    def parents(self) -> dict[cst.CSTNode, cst.CSTNode]:
        return self._parents()

    @cached_property
    def positions(self) -> LazyPositions:
        return LazyPositions(self.module, self._parents, self.text)
