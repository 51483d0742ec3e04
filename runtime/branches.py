"""Whether a line of a function can run in this process, as far as its module-level flags
decide: what narrows the lines an uninvalidated mapping write is reported at (I1) to the
branch that ran.

I1 is found after the fact: at the end of a watched call the mapping has moved under a
live cached translation. The lines that can write it are read off the bytecode of the
method and the methods of its object it calls (``bytecode.SelfAccess.any_writes``), and
engines keep platform alternatives side by side::

    if _is_npu:
        self.full_to_swa_index_mapping[full.to(torch.int64)] = swa.to(torch.int64)
    else:
        self.full_to_swa_index_mapping[full] = swa

so the first candidate is the NPU line, which never runs on a CUDA machine. Watching
which line runs costs on the hot path: line tracing (``sys.settrace``) of every
allocator call made while an entry is live measured some seven times the call on
Python 3.11, and per-code-object line events (``sys.monitoring``) need 3.12. So the
candidates are narrowed at report time only, from the source: a line inside a branch of
an ``if`` whose test picks the other branch, or after an ``if`` whose taken branch always
leaves (``return``, ``raise``), cannot have run. A test is evaluated only when it reads
nothing but constants, module globals (and attributes of modules), closure cells and
builtins, combined with ``not``/``and``/``or`` and comparisons of plain values, in
three-valued logic: anything else (a local, an attribute of ``self``, a call) is
unknown and keeps both branches. Such flags are set at import, so what they rule out
now they ruled out during the call; a data-dependent alternative stays a candidate and
the report says it names one of several lines. Nothing is evaluated that could run
engine code (no calls, no attribute access on anything but a module's own dictionary).
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import linecache
import operator
import types
from collections.abc import Callable, Iterator
from typing import Any

_UNKNOWN = object()
# Values whose truth and comparisons run no engine code.
_PLAIN = (bool, int, float, str, bytes, type(None))
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: operator.contains(b, a),
    ast.NotIn: lambda a, b: not operator.contains(b, a),
}
# Statements after which the rest of their block never runs.
_LEAVES = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def may_run(fn: Callable[..., Any], line: int) -> bool:
    """``False`` only when ``fn``'s module flags prove that ``line`` of it never runs in
    this process; ``True`` when it may (or the source cannot be read)."""
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(fn, "__code__", None)
    if code is None:
        return True
    node = _function_node(code.co_filename, code.co_firstlineno, code.co_name)
    if node is None:
        return True
    return _reachable(node.body, line, _Scope(fn, code)) is not False


class _Scope:
    """What a name in ``fn`` reads, when it is not a local: a closure cell, a module
    global, a builtin."""

    def __init__(self, fn: Any, code: types.CodeType) -> None:
        self.locals = frozenset(code.co_varnames) | frozenset(code.co_cellvars)
        cells = getattr(fn, "__closure__", None) or ()
        self.cells = dict(zip(code.co_freevars, cells, strict=False))
        self.globals: dict[str, Any] = getattr(fn, "__globals__", {})

    def lookup(self, name: str) -> Any:
        if name in self.locals:
            return _UNKNOWN
        if name in self.cells:
            try:
                return self.cells[name].cell_contents
            except ValueError:  # an empty cell
                return _UNKNOWN
        if name in self.globals:
            return self.globals[name]
        return getattr(builtins, name, _UNKNOWN)


@functools.lru_cache(maxsize=64)
def _module_tree(filename: str, text: str) -> ast.Module | None:
    try:
        return ast.parse(text, filename)
    except (SyntaxError, ValueError):
        return None


def _function_node(
    filename: str, first_line: int, name: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The definition whose code starts at ``first_line`` (its first decorator's line, as
    the code object counts it); ``None`` when the source is missing or differs."""
    text = "".join(linecache.getlines(filename))
    tree = _module_tree(filename, text) if text else None
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if start == first_line:
                return node
    return None


def _reachable(block: list[ast.stmt], line: int, scope: _Scope) -> bool | None:
    """Whether ``line`` can run, if it lies in ``block``: ``False`` when a flag rules it
    out, ``True`` when nothing does, ``None`` when the block does not hold it."""
    for stmt in block:
        end = stmt.end_lineno or stmt.lineno
        if stmt.lineno <= line <= end:
            if isinstance(stmt, ast.If) and line >= stmt.body[0].lineno:
                test = _truth(stmt.test, scope)
                if _holds(stmt.body, line):
                    return False if test is False else _reachable(stmt.body, line, scope)
                return False if test is True else _reachable(stmt.orelse, line, scope)
            for inner in _blocks(stmt):
                found = _reachable(inner, line, scope)
                if found is not None:
                    return found
            return True
        if isinstance(stmt, ast.If) and _always_leaves(stmt, scope):
            return False  # the rest of the block, the line's statement included
    return None


def _holds(block: list[ast.stmt], line: int) -> bool:
    return bool(block) and block[0].lineno <= line <= (block[-1].end_lineno or block[-1].lineno)


def _blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement blocks of a compound statement (loops, ``with``, ``try``, ``match``)."""
    for name in ("body", "orelse", "finalbody"):
        value = getattr(stmt, name, None)
        if isinstance(value, list):
            yield value
    for part in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
        yield part.body


def _always_leaves(stmt: ast.If, scope: _Scope) -> bool:
    """An ``if`` whose test is known and whose taken branch ends by leaving the block."""
    test = _truth(stmt.test, scope)
    taken = stmt.body if test is True else stmt.orelse if test is False else None
    return bool(taken) and isinstance(taken[-1], _LEAVES)  # type: ignore[index]


def _truth(expr: ast.expr, scope: _Scope) -> bool | None:
    """Three-valued truth of a test: ``None`` when it reads anything but flags."""
    if isinstance(expr, ast.BoolOp):
        parts = [_truth(value, scope) for value in expr.values]
        decisive = isinstance(expr.op, ast.Or)  # ``or``: one True decides; ``and``: one False
        if decisive in parts:
            return decisive
        return None if None in parts else not decisive
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = _truth(expr.operand, scope)
        return None if inner is None else not inner
    value = _value(expr, scope)
    return bool(value) if _plain(value) else None


def _value(expr: ast.expr, scope: _Scope) -> Any:
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Name):
        return scope.lookup(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _value(expr.value, scope)
        if isinstance(base, types.ModuleType):  # the module's own dictionary, no __getattr__
            return vars(base).get(expr.attr, _UNKNOWN)
        return _UNKNOWN
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        items = [_value(item, scope) for item in expr.elts]
        return tuple(items) if all(_plain(item) for item in items) else _UNKNOWN
    if isinstance(expr, ast.Compare):
        left = _value(expr.left, scope)
        for op, right_expr in zip(expr.ops, expr.comparators, strict=True):
            right = _value(right_expr, scope)
            compare = _COMPARE.get(type(op))
            if compare is None or not (_plain(left) and _plain(right)):
                return _UNKNOWN
            if not compare(left, right):
                return False
            left = right
        return True
    if isinstance(expr, ast.BoolOp) or (
        isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not)
    ):
        truth = _truth(expr, scope)
        return _UNKNOWN if truth is None else truth
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        operand = _value(expr.operand, scope)
        return -operand if isinstance(operand, (int, float)) else _UNKNOWN
    return _UNKNOWN


def _plain(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_plain(item) for item in value)
    return value is not _UNKNOWN and isinstance(value, _PLAIN)
