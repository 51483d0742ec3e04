"""Which integer dtype an expression denotes, and where a tensor's integer dtype is decided.

Two questions, each deliberately small:

* :class:`DtypeResolver`: the dtype a *dtype expression* denotes: a literal
  (``torch.int64``, ``torch.long``, ``torch.cuda.LongTensor``), a conditional, a local or
  module-level variable, a parameter's default value.
* :class:`ValueDtypes`: where a *tensor value's* integer dtype is decided, as
  :class:`Source` records: an allocation with a dtype (or int64 by default, such as
  ``torch.arange(n)``), a cast (``.long()``, ``.to(torch.int32)``), a gather from the
  mapping table, a translation (a ``translate-methods`` call), a helper's result (a
  function or method of the project, ``_alloc_buffer(n)``, ``self._alloc(n)``). Followed
  through views, dtype-keeping methods, arithmetic with a scalar, conditionals and the
  bindings of a local. A parameter, an attribute and any other call are unknown, and
  what is unknown is never reported.

Gathers, translations and helpers are *symbolic*: the table's dtype, what the project's
translate returns and what a helper returns are project facts
(:mod:`swacheck.analysis.conventions`), resolved when a rule checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import libcst as cst

from swacheck.analysis.aliases import VIEW_METHODS
from swacheck.analysis.escapes import DTYPE_PRESERVING
from swacheck.analysis.names import Names, dotted_name
from swacheck.analysis.walk import walk
from swacheck.context import FileContext

_DTYPE_NAMES = {
    "int64": "int64",
    "long": "int64",
    "LongTensor": "int64",
    "int32": "int32",
    "int": "int32",
    "IntTensor": "int32",
}

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
# ``torch.zeros_like(x)`` without a dtype has ``x``'s.
_LIKE = frozenset({"zeros_like", "ones_like", "empty_like", "full_like"})
CAST_METHODS = {"long": "int64", "int": "int32"}
# ``x.new_zeros(n)`` has ``x``'s dtype unless given one.
_NEW_TENSOR = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})
# ``torch.cat([a, b])``: the common dtype of its parts.
_JOINS = frozenset({"cat", "concat", "concatenate", "stack"})
# Methods whose result has their receiver's dtype.
_KEEPS_DTYPE = VIEW_METHODS | DTYPE_PRESERVING | {"clamp", "clamp_min", "clamp_max", "masked_fill"}
# Arithmetic with a Python scalar keeps an integer tensor's dtype.
_SCALAR_OPS = (cst.FloorDivide, cst.Add, cst.Subtract, cst.Multiply, cst.Modulo)

# Kinds of :class:`Source`.
ALLOCATION = "allocation"  # torch.zeros(..., dtype=torch.int64), or a dtype variable's
DEFAULT = "default"  # torch.arange(n): int64 when no dtype is given
CAST = "cast"  # .long(), .int(), .to(torch.int64), .type(torch.IntTensor)
GATHER = "gather"  # mapping[idx]: the table's dtype
TRANSLATION = "translation"  # pool.translate_loc_from_full_to_swa(loc)
HELPER = "helper"  # alloc_buffer(n), self._alloc(n): what the helper returns
SYMBOLIC = frozenset({GATHER, TRANSLATION, HELPER})


def dtype_literal(node: cst.BaseExpression) -> str | None:
    """``torch.int64``, ``torch.long``, ``torch.cuda.LongTensor`` (as written), else ``None``."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        name = value if isinstance(value, str) else None
    else:
        name = dotted_name(node)
    if name is None or "." not in name or not name.startswith("torch."):
        return None
    return name if name.rsplit(".", 1)[1] in _DTYPE_NAMES else None


def literal_dtype(node: cst.BaseExpression) -> str | None:
    """``int32``/``int64`` for a dtype literal, else ``None``."""
    literal = dtype_literal(node)
    return _DTYPE_NAMES[literal.rsplit(".", 1)[1]] if literal is not None else None


@dataclass(frozen=True)
class Source:
    """Where a tensor value's integer dtype is decided."""

    kind: str
    # Where to point: the dtype literal, the ``long`` of ``.long()``, the factory call,
    # the gather, the translate or helper call, the dtype variable.
    node: cst.CSTNode
    # ALLOCATION, DEFAULT, CAST: the dtype; the symbolic kinds: ``None``.
    dtype: str | None = None
    # How it reads in a message: ``torch.zeros(...)``, ``.long()``, ``_alloc()``.
    what: str = ""
    # HELPER: the callee (``name``, ``Class.name``, or ``.name`` for a method of an
    # unknown receiver); TRANSLATION: the translate method; a dtype from a parameter's
    # default: ``<param>@<position>`` of the enclosing function.
    ref: str = ""
    # HELPER: the dtype literals the call passes by keyword or position (a parametric
    # helper's ``dtype=``), as ``(name or position, dtype)``.
    passes: tuple[tuple[str, str], ...] = ()
    # ALLOCATION, CAST: the dtype is written as a literal at ``node`` (not a variable's).
    literal: bool = True


