"""The mapping table's sentinel rows, and the writes that reach them (I11).

SGLang builds its full->SWA table with a trailing ``-1`` row
(``torch.cat([torch.zeros(size + page_size), torch.tensor([-1])])``): a ``last_loc`` of
``-1`` (a request without a prefix) indexes it and must translate to ``-1``. Row 0 holds
``0``: full slot 0 is the padding slot, and padded tokens must translate to SWA slot 0,
the reserved one. ``clear()`` resets the rest (``mapping[:-1].fill_(0)``). Both rows are
learnt from how the project builds each mapping attribute (:func:`design_of`), never
assumed: a table built without a trailing ``-1`` has no such row to keep.

:func:`region_of` says which rows an expression over the table covers
(``m``, ``m[:-1]``, ``m[1:]``, ``m[-1]``, through views and local names); :func:`fill_value`
what constant a value is; :func:`fresh_without_sentinel` whether a value is a new table
lacking the trailing row.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import libcst as cst

from swacheck.analysis.aliases import VIEW_METHODS
from swacheck.analysis.names import Names, target_name
from swacheck.analysis.walk import walk
from swacheck.context import FileContext
from swacheck.places import position

# Factories whose result is int64 when no dtype is given (for integer data).
INT64_BY_DEFAULT = frozenset(
    {"arange", "randint", "randperm", "tensor", "as_tensor", "asarray", "full"}
)
FACTORIES = INT64_BY_DEFAULT | {
    "zeros",
    "ones",
    "empty",
    "empty_strided",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
}


@dataclass(frozen=True)
class Design:
    """The sentinel rows a mapping attribute is built with, and where (``row`` of the
    construction; ``0`` when unknown)."""

    trailing: int | None  # the last row's value (-1), if the table has such a row
    head: int | None  # row 0's value (0), if the body starts at 0 (zeros, arange)
    row: int = position()


@dataclass(frozen=True)
class Region:
    """Which sentinel rows an expression over a mapping attribute covers."""

    attr: str
    first: bool
    last: bool
    whole: bool  # the table itself or an open slice of it


def int_constant(node: cst.BaseExpression) -> int | None:
    """``0``, ``-1`` (a literal integer), else ``None``."""
    sign = 1
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        sign, node = -1, node.expression
    if isinstance(node, cst.Integer):
        return sign * int(node.evaluated_value)
    return None


def _mapping_attr(node: cst.BaseExpression, names: Names) -> str | None:
    if isinstance(node, cst.Attribute) and names.is_mapping(node.attr.value):
        return node.attr.value
    return None


def region_of(
    expr: cst.BaseExpression, names: Names, scope: cst.FunctionDef | None, depth: int = 0
) -> Region | None:
    """The rows of a mapping attribute ``expr`` covers, or ``None`` (not the mapping, or
    indices that cannot be read off the text)."""
    if depth > 4:
        return None
    attr = _mapping_attr(expr, names)
    if attr is not None:
        return Region(attr, first=True, last=True, whole=True)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in VIEW_METHODS - {"narrow", "select", "diagonal", "unfold"}:
            return region_of(expr.func.value, names, scope, depth + 1)
        return None
    if isinstance(expr, cst.Name) and scope is not None:
        bound = assignments(scope, expr.value)
        if len(bound) == 1:
            return region_of(bound[0][0], names, scope, depth + 1)
        return None
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        base = region_of(expr.value, names, scope, depth + 1)
        if base is None:
            return None
        index = expr.slice[0].slice
        if isinstance(index, cst.Slice):
            if index.step is not None:
                return None
            lower = int_constant(index.lower) if index.lower is not None else 0
            first = base.first and lower == 0
            last = base.last and (index.upper is None or _length_of(index.upper, expr.value))
            return Region(base.attr, first, last, base.whole and first and last)
        if isinstance(index, cst.Index):
            if isinstance(index.value, cst.Ellipsis):
                return base
            value = int_constant(index.value)
            if value == -1:
                return Region(base.attr, first=False, last=base.last, whole=False)
            if value == 0:
                return Region(base.attr, first=base.first, last=False, whole=False)
        return None
    return None


def _length_of(bound: cst.BaseExpression, table: cst.BaseExpression) -> bool:
    """Whether ``bound`` is ``table``'s own length (``len(t)``, ``t.shape[0]``,
    ``t.size(0)``, ``t.numel()``): a slice up to it reaches the last row."""
    if isinstance(bound, cst.Subscript) and len(bound.slice) == 1:
        index = bound.slice[0].slice
        if not (isinstance(index, cst.Index) and int_constant(index.value) == 0):
            return False
        bound = bound.value  # ``t.shape[0]``, ``t.size()[0]``
        if isinstance(bound, cst.Attribute) and bound.attr.value == "shape":
            return bound.value.deep_equals(table)
    if not isinstance(bound, cst.Call):
        return False
    func = bound.func
    if isinstance(func, cst.Name) and func.value == "len" and len(bound.args) == 1:
        return bound.args[0].value.deep_equals(table)
    if isinstance(func, cst.Attribute) and func.attr.value in ("numel", "size"):
        dims = [int_constant(a.value) for a in bound.args]
        return dims in ([], [0]) and func.value.deep_equals(table)
    return False


def fill_value(expr: cst.BaseExpression) -> int | None:
    """The constant every row gets from ``expr``: an integer, or a new tensor of one
    (``torch.zeros_like(m)``, ``torch.full(shape, -1)``)."""
    constant = int_constant(expr)
    if constant is not None:
        return constant
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and isinstance(expr.func.value, cst.Name)
        and expr.func.value.value == "torch"
    ):
        method = expr.func.attr.value
        if method in ("zeros", "zeros_like"):
            return 0
        if method in ("full", "full_like"):
            positional = [a.value for a in expr.args if a.keyword is None]
            return int_constant(positional[1]) if len(positional) >= 2 else None
    return None


def _torch_call(expr: cst.BaseExpression) -> str | None:
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and isinstance(expr.func.value, cst.Name)
        and expr.func.value.value == "torch"
    ):
        return expr.func.attr.value
    return None


def _parts(expr: cst.Call) -> list[cst.BaseExpression]:
    positional = [a.value for a in expr.args if a.keyword is None]
    if positional and isinstance(positional[0], cst.List | cst.Tuple):
        return [e.value for e in positional[0].elements]
    return []


def _constant_tensor(expr: cst.BaseExpression) -> int | None:
    """``torch.tensor([-1])``, ``torch.full((1,), -1)``: the value of a one-value part."""
    method = _torch_call(expr)
    if method == "tensor" and isinstance(expr, cst.Call) and expr.args:
        data = expr.args[0].value
        if isinstance(data, cst.List | cst.Tuple) and len(data.elements) == 1:
            return int_constant(data.elements[0].value)
    if method == "full":
        return fill_value(expr)
    return None


def _starts_at_zero(expr: cst.BaseExpression) -> bool:
    method = _torch_call(expr)
    if method in ("zeros", "zeros_like"):
        return True
    if method == "arange" and isinstance(expr, cst.Call):
        positional = [a.value for a in expr.args if a.keyword is None]
        return len(positional) == 1 or (len(positional) > 1 and int_constant(positional[0]) == 0)
    return method == "full" and fill_value(expr) == 0


def construction(value: cst.BaseExpression) -> tuple[int | None, int | None] | None:
    """``(trailing, head)`` sentinel values of a new table built by ``value``
    (``torch.cat([torch.zeros(n), torch.tensor([-1])])`` -> ``(-1, 0)``), or ``None`` when
    ``value`` builds no new table (a table shared from elsewhere, ``None``)."""
    method = _torch_call(value)
    if method in ("cat", "concat", "concatenate") and isinstance(value, cst.Call):
        parts = _parts(value)
        if not parts:
            return None
        return _constant_tensor(parts[-1]), 0 if _starts_at_zero(parts[0]) else None
    if method in FACTORIES:
        return None, 0 if _starts_at_zero(value) else None
    return None


def design_of(context: FileContext) -> dict[str, Design]:
    """How the file builds each mapping attribute with sentinel rows: a construction
    ending in a ``-1`` part (``torch.cat([..., torch.tensor([-1])])``), or a new table
    whose last row is then set (``m = torch.zeros(n + 1)``; ``m[-1] = -1``)."""
    names = context.names
    heads: dict[str, int | None] = {}
    found: dict[str, Design] = {}

    class Visitor(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                attr = _mapping_attr(target.target, names)
                if attr is not None:
                    built = construction(node.value)
                    if built is not None:
                        heads.setdefault(attr, built[1])
                        if built[0] is not None:
                            found[attr] = Design(built[0], built[1], context.start(node).row)
                elif isinstance(target.target, cst.Subscript):
                    region = region_of(target.target, names, None)
                    if (
                        region is not None
                        and region.last
                        and not region.first
                        and int_constant(node.value) == -1
                    ):
                        head = heads.get(region.attr)
                        found.setdefault(region.attr, Design(-1, head, context.start(node).row))

    walk(context.module, Visitor())
    return found


def binding_attr(target: cst.BaseExpression, names: Names) -> str | None:
    """The mapping attribute an assignment target rebinds (``self.m = ...``)."""
    name = target_name(target)
    if isinstance(target, cst.Attribute) and name is not None and names.is_mapping(name):
        return name
    return None


def assignments(
    scope: cst.Module | cst.FunctionDef, name: str, ctx: FileContext | None = None
) -> list[tuple[cst.BaseExpression, int]]:
    """Direct ``name = value`` assignments in ``scope`` (not in nested functions or
    classes), with their rows (0 without a context)."""
    return [
        (value, ctx.start(statement).row if ctx else 0)
        for statement, value in _assignment_index(scope).get(name, ())
    ]


@lru_cache(maxsize=32)
def _assignment_index(
    scope: cst.Module | cst.FunctionDef,
) -> dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]]:
    """Every direct assignment to a plain name in ``scope``, by name, in source order:
    one walk per scope, where rules ask for one name after another (SWA009 asks for each
    argument of each call, one scope at a time). Nodes hash by identity, so a scope is its
    own key; the small bound keeps a long-lived worker from holding old files' trees."""
    index: dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]] = {}

    class Visitor(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    index.setdefault(target.target.value, []).append((node, node.value))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if node.value is not None and isinstance(node.target, cst.Name):
                index.setdefault(node.target.value, []).append((node, node.value))

    walk(scope, Visitor())
    return index
