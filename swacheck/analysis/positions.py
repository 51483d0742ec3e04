"""Source positions computed one statement at a time, when first asked for.

libcst's ``PositionProvider`` generates the whole module's code while recording a
range for every node; on a large engine file that costs more than parsing it, yet
a rule asks for the positions of a handful of nodes (its findings, a few statement
lines). :class:`LazyPositions` answers the same ``CodeRange`` values with libcst's own
position-recording code generator, run on just the innermost statement holding the
node asked about. Where that statement starts (line and indentation) comes from one
cheap pass of plain code generation over its top-level statement, which records
only the start of every statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

_NEWLINE = re.compile(r"\r\n?|\n")

# Where a statement's code (its leading blank and comment lines included) starts, and
# the indentation tokens in force there.
_Start = tuple[int, tuple[str, ...]]


@dataclass
class _StatementStarts(CodegenState):
    """Code generation that keeps no text: it counts lines and notes statement starts."""

    line: int = 1
    starts: dict[cst.CSTNode, _Start] = field(default_factory=dict)

    def add_indent_tokens(self) -> None:
        pass

    def add_token(self, value: str) -> None:
        if "\n" in value or "\r" in value:
            self.line += len(_NEWLINE.findall(value))

    def before_codegen(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.BaseStatement):
            self.starts[node] = (self.line, tuple(self.indent_tokens))


class LazyPositions(Mapping[cst.CSTNode, CodeRange]):
    """``PositionProvider``'s answers for ``module``, computed per statement on demand.

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
        self._top_starts = [1 + len(module.header)]
        self._starts: dict[cst.CSTNode, _Start] = {}
        self._scanned: set[int] = set()
        self._done: set[cst.CSTNode] = set()
        self._whole = False

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._computed.get(node)
        if found is not None:
            return found
        innermost = self._innermost_statement(node)
        if innermost is None or innermost in self._done:
            self._compute_whole()
        else:
            self._compute_statement(innermost)
        return self._computed[node]

    def __iter__(self) -> Iterator[cst.CSTNode]:
        self._compute_whole()
        return iter(self._computed)

    def __len__(self) -> int:
        self._compute_whole()
        return len(self._computed)

    def _innermost_statement(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The innermost statement around ``node``, its start known; ``None`` if none."""
        parents = self._parents()
        innermost = None
        current: cst.CSTNode | None = node
        while current is not None:
            if innermost is None and isinstance(current, cst.BaseStatement):
                innermost = current
            index = self._index.get(id(current))
            if index is not None and self.module.body[index] is current:
                self._scan(index)
                return innermost
            current = parents.get(current)
        return None

    def _top_start(self, index: int) -> int:
        while len(self._top_starts) <= index:
            done = len(self._top_starts) - 1
            code = self.module.code_for_node(self.module.body[done])
            self._top_starts.append(self._top_starts[-1] + len(_NEWLINE.findall(code)))
        return self._top_starts[index]

    def _scan(self, index: int) -> None:
        if index in self._scanned:
            return
        state = _StatementStarts(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
            line=self._top_start(index),
        )
        self.module.body[index]._codegen(state)
        self._starts.update(state.starts)
        self._scanned.add(index)

    def _compute_statement(self, statement: cst.CSTNode) -> None:
        line, indents = self._starts[statement]
        state = PositionProvidingCodegenState(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
            provider=self,  # type: ignore[arg-type]
            indent_tokens=list(indents),
        )
        state.line = line
        statement._codegen(state)
        self._done.add(statement)

    def _compute_whole(self) -> None:
        if not self._whole:
            whole = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
            self._computed.update(whole)
            self._whole = True