class DtypeResolver:
    def __init__(self, context: FileContext) -> None:
        self.context = context

    def dtypes_of(self, node: cst.BaseExpression, depth: int = 0) -> set[str]:
        """The integer dtypes ``node`` may denote (empty when unknown or not integer)."""
        literal = literal_dtype(node)
        if literal is not None:
            return {literal}
        if isinstance(node, cst.IfExp):
            return self.dtypes_of(node.body, depth) | self.dtypes_of(node.orelse, depth)
        if isinstance(node, cst.Name) and depth < 4:
            found: set[str] = set()
            for value, _, _ in self._bindings(node):
                found |= self.dtypes_of(value, depth + 1)
            return found
        return set()

    def origin_of(self, node: cst.BaseExpression) -> str:
        if isinstance(node, cst.Name):
            origins = [where for _, where, _ in self._bindings(node)]
            if origins:
                return origins[0]
        return "an expression"

    def parameter_of(self, node: cst.BaseExpression) -> str:
        """``<param>@<position>`` when ``node`` is a parameter of its function with a
        default dtype (the dtype a caller may pass instead), else ``""``."""
        if isinstance(node, cst.Name):
            for _, _, param in self._bindings(node):
                if param:
                    return param
        return ""

    def _bindings(self, name: cst.Name) -> list[tuple[cst.BaseExpression, str, str]]:
        """Values bound to ``name`` in the enclosing function (params, assignments) or module:
        ``(value, where, "<param>@<position>" for a parameter's default)``."""
        ctx = self.context
        found: list[tuple[cst.BaseExpression, str, str]] = []
        func = ctx.enclosing(name, cst.FunctionDef)
        scopes: list[cst.CSTNode] = [func] if func is not None else []
        scopes.append(ctx.module)
        for scope in scopes:
            if isinstance(scope, cst.FunctionDef):
                positional = [*scope.params.posonly_params, *scope.params.params]
                if positional and positional[0].name.value in ("self", "cls"):
                    positional = positional[1:]  # a caller's positions start after it
                for position, param in enumerate([*positional, *scope.params.kwonly_params]):
                    if param.name.value == name.value and param.default is not None:
                        where = f"the default of parameter `{name.value}` of {scope.name.value}()"
                        index = position if position < len(positional) else -1
                        found.append((param.default, where, f"{name.value}@{index}"))
            for value, row in assignments(scope, name.value, ctx):
                found.append((value, f"`{name.value}` assigned on line {row}", ""))
            if found:
                break
        return found


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


