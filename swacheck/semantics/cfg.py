"""Per-function control-flow graphs over CPython's :mod:`ast`, with dominance.

One graph per function body (or a module's top level); nested functions, lambdas and
classes are opaque statements of their enclosing graph and get graphs of their own. A
node is one *evaluation point*: a simple statement (``x = f()``, ``return y``) or the
header of a compound statement (an ``if``/``while`` test, a ``for`` iterator, ``with``
items, an ``except`` clause, a ``match`` case).

Modelled control flow:

* ``if``/``elif``/``else``, ``while``, ``match``: the edges leaving a test are labelled
  :data:`TRUE`/:data:`FALSE`, so an analysis can follow what a branch decides;
* ``while``/``for`` with back edges, ``break``, ``continue`` and ``else`` clauses
  (``while True`` leaves only by ``break``);
* ``try``/``except``/``else``/``finally``: every node built inside a ``try`` body has an
  *exceptional* edge to the handlers ("an exception raised after this point"); the
  ``finally`` body is built once per way of leaving the ``try`` (fall-through,
  ``return``, ``raise``, ``break``, ``continue``), as CPython's compiler does, so no
  infeasible path joins a ``return`` to the code after the statement;
* ``return`` (to :attr:`CFG.exit`) and ``raise`` (to :attr:`CFG.raise_exit`).

Written here rather than taken from PyPI: the CFG packages for :mod:`ast` (staticfg,
scalpel) build one node per basic block without edge labels or ``finally`` copies, and
the analyses need both; beniget gives reaching definitions but no paths.

Dominators: Cooper, Harvey and Kennedy, "A Simple, Fast Dominance Algorithm" (2001).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

TRUE = "true"
FALSE = "false"

ENTRY, EXIT, RAISE_EXIT = 0, 1, 2


@dataclass(eq=False)
class Node:
    """One evaluation point of a function."""

    id: int
    # entry, exit, raise, stmt, if, while, for, with, handler, match, case, try, reraise
    kind: str
    stmt: ast.AST | None = None
    succs: list[int] = field(default_factory=list)
    preds: list[int] = field(default_factory=list)
    exc_succs: list[int] = field(default_factory=list)
    exc_preds: list[int] = field(default_factory=list)
    # Test nodes: successor -> TRUE/FALSE.
    labels: dict[int, str] = field(default_factory=dict)


@dataclass(eq=False)
class CFG:
    nodes: list[Node]
    _dom: list[int] | None = None
    _pdom: list[int] | None = None

    entry = ENTRY
    exit = EXIT
    raise_exit = RAISE_EXIT

    def __len__(self) -> int:
        return len(self.nodes)

    def successors(self, i: int, exceptional: bool = True) -> list[int]:
        node = self.nodes[i]
        return node.succs + node.exc_succs if exceptional else node.succs

    def predecessors(self, i: int, exceptional: bool = True) -> list[int]:
        node = self.nodes[i]
        return node.preds + node.exc_preds if exceptional else node.preds

    def order(self) -> list[int]:
        """Reverse post-order from the entry over normal and exceptional edges."""
        order: list[int] = []
        seen = {ENTRY}
        stack: list[tuple[int, Iterator[int]]] = [(ENTRY, iter(self.successors(ENTRY)))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if child not in seen:
                    seen.add(child)
                    stack.append((child, iter(self.successors(child))))
                    break
            else:
                stack.pop()
                order.append(node)
        order.reverse()
        return order

    def idom(self) -> list[int]:
        """Immediate dominators (``-1``: unreachable; the entry is its own)."""
        if self._dom is None:
            self._dom = _dominators(len(self.nodes), ENTRY, self.successors, self.predecessors)
        return self._dom

    def ipdom(self) -> list[int]:
        """Immediate post-dominators towards :attr:`exit` over normal edges; a path
        ending in ``raise`` has a virtual edge to the exit so that it takes part."""
        if self._pdom is None:

            def reversed_preds(i: int) -> list[int]:
                out = list(self.nodes[i].succs)
                if i == RAISE_EXIT:
                    out.append(EXIT)
                return out

            def reversed_succs(i: int) -> list[int]:
                out = list(self.nodes[i].preds)
                if i == EXIT:
                    out.append(RAISE_EXIT)
                return out

            self._pdom = _dominators(len(self.nodes), EXIT, reversed_succs, reversed_preds)
        return self._pdom

    def dominates(self, a: int, b: int) -> bool:
        return _walks_to(self.idom(), b, a)

    def post_dominates(self, a: int, b: int) -> bool:
        return _walks_to(self.ipdom(), b, a)


def _walks_to(idom: list[int], start: int, target: int) -> bool:
    if idom[start] < 0:
        return False
    node = start
    while node != target:
        parent = idom[node]
        if parent == node:
            return False
        node = parent
    return True


def _dominators(
    n: int,
    root: int,
    succs: Callable[[int], list[int]],
    preds: Callable[[int], list[int]],
) -> list[int]:
    order: list[int] = []
    seen = [False] * n
    seen[root] = True
    stack: list[tuple[int, Iterator[int]]] = [(root, iter(succs(root)))]
    while stack:
        node, children = stack[-1]
        for child in children:
            if not seen[child]:
                seen[child] = True
                stack.append((child, iter(succs(child))))
                break
        else:
            stack.pop()
            order.append(node)
    order.reverse()
    rpo = [-1] * n
    for index, node in enumerate(order):
        rpo[node] = index
    idom = [-1] * n
    idom[root] = root
    changed = True
    while changed:
        changed = False
        for node in order[1:]:
            new = -1
            for p in preds(node):
                if idom[p] < 0:
                    continue
                if new < 0:
                    new = p
                    continue
                a, b = p, new
                while a != b:
                    while rpo[a] > rpo[b]:
                        a = idom[a]
                    while rpo[b] > rpo[a]:
                        b = idom[b]
                new = a
            if new >= 0 and idom[node] != new:
                idom[node] = new
                changed = True
    return idom


# -- the builder ------------------------------------------------------------------------

_LOOP_JUMPS = ("break", "continue")
_ALL_JUMPS = ("return", "raise", "break", "continue")
_OPAQUE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class _Scope:
    """Where jumps of each kind go: the function, a loop, or a ``try`` with ``finally``."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.kinds = frozenset(kinds)
        self.pending: dict[str, list[int]] = {k: [] for k in self.kinds}


