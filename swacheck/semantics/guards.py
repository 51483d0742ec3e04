"""Branch literals: what a test says about the values it reads, on each of its edges.

A test is read into literals ``(key, polarity)`` whose key is the *term* of what it
tests (:mod:`swacheck.semantics.terms`), not its text: ``if is_swa_layer:`` after
``_, is_swa_layer = self.layers_mapping[layer_id]`` has the key
``Index(Index(Attr(self, layers_mapping), layer_id), 1)``, the very key a later
``if is_swa_layer:`` produces, while a rebound local gives a new key. So two branches
on the same value line up (the pool chosen ``if is_swa_layer`` and the location chosen
``if is_swa_layer``), and a value bound under one branch never meets a use under the
other. ``x is None`` and ``x is not None`` share a key with opposite polarities, as do
``a == b`` and ``a != b``; ``not`` flips; ``a and b`` gives both literals on its true
edge, ``a or b`` both negations on its false edge.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from swacheck.semantics.terms import (
    Attr,
    Call,
    Const,
    Filled,
    Global,
    Guard,
    Index,
    Lambda,
    Literal,
    Op,
    Param,
    Phi,
    Seq,
    Slice,
    Term,
    Unknown,
    contains,
)

_NEGATED = {"is not": "is", "!=": "==", "not in": "in"}


@lru_cache(maxsize=1 << 16)
def stable(term: Term) -> bool:
    """Whether ``term`` names the same value wherever it is met in the function: no
    unknown part, no join, no in-place state."""
    stack = [term]
    while stack:
        node = stack.pop()
        if isinstance(node, Unknown | Phi | Filled | Lambda):
            return False
        if isinstance(node, Attr):
            stack.append(node.base)
        elif isinstance(node, Index):
            stack += [node.base, node.index]
        elif isinstance(node, Call):
            stack += [node.func, *node.args, *(v for _, v in node.kwargs)]
        elif isinstance(node, Op | Seq):
            stack += list(node.operands if isinstance(node, Op) else node.items)
        elif isinstance(node, Slice):
            stack += [p for p in (node.lower, node.upper, node.step) if p is not None]
        elif not isinstance(node, Param | Global | Const):
            return False
    return True


def normal(term: Term) -> tuple[Term, bool]:
    """``term`` as a literal's key and the polarity ``term`` being true gives it."""
    polarity = True
    while isinstance(term, Op) and term.op == "not" and len(term.operands) == 1:
        polarity = not polarity
        term = term.operands[0]
    if isinstance(term, Op) and term.op in _NEGATED and len(term.operands) == 2:
        return Op(_NEGATED[term.op], term.operands), not polarity
    return term, polarity


def literals(test: Term, outcome: bool) -> Guard:
    """The literals that hold when ``test`` evaluates to ``outcome``."""
    key, polarity = normal(test)
    holds = outcome == polarity
    found: set[Literal] = set()
    if isinstance(key, Op) and key.op in ("and", "or"):
        conjunctive = (key.op == "and") == holds
        if conjunctive:
            for operand in key.operands:
                found |= literals(operand, holds)
    if stable(key):
        found.add((key, holds))
    return frozenset(found)


def reads(key: Term, target: Term) -> bool:
    """Whether a literal's key reads ``target`` (a field rebound since the test)."""
    return contains(key, target.__eq__)


def is_none_test(term: Term) -> Term | None:
    """The value a ``x is None`` test (either polarity) is about, else ``None``."""
    key, _ = normal(term)
    if (
        isinstance(key, Op)
        and key.op in ("is", "==")
        and len(key.operands) == 2
        and key.operands[1] == Const(None)
    ):
        return key.operands[0]
    return None


def called(term: Term, name: str) -> Call | None:
    """``term`` as a call of the builtin ``name`` (``isinstance``, ``hasattr``)."""
    if isinstance(term, Call) and term.func == Global(name):
        return term
    return None


def fold(term: Term, constant: Callable[[str], Const | None]) -> Term:
    """``term`` with each parameter ``constant`` knows replaced by its value, and the
    ``not``/``and``/``or`` and identity or equality tests over constants folded: in a
    call that leaves ``skip=False`` as its default, ``not skip and hasattr(pool, ...)``
    is ``hasattr(pool, ...)``."""
    if isinstance(term, Param):
        return constant(term.name) or term
    if not isinstance(term, Op):
        return term
    operands = tuple(fold(operand, constant) for operand in term.operands)
    op = term.op
    if op == "not" and len(operands) == 1:
        inner = operands[0]
        return Const(not inner.value) if isinstance(inner, Const) else Op(op, operands)
    if op in ("and", "or"):
        deciding = op == "or"  # the truth that decides the whole test
        rest = []
        for operand in operands:
            if isinstance(operand, Const):
                if bool(operand.value) == deciding:
                    return Const(deciding)
                continue
            rest.append(operand)
        if not rest:
            return Const(not deciding)
        return rest[0] if len(rest) == 1 else Op(op, tuple(rest))
    if len(operands) == 2 and all(isinstance(o, Const) for o in operands):
        left, right = (o.value for o in operands)  # type: ignore[attr-defined]
        tests = {"is": left is right, "is not": left is not right}
        tests |= {"==": left == right, "!=": left != right}
        if op in tests:
            return Const(tests[op])
    return Op(op, operands) if operands != term.operands else term


def assume(guard: Guard, constant: Callable[[str], Const | None]) -> Guard | None:
    """``guard`` where the parameters ``constant`` knows have their values: literals the
    values decide dropped or narrowed (:func:`fold`), ``None`` where a literal is
    decided false (the path cannot run)."""
    out: set[Literal] = set()
    for key, holds in guard:
        folded = fold(key, constant)
        if folded is key:
            out.add((key, holds))
        elif isinstance(folded, Const):
            if bool(folded.value) != holds:
                return None
        else:
            out |= literals(folded, holds)
    return frozenset(out)
