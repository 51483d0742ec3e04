"""Branch conditions as plain data: what a test says on each edge, and what holds where.

A helper that invalidates only on some paths (``if not self.capturing:
self.pool.invalidate_loc_cache()``) is judged per path at each call: its summary is
computed under what the caller's path already decides about the helper's conditions.
This module gives both sides the same vocabulary, config-free:

* :func:`condition_of` reads a test (``if``/``while``) into a :class:`Condition`: its
  operands (``a and not b`` → ``a``, ``not b``), each as the text a caller can decide
  (a name or attribute chain, or a call of one without arguments), and whether an
  operand reads a parameter of the function (a condition the *caller* sets,
  ``if force:``) or only the object's or the module's state (``self.capturing``);
* :func:`path_facts` computes, over a function's control flow, which operands surely
  hold or fail when a node is reached: a forward *must* analysis fed by the tests'
  edges and by assignments of ``True``/``False`` (``self.model_runner.capturing =
  True``), starting from what the caller decided;
* :func:`carry_facts` turns a caller's facts at a call into the callee's terms
  (``self.model_runner.capturing`` at ``self.model_runner.helper()`` is the helper's
  ``self.capturing``; a literal argument decides a parameter).

Picklable: conditions are part of the first-pass skeletons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import libcst as cst

from swacheck.analysis.cfg import TRUE
from swacheck.analysis.names import dotted_name
from swacheck.analysis.walk import children
from swacheck.analysis.writes import CALL, WRITE, Event

# What is known about operands at a point: operand text -> its truth value.
Facts = Mapping[str, bool]

# Literal arguments (``Event.literals``) and rebound values (``Event.value``) that decide a
# truth value.
LITERAL_TRUTH = {"True": True, "False": False, "None": False}
BOUND_TRUTH = {"true": True, "false": False, "none": False}


@dataclass(frozen=True)
class Operand:
    """One operand of a test: ``text`` (without ``not``), negated or not."""

    text: str
    negated: bool = False
    # Reads a parameter of the function (other than ``self``/``cls``): the caller's choice.
    param: bool = False

    def value(self, facts: Facts) -> bool | None:
        known = facts.get(self.text) if self.text else None
        if known is None:
            return None
        return not known if self.negated else known


@dataclass(frozen=True)
class Condition:
    """A test node: its edges, and its operands joined by ``and`` (or by ``or``)."""

    node: int
    labels: tuple[tuple[int, str], ...]
    disjunction: bool
    operands: tuple[Operand, ...]

    def value(self, facts: Facts) -> bool | None:
        """The test's value where ``facts`` hold, when they decide it."""
        values = [o.value(facts) for o in self.operands]
        if self.disjunction:
            if any(v is True for v in values):
                return True
            return False if all(v is False for v in values) else None
        if any(v is False for v in values):
            return False
        return True if all(v is True for v in values) else None

    def implied(self, label: str) -> tuple[tuple[str, bool], ...]:
        """The operand values that surely hold on the edge labelled ``label``."""
        # ``a and b`` true: both hold; ``a or b`` false: both fail. A single operand is
        # decided on both edges.
        if len(self.operands) > 1 and (label == TRUE) == self.disjunction:
            return ()
        holds = label == TRUE
        return tuple((o.text, holds != o.negated) for o in self.operands if o.text)

    def state_only(self, facts: Facts) -> bool:
        """Every operand ``facts`` leave open reads only state (no parameter)."""
        return all(not o.param for o in self.operands if o.value(facts) is None)


def _text(expr: cst.BaseExpression) -> str:
    """The operand as text when a caller can decide it: a name or attribute chain
    (``self.capturing``), or a call of one without arguments (``self.is_capturing()``);
    ``""`` for anything else (never decided: code generation per test would cost the
    first pass more than the rare decision it could bring)."""
    if isinstance(expr, cst.Call) and not expr.args:
        name = dotted_name(expr.func)
        return f"{name}()" if name else ""
    return dotted_name(expr) or ""


def _reads_param(expr: cst.CSTNode, params: frozenset[str]) -> bool:
    """Whether ``expr`` reads one of ``params`` (a name, not an attribute's name)."""
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            if node.value in params:
                return True
            continue
        if isinstance(node, cst.Attribute):
            stack.append(node.value)
            continue
        if isinstance(node, cst.Lambda):
            continue
        stack.extend(children(node))
    return False


