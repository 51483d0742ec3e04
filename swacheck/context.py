"""Per-file state shared by every rule: source, parsed module, metadata, the project index.

Built once per file by the engine; rules reach it as ``self.context``. Analyses that
several rules need (a function's control-flow graph, alias sets) are computed on first
use and memoised here, so running eight rules does not build eight CFGs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import libcst as cst
from libcst.metadata import MetadataWrapper

from swacheck.analysis.names import Names
from swacheck.analysis.positions import LazyPositions
from swacheck.analysis.tree import TreeMaps
from swacheck.config import Config
from swacheck.engine.fixer import rows
from swacheck.finding import Applicability, Edit, Fix, Position

if TYPE_CHECKING:
    from swacheck.analysis.index import ProjectIndex

T = TypeVar("T")


@dataclass
class FileContext:
    path: str
    text: str
    wrapper: MetadataWrapper
    config: Config
    names: Names
    project: ProjectIndex
    # The tree's parents and positions, shared with the other passes over it (built
    # here if none is given).
    maps: TreeMaps | None = None
    _memo: dict[Hashable, Any] = field(default_factory=dict)

    @property
    def module(self) -> cst.Module:
        return self.wrapper.module

    @cached_property
    def _maps(self) -> TreeMaps:
        return self.maps if self.maps is not None else TreeMaps(self.module)

    @cached_property
    def positions(self) -> LazyPositions:
        return self._maps.positions

    @cached_property
    def parents(self) -> dict[cst.CSTNode, cst.CSTNode]:
        return self._maps.parents

    @cached_property
    def lines(self) -> list[str]:
        # Rows as positions count them: not str.splitlines, which also splits at \f.
        return rows(self.text)

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Compute ``compute()`` once per file for ``key`` (e.g. ``("cfg", func_node)``)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def tree_memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Like :meth:`memo`, for an analysis that reads the tree and the configuration
        only, never the project: computed once for both passes over the tree (the first
        pass's facts and the rules' check). A parsed tree serves one audit, under one
        configuration (the executor that keeps it is keyed by the configuration)."""
        return self._maps.memo(key, compute)

    def start(self, node: cst.CSTNode) -> Position:
        pos = self.positions[node].start
        return Position(pos.line, pos.column)

    def end(self, node: cst.CSTNode) -> Position:
        pos = self.positions[node].end
        return Position(pos.line, pos.column)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        chain = []
        current = self.parents.get(node)
        while current is not None:
            chain.append(current)
            current = self.parents.get(current)
        return chain

    def enclosing(self, node: cst.CSTNode, kind: type[T] | tuple[type, ...]) -> T | None:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, kind):
                return ancestor  # type: ignore[return-value]
        return None

    # -- fix builders -------------------------------------------------------------------

    def indent_of(self, node: cst.CSTNode) -> str:
        line = self.lines[self.start(node).row - 1]
        return line[: len(line) - len(line.lstrip(" \t"))]

    def replace(
        self,
        node: cst.CSTNode,
        new: cst.CSTNode | str,
        message: str,
        applicability: Applicability = Applicability.SAFE,
    ) -> Fix:
        """A fix that swaps ``node``'s text for ``new`` (a node rendered in this file's style)."""
        content = new if isinstance(new, str) else self.module.code_for_node(new)
        return Fix(message, (Edit(self.start(node), self.end(node), content),), applicability)

    def insert_statements(
        self,
        anchor: cst.BaseStatement,
        code_lines: list[str],
        message: str,
        *,
        after: bool,
        applicability: Applicability = Applicability.SAFE,
        indent: str | None = None,
    ) -> Fix | None:
        """Insert whole lines before or after ``anchor``, indented like it.

        Returns ``None`` where a line insertion would be wrong: ``anchor`` shares its
        line with other code (``a = 1; b = 2``, ``if x: y``).
        """
        parent = self.parent(anchor)
        if not isinstance(parent, cst.IndentedBlock | cst.Module):
            return None
        if isinstance(anchor, cst.SimpleStatementLine) and len(anchor.body) != 1:
            return None
        indent = self.indent_of(anchor) if indent is None else indent
        newline = self.module.default_newline
        text = "".join(f"{indent}{line}{newline}" if line else newline for line in code_lines)
        row = self.end(anchor).row + 1 if after else self.start(anchor).row
        if after and not self.text.endswith(("\n", "\r")) and row > len(self.lines):
            text = newline + text
        return Fix(message, (Edit(Position(row, 0), Position(row, 0), text),), applicability)