class ValueDtypes:
    """Where the integer dtype of tensor values of one file is decided (see the module)."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.names: Names = context.names
        self.dtypes = DtypeResolver(context)
        self._locals: dict[tuple[cst.CSTNode, str], list[cst.BaseExpression]] = {}

    def sources(self, expr: cst.BaseExpression, depth: int = 0) -> list[Source]:
        if depth > 6:
            return []
        if isinstance(expr, cst.IfExp):
            return self.sources(expr.body, depth + 1) + self.sources(expr.orelse, depth + 1)
        if isinstance(expr, cst.Lambda):
            return self.sources(expr.body, depth + 1)
        if isinstance(expr, cst.Subscript):
            base = expr.value
            if self.names.is_mapping(_last_name(base)):
                return [Source(GATHER, expr, what="a gather from the mapping table")]
            return self.sources(base, depth + 1)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _SCALAR_OPS):
            if _is_scalar(expr.right):
                return self.sources(expr.left, depth + 1)
            if _is_scalar(expr.left) and not isinstance(expr.operator, cst.FloorDivide):
                return self.sources(expr.right, depth + 1)
            return []
        if isinstance(expr, cst.Call):
            return self._call(expr, depth)
        if isinstance(expr, cst.Name):
            return [s for value in self._local_values(expr) for s in self.sources(value, depth + 1)]
        return []

    def _local_values(self, name: cst.Name) -> list[cst.BaseExpression]:
        function = self.context.enclosing(name, cst.FunctionDef)
        if function is None:
            return []
        key = (function, name.value)
        if key not in self._locals:
            self._locals[key] = [value for value, _ in assignments(function, name.value)]
        return self._locals[key]

    def _call(self, call: cst.Call, depth: int) -> list[Source]:
        func = call.func
        if isinstance(func, cst.Name):
            if func.value == "field":  # a dataclass field's default
                return [
                    s
                    for arg in call.args
                    if arg.keyword and arg.keyword.value in ("default", "default_factory")
                    for s in self.sources(arg.value, depth + 1)
                ]
            return [self._helper(call, func.value)]
        if not isinstance(func, cst.Attribute):
            return []
        method = func.attr.value
        receiver = func.value
        if isinstance(receiver, cst.Name) and receiver.value == "torch":
            if method in FACTORIES:
                return self._factory(call, method, depth)
            if (
                method in _JOINS
                and call.args
                and isinstance(call.args[0].value, cst.List | cst.Tuple)
            ):
                return [
                    s
                    for element in call.args[0].value.elements
                    for s in self.sources(element.value, depth + 1)
                ]
            return []
        if self.names.is_translate(method):
            return [Source(TRANSLATION, call, what=f"`{method}()`", ref=method)]
        if method in CAST_METHODS and not call.args:
            return [Source(CAST, func.attr, CAST_METHODS[method], f".{method}()")]
        if method in ("to", "type"):
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value != "dtype":
                    continue
                found = self._dtype_argument(arg.value, f".{method}(...)", CAST)
                if found:
                    return found
            return self.sources(receiver, depth + 1)
        if method in _NEW_TENSOR:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "dtype":
                    return self._dtype_argument(arg.value, f".{method}(...)", ALLOCATION)
            return self.sources(receiver, depth + 1)
        if method in _KEEPS_DTYPE or (method.endswith("_") and not method.startswith("_")):
            return self.sources(receiver, depth + 1)
        if isinstance(receiver, cst.Name) and receiver.value in ("self", "cls"):
            return [self._helper(call, method, method=True)]
        return []

    def _helper(self, call: cst.Call, name: str, method: bool = False) -> Source:
        ref = name
        if method:
            cls = self.context.enclosing(call, cst.ClassDef)
            ref = f"{cls.name.value}.{name}" if cls is not None else f".{name}"
        passes = []
        for position, arg in enumerate(call.args):
            dtype = literal_dtype(arg.value)
            if dtype is not None:
                key = arg.keyword.value if arg.keyword is not None else str(position)
                passes.append((key, dtype))
        return Source(HELPER, call, what=f"`{name}()`", ref=ref, passes=tuple(passes))

    def _factory(self, call: cst.Call, method: str, depth: int) -> list[Source]:
        dtype_args = [a for a in call.args if a.keyword and a.keyword.value == "dtype"]
        if dtype_args:
            return self._dtype_argument(dtype_args[0].value, f"torch.{method}(...)", ALLOCATION)
        if method in _LIKE:
            positional = [a.value for a in call.args if a.keyword is None]
            return self.sources(positional[0], depth + 1) if positional else []
        if method in INT64_BY_DEFAULT and _integer_data(call, method):
            return [Source(DEFAULT, call, "int64", f"torch.{method}(...) with no dtype")]
        return []

    def _dtype_argument(self, value: cst.BaseExpression, where: str, kind: str) -> list[Source]:
        literal = dtype_literal(value)
        if literal is not None:
            return [Source(kind, value, literal_dtype(value), f"{literal} in {where}")]
        origin = self.dtypes.origin_of(value)
        param = self.dtypes.parameter_of(value)
        what = f"{where} (dtype from {origin})"
        return [
            Source(kind, value, dtype, f"torch.{dtype} in {what}", param, literal=False)
            for dtype in sorted(self.dtypes.dtypes_of(value))
        ]


def _last_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return ""


def _is_scalar(node: cst.BaseExpression) -> bool:
    """A Python number or a name/attribute a scalar usually is (``page_size``,
    ``self.page_size``): not a subscript, call or tensor expression."""
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    return isinstance(node, cst.Integer | cst.Name | cst.Attribute)


def _integer_data(call: cst.Call, method: str) -> bool:
    """Whether an int64-by-default factory gets integer (not float) data here."""
    positional = [a.value for a in call.args if a.keyword is None]
    if method in ("randint", "randperm"):
        return True
    if method == "full":
        return len(positional) >= 2 and _is_int_literal(positional[1])
    if method == "arange":
        return bool(positional) and not any(isinstance(a, cst.Float) for a in positional)
    # tensor / as_tensor / asarray: a literal list or tuple of ints
    return bool(positional) and _is_int_sequence(positional[0])


def _is_int_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, cst.Integer)


def _is_int_sequence(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return _is_int_sequence(node.left) or _is_int_sequence(node.right)
    if isinstance(node, cst.List | cst.Tuple):
        return bool(node.elements) and all(_is_int_literal(e.value) for e in node.elements)
    return False
