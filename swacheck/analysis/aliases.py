"""Which local names of a function are aliases (or views) of an object's attribute.

``t = self.full_to_swa_index_mapping`` makes ``t`` the mapping itself;
``head = self.full_to_swa_index_mapping[:-1]`` makes ``head`` a view of it, so
``head.fill_(0)`` writes the mapping. Tuple unpacking (``a, b = self.m, self.n``) and
chains (``t = self.m; u = t[1:]``) are followed.

The analysis is flow-insensitive but strict: a name counts as an alias only when every
binding of it in the function binds the same attribute (``t = self.m`` in one branch and
``t = torch.zeros(...)`` in another makes ``t`` unknown, not an alias). Advanced
indexing (``self.m[idx]`` with a tensor ``idx``) is a gather that copies, so it makes no
alias; only slices, integer/``None``/``...`` indices and view methods do.

Config-free: the result names every attribute; the rules decide which ones matter.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst

from swacheck.analysis.names import dotted_name

# Methods whose result shares its receiver's storage.
VIEW_METHODS = frozenset(
    {
        "view",
        "view_as",
        "narrow",
        "select",
        "unsqueeze",
        "squeeze",
        "expand",
        "expand_as",
        "as_strided",
        "transpose",
        "permute",
        "t",
        "detach",
        "flatten",
        "reshape",
        "unflatten",
        "diagonal",
        "unfold",
        "movedim",
    }
)


@dataclass(frozen=True)
class AttrRef:
    """``receiver.attr`` (``receiver`` is dotted text such as ``self.pool``, or ``?``)."""

    receiver: str
    attr: str
    # Reached through a slice or view method rather than the attribute itself.
    view: bool = False
    # The local alias the expression went through, if any.
    via: str | None = None

    @property
    def text(self) -> str:
        return f"{self.receiver}.{self.attr}"


def _is_view_index(element: cst.SubscriptElement) -> bool:
    index = element.slice
    if isinstance(index, cst.Slice):
        return True
    value = index.value
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        value = value.expression
    if isinstance(value, cst.Integer | cst.Ellipsis):
        return True
    return isinstance(value, cst.Name) and value.value == "None"


def strip_views(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """The expression a view is taken of (``self.m[:-1].view(-1)`` -> ``self.m``)."""
    view = False
    while True:
        if isinstance(expr, cst.Subscript) and all(_is_view_index(e) for e in expr.slice):
            expr, view = expr.value, True
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in VIEW_METHODS
        ):
            expr, view = expr.func.value, True
        elif isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT", "data"):
            expr, view = expr.value, True
        else:
            return expr, view


def attr_ref(expr: cst.BaseExpression, aliases: dict[str, AttrRef] | None = None) -> AttrRef | None:
    """The attribute ``expr`` is (a view of), following local aliases; else ``None``."""
    base, view = strip_views(expr)
    if isinstance(base, cst.Attribute):
        receiver = dotted_name(base.value) or "?"
        return AttrRef(receiver, base.attr.value, view)
    if isinstance(base, cst.Name) and aliases:
        alias = aliases.get(base.value)
        if alias is not None:
            return AttrRef(alias.receiver, alias.attr, alias.view or view, base.value)
    return None


_UNKNOWN = AttrRef("", "")  # a name bound to something other than an attribute


def _pairs(
    target: cst.BaseExpression, value: cst.BaseExpression | None
) -> Iterable[tuple[str, cst.BaseExpression | None]]:
    """(local name, value bound to it or None when unknown) for one binding."""
    if isinstance(target, cst.Name):
        yield target.value, value
    elif isinstance(target, cst.Tuple | cst.List):
        values: list[cst.BaseExpression | None]
        if (
            isinstance(value, cst.Tuple | cst.List)
            and len(value.elements) == len(target.elements)
            and not any(isinstance(e, cst.StarredElement) for e in value.elements)
        ):
            values = [e.value for e in value.elements]
        else:
            values = [None] * len(target.elements)
        for element, sub in zip(target.elements, values, strict=True):
            inner = element.value
            yield from _pairs(inner, sub if not isinstance(element, cst.StarredElement) else None)
    elif isinstance(target, cst.StarredElement):
        yield from _pairs(target.value, None)


def bindings(statements: Iterable[cst.CSTNode]) -> list[tuple[str, cst.BaseExpression | None]]:
    """Every (name, value) binding made by ``statements`` (CFG node statements)."""
    out: list[tuple[str, cst.BaseExpression | None]] = []
    for stmt in statements:
        if isinstance(stmt, cst.Assign):
            for target in stmt.targets:
                out.extend(_pairs(target.target, stmt.value))
        elif isinstance(stmt, cst.AnnAssign) and stmt.value is not None:
            out.extend(_pairs(stmt.target, stmt.value))
        elif isinstance(stmt, cst.AugAssign) and isinstance(stmt.target, cst.Name):
            # ``t += x`` keeps ``t`` the same tensor: no new binding.
            continue
        elif isinstance(stmt, cst.For):
            out.extend(_pairs(stmt.target, None))
        elif isinstance(stmt, cst.With):
            for item in stmt.items:
                if item.asname is not None:
                    out.extend(_pairs(item.asname.name, None))
        elif isinstance(stmt, cst.ExceptHandler) and stmt.name is not None:
            if isinstance(stmt.name.name, cst.Name):
                out.append((stmt.name.name.value, None))
        elif isinstance(stmt, cst.FunctionDef | cst.ClassDef):
            out.append((stmt.name.value, None))
        elif isinstance(stmt, cst.Import | cst.ImportFrom) and not isinstance(
            stmt.names, cst.ImportStar
        ):
            for alias in stmt.names:
                bound = alias.asname.name if alias.asname else alias.name
                if isinstance(bound, cst.Name):
                    out.append((bound.value, None))
    return out


def local_aliases(
    statements: Iterable[cst.CSTNode], params: Iterable[str] = ()
) -> dict[str, AttrRef]:
    """Local name -> the attribute it aliases, for names every binding agrees on."""
    pairs = bindings(statements)
    if not pairs:
        return {}
    result: dict[str, AttrRef] = {}
    blocked = set(params)
    # Two rounds follow chains such as ``t = self.m; u = t[1:]`` in any order.
    for _ in range(2):
        seen: dict[str, AttrRef] = {}
        for name, value in pairs:
            ref = attr_ref(value, result) if value is not None else None
            current = seen.get(name)
            if ref is None:
                seen[name] = _UNKNOWN
            elif current is None:
                seen[name] = ref
            elif current is not _UNKNOWN and (current.receiver, current.attr) != (
                ref.receiver,
                ref.attr,
            ):
                seen[name] = _UNKNOWN
        result = {
            n: AttrRef(r.receiver, r.attr, r.view)
            for n, r in seen.items()
            if r is not _UNKNOWN and n not in blocked
        }
    return result
