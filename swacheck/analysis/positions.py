"""Source positions computed one statement at a time, when first asked for.

libcst's ``PositionProvider`` generates the whole module's code while recording a
range for every node; on a large engine file that costs more than parsing it, yet
a rule asks for the positions of a handful of nodes (its findings, a few statement
lines). :class:`LazyPositions` answers the same ``CodeRange`` values with libcst's own
position-recording code generator, run on just the innermost statement holding the
node asked about. Where that statement starts (line and indentation) comes from
CPython's parse of the same text, about ten times faster than generating the code:
each libcst statement is paired with its ``ast`` statement, and its first line is the
``ast`` line less its leading blank and comment lines. Where the two trees do not pair
(a syntax the running CPython does not read, a shape not paired here), one pass of plain
code generation over the top-level statement records the start of every statement.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

_NEWLINE = re.compile(r"\r\n?|\n")

# Where a statement's code (its leading blank and comment lines included) starts, and
# the indentation tokens in force there.
_Indents = tuple[str, ...]
_Start = tuple[int, _Indents]


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


# The ``ast`` classes a libcst compound statement pairs with.
_AST_OF: dict[type, tuple[type, ...]] = {
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.If: (ast.If,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith),
    cst.Try: (ast.Try,),
    cst.TryStar: (getattr(ast, "TryStar", ast.Try),),
    cst.Match: (ast.Match,),
}


class _Pairing:
    """Every statement's :data:`_Start` of one module, from CPython's ``ast`` of its text."""

    def __init__(self, module: cst.Module, lines: Sequence[str]) -> None:
        self.default_indent = module.default_indent
        self.lines = lines
        self.starts: dict[cst.CSTNode, _Start] = {}

    def block(
        self, statements: Sequence[cst.BaseStatement], nodes: list[ast.stmt], indents: _Indents
    ) -> bool:
        at = 0
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                # ``a = 1; b = 2`` is one line of libcst's and two statements of CPython's.
                if at + len(statement.body) > len(nodes):
                    return False
                line = nodes[at].lineno
                at += len(statement.body)
                self.starts[statement] = (line - len(statement.leading_lines), indents)
            elif at < len(nodes) and self.compound(statement, nodes[at], indents):
                at += 1
            else:
                return False
        return at == len(nodes)

    def compound(self, statement: cst.BaseStatement, node: ast.stmt, indents: _Indents) -> bool:
        if not isinstance(node, _AST_OF.get(type(statement), ())):
            return False
        line = node.lineno
        decorators = getattr(statement, "decorators", ())
        if decorators:
            line = node.decorator_list[0].lineno  # type: ignore[attr-defined]
            # CPython numbers a decorator by its expression: it must start on the ``@`` line.
            if not self.lines[line - 1].lstrip().startswith("@"):
                return False
            line -= len(decorators[0].leading_lines)
        self.starts[statement] = (line - len(statement.leading_lines), indents)
        return self.bodies(statement, node, indents)

    def suite(self, body: cst.BaseSuite, nodes: list[ast.stmt], indents: _Indents) -> bool:
        if not isinstance(body, cst.IndentedBlock):
            return True  # ``if x: return`` holds no statement of libcst's
        indent = self.default_indent if body.indent is None else body.indent
        return self.block(body.body, nodes, (*indents, indent))

    def bodies(self, statement: cst.BaseStatement, node: ast.stmt, indents: _Indents) -> bool:
        if isinstance(statement, cst.Match):
            # The cases are indented under ``match``, their bodies under the cases.
            indent = self.default_indent if statement.indent is None else statement.indent
            cases = node.cases  # type: ignore[attr-defined]
            return len(cases) == len(statement.cases) and all(
                self.suite(case.body, paired.body, (*indents, indent))
                for case, paired in zip(statement.cases, cases, strict=True)
            )
        body = statement.body  # type: ignore[attr-defined]
        if not self.suite(body, node.body, indents):  # type: ignore[attr-defined]
            return False
        if isinstance(statement, cst.Try | cst.TryStar):
            handlers = node.handlers  # type: ignore[attr-defined]
            if len(handlers) != len(statement.handlers) or not all(
                self.suite(handler.body, paired.body, indents)
                for handler, paired in zip(statement.handlers, handlers, strict=True)
            ):
                return False
            final = statement.finalbody
            finalbody = node.finalbody  # type: ignore[attr-defined]
            if final is not None and not self.suite(final.body, finalbody, indents):
                return False
        orelse = getattr(statement, "orelse", None)
        if isinstance(orelse, cst.If):  # ``elif``: the ``If`` CPython keeps in ``orelse``
            rest = node.orelse  # type: ignore[attr-defined]
            return len(rest) == 1 and self.compound(orelse, rest[0], indents)
        if isinstance(orelse, cst.Else):
            return self.suite(orelse.body, node.orelse, indents)  # type: ignore[attr-defined]
        return True


def _paired_starts(module: cst.Module, text: str) -> dict[cst.CSTNode, _Start] | None:
    """Every statement's start, from CPython's parse of ``text`` (``module``'s source);
    ``None`` where CPython cannot parse it or the trees do not pair."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    pairing = _Pairing(module, _NEWLINE.split(text))
    try:
        paired = pairing.block(module.body, tree.body, ())
    except RecursionError:
        return None
    return pairing.starts if paired else None


class LazyPositions(Mapping[cst.CSTNode, CodeRange]):
    """``PositionProvider``'s answers for ``module``, computed per statement on demand.

    ``parents`` returns the module's child-to-parent map (built on first use); ``text``,
    the module's source (``module.code``), lets CPython's parse tell where statements
    start.
    """

    def __init__(
        self,
        module: cst.Module,
        parents: Callable[[], Mapping[cst.CSTNode, cst.CSTNode]],
        text: str | None = None,
    ) -> None:
        self.module = module
        self._parents = parents
        self._text = text
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
            # An ``elif`` is generated by the ``if`` it continues (alone it would read
            # ``if``, two columns short): the chain's first ``if`` is the statement.
            elif_ = isinstance(current, cst.If) and isinstance(parents.get(current), cst.If)
            if innermost is None and isinstance(current, cst.BaseStatement) and not elif_:
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
        if self._text is not None:
            starts = _paired_starts(self.module, self._text)
            self._text = None  # tried once
            if starts is not None:
                self._starts.update(starts)
                self._scanned.update(range(len(self.module.body)))
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
