"""Source positions computed one top-level statement at a time, when first asked for.

libcst's ``PositionProvider`` generates the whole module's code while recording a
range for every node; on a large engine file that costs more than parsing it, yet
a rule asks for the positions of a handful of nodes (its findings, a few statement
lines). :class:`LazyPositions` answers the same ``CodeRange`` values, computing them
with libcst's own position-recording code generator for just the top-level
statement that holds the node asked about.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

_NEWLINE = re.compile(r"\r\n?|\n")


class LazyPositions(Mapping[cst.CSTNode, CodeRange]):
    """``PositionProvider``'s answers for ``module``, computed per top-level statement.

    ``parents`` returns the module's child-to-parent map (built on first use).
    """

    def __init__(
        self, module: cst.Module, parents: Callable[[], Mapping[cst.CSTNode, cst.CSTNode]]
    ) -> None:
        self.module = module
        self._parents = parents
        # Read by libcst's codegen state, which records ranges into its provider.
        self._computed: dict[cst.CSTNode, CodeRange] = {}
        self._index = {id(stmt): i for i, stmt in enumerate(module.body)}
        # Line on which statement i's code (its leading blank/comment lines included) starts.
        self._starts = [1 + len(module.header)]
        self._done: set[int] = set()
        self._whole = False

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._computed.get(node)
        if found is not None:
            return found
        index = self._statement_index(node)
        if index is None:
            self._compute_whole()
        elif index not in self._done:
            self._compute_statement(index)
        return self._computed[node]

    def __iter__(self) -> Iterator[cst.CSTNode]:
        self._compute_whole()
        return iter(self._computed)

    def __len__(self) -> int:
        self._compute_whole()
        return len(self._computed)

    def _statement_index(self, node: cst.CSTNode) -> int | None:
        parents = self._parents()
        current: cst.CSTNode | None = node
        while current is not None:
            index = self._index.get(id(current))
            if index is not None and self.module.body[index] is current:
                return index
            current = parents.get(current)
        return None

    def _start(self, index: int) -> int:
        while len(self._starts) <= index:
            done = len(self._starts) - 1
            code = self.module.code_for_node(self.module.body[done])
            self._starts.append(self._starts[-1] + len(_NEWLINE.findall(code)))
        return self._starts[index]

    def _compute_statement(self, index: int) -> None:
        state = PositionProvidingCodegenState(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
            provider=self,  # type: ignore[arg-type]
        )
        state.line = self._start(index)
        self.module.body[index]._codegen(state)
        self._done.add(index)

    def _compute_whole(self) -> None:
        if not self._whole:
            whole = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
            self._computed.update(whole)
            self._whole = True
            self._done.update(range(len(self.module.body)))
