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


@contextmanager
def memoized_children() -> Iterator[None]:
    """Remember every node's children until the block ends.

    One file's analysis walks (parts of) its tree several times; with the children
    remembered, every walk after the first is a list traversal. Node ids are stable
    while the tree is alive, which it is for the whole block.
    """
    global _MEMO
    outer, _MEMO = _MEMO, {} if _MEMO is None else _MEMO
    try:
        yield
    finally:
        _MEMO = outer


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node``'s children in source order, without layout nodes."""
    if _MEMO is not None:
        found = _MEMO.get(id(node))
        if found is None:
            found = _MEMO[id(node)] = _children(node)
        return found
    return _children(node)


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
            # A visitor overriding libcst's generic hook sees every node through it.
            generic = getattr(type(visitor), hook, None)
            if generic is not None and generic is not getattr(cst.CSTVisitor, hook):
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


_LEAVE = object()


def walk(
    root: cst.CSTNode,
    visitors: cst.CSTVisitor | cst.BatchableCSTVisitor | Sequence[Any],
) -> None:
    """Run ``visitors`` (one, or a batch) over ``root`` like ``root.visit`` would.

    With a single visitor, ``visit_<Type>`` returning ``False`` skips the children;
    in a batch the return values are ignored, as in ``libcst.visit_batched``.
    Iterative, so a deep tree that parsed cannot overflow the stack here.
    """
    batch = visitors if isinstance(visitors, Sequence) else [visitors]
    single = len(batch) == 1
    dispatch = _Dispatch(batch)
    stack: list[Any] = [root]
    while stack:
        item = stack.pop()
        if item is _LEAVE:
            node = stack.pop()
            for method in dispatch.leave(type(node)):
                method(node)
            continue
        node = item
        descend = True
        for method in dispatch.visit(type(node)):
            if method(node) is False and single:
                descend = False
        stack.append(node)
        stack.append(_LEAVE)
        if descend:
            stack.extend(reversed(children(node)))
