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
from swacheck.analysis.walk import walk
from swacheck.analysis.writes import WRITE, is_inplace_method

if TYPE_CHECKING:
    from swacheck.analysis.order import FunctionFlow
    from swacheck.context import FileContext

# The batch's own location tensor (what ``set_kv_buffer`` translates); translating it
# (or a slice of it) is the cache's normal use.
BATCH_LOCATION_NAMES = frozenset({"out_cache_loc"})


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
        if isinstance(base, cst.Call):
            return code if len(code) <= 40 else code[:37] + "..."
        return None

    @cached_property
    def names(self) -> set[str]:
        """Names holding a tensor computed in this function.

        A local bound (on every binding) to a computation, or any name written in place
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
            is_computation = isinstance(base, cst.Call | cst.BinaryOperation)
            if isinstance(base, cst.Name | cst.Attribute):
                is_computation = False
            computed[target.value] = computed.get(target.value, True) and is_computation

        walk(flow.function, Visitor())
        fresh = {n for n, ok in computed.items() if ok and n not in params}
        return (fresh | written) - BATCH_LOCATION_NAMES
