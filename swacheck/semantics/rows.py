"""Which rows of a tensor hold what: rows left uninitialised, rows padded with a value.

A buffer a captured graph reads must hold the padding sentinel in every row past the
live batch (I4, I12). Two ways it does not, read off the values:

* :func:`uninitialised` — a tensor allocated without initialising it (``torch.empty``,
  ``x.new_empty(n)``, ``torch.empty_like``) whose prefix alone is then written
  (``padded[:k].copy_(ids)``): its tail holds whatever the allocator's memory held;
  followed through views, casts, joins and the functions that return it;
* :func:`padding_value` — the constant a padding step writes: a tail filled
  (``buf[n:].fill_(-1)``, ``buf[n:] = -1``), a tensor allocated full of it
  (``torch.full((n,), -1)``), a padding call's fill value (``pad(x, n, value=-1)``).
"""

from __future__ import annotations

from swacheck.semantics.terms import (
    Attr,
    Call,
    Const,
    Filled,
    Global,
    Index,
    Op,
    Param,
    Phi,
    Seq,
    Slice,
    Term,
)
from swacheck.semantics.values import Ctx, Values

_UNINITIALISED = frozenset({"empty", "empty_like", "new_empty", "empty_strided"})
_KEEPS = frozenset({"view", "reshape", "flatten", "contiguous", "to", "long", "int", "clone"})


def uninitialised(
    term: Term, ctx: Ctx, values: Values, depth: int = 0, prefix: bool = False
) -> Call | None:
    """The allocation whose rows ``term`` leaves unwritten past its written prefix (the
    ``torch.empty``/``new_empty`` call), or ``None`` where every row is written or
    nothing is known. A bare uninitialised allocation is not one: it is filled later,
    whole or not; only a prefix written into it says the rest is not."""
    if depth > 6:
        return None
    if isinstance(term, Phi):
        for _, alternative in term.alternatives:
            found = uninitialised(alternative, ctx, values, depth + 1, prefix)
            if found is not None:
                return found
        return None
    if isinstance(term, Filled):
        region = term.region
        if region == "all":
            return None
        if isinstance(region, Slice) and region.upper is None and region.lower is not None:
            return None  # the tail is written: the prefix is the caller's to fill
        if isinstance(region, Slice) and region.lower in (None, Const(0)):
            return uninitialised(term.base, ctx, values, depth + 1, prefix=True)
        return None
    if isinstance(term, Call):
        func = term.func
        name = func.name if isinstance(func, Attr) else getattr(func, "name", "")
        short = name.rsplit(".", 1)[-1]
        if short in _UNINITIALISED:
            return term if prefix else None
        if short in ("cat", "concat", "concatenate") and term.args:
            # the rows after the first part are what was appended: padding
            parts = term.args[0].items if isinstance(term.args[0], Seq) else ()
            for part in parts[1:]:
                found = uninitialised(part, ctx, values, depth + 1, prefix=True)
                if found is not None:
                    return found
            return None
        if isinstance(func, Attr) and short in _KEEPS:
            return uninitialised(func.base, ctx, values, depth + 1, prefix)
        for callee, inner in values.callees(term, ctx):
            found = uninitialised(callee.facts.returns, inner, values, depth + 1, prefix)
            if found is not None:
                return found
        return None
    if isinstance(term, Index) and isinstance(term.index, Slice):
        return uninitialised(term.base, ctx, values, depth + 1, prefix)
    if isinstance(term, Param):
        bound = ctx.binding(term.name)
        if bound is not None:
            return uninitialised(bound[0], bound[1], values, depth + 1, prefix)
    return None


def constant(term: Term | None) -> int | None:
    """An integer constant (``-1``, ``0``), or a name the model cannot see through."""
    if isinstance(term, Const) and isinstance(term.value, int) and not isinstance(term.value, bool):
        return term.value
    if isinstance(term, Op) and term.op == "neg" and len(term.operands) == 1:
        inner = constant(term.operands[0])
        return -inner if inner is not None else None
    return None


def full_value(term: Term) -> int | None:
    """The constant a ``torch.full``/``new_full``/``full_like`` allocation fills with."""
    if not isinstance(term, Call):
        return None
    func = term.func
    name = func.name if isinstance(func, Attr | Global) else ""
    short = name.rsplit(".", 1)[-1]
    if short in ("full", "new_full"):
        return constant(term.argument(1, "fill_value"))
    if short == "full_like":
        return constant(term.argument(1, "fill_value"))
    return None
