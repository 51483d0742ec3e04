"""Per-function control-flow graphs over libcst statements, with dominance.

Hand-written because nothing on PyPI builds a control-flow graph for libcst trees
(the CFG libraries there work on :mod:`ast`, whose nodes cannot be mapped back to the
concrete syntax tree the rules report on and fix).

One graph per function body; nested functions, lambdas and classes are opaque
statements of their enclosing graph and get graphs of their own. A node is one
*evaluation point*: a small statement (``x = f()``, ``return y``), or the header of a
compound statement (an ``if``/``while`` test, a ``for`` iterator, ``with`` items, an
``except`` clause). Every node lists the expressions it evaluates (``exprs``), so an
analysis can walk exactly the code that runs there.

Modelled control flow:

* ``if``/``elif``/``else`` and ``match`` (true/false edges are labelled so an
  analysis can prune a branch, e.g. "assume the model is hybrid-SWA");
* ``while``/``for`` with back edges, ``break``, ``continue`` and ``else`` clauses
  (``while True`` has no exit edge besides ``break``);
* ``try``/``except``/``else``/``finally``: every node built inside a ``try`` body
  gets an *exceptional* edge to the handlers (``exc_succs``), meaning "an exception
  raised after this point"; the ``finally`` body is built once per way of leaving the
  ``try`` (fall-through, ``return``, ``raise``, ``break``, ``continue``), like
  CPython's compiler does, so no infeasible path joins a ``return`` to the code after
  the statement;
* ``with``/``async with`` (the items are a node; the body runs once);
* ``return`` (to :attr:`CFG.exit`) and ``raise`` (to :attr:`CFG.raise_exit`).

Dominators use the iterative algorithm of Cooper, Harvey and Kennedy ("A Simple,
Fast Dominance Algorithm", 2001) over reverse post-order; post-dominators run the
same algorithm on the reversed graph from the exit.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

# Labels of the edges leaving a test node.
TRUE = "true"
FALSE = "false"


@dataclass(eq=False)
class CFGNode:
    """One evaluation point of a function."""

    id: int
    kind: str  # entry, exit, raise, stmt, if, while, for, with, handler, match, case, try
    stmt: cst.CSTNode | None = None
    exprs: tuple[cst.CSTNode, ...] = ()
    succs: list[int] = field(default_factory=list)
    preds: list[int] = field(default_factory=list)
    # Exceptional successors (handlers / finally of an enclosing ``try``).
    exc_succs: list[int] = field(default_factory=list)
    exc_preds: list[int] = field(default_factory=list)
    # For test nodes: successor id -> TRUE/FALSE.
    labels: dict[int, str] = field(default_factory=dict)
    # For test nodes: the test expression (``if``/``while``), else None.
    test: cst.BaseExpression | None = None

    @property
    def line_node(self) -> cst.CSTNode | None:
        return self.stmt


@dataclass(eq=False)
class CFG:
    function: cst.FunctionDef | cst.Module
    nodes: list[CFGNode]
    entry: int = 0
    exit: int = 1
    raise_exit: int = 2
    # CST statement (small statement or compound statement) -> the nodes built for it
    # (several when a ``finally`` body is duplicated).
    by_stmt: dict[int, list[int]] = field(default_factory=dict)
    _dom: list[int] | None = None
    _pdom: list[int] | None = None

    def __len__(self) -> int:
        return len(self.nodes)

    def nodes_of(self, stmt: cst.CSTNode) -> list[CFGNode]:
        return [self.nodes[i] for i in self.by_stmt.get(id(stmt), ())]

    def successors(self, i: int, exceptional: bool = True) -> list[int]:
        node = self.nodes[i]
        return node.succs + node.exc_succs if exceptional else node.succs

    def predecessors(self, i: int, exceptional: bool = True) -> list[int]:
        node = self.nodes[i]
        return node.preds + node.exc_preds if exceptional else node.preds

    def reachable(self, exceptional: bool = True) -> set[int]:
        seen = {self.entry}
        stack = [self.entry]
        while stack:
            for s in self.successors(stack.pop(), exceptional):
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return seen

    # -- dominance ---------------------------------------------------------------

    def idom(self) -> list[int]:
        """Immediate dominators (``-1``: unreachable; the entry is its own)."""
        if self._dom is None:
            self._dom = _dominators(
                len(self.nodes), self.entry, lambda i: self.successors(i), self.predecessors
            )
        return self._dom

    def ipdom(self) -> list[int]:
        """Immediate post-dominators towards :attr:`exit` (``-1``: cannot reach it).

        Computed on normal edges only: an exception is not a way to finish the function.
        Paths ending in ``raise`` have a virtual edge to the exit so they take part.
        """
        if self._pdom is None:

            def preds(i: int) -> list[int]:  # predecessors in the reversed graph
                out = list(self.nodes[i].succs)
                if i == self.raise_exit:
                    out.append(self.exit)
                return out

            def succs(i: int) -> list[int]:
                out = list(self.nodes[i].preds)
                if i == self.exit:
                    out.append(self.raise_exit)
                return out

            self._pdom = _dominators(len(self.nodes), self.exit, succs, preds)
        return self._pdom

    def dominates(self, a: int, b: int) -> bool:
        return _walks_to(self.idom(), b, a)

    def post_dominates(self, a: int, b: int) -> bool:
        return _walks_to(self.ipdom(), b, a)

    def dominators(self, b: int) -> list[int]:
        return _chain(self.idom(), b)

    def post_dominators(self, b: int) -> list[int]:
        return _chain(self.ipdom(), b)


def _chain(idom: list[int], b: int) -> list[int]:
    if idom[b] < 0:
        return []
    out = [b]
    while idom[b] != b:
        b = idom[b]
        out.append(b)
    return out


def _walks_to(idom: list[int], start: int, target: int) -> bool:
    if idom[start] < 0:
        return False
    node = start
    while True:
        if node == target:
            return True
        parent = idom[node]
        if parent == node:
            return False
        node = parent


def _dominators(n: int, root: int, succs, preds) -> list[int]:  # type: ignore[no-untyped-def]
    """Cooper–Harvey–Kennedy iterative dominators."""
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
    order.reverse()  # reverse post-order
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


# -- the builder -------------------------------------------------------------------


class _Scope:
    """Where jumps of each kind go: a function, a loop, or a ``try``."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.kinds = frozenset(kinds)
        self.pending: dict[str, list[int]] = {k: [] for k in self.kinds}


