"""Function skeletons: a function's control flow and events as plain, picklable data.

Built in the first pass (:func:`module_skeletons`, called from
:func:`swacheck.analysis.index.index_module`), config-free: each module-level function
and each method gets a :class:`FunctionSkeleton` — its control-flow graph reduced to
successor lists, the :class:`~swacheck.analysis.writes.Event` list of every node (calls
with their receivers, attribute writes), the tests that look like mode guards, and the
parameter/local types it can read off annotations and constructor calls. Nothing here
knows which names are "the mapping" or "the invalidation"; the method summaries
(:mod:`swacheck.analysis.summaries`) read it with the configuration.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import libcst as cst

from swacheck.analysis.aliases import local_aliases
from swacheck.analysis.cfg import CFG, cfg_for
from swacheck.analysis.conditions import Condition, condition_of
from swacheck.analysis.modes import guard_key
from swacheck.analysis.names import dotted_name
from swacheck.analysis.walk import children
from swacheck.analysis.writes import Event, node_events
from swacheck.places import position

CONSTRUCTORS = frozenset({"__init__", "__post_init__", "__new__", "__setstate__"})


# -- first pass -----------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionSkeleton:
    """A function's control flow and events, without CST nodes (picklable)."""

    name: str
    cls: str | None  # the class it is a method of, or None
    line: int = position()
    params: tuple[str, ...]
    # Parameter / local name -> class name, from annotations and ``x = Cls(...)``.
    local_types: tuple[tuple[str, str], ...]
    # Body is only a docstring / ``pass`` / ``...`` / ``return`` / ``raise``.
    trivial: bool
    succs: tuple[tuple[int, ...], ...]
    exc_succs: tuple[tuple[int, ...], ...]
    events: tuple[tuple[Event, ...], ...]
    # (node, guard key, {succ: label}) for tests that look like a mode guard.
    guards: tuple[tuple[int, str, tuple[tuple[int, str], ...]], ...]
    # Tests that read ``self`` attributes: (node, {succ: label}, the attributes each
    # operand reads of the condition under which the TRUE edge is taken, as an ``or``
    # of operands, and likewise for the FALSE edge).
    self_tests: tuple[SelfTest, ...] = ()
    # Every test's operands (:mod:`swacheck.analysis.conditions`): what a caller's path
    # may decide about them.
    conditions: tuple[Condition, ...] = ()
    # Its decorators' dotted names (``functools.lru_cache``), calls stripped.
    decorators: tuple[str, ...] = ()

    @property
    def types(self) -> dict[str, str]:
        return dict(self.local_types)


# (node, {succ: label}, operands of the TRUE condition, operands of the FALSE condition)
SelfTest = tuple[
    int, tuple[tuple[int, str], ...], tuple[frozenset[str], ...], tuple[frozenset[str], ...]
]


