"""Which integer dtype an expression denotes: literals, conditionals, variables, defaults.

Deliberately small: a dtype is followed through a local or module-level variable and a
parameter's default value, not through calls or attributes. What cannot be resolved is
unknown and never reported.
"""

from __future__ import annotations

import libcst as cst

from swacheck.analysis.names import dotted_name
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


class DtypeResolver:
    def __init__(self, context: FileContext) -> None:
        self.context = context

    def dtypes_of(self, node: cst.BaseExpression, depth: int = 0) -> set[str]:
        """The integer dtypes ``node`` may denote (empty when unknown or not integer)."""
        literal = dtype_literal(node)
        if literal is not None:
            return {_DTYPE_NAMES[literal.rsplit(".", 1)[1]]}
        if isinstance(node, cst.IfExp):
            return self.dtypes_of(node.body, depth) | self.dtypes_of(node.orelse, depth)
        if isinstance(node, cst.Name) and depth < 4:
            found: set[str] = set()
            for value, _ in self._bindings(node):
                found |= self.dtypes_of(value, depth + 1)
            return found
        return set()

    def origin_of(self, node: cst.BaseExpression) -> str:
        if isinstance(node, cst.Name):
            origins = [where for _, where in self._bindings(node)]
            if origins:
                return origins[0]
        return "an expression"

    def _bindings(self, name: cst.Name) -> list[tuple[cst.BaseExpression, str]]:
        """Values bound to ``name`` in the enclosing function (params, assignments) or module."""
        ctx = self.context
        found: list[tuple[cst.BaseExpression, str]] = []
        func = ctx.enclosing(name, cst.FunctionDef)
        scopes: list[cst.CSTNode] = [func] if func is not None else []
        scopes.append(ctx.module)
        for scope in scopes:
            if isinstance(scope, cst.FunctionDef):
                params = [*scope.params.params, *scope.params.kwonly_params]
                for param in params:
                    if param.name.value == name.value and param.default is not None:
                        found.append(
                            (
                                param.default,
                                f"the default of parameter `{name.value}` of {scope.name.value}()",
                            )
                        )
            for value, row in _assignments(scope, name.value, ctx):
                found.append((value, f"`{name.value}` assigned on line {row}"))
            if found:
                break
        return found


def _assignments(
    scope: cst.Module | cst.FunctionDef, name: str, ctx: FileContext
) -> list[tuple[cst.BaseExpression, int]]:
    """Direct ``name = value`` assignments in ``scope`` (not in nested functions or classes)."""
    found: list[tuple[cst.BaseExpression, int]] = []

    class Visitor(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name:
                    found.append((node.value, ctx.start(node).row))

    walk(scope, Visitor())
    return found