def _always_true(test: ast.expr) -> bool:
    return isinstance(test, ast.Constant) and bool(test.value)


def _catches_everything(handler: ast.ExceptHandler) -> bool:
    kind = handler.type
    return kind is None or (
        isinstance(kind, ast.Name) and kind.id in ("BaseException", "Exception")
    )


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.scopes: list[_Scope] = []
        self.exc_targets: list[list[int]] = []
        self.pending_false: list[int] = []
        for kind in ("entry", "exit", "raise"):
            self.new(kind)

    def new(self, kind: str, stmt: ast.AST | None = None) -> int:
        node = Node(len(self.nodes), kind, stmt)
        self.nodes.append(node)
        if self.exc_targets:
            for target in self.exc_targets[-1]:
                self.exc_edge(node.id, target)
        return node.id

    def edge(self, a: int, b: int) -> None:
        if b not in self.nodes[a].succs:
            self.nodes[a].succs.append(b)
            self.nodes[b].preds.append(a)

    def exc_edge(self, a: int, b: int) -> None:
        if b not in self.nodes[a].exc_succs:
            self.nodes[a].exc_succs.append(b)
            self.nodes[b].exc_preds.append(a)

    def after(self, frontier: Iterable[int], kind: str, stmt: ast.AST | None) -> int:
        node = self.new(kind, stmt)
        for source in frontier:
            self.edge(source, node)
        return node

    def label_first(self, source: int, first_new: int, label: str) -> None:
        """Label the edge from ``source`` to the first node built at or after ``first_new``."""
        node = self.nodes[source]
        for succ in node.succs:
            if succ >= first_new and succ not in node.labels:
                node.labels[succ] = label
                return

    def jump(self, kind: str, source: int) -> None:
        for scope in reversed(self.scopes):
            if kind in scope.kinds:
                scope.pending[kind].append(source)
                return
        self.edge(source, RAISE_EXIT if kind == "raise" else EXIT)

    def block(self, body: Sequence[ast.stmt], frontier: list[int]) -> list[int]:
        for stmt in body:
            frontier = self.statement(stmt, frontier)
        return frontier

    def statement(self, stmt: ast.stmt, frontier: list[int]) -> list[int]:
        method = getattr(self, f"_{type(stmt).__name__}", None)
        if method is not None:
            return method(stmt, frontier)
        node = self.after(frontier, "stmt", stmt)
        if isinstance(stmt, ast.Return):
            self.jump("return", node)
            return []
        if isinstance(stmt, ast.Raise):
            self.jump("raise", node)
            return []
        if isinstance(stmt, ast.Break):
            self.jump("break", node)
            return []
        if isinstance(stmt, ast.Continue):
            self.jump("continue", node)
            return []
        return [node]

    def _If(self, stmt: ast.If, frontier: list[int]) -> list[int]:
        test = self.after(frontier, "if", stmt)
        start = len(self.nodes)
        out = self.block(stmt.body, [test])
        self.label_first(test, start, TRUE)
        if not stmt.orelse:
            self.pending_false.append(test)
            return [*out, test]
        start = len(self.nodes)
        out += self.block(stmt.orelse, [test])
        self.label_first(test, start, FALSE)
        return out

    def _loop(self, header: int, body: list[ast.stmt], orelse: list[ast.stmt], exits: bool):
        scope = _Scope(_LOOP_JUMPS)
        self.scopes.append(scope)
        start = len(self.nodes)
        body_out = self.block(body, [header])
        self.label_first(header, start, TRUE)
        self.scopes.pop()
        for source in body_out + scope.pending["continue"]:
            self.edge(source, header)
        out: list[int] = []
        if exits:
            if orelse:
                start = len(self.nodes)
                out = self.block(orelse, [header])
                self.label_first(header, start, FALSE)
            else:
                out = [header]
                self.pending_false.append(header)
        return out + scope.pending["break"]

    def _While(self, stmt: ast.While, frontier: list[int]) -> list[int]:
        header = self.after(frontier, "while", stmt)
        return self._loop(header, stmt.body, stmt.orelse, not _always_true(stmt.test))

    def _For(self, stmt: ast.For | ast.AsyncFor, frontier: list[int]) -> list[int]:
        header = self.after(frontier, "for", stmt)
        return self._loop(header, stmt.body, stmt.orelse, True)

    _AsyncFor = _For

    def _With(self, stmt: ast.With | ast.AsyncWith, frontier: list[int]) -> list[int]:
        header = self.after(frontier, "with", stmt)
        return self.block(stmt.body, [header])

    _AsyncWith = _With

    def _Match(self, stmt: ast.Match, frontier: list[int]) -> list[int]:
        previous = self.after(frontier, "match", stmt)
        out: list[int] = []
        exhaustive = False
        for case in stmt.cases:
            test = self.after([previous], "case", case)
            out += self.block(case.body, [test])
            previous = test
            if (
                isinstance(case.pattern, ast.MatchAs)
                and case.pattern.pattern is None
                and case.guard is None
            ):
                exhaustive = True
        if not exhaustive:
            out.append(previous)
        return out

    def _Try(self, stmt: ast.Try, frontier: list[int]) -> list[int]:
        fin_scope = _Scope(_ALL_JUMPS) if stmt.finalbody else None
        if fin_scope is not None:
            self.scopes.append(fin_scope)
        try_node = self.after(frontier, "try", stmt)
        handlers = [self.new("handler", h) for h in stmt.handlers]
        targets = list(handlers)
        reraise = None
        if not any(_catches_everything(h) for h in stmt.handlers):
            reraise = self.new("reraise", None)
            targets.append(reraise)
        self.exc_targets.append(targets)
        body_out = self.block(stmt.body, [try_node])
        self.exc_targets.pop()
        out = self.block(stmt.orelse, body_out) if stmt.orelse else body_out
        for handler, node in zip(stmt.handlers, handlers, strict=True):
            out = out + self.block(handler.body, [node])
        if reraise is not None:
            self.jump("raise", reraise)
        if fin_scope is None:
            return out
        self.scopes.pop()
        after = self.block(stmt.finalbody, out) if out else []
        for kind in _ALL_JUMPS:
            sources = fin_scope.pending[kind]
            if sources:
                for node_id in self.block(stmt.finalbody, sources):
                    self.jump(kind, node_id)
        return after

    _TryStar = _Try


def build(body: Sequence[ast.stmt]) -> CFG:
    """The control-flow graph of a function's (or a module's) ``body``."""
    builder = _Builder()
    scope = _Scope(("return", "raise"))
    builder.scopes.append(scope)
    out = builder.block(body, [ENTRY])
    for source in out + scope.pending["return"]:
        builder.edge(source, EXIT)
    for source in scope.pending["raise"]:
        builder.edge(source, RAISE_EXIT)
    for test in builder.pending_false:
        node = builder.nodes[test]
        for succ in node.succs:
            node.labels.setdefault(succ, FALSE)
    return CFG(builder.nodes)


def is_opaque(stmt: ast.AST) -> bool:
    """A nested definition: one node of the enclosing graph, a graph of its own."""
    return isinstance(stmt, _OPAQUE)