def _operand(expr: cst.BaseExpression, params: frozenset[str]) -> Operand:
    negated = False
    while isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        negated = not negated
        expr = expr.expression
    return Operand(_text(expr), negated, _reads_param(expr, params))


def _split(expr: cst.BaseExpression, operator: type) -> list[cst.BaseExpression]:
    if (
        isinstance(expr, cst.BooleanOperation)
        and isinstance(expr.operator, operator)
        and not expr.lpar
    ):
        return [*_split(expr.left, operator), *_split(expr.right, operator)]
    return [expr]


def condition_of(
    node: int,
    test: cst.BaseExpression,
    labels: Mapping[int, str],
    params: Sequence[str],
) -> Condition:
    """The :class:`Condition` of the test ``test`` at CFG node ``node``."""
    own = frozenset(p for p in params if p not in ("self", "cls"))
    disjunction = isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or)
    parts = _split(test, cst.Or if disjunction else cst.And)
    return Condition(
        node,
        tuple(sorted(labels.items())),
        disjunction,
        tuple(_operand(p, own) for p in parts),
    )


def _kills(text: str, bound: str) -> bool:
    """Rebinding ``bound`` changes what ``text`` reads."""
    return text == bound or (text.startswith(bound) and text[len(bound)] in ".[(")


def transfer(events: Sequence[Event], facts: dict[str, bool]) -> dict[str, bool]:
    """``facts`` after a node's assignments: ``r.a = True`` decides ``r.a``; any other
    rebinding of ``r.a`` forgets what was known of it."""
    out = facts
    for event in events:
        if event.kind != WRITE or not event.rebinding or not event.receiver:
            continue
        bound = f"{event.receiver}.{event.name}"
        stale = [text for text in out if _kills(text, bound)]
        truth = BOUND_TRUTH.get(event.value)
        if not stale and truth is None:
            continue
        if out is facts:
            out = dict(facts)
        for text in stale:
            del out[text]
        if truth is not None and not event.conditional:
            out[bound] = truth
    return out


def path_facts(
    succs: Sequence[Sequence[int]],
    events: Sequence[Sequence[Event]],
    conditions: Sequence[Condition],
    entry: Facts,
    entry_node: int = 0,
) -> list[dict[str, bool] | None]:
    """Per node, the operand values that hold whenever it is reached (``None``: never
    reached). A forward *must* analysis: facts at a join are those every way in agrees on."""
    n = len(succs)
    by_node = {c.node: c for c in conditions}
    state: list[dict[str, bool] | None] = [None] * n
    state[entry_node] = dict(entry)
    work = [entry_node]
    while work:
        node = work.pop()
        current = state[node]
        assert current is not None
        out = transfer(events[node], current)
        condition = by_node.get(node)
        labels = dict(condition.labels) if condition is not None else {}
        for succ in succs[node]:
            edge = out
            label = labels.get(succ)
            if condition is not None and label is not None:
                implied = condition.implied(label)
                if implied:
                    edge = {**out, **dict(implied)}
            known = state[succ]
            if known is None:
                merged = dict(edge)
            else:
                merged = {k: v for k, v in known.items() if edge.get(k) == v}
                if len(merged) == len(known):
                    continue
            state[succ] = merged
            work.append(succ)
    return state


def carry_facts(
    event: Event,
    facts: Facts,
    params: Sequence[str],
    method: bool,
) -> frozenset[tuple[str, bool]]:
    """What the caller's ``facts`` at call ``event`` decide about the callee's operands,
    in the callee's terms: ``<receiver>.x`` becomes ``self.x``; a literal ``True``,
    ``False`` or ``None`` argument decides the parameter it binds."""
    if event.kind != CALL:
        return frozenset()
    out: dict[str, bool] = {}
    receiver = event.receiver
    if method and receiver and receiver != "?":
        prefix = "self" if receiver == "super()" else receiver
        for text, value in facts.items():
            if _kills(text, prefix) and text != prefix:
                out["self" + text[len(prefix) :]] = value
    positional = [p for p in params if p not in ("self", "cls")] if method else list(params)
    for key, literal in event.literals:
        truth = LITERAL_TRUTH.get(literal)
        if truth is None:
            continue
        if key.isdigit():
            index = int(key)
            if index < len(positional):
                out[positional[index]] = truth
        elif key in params:
            out[key] = truth
    return frozenset(out.items())