_LOOP_JUMPS = ("break", "continue")
_ALL_JUMPS = ("return", "raise", "break", "continue")


def _is_true_constant(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value == "True"
    if isinstance(expr, cst.Integer):
        return expr.value not in ("0",)
    return False


def _catches_everything(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    name = handler.type
    return isinstance(name, cst.Name) and name.value in ("BaseException", "Exception")


class _Builder:
    def __init__(self, function: cst.FunctionDef | cst.Module) -> None:
        self.nodes: list[CFGNode] = []
        self.by_stmt: dict[int, list[int]] = {}
        self.scopes: list[_Scope] = []
        # Innermost exception targets: (handler entry ids) for nodes built in a try body.
        self.exc_targets: list[list[int]] = []
        self.function = function
        for kind in ("entry", "exit", "raise"):
            self.new(kind)

    def new(
        self,
        kind: str,
        stmt: cst.CSTNode | None = None,
        exprs: Sequence[cst.CSTNode] = (),
        test: cst.BaseExpression | None = None,
    ) -> int:
        node = CFGNode(len(self.nodes), kind, stmt, tuple(exprs), test=test)
        self.nodes.append(node)
        if stmt is not None:
            self.by_stmt.setdefault(id(stmt), []).append(node.id)
        if self.exc_targets:
            for target in self.exc_targets[-1]:
                self.exc_edge(node.id, target)
        return node.id

    def edge(self, a: int, b: int, label: str | None = None) -> None:
        if b not in self.nodes[a].succs:
            self.nodes[a].succs.append(b)
            self.nodes[b].preds.append(a)
        if label is not None:
            self.nodes[a].labels[b] = label

    def exc_edge(self, a: int, b: int) -> None:
        if b not in self.nodes[a].exc_succs:
            self.nodes[a].exc_succs.append(b)
            self.nodes[b].exc_preds.append(a)

    def link(self, frontier: Iterable[int], target: int) -> None:
        for source in frontier:
            self.edge(source, target)

    def node_after(self, frontier: list[int], *args, **kwargs) -> int:  # type: ignore[no-untyped-def]
        node = self.new(*args, **kwargs)
        self.link(frontier, node)
        return node

    def jump(self, kind: str, source: int) -> None:
        for scope in reversed(self.scopes):
            if kind in scope.kinds:
                scope.pending[kind].append(source)
                return
        # ``break``/``continue`` outside a loop is a syntax error; treat it as a return.
        self.edge(source, 1 if kind != "raise" else 2)

    # -- statements --------------------------------------------------------------

    def block(self, body: cst.BaseSuite | Sequence[cst.BaseStatement], frontier: list[int]):  # type: ignore[no-untyped-def]
        if isinstance(body, cst.IndentedBlock):
            statements: Sequence[cst.CSTNode] = body.body
        elif isinstance(body, cst.SimpleStatementSuite):
            return self.small_statements(body.body, frontier)
        else:
            statements = body  # type: ignore[assignment]
        for stmt in statements:
            frontier = self.statement(stmt, frontier)
        return frontier

    def small_statements(self, smalls: Sequence[cst.BaseSmallStatement], frontier: list[int]):  # type: ignore[no-untyped-def]
        for small in smalls:
            frontier = self.small(small, frontier)
        return frontier

    def small(self, small: cst.BaseSmallStatement, frontier: list[int]) -> list[int]:
        node = self.node_after(frontier, "stmt", small, (small,))
        if isinstance(small, cst.Return):
            self.jump("return", node)
            return []
        if isinstance(small, cst.Raise):
            self.jump("raise", node)
            return []
        if isinstance(small, cst.Break):
            self.jump("break", node)
            return []
        if isinstance(small, cst.Continue):
            self.jump("continue", node)
            return []
        return [node]

    def statement(self, stmt: cst.CSTNode, frontier: list[int]) -> list[int]:
        if isinstance(stmt, cst.SimpleStatementLine):
            return self.small_statements(stmt.body, frontier)
        method = getattr(self, f"stmt_{type(stmt).__name__}", None)
        if method is not None:
            return method(stmt, frontier)
        # FunctionDef, ClassDef and anything unknown: one opaque node.
        exprs: tuple[cst.CSTNode, ...] = ()
        if isinstance(stmt, cst.FunctionDef):
            exprs = tuple(d.decorator for d in stmt.decorators)
        return [self.node_after(frontier, "stmt", stmt, exprs)]

    def stmt_If(self, stmt: cst.If, frontier: list[int]) -> list[int]:
        test = self.node_after(frontier, "if", stmt, (stmt.test,), test=stmt.test)
        body_start = len(self.nodes)
        out = self.block(stmt.body, [test])
        self._label_first(test, body_start, TRUE)
        if stmt.orelse is None:
            self._pending_false.append(test)
            return [*out, test]
        else_start = len(self.nodes)
        if isinstance(stmt.orelse, cst.If):
            else_out = self.stmt_If(stmt.orelse, [test])
        else:
            else_out = self.block(stmt.orelse.body, [test])
        self._label_first(test, else_start, FALSE)
        return out + else_out

    # The false edge of an ``if`` without ``else`` goes to whatever comes next; it is
    # labelled when that node is linked (see ``_label_pending``).
    @property
    def _pending_false(self) -> list[int]:
        return self.__dict__.setdefault("_false", [])

    def _label_first(self, source: int, first_new: int, label: str) -> None:
        """Label the edge from ``source`` to the first node built at/after ``first_new``."""
        for succ in self.nodes[source].succs:
            if succ >= first_new and succ not in self.nodes[source].labels:
                self.nodes[source].labels[succ] = label
                return

    def _loop(self, header: int, body: cst.BaseSuite, orelse: cst.Else | None,
              exits_on_false: bool) -> list[int]:  # fmt: skip
        scope = _Scope(_LOOP_JUMPS)
        self.scopes.append(scope)
        body_start = len(self.nodes)
        body_out = self.block(body, [header])
        self._label_first(header, body_start, TRUE)
        self.scopes.pop()
        self.link(body_out + scope.pending["continue"], header)
        out: list[int] = []
        if exits_on_false:
            if orelse is not None:
                else_start = len(self.nodes)
                out = self.block(orelse.body, [header])
                self._label_first(header, else_start, FALSE)
            else:
                out = [header]
                self._pending_false.append(header)
        return out + scope.pending["break"]

    def stmt_While(self, stmt: cst.While, frontier: list[int]) -> list[int]:
        header = self.node_after(frontier, "while", stmt, (stmt.test,), test=stmt.test)
        return self._loop(header, stmt.body, stmt.orelse, not _is_true_constant(stmt.test))

    def stmt_For(self, stmt: cst.For, frontier: list[int]) -> list[int]:
        header = self.node_after(frontier, "for", stmt, (stmt.iter, stmt.target))
        return self._loop(header, stmt.body, stmt.orelse, True)

    def stmt_With(self, stmt: cst.With, frontier: list[int]) -> list[int]:
        items = tuple(item for item in stmt.items)
        header = self.node_after(frontier, "with", stmt, items)
        return self.block(stmt.body, [header])

    def stmt_Match(self, stmt: cst.Match, frontier: list[int]) -> list[int]:
        subject = self.node_after(frontier, "match", stmt, (stmt.subject,))
        out: list[int] = []
        previous = subject
        exhaustive = False
        for case in stmt.cases:
            guard = (case.guard,) if case.guard is not None else ()
            test = self.node_after([previous], "case", case, (case.pattern, *guard))
            out += self.block(case.body, [test])
            previous = test
            if (
                isinstance(case.pattern, cst.MatchAs)
                and case.pattern.pattern is None
                and case.guard is None
            ):
                exhaustive = True
        if not exhaustive:
            out.append(previous)
        return out

    def stmt_Try(self, stmt: cst.Try | cst.TryStar, frontier: list[int]) -> list[int]:
        has_finally = stmt.finalbody is not None
        fin_scope = _Scope(_ALL_JUMPS) if has_finally else None
        if fin_scope is not None:
            self.scopes.append(fin_scope)
        try_node = self.node_after(frontier, "try", stmt, ())
        # Handler entries exist before the body so body nodes can point at them.
        handler_nodes = [
            self.new("handler", h, tuple(x for x in (h.type,) if x is not None))
            for h in stmt.handlers
        ]
        catch_all = any(_catches_everything(h) for h in stmt.handlers)
        # Where an exception raised in the body goes.
        targets = list(handler_nodes)
        reraise_node = None
        if not catch_all:
            # An exception no handler matches propagates: to the finally or outward.
            reraise_node = self.new("reraise", None, ())
            targets.append(reraise_node)
        self.exc_targets.append(targets)
        body_out = self.block(stmt.body, [try_node])
        self.exc_targets.pop()
        # Handler nodes were built outside the body's targets: an exception inside a
        # handler propagates outward (to the finally or an enclosing try).
        out: list[int] = []
        if stmt.orelse is not None:
            out += self.block(stmt.orelse.body, body_out)
        else:
            out += body_out
        for handler, node in zip(stmt.handlers, handler_nodes, strict=True):
            out += self.block(handler.body, [node])
        if reraise_node is not None:
            self.jump("raise", reraise_node)
        if fin_scope is None:
            return out
        self.scopes.pop()
        # One copy of the finally body per way of leaving the try statement.
        assert stmt.finalbody is not None
        after = self.block(stmt.finalbody.body, out) if out else []
        for kind in _ALL_JUMPS:
            sources = fin_scope.pending[kind]
            if not sources:
                continue
            copy_out = self.block(stmt.finalbody.body, sources)
            for node_id in copy_out:
                self.jump(kind, node_id)
        return after

    stmt_TryStar = stmt_Try


def _attach_false_labels(builder: _Builder) -> None:
    """Label the false edge of ``if`` without ``else`` and of loop headers."""
    for test in builder._pending_false:
        node = builder.nodes[test]
        for succ in node.succs:
            if succ not in node.labels:
                node.labels[succ] = FALSE


def build_cfg(function: cst.FunctionDef | cst.Module) -> CFG:
    """The control-flow graph of ``function``'s body (or a module's top level)."""
    builder = _Builder(function)
    scope = _Scope(("return", "raise"))
    builder.scopes.append(scope)
    out = builder.block(function.body, [0])
    builder.link(out + scope.pending["return"], 1)
    builder.link(scope.pending["raise"], 2)
    _attach_false_labels(builder)
    return CFG(function, builder.nodes, by_stmt=builder.by_stmt)


# Keyed by id(function) holding the function itself (libcst nodes take no weak
# references), so a serial audit's second pass reuses the first pass's graphs.
_CACHE: OrderedDict[int, tuple[cst.CSTNode, CFG]] = OrderedDict()
_CACHE_SIZE = 50_000


def forget_cfgs() -> None:
    """Let go of the memoised CFGs (and the trees they hold) once an audit is over."""
    _CACHE.clear()


def cfg_for(function: cst.FunctionDef) -> CFG:
    """:func:`build_cfg`, memoised across the two passes of an audit."""
    key = id(function)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is function:
        _CACHE.move_to_end(key)
        return hit[1]
    cfg = build_cfg(function)
    _CACHE[key] = (function, cfg)
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return cfg


def functions_in(module: cst.Module) -> Iterator[tuple[cst.FunctionDef, list[cst.ClassDef]]]:
    """Every function of ``module`` (nested ones too) with its enclosing classes."""

    def walk(
        statements: Sequence[cst.CSTNode], classes: list[cst.ClassDef]
    ) -> Iterator[tuple[cst.FunctionDef, list[cst.ClassDef]]]:
        for stmt in statements:
            if isinstance(stmt, cst.FunctionDef):
                yield stmt, classes
                yield from walk(_body(stmt.body), [])
            elif isinstance(stmt, cst.ClassDef):
                yield from walk(_body(stmt.body), [*classes, stmt])
            elif not isinstance(stmt, cst.SimpleStatementLine):
                for child in _compound_bodies(stmt):
                    yield from walk(child, classes)

    yield from walk(module.body, [])


def _body(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return suite.body if isinstance(suite, cst.IndentedBlock) else ()


def _compound_bodies(stmt: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    for name in ("body", "orelse", "finalbody"):
        part = getattr(stmt, name, None)
        if part is None:
            continue
        if isinstance(part, cst.If):
            yield [part]
        elif isinstance(part, cst.IndentedBlock):
            yield part.body
        elif isinstance(part, cst.BaseSuite | cst.Else | cst.Finally):
            inner = getattr(part, "body", None)
            if isinstance(inner, cst.IndentedBlock):
                yield inner.body
    for handler in getattr(stmt, "handlers", ()):
        yield _body(handler.body)
    for case in getattr(stmt, "cases", ()):
        yield _body(case.body)