def self_reads(expr: cst.CSTNode) -> frozenset[str]:
    """The attributes of ``self`` an expression reads (``self.cached_loc is None``)."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if (
            isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == "self"
        ):
            found.add(node.attr.value)
        stack.extend(children(node))
    return frozenset(found)


def _operands(test: cst.BaseExpression, operator: type) -> list[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, operator):
        return [*_operands(test.left, operator), *_operands(test.right, operator)]
    return [test]


def condition_reads(
    test: cst.BaseExpression,
) -> tuple[tuple[frozenset[str], ...], tuple[frozenset[str], ...]]:
    """What each operand of the condition of a test's TRUE and FALSE edges reads of
    ``self``: ``a or b`` holds when ``a`` or ``b`` does, ``not (a and b)`` when ``not a``
    or ``not b`` does."""
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        negated = not negated
        test = test.expression
    when_true = tuple(self_reads(o) for o in _operands(test, cst.Or))
    when_false = tuple(self_reads(o) for o in _operands(test, cst.And))
    return (when_false, when_true) if negated else (when_true, when_false)


def annotation_class(annotation: cst.BaseExpression | None) -> str | None:
    """The class an annotation names: ``X`` for ``X``, ``mod.X``, ``Optional[X]``,
    ``X | None`` and the same as a string (``"Optional[X]"``); ``None`` for anything
    else, including names that do not look like a class (``int``, ``torch.device``)."""
    if annotation is None:
        return None
    if isinstance(annotation, cst.SimpleString):
        value = annotation.evaluated_value
        if not isinstance(value, str):
            return None
        try:
            annotation = cst.parse_expression(value)
        except cst.ParserSyntaxError:
            return None
    if isinstance(annotation, cst.Subscript):
        name = dotted_name(annotation.value)
        if name and name.rsplit(".", 1)[-1] == "Optional" and len(annotation.slice) == 1:
            inner = annotation.slice[0].slice
            if isinstance(inner, cst.Index):
                return annotation_class(inner.value)
        return None
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = [s for s in (annotation.left, annotation.right) if not _is_none(s)]
        return annotation_class(sides[0]) if len(sides) == 1 else None
    name = dotted_name(annotation)
    if name is None:
        return None
    last = name.rsplit(".", 1)[-1]
    return last if last[:1].isupper() else None


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def constructed_class(value: cst.BaseExpression | None, factories: bool = False) -> str | None:
    """``Cls`` for ``Cls(...)``/``mod.Cls(...)`` (a capitalised callee), else None; with
    ``factories``, also ``Cls`` for a factory call ``Cls.create(...)``."""
    if not isinstance(value, cst.Call):
        return None
    name = dotted_name(value.func)
    if name is None:
        return None
    parts = name.split(".")
    for part in reversed(parts if factories else parts[-1:]):
        if part[:1].isupper():
            return part
    return None


def _is_trivial(function: cst.FunctionDef) -> bool:
    body = function.body
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for stmt in statements:
        smalls = (
            stmt.body
            if isinstance(stmt, cst.SimpleStatementLine | cst.SimpleStatementSuite)
            else None
        )
        if smalls is None:
            return False
        for small in smalls:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(
                small.value, cst.SimpleString | cst.ConcatenatedString | cst.Ellipsis
            ):
                continue
            if isinstance(small, cst.Return) and (
                small.value is None
                or (isinstance(small.value, cst.Name) and small.value.value == "None")
            ):
                continue
            if isinstance(small, cst.Raise):
                continue
            return False
    return True


def params_of(function: cst.FunctionDef) -> list[cst.Param]:
    p = function.params
    out = [*p.posonly_params, *p.params, *p.kwonly_params]
    if isinstance(p.star_arg, cst.Param):
        out.append(p.star_arg)
    if p.star_kwarg is not None:
        out.append(p.star_kwarg)
    return out


@dataclass
class FunctionAnalysis:
    """A function's CFG with its events (CST nodes attached): shared by both passes."""

    function: cst.FunctionDef
    cfg: CFG
    params: tuple[str, ...]
    events: list[list[Event]]
    local_types: dict[str, str]


# Like the CFG cache: a serial audit's second pass reuses the first pass's analyses.
_ANALYSES: OrderedDict[int, tuple[cst.CSTNode, Any, FunctionAnalysis]] = OrderedDict()
_ANALYSES_SIZE = 50_000


def forget_analyses() -> None:
    """Let go of the memoised analyses (and the trees they hold) once an audit is over."""
    _ANALYSES.clear()


def analyse_function(function: cst.FunctionDef, positions: Any) -> FunctionAnalysis:
    """CFG, aliases, events and local types of ``function`` (memoised across passes)."""
    key = id(function)
    hit = _ANALYSES.get(key)
    if hit is not None and hit[0] is function and hit[1] is positions:
        _ANALYSES.move_to_end(key)
        return hit[2]
    analysis = _analyse(function, positions)
    _ANALYSES[key] = (function, positions, analysis)
    if len(_ANALYSES) > _ANALYSES_SIZE:
        _ANALYSES.popitem(last=False)
    return analysis


