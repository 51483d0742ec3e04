"""A read-only libcst traversal that does not rebuild the tree.

``node.visit(visitor)`` and ``MetadataWrapper.visit_batched`` reach children through
``_visit_and_replace_children``, which re-creates (and re-validates) every node on the
way back up, even for a visitor that changes nothing. Profiling the audit of a real
engine tree showed those rebuilds costing several times the parse itself. The
walkers here read the children straight from the node's fields instead.

Semantics are libcst's, with one documented difference:

- children are visited in source order: the field order is learnt once per node class
  from libcst itself (the ``on_visit_attribute`` calls of its own traversal), so it
  can never drift from the installed libcst;
- ``visit_<Type>`` (or an overridden ``on_visit``) returning ``False`` skips the
  children (single visitor only, as in libcst's batched traversal); ``leave_<Type>``
  (or ``on_leave``) is called after them;
- whitespace, comments and punctuation nodes (:data:`SKIPPED`) are not visited: no
  analysis looks at them (``noqa`` comments are read with :mod:`tokenize`).
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import libcst as cst

# Node classes never visited nor descended into: layout, not meaning.
SKIPPED: frozenset[type] = frozenset(
    {
        cst.SimpleWhitespace,
        cst.ParenthesizedWhitespace,
        cst.EmptyLine,
        cst.TrailingWhitespace,
        cst.Newline,
        cst.Comment,
        cst.LeftParen,
        cst.RightParen,
        cst.LeftSquareBracket,
        cst.RightSquareBracket,
        cst.LeftCurlyBrace,
        cst.RightCurlyBrace,
        cst.Comma,
        cst.Semicolon,
        cst.Colon,
        cst.Dot,
        cst.AssignEqual,
    }
)

_ORDER: dict[type, tuple[str, ...]] = {}


class _AttributeRecorder(cst.CSTVisitor):
    """Records the order in which libcst's own traversal visits a node's fields."""

    def __init__(self) -> None:
        self.order: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if attribute not in self.order:
            self.order.append(attribute)


def _field_order(node: cst.CSTNode) -> tuple[str, ...]:
    kind = type(node)
    order = _ORDER.get(kind)
    if order is None:
        recorder = _AttributeRecorder()
        node._visit_and_replace_children(recorder)
        # A field visited only conditionally (``ImportFrom.names`` for ``*``) may be
        # missing from one instance's record: keep it, after the recorded ones.
        rest = [f.name for f in dataclasses.fields(kind) if f.name not in recorder.order]
        order = _ORDER[kind] = tuple(
            name for name in recorder.order + rest if not _is_layout_field(name)
        )
    return order


# Fields that hold only layout nodes (whitespace, brackets, separators) in every libcst
# node class; not even read. The walker's test against libcst's own traversal would
# notice a field here that held anything else.
_LAYOUT_FIELDS = frozenset(
    {
        "leading_lines",
        "lines_after_decorators",
        "lpar",
        "rpar",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
        "header",
        "footer",
        "trailing_whitespace",
        "comma",
        "semicolon",
        "equal",
        "dot",
        "colon",
    }
)


def _is_layout_field(name: str) -> bool:
    return name in _LAYOUT_FIELDS or name.startswith("whitespace")


# Per value type: 1 a node to visit, 2 a sequence that may hold nodes, 0 anything else
# (layout nodes, strings, sentinels). ``isinstance(x, cst.CSTNode)`` is an ABC check,
# far slower than this lookup on the millions of values of a large tree.
_KIND: dict[type, int] = {tuple: 2, list: 2}


def _kind(kind: type) -> int:
    found = _KIND.get(kind)
    if found is None:
        found = _KIND[kind] = int(issubclass(kind, cst.CSTNode) and kind not in SKIPPED)
    return found


# While a file is analysed (:func:`memoized_children`), each node's children, by id.
_MEMO: dict[int, list[cst.CSTNode]] | None = None
# ... and the analysed module, in preorder once it is first walked (:class:`_Preorder`).
_TREE: TreeLayout | None = None


@contextmanager
def memoized_children(
    module: cst.Module | None = None, layout: TreeLayout | None = None
) -> Iterator[None]:
    """Remember every node's children until the block ends; with ``module``, also its
    nodes in preorder, so a walk of (part of) it visits only the nodes its visitors
    handle (``layout``: the module's, kept from an earlier pass over the same tree).

    One file's analysis walks (parts of) its tree several times; with the children
    remembered, every walk after the first is a list traversal. Node ids are stable
    while the tree is alive, which it is for the whole block.
    """
    global _MEMO, _TREE
    outer, _MEMO = _MEMO, {} if _MEMO is None else _MEMO
    outer_tree = _TREE
    if module is not None:
        _TREE = layout if layout is not None and layout.module is module else TreeLayout(module)
    try:
        yield
    finally:
        _MEMO, _TREE = outer, outer_tree


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node``'s children in source order, without layout nodes."""
    if _MEMO is not None:
        found = _MEMO.get(id(node))
        if found is None:
            built = _TREE.built if _TREE is not None else None
            at = built.position(node) if built is not None else None
            found = built.children(at) if at is not None else _children(node)
            _MEMO[id(node)] = found
        return found
    return _children(node)


def after_in_walk_order(
    scope: cst.CSTNode, start: cst.CSTNode, opaque: tuple[type, ...]
) -> Iterator[cst.CSTNode]:
    """The nodes a walk of ``scope`` meets after ``start``'s subtree, in order, without
    the nodes of the ``opaque`` classes below ``scope`` or anything inside them; none
    when the walk never meets ``start`` (outside ``scope``, or inside an opaque node).

    Read off the analysed module's layout (:func:`memoized_children`), so a search that
    starts at a statement does not traverse what comes before it; where no layout holds
    ``scope``, ``scope`` alone is laid out.
    """
    layout = _TREE.get() if _TREE is not None else None
    at_scope = layout.position(scope) if layout is not None else None
    if layout is None or at_scope is None:
        layout, at_scope = _Preorder(scope), 0
    return _after(layout, at_scope, layout.position(start), opaque)


def _after(
    layout: _Preorder, at_scope: int, at_start: int | None, opaque: tuple[type, ...]
) -> Iterator[cst.CSTNode]:
    nodes, ends = layout.nodes, layout.ends
    stop = ends[at_scope]
    if at_start is None or not at_scope <= at_start < stop:
        return
    at = at_scope + 1
    while at < at_start:  # down the ancestors of ``start``, over the subtrees before it
        if ends[at] <= at_start:
            at = ends[at]
        elif isinstance(nodes[at], opaque):
            return
        else:
            at += 1
    at = ends[at_start]
    while at < stop:
        node = nodes[at]
        if isinstance(node, opaque):
            at = ends[at]
            continue
        yield node
        at += 1


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    order = _ORDER.get(type(node)) or _field_order(node)
    for name in order:
        value = getattr(node, name)
        kind = _KIND.get(type(value))
        if kind is None:
            kind = _kind(type(value))
        if kind == 1:
            found.append(value)
        elif kind == 2:
            for item in value:
                item_kind = _KIND.get(type(item))
                if item_kind is None:
                    item_kind = _kind(type(item))
                if item_kind == 1:
                    found.append(item)
    return found


Handler = Callable[[cst.CSTNode], Any]


class _Dispatch:
    """Each visitor's overridden ``visit_``/``leave_`` methods, per node class."""

    def __init__(self, visitors: Sequence[cst.CSTVisitor | cst.BatchableCSTVisitor]) -> None:
        self.visitors = visitors
        self._visit: dict[type, tuple[Handler, ...]] = {}
        self._leave: dict[type, tuple[Handler, ...]] = {}

    def _methods(self, prefix: str, kind: type) -> tuple[Handler, ...]:
        found = []
        hook = "on_visit" if prefix == "visit_" else "on_leave"
        for visitor in self.visitors:
            if _overrides(type(visitor), hook):
                method = getattr(visitor, hook, None)
            else:
                method = getattr(visitor, f"{prefix}{kind.__name__}", None)
            if method is not None and not getattr(method, "_is_no_op", False):
                found.append(method)
        return tuple(found)

    def visit(self, kind: type) -> tuple[Handler, ...]:
        methods = self._visit.get(kind)
        if methods is None:
            methods = self._visit[kind] = self._methods("visit_", kind)
        return methods

    def leave(self, kind: type) -> tuple[Handler, ...]:
        methods = self._leave.get(kind)
        if methods is None:
            methods = self._leave[kind] = self._methods("leave_", kind)
        return methods

    def enter(self, node: cst.CSTNode, single: bool) -> bool:
        """Call the visit hooks on ``node``: whether to descend into its children."""
        descend = True
        for method in self.visit(type(node)):
            if method(node) is False and single:
                descend = False
        return descend

    def exit(self, node: cst.CSTNode) -> None:
        """Call the leave hooks on ``node``."""
        for method in self.leave(type(node)):
            method(node)


def _overrides(kind: type, hook: str) -> bool:
    """Whether visitor class ``kind`` overrides libcst's generic ``hook`` (``on_visit`` or
    ``on_leave``): it then sees every node through it."""
    generic = getattr(kind, hook, None)
    return generic is not None and generic is not getattr(cst.CSTVisitor, hook)


_LEAVE = object()


def walk(
    root: cst.CSTNode,
    visitors: cst.CSTVisitor | cst.BatchableCSTVisitor | Sequence[Any],
) -> None:
    """Run ``visitors`` (one, or a batch) over ``root`` like ``root.visit`` would.

    With a single visitor, ``visit_<Type>`` returning ``False`` skips the children;
    in a batch the return values are ignored, as in ``libcst.visit_batched``.
    Iterative, so a deep tree that parsed cannot overflow the stack here. Inside
    :func:`memoized_children` with the root's module, only the nodes of the classes the
    visitors handle are reached (:class:`_Preorder`).
    """
    batch = visitors if isinstance(visitors, Sequence) else [visitors]
    single = len(batch) == 1
    dispatch = _Dispatch(batch)
    if _TREE is not None:
        handled = _handled_names(batch)
        if handled is not None:
            preorder = _TREE.get()
            start = preorder.position(root)
            if start is not None:
                preorder.walk(start, handled, dispatch, single)
                return
    stack: list[Any] = [root]
    while stack:
        item = stack.pop()
        if item is _LEAVE:
            dispatch.exit(stack.pop())
            continue
        node = item
        descend = dispatch.enter(node, single)
        stack.append(node)
        stack.append(_LEAVE)
        if descend:
            stack.extend(reversed(children(node)))


def _handled_names(batch: Sequence[Any]) -> frozenset[str] | None:
    """The names of the node classes ``batch``'s visitors have typed hooks for; ``None``
    when one of them overrides libcst's generic ``on_visit``/``on_leave`` (it sees every
    node)."""
    names: set[str] = set()
    for visitor in batch:
        if _overrides(type(visitor), "on_visit") or _overrides(type(visitor), "on_leave"):
            return None
        for kind in type(visitor).__mro__:
            if kind.__module__.startswith("libcst.") or kind is object:
                continue  # libcst's own typed hooks are no-ops
            for name in kind.__dict__:
                prefix, _, rest = name.partition("_")
                if prefix in ("visit", "leave") and rest and "_" not in rest:
                    names.add(rest)
    return frozenset(names)


class TreeLayout:
    """A module's :class:`_Preorder`, built at the first walk that can use it.

    Both passes over a tree can share one (:attr:`swacheck.analysis.tree.TreeMaps.layout`);
    a caller keeping many trees drops their layouts (:meth:`drop`), which are as large
    as the trees' own node lists.
    """

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.built: _Preorder | None = None

    def get(self) -> _Preorder:
        if self.built is None:
            self.built = _Preorder(self.module)
        return self.built

    def drop(self) -> None:
        """Free the layout; a later walk builds it again."""
        self.built = None


class _Preorder:
    """A tree's nodes in the order a walk visits them, where each one's subtree ends,
    and the positions of each node class.

    A file's analyses walk its tree many times (the index, each rule's facts, each
    function's locals and buffers: about eight full traversals of every node on an
    engine's attention backends), each for a few node classes. Laid out once, a walk
    of a subtree for those classes reads only their positions inside the subtree's
    range, and ``leave_`` hooks run when the walk passes a node's end: the same calls
    in the same order as the traversal, without touching the nodes no visitor handles.
    """

    def __init__(self, root: cst.CSTNode) -> None:
        nodes: list[cst.CSTNode] = []
        ends: list[int] = []
        kinds: dict[type, list[int]] = {}
        stack: list[Any] = [root]
        pop, push, extend = stack.pop, stack.append, stack.extend
        add, add_end = nodes.append, ends.append
        while stack:
            item = pop()
            if item.__class__ is int:
                ends[item] = len(nodes)
                continue
            at = len(nodes)
            add(item)
            add_end(0)
            kind = item.__class__
            found = kinds.get(kind)
            if found is None:
                kinds[kind] = [at]
            else:
                found.append(at)
            push(at)
            below = _children(item)
            below.reverse()
            extend(below)
        self.nodes = nodes
        self.ends = ends
        self._kinds = kinds
        self._at = {id(node): at for at, node in enumerate(nodes)}
        self._merged: dict[frozenset[str], list[int]] = {}

    def children(self, at: int) -> list[cst.CSTNode]:
        """The children of the node at ``at``."""
        found = []
        ends, stop = self.ends, self.ends[at]
        child = at + 1
        while child < stop:
            found.append(self.nodes[child])
            child = ends[child]
        return found

    def position(self, node: cst.CSTNode) -> int | None:
        """Where ``node`` is, if it is one of this tree's nodes."""
        at = self._at.get(id(node))
        return at if at is not None and self.nodes[at] is node else None

    def positions(self, names: frozenset[str]) -> list[int]:
        """The positions of the nodes whose class is named in ``names``, ascending."""
        found = self._merged.get(names)
        if found is None:
            lists = [at for kind, at in self._kinds.items() if kind.__name__ in names]
            found = self._merged[names] = sorted(i for at in lists for i in at)
        return found

    def walk(self, start: int, names: frozenset[str], dispatch: _Dispatch, single: bool) -> None:
        """:func:`walk` of the subtree at ``start`` for visitors handling ``names``."""
        positions = self.positions(names)
        nodes, ends = self.nodes, self.ends
        stop = ends[start]
        pending: list[tuple[int, cst.CSTNode]] = []  # nodes to leave, by subtree end
        index = bisect_left(positions, start)
        count = len(positions)
        while index < count:
            at = positions[index]
            if at >= stop:
                break
            while pending and pending[-1][0] <= at:
                dispatch.exit(pending.pop()[1])
            node = nodes[at]
            if dispatch.enter(node, single):
                pending.append((ends[at], node))
                index += 1
            else:
                dispatch.exit(node)
                index = bisect_left(positions, ends[at], index + 1)
        while pending:
            dispatch.exit(pending.pop()[1])
