"""Which side of the full->SWA translation a value comes from (I9).

*Full side*: the batch's full-pool write locations (``out_cache_loc``), ``req_to_token``
pages and the page table built from them, names with ``full`` and a location word
(:func:`swacheck.analysis.roles.is_full_side_name`), followed through views, slices,
dtype-keeping copies and casts, arithmetic with a scalar, conditionals whose every
branch is full side, and the bindings of a local. *SWA side*: an expression that
translates (a ``translate-methods`` call or any call whose name has ``translate``, a
gather through the full->SWA table, a call handed the table or a translator; the table
is a mapping attribute or a name that says so, ``full_to_swa``, ``swa_mapping``),
an SWA allocator's result, or any value named for an SWA role. Everything else is
unknown and never reported.
"""

from __future__ import annotations

import libcst as cst

from swacheck.analysis.aliases import VIEW_METHODS, strip_views
from swacheck.analysis.dtypes import CAST_METHODS, assignments
from swacheck.analysis.escapes import DTYPE_PRESERVING
from swacheck.analysis.names import Names, call_name, dotted_name, target_name
from swacheck.analysis.roles import is_full_side_name, is_translation_table, role_of
from swacheck.analysis.walk import walk
from swacheck.context import FileContext

_CARRIES = VIEW_METHODS | DTYPE_PRESERVING | set(CAST_METHODS) | {"to", "type"}
_SCALAR_OPS = (cst.FloorDivide, cst.Add, cst.Subtract, cst.Multiply, cst.Modulo)


def _last_name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def full_side(
    expr: cst.BaseExpression, scope: cst.FunctionDef | None, depth: int = 0
) -> str | None:
    """How ``expr`` is a full-pool value (```out_cache_loc```, ```req_to_token``
    pages``), or ``None`` when it is not known to be one."""
    if depth > 5:
        return None
    if isinstance(expr, cst.Name):
        bound = assignments(scope, expr.value) if scope is not None else []
        if bound:
            sides = [full_side(value, scope, depth + 1) for value, _ in bound]
            return sides[0] if all(sides) else None
        return f"`{expr.value}`" if is_full_side_name(expr.value) else None
    if isinstance(expr, cst.Attribute):
        if is_full_side_name(expr.attr.value):
            return f"`{dotted_name(expr) or expr.attr.value}`"
        return None
    if isinstance(expr, cst.Subscript):
        base = full_side(expr.value, scope, depth + 1)
        if base is None:
            return None
        return f"{base} pages" if "req_to_token" in base and "pages" not in base else base
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _CARRIES:
            return full_side(func.value, scope, depth + 1)
        return None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _SCALAR_OPS):
        return full_side(expr.left, scope, depth + 1)
    if isinstance(expr, cst.IfExp):
        body = full_side(expr.body, scope, depth + 1)
        orelse = full_side(expr.orelse, scope, depth + 1)
        if body and (orelse or _is_none(expr.orelse)):
            return body
        if orelse and _is_none(expr.body):
            return orelse
        return None
    return None


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def is_swa_side(
    expr: cst.BaseExpression, names: Names, scope: cst.FunctionDef | None = None
) -> bool:
    """Whether ``expr`` holds a translation or an SWA-side value anywhere in it."""
    found = False

    class Visitor(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            if found:
                return False
            if (isinstance(node, cst.Call) and translates(node, names, scope)) or (
                isinstance(node, cst.Subscript)
                and is_translation_table(_last_name(node.value) or "", names)
            ):
                found = True
            elif isinstance(node, cst.Name | cst.Attribute):
                name = _last_name(node) or ""
                if is_translation_table(name, names) or role_of(name, names) is not None:
                    found = True
            return not found

    walk(expr, Visitor())
    return found


def translates(call: cst.Call, names: Names, scope: cst.FunctionDef | None = None) -> bool:
    """A call that translates: a translate method, a translator's, one handed a mapping
    (directly, as a view or cast of it, or through a local bound to one)."""
    name = call_name(call) or ""
    receiver = dotted_name(call.func.value) if isinstance(call.func, cst.Attribute) else ""
    if names.is_translate(name) or "translate" in name.lower():
        return True
    if receiver and ("translator" in receiver.lower() or "swa" in receiver.lower().split(".")[-1]):
        return True  # kv_index_translator.write_ids(...), self.swa_allocator.alloc(...)
    return any(
        is_mapping_value(arg.value, names, scope)
        or (arg.keyword is not None and "mapping" in arg.keyword.value)
        for arg in call.args
    )


def is_mapping_value(
    expr: cst.BaseExpression, names: Names, scope: cst.FunctionDef | None, depth: int = 0
) -> bool:
    """The mapping table, a view, slice or cast of it (``mapping.long()``), or a local
    bound to one (``token_mapping = pool.full_to_swa_index_mapping if swa else None``)."""
    if depth > 4:
        return False
    if isinstance(expr, cst.IfExp):
        return is_mapping_value(expr.body, names, scope, depth + 1) or is_mapping_value(
            expr.orelse, names, scope, depth + 1
        )
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _CARRIES
        ):
            expr = expr.func.value
        else:
            break
    if is_translation_table(_last_name(expr) or "", names):
        return True
    if isinstance(expr, cst.Name) and scope is not None:
        return any(
            is_mapping_value(value, names, scope, depth + 1)
            for value, _ in assignments(scope, expr.value)
        )
    return False


def swa_bound_slots(context: FileContext) -> frozenset[str]:
    """The names of SWA roles the file binds or fills from the SWA side: assigned,
    passed, keyed or copied from a translation or an SWA-side value, or handed to a
    call that translates (``translator.pack(..., out=window_kv_indices)``)."""
    names = context.names
    found: set[str] = set()

    def enclosing(node: cst.CSTNode) -> cst.FunctionDef | None:
        return context.enclosing(node, cst.FunctionDef)

    def note(target: cst.BaseExpression, value: cst.BaseExpression, node: cst.CSTNode) -> None:
        base, _ = strip_views(target)
        name = target_name(base)
        if name and role_of(name, names) and is_swa_side(value, names, enclosing(node)):
            found.add(name)

    class Visitor(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                note(target.target, node.value, node)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if node.value is not None:
                note(node.target, node.value, node)

        def visit_DictElement(self, node: cst.DictElement) -> None:
            if isinstance(node.key, cst.SimpleString):
                key = node.key.evaluated_value
                if (
                    isinstance(key, str)
                    and role_of(key, names)
                    and is_swa_side(node.value, names, enclosing(node))
                ):
                    found.add(key)

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if call_name(node) == "copy_" and isinstance(func, cst.Attribute) and node.args:
                note(func.value, node.args[0].value, node)
            for arg in node.args:
                keyword = arg.keyword.value if arg.keyword is not None else None
                if (
                    keyword
                    and role_of(keyword, names)
                    and is_swa_side(arg.value, names, enclosing(node))
                ):
                    found.add(keyword)
            if translates(node, names, enclosing(node)):
                for arg in node.args:
                    base, _ = strip_views(arg.value)
                    name = target_name(base)
                    if name and role_of(name, names):
                        found.add(name)

    walk(context.module, Visitor())
    return frozenset(found)


def mentions(expr: cst.CSTNode, text: str) -> bool:
    """Whether the code of ``expr`` names ``text`` (a target such as
    ``metadata.swa_page_table``) as a whole name."""
    found = False

    class Visitor(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            if found:
                return False
            if isinstance(node, cst.Name | cst.Attribute) and dotted_name(node) == text:
                found = True
            return not found

    walk(expr, Visitor())
    return found