def _analyse(function: cst.FunctionDef, positions: Any) -> FunctionAnalysis:
    cfg = cfg_for(function)
    params = params_of(function)
    names = tuple(p.name.value for p in params)
    statements = [n.stmt for n in cfg.nodes if n.stmt is not None]
    aliases = local_aliases(statements, names)
    events = [node_events(node.exprs, aliases, positions) for node in cfg.nodes]
    types: dict[str, str] = {}
    for param in params:
        if param.annotation is not None:
            cls = annotation_class(param.annotation.annotation)
            if cls:
                types[param.name.value] = cls
    for stmt in statements:
        if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0].target
            cls = constructed_class(stmt.value)
            if isinstance(target, cst.Name) and cls:
                types.setdefault(target.value, cls)
        elif isinstance(stmt, cst.AnnAssign) and isinstance(stmt.target, cst.Name):
            cls = annotation_class(stmt.annotation.annotation)
            if cls:
                types.setdefault(stmt.target.value, cls)
    return FunctionAnalysis(function, cfg, names, events, types)


def decorator_names(function: cst.FunctionDef) -> tuple[str, ...]:
    """Dotted names of ``function``'s decorators (``functools.lru_cache`` for
    ``@functools.lru_cache(maxsize=1)``)."""
    names = []
    for decorator in function.decorators:
        expr = decorator.decorator
        name = dotted_name(expr.func if isinstance(expr, cst.Call) else expr)
        if name:
            names.append(name)
    return tuple(names)


def conditions_of(analysis: FunctionAnalysis) -> tuple[Condition, ...]:
    """The :class:`Condition` of every test of the function."""
    return tuple(
        condition_of(node.id, node.test, node.labels, analysis.params)
        for node in analysis.cfg.nodes
        if node.test is not None and node.labels
    )


def skeleton_of(analysis: FunctionAnalysis, cls: str | None, line: int) -> FunctionSkeleton:
    cfg = analysis.cfg
    guards = []
    self_tests: list[SelfTest] = []
    for node in cfg.nodes:
        if node.test is None:
            continue
        key = guard_key(node.test)
        if key is not None:
            guards.append((node.id, key, tuple(node.labels.items())))
        if self_reads(node.test):
            self_tests.append((node.id, tuple(node.labels.items()), *condition_reads(node.test)))
    return FunctionSkeleton(
        name=analysis.function.name.value,
        cls=cls,
        line=line,
        params=analysis.params,
        local_types=tuple(sorted(analysis.local_types.items())),
        trivial=_is_trivial(analysis.function),
        succs=tuple(tuple(n.succs) for n in cfg.nodes),
        exc_succs=tuple(tuple(n.exc_succs) for n in cfg.nodes),
        events=tuple(tuple(e.bare() for e in events) for events in analysis.events),
        guards=tuple(guards),
        self_tests=tuple(self_tests),
        conditions=conditions_of(analysis),
        decorators=decorator_names(analysis.function),
    )


def function_key(cls: str | None, name: str) -> str:
    return f"{cls}.{name}" if cls else name


def module_skeletons(module: cst.Module, positions: Any) -> dict[str, FunctionSkeleton]:
    """Skeletons of the module-level functions and the methods of every class."""
    out: dict[str, FunctionSkeleton] = {}

    def visit(statements: Any, cls: str | None) -> None:
        for stmt in statements:
            if isinstance(stmt, cst.FunctionDef):
                analysis = analyse_function(stmt, positions)
                line = positions[stmt].start.line if positions is not None else 0
                out.setdefault(function_key(cls, stmt.name.value), skeleton_of(analysis, cls, line))
            elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                visit(stmt.body.body, stmt.name.value)
            elif isinstance(stmt, cst.If | cst.Try) and cls is None:
                # ``if TYPE_CHECKING:``/``try: import`` blocks at module level
                for part in (stmt.body, getattr(stmt, "orelse", None)):
                    if isinstance(part, cst.IndentedBlock):
                        visit(part.body, cls)
                    elif isinstance(part, cst.Else) and isinstance(part.body, cst.IndentedBlock):
                        visit(part.body.body, cls)

    visit(module.body, None)
    return out
