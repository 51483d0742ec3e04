"""Where a local's value leaves its function: returned, stored on an object, or handed
to a kernel (or, where asked, to any call).

A tensor bound to a local is an intermediate while it stays in the function (host-side
bookkeeping, a value converted again before use). It escapes when the value itself
(or a view of it, or a copy that keeps its dtype) is returned, stored into an attribute
or a container (``self.swa_loc = x``, ``bufs["swa_loc"] = x``), or passed to a Triton
launch ``kernel[grid](..., x)``; optionally, handed to any call other than an
allocator's. The search follows the function's statements in source order from the
binding and stops at the next rebinding of the name.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from swacheck.analysis.aliases import VIEW_METHODS
from swacheck.analysis.names import call_name
from swacheck.analysis.walk import after_in_walk_order

# Methods whose result is a tensor of their receiver's dtype (views aside).
DTYPE_PRESERVING = frozenset(
    {"clone", "contiguous", "cpu", "cuda", "detach", "pin_memory", "repeat", "index_select"}
)


@dataclass(frozen=True)
class Escape:
    """How the value leaves (``returned``, ``stored in `self.x```, ...) and where."""

    how: str
    node: cst.CSTNode


def carried(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The expressions whose value ``expr`` is, through views, dtype-keeping copies and
    tuple/list displays (``x[:n].contiguous()`` -> ``x``; ``(a, b)`` -> ``a``, ``b``)."""
    if isinstance(expr, cst.Tuple | cst.List):
        return [e for element in expr.elements for e in carried(element.value)]
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in VIEW_METHODS | DTYPE_PRESERVING
        ):
            expr = expr.func.value
        else:
            return [expr]


def _is(expr: cst.BaseExpression, name: str) -> bool:
    return any(isinstance(e, cst.Name) and e.value == name for e in carried(expr))


def _rebinds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, cst.Tuple | cst.List):
        return any(_rebinds(element.value, name) for element in target.elements)
    return isinstance(target, cst.StarredElement) and _rebinds(target.value, name)


def is_allocator_call(call: cst.Call) -> bool:
    """``allocator.alloc(...)``, ``self.swa_attn_allocator.alloc_extend(...)``: what it is
    handed is the allocator's own input, in its index space and dtype."""
    name = call_name(call) or ""
    return name.split("_", 1)[0] == "alloc"


# Nodes whose bodies run elsewhere (or later): a search does not look inside them.
_OPAQUE = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


class _Search:
    """The search for where ``name``'s value leaves, node by node in walk order."""

    def __init__(self, name: str, calls: bool) -> None:
        self.name = name
        self.calls = calls
        self.found: Escape | None = None
        self.done = False

    def check(self, node: cst.CSTNode) -> None:
        name = self.name
        if isinstance(node, cst.Assign | cst.AnnAssign | cst.AugAssign):
            value = node.value
            if isinstance(node, cst.Assign):
                targets = [t.target for t in node.targets]
            else:
                targets = [node.target]
            if value is not None and _is(value, name):
                for target in targets:
                    if isinstance(target, cst.Attribute | cst.Subscript):
                        code = cst.Module([]).code_for_node(target)
                        self._found(Escape(f"stored in `{code}`", node))
                        return
            if not isinstance(node, cst.AugAssign) and any(_rebinds(t, name) for t in targets):
                self.done = True
        elif isinstance(node, cst.For) and _rebinds(node.target, name):
            self.done = True
        elif isinstance(node, cst.Return) and node.value is not None and _is(node.value, name):
            self._found(Escape("returned", node))
        elif isinstance(node, cst.Call) and any(_is(arg.value, name) for arg in node.args):
            if isinstance(node.func, cst.Subscript):
                kernel = cst.Module([]).code_for_node(node.func.value)
                self._found(Escape(f"passed to the kernel `{kernel}`", node))
            elif self.calls and not is_allocator_call(node):
                self._found(Escape(f"passed to `{call_name(node) or '?'}()`", node))

    def _found(self, escape: Escape) -> None:
        self.found = escape
        self.done = True


def escape_of(
    scope: cst.CSTNode, binding: cst.CSTNode, name: str, calls: bool = False
) -> Escape | None:
    """Where the value ``binding`` (a statement of ``scope``) gives the local ``name``
    first leaves ``scope``, if it does before ``name`` is bound again. With ``calls``,
    handing it to any call but an allocator's (:func:`is_allocator_call`) counts too.

    The nodes after ``binding`` are read off the module's layout
    (:func:`swacheck.analysis.walk.after_in_walk_order`): each search starts at its
    binding, not at the top of ``scope``.
    """
    search = _Search(name, calls)
    for node in after_in_walk_order(scope, binding, _OPAQUE):
        search.check(node)
        if search.done:
            break
    return search.found
