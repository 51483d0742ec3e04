"""Fresh index tensors: the ones a function computes itself (SWA007, I7).

A translation of the batch's own location tensor (``out_cache_loc``) is the cache's
normal use; a translation of a tensor the function has just computed (a gather, an
``arange``, a buffer a kernel filled) is the one that needs bracketing by invalidations.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from swacheck.analysis.aliases import strip_views
from swacheck.analysis.names import call_name
from swacheck.analysis.order import file_functions
from swacheck.analysis.skeletons import function_key, params_of
from swacheck.analysis.walk import walk
from swacheck.analysis.writes import WRITE, is_inplace_method

if TYPE_CHECKING:
    from swacheck.analysis.order import FunctionFlow
    from swacheck.context import FileContext

# The batch's own location tensor (what ``set_kv_buffer`` translates); translating it
# (or a slice of it) is the cache's normal use.
BATCH_LOCATION_NAMES = frozenset({"out_cache_loc"})


def is_gather(expr: cst.BaseExpression) -> bool:
    """An indexing that copies (``table[idx]`` with a tensor or list index), as opposed to
    a view (slices, integers) or a lookup by a string key."""
    if not isinstance(expr, cst.Subscript):
        return False
    for element in expr.slice:
        index = element.slice
        if isinstance(index, cst.Slice):
            continue
        value = index.value
        if isinstance(value, cst.UnaryOperation):
            value = value.expression
        if isinstance(value, cst.Integer | cst.Ellipsis | cst.SimpleString):
            continue
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        return True
    return False


class FreshTensors:
    """Which expressions of a checked function are tensors it computed itself."""

    def __init__(self, context: FileContext, flow: FunctionFlow) -> None:
        self.context = context
        self.flow = flow

    def describe(self, arg: cst.BaseExpression) -> str | None:
        """A short description of ``arg`` when it is a fresh tensor, else None."""
        flow = self.flow
        base, _ = strip_views(arg)
        code = self.context.module.code_for_node(base)
        if isinstance(base, cst.Attribute):
            if base.attr.value in BATCH_LOCATION_NAMES:
                return None
            written = False
            for events in flow.analysis.events:
                for event in events:
                    if event.kind == WRITE and event.name == base.attr.value:
                        written = True
            return code if written else None
        if isinstance(base, cst.Name):
            if base.value in BATCH_LOCATION_NAMES:
                return None
            return base.value if base.value in self.names else None
        if isinstance(base, cst.Call) or is_gather(base):
            return code if len(code) <= 40 else code[:37] + "..."
        return None

    @cached_property
    def names(self) -> set[str]:
        """Names holding a tensor computed in this function.

        A local bound (on every binding) to a computation (a call, an operation, a gather
        such as ``self.req_to_token[req_pool_indices, idx]``), or any name written in place
        here (``x.copy_(...)``, ``x[i] = ...``, ``kernel[grid](..., x)``, ``out=x``); a
        local bound to a slice/alias of the batch locations or of a parameter is not.
        """
        flow = self.flow
        params = set(flow.analysis.params)
        computed: dict[str, bool] = {}
        written: set[str] = set()

        class Visitor(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is flow.function

            def visit_Lambda(self, node: cst.Lambda) -> bool:
                return False

            def visit_Assign(self, node: cst.Assign) -> None:
                for target in node.targets:
                    bind(target.target, node.value)

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                if node.value is not None:
                    bind(node.target, node.value)

            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                if isinstance(func, cst.Subscript):
                    for arg in node.args:
                        mark(arg.value)
                elif isinstance(func, cst.Attribute) and is_inplace_method(func.attr.value):
                    mark(func.value)
                for arg in node.args:
                    if arg.keyword is not None and arg.keyword.value == "out":
                        mark(arg.value)

        def mark(expr: cst.BaseExpression) -> None:
            base, _ = strip_views(expr)
            if isinstance(base, cst.Name):
                written.add(base.value)

        def bind(target: cst.BaseExpression, value: cst.BaseExpression) -> None:
            if isinstance(target, cst.Subscript):
                mark(target.value)
                return
            if not isinstance(target, cst.Name):
                return
            base, _ = strip_views(value)
            is_computation = isinstance(base, cst.Call | cst.BinaryOperation) or is_gather(base)
            if isinstance(base, cst.Name | cst.Attribute):
                is_computation = False
            computed[target.value] = computed.get(target.value, True) and is_computation

        walk(flow.function, Visitor())
        fresh = {n for n, ok in computed.items() if ok and n not in params}
        return (fresh | written) - BATCH_LOCATION_NAMES


class TranslatingHelpers:
    """The functions of a checked file that translate (a view of) one of their own
    parameters, directly or through another such function of the file
    (``def _maybe_translate_swa(self, token_indices): return
    pool.translate_loc_from_full_to_swa(token_indices.reshape(-1))``): a call of one
    translates what it is handed."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._translated: dict[int, frozenset[str]] = {}

    def handed(self, call: cst.Call, callee: cst.FunctionDef) -> list[cst.BaseExpression]:
        """The arguments of ``call`` that ``callee`` translates."""
        translated = self.translated_params(callee)
        if not translated:
            return []
        params = [p.name.value for p in params_of(callee)]
        # A call through an attribute (``self.helper(x)``) binds the first parameter.
        bound = isinstance(call.func, cst.Attribute) and bool(params) and params[0] == "self"
        positional = params[1:] if bound else params
        out = []
        for i, arg in enumerate(a for a in call.args if a.keyword is None and not a.star):
            if i < len(positional) and positional[i] in translated:
                out.append(arg.value)
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in translated:
                out.append(arg.value)
        return out

    def callee(self, call: cst.Call, cls: str | None) -> cst.FunctionDef | None:
        """The function of this file ``call`` runs: ``self.name(...)`` in class ``cls``, or
        a module-level ``name(...)``."""
        func = call.func
        if isinstance(func, cst.Name):
            return file_functions(self.context).get(func.value)
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
            and cls is not None
        ):
            return file_functions(self.context).get(function_key(cls, func.attr.value))
        return None

    def translated_params(self, function: cst.FunctionDef) -> frozenset[str]:
        key = id(function)
        if key in self._translated:
            return self._translated[key]
        self._translated[key] = frozenset()  # recursion counts as nothing translated
        names = self.context.names
        params = {p.name.value for p in params_of(function)}
        classdef = self.context.enclosing(function, cst.ClassDef)
        cls = classdef.name.value if isinstance(classdef, cst.ClassDef) else None
        found: set[str] = set()

        def param(expr: cst.BaseExpression) -> str | None:
            base, _ = strip_views(expr)
            return base.value if isinstance(base, cst.Name) and base.value in params else None

        helpers = self

        class Visitor(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is function

            def visit_Lambda(self, node: cst.Lambda) -> bool:
                return False

            def visit_Call(self, node: cst.Call) -> None:
                if names.is_translate(call_name(node) or ""):
                    positional = [a.value for a in node.args if a.keyword is None]
                    name = param(positional[0]) if positional else None
                    if name is not None:
                        found.add(name)
                    return
                callee = helpers.callee(node, cls)
                if callee is not None and callee is not function:
                    for arg in helpers.handed(node, callee):
                        name = param(arg)
                        if name is not None:
                            found.add(name)

        walk(function, Visitor())
        result = frozenset(found - {"self"})
        self._translated[key] = result
        return result


def translating_helpers(context: FileContext) -> TranslatingHelpers:
    """The file's :class:`TranslatingHelpers` (memoised per file)."""
    return context.memo(("fresh.translating_helpers",), lambda: TranslatingHelpers(context))
