"""The events of one control-flow node: calls made and tensor attributes written.

A *write* is anything that can change an attribute's tensor (or rebinds it):

* rebinding ``r.attr = ...`` (also in tuple targets) and augmented ``r.attr += ...``;
* a subscript store ``r.attr[i] = ...`` / ``r.attr[i] += ...``;
* an in-place method: any public ``*_`` method (``fill_``, ``zero_``, ``copy_``,
  ``index_copy_``, ``index_fill_``, ``index_put_``, ``masked_fill_``, ``scatter_``,
  ``scatter_add_``, ...) called on the attribute or a view of it;
* ``torch.<name>_(r.attr, ...)`` functions (``torch.index_put_``, and those of device
  extensions such as ``torch_npu.npu_scatter_nd_update_``) on their first argument;
* an ``out=`` keyword naming the attribute;
* a Triton launch ``kernel[grid](..., r.attr, ...)``: a *possible* write (the rules
  decide, by configuration, whether it counts).

All of them also go through local aliases and views (:mod:`swacheck.analysis.aliases`).
Events come in evaluation order (a call's arguments before the call, an assignment's
value before its targets) and are marked *conditional* when they sit in code that may
not run (the right of ``and``/``or``, a branch of ``x if c else y``, a comprehension's
element); lambda bodies run later, if ever, and are skipped.

Config-free: every attribute and every call is reported; the rules pick names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import libcst as cst

from swacheck.analysis.aliases import AttrRef, attr_ref
from swacheck.analysis.names import dotted_name
from swacheck.analysis.walk import children
from swacheck.places import position

CALL = "call"
WRITE = "write"

# Values a rebinding binds (``Event.value``).
NEW = "new"
NONE = "none"
TRUE_VALUE = "true"
FALSE_VALUE = "false"

# ``*_`` methods that change no tensor data.
_NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad_"})


# PyTorch and its out-of-tree device extensions: their ``*_`` functions write their first
# argument (``torch.index_put_``, ``torch_npu.npu_scatter_nd_update_``). A local named
# like one of these would shadow the module; none of the engines does that.
_TORCH_MODULES = frozenset({"torch", "torch_npu", "torch_mlu", "torch_musa"})


def _is_torch_module(dotted: str) -> bool:
    """``torch``, ``torch.Tensor``, ``torch.ops.x``, ``torch_npu``, ..."""
    return dotted.split(".", 1)[0] in _TORCH_MODULES


def is_inplace_method(name: str) -> bool:
    return (
        len(name) > 1
        and name.endswith("_")
        and not name.startswith("_")
        and name not in _NOT_WRITES
    )


@dataclass(frozen=True)
class Event:
    kind: str  # CALL or WRITE
    # CALL: the callee's last name; WRITE: the attribute written.
    name: str
    # CALL: dotted text of the receiver (``self.pool``), ``None`` for a plain function,
    # ``"?"`` for an expression; WRITE: the attribute's receiver.
    receiver: str | None
    line: int = position(default=0)
    # WRITE: how ("subscript store", "in-place `fill_()`", ...).
    how: str = ""
    conditional: bool = False
    # WRITE through a kernel launch: may or may not write.
    possible: bool = False
    # WRITE: the local alias written through.
    via: str | None = None
    # WRITE: rebinding of the attribute itself (``r.attr = value``).
    rebinding: bool = False
    # WRITE, rebinding: what is bound: NEW (a freshly constructed ``Cls(...)``), NONE
    # (``None``), TRUE_VALUE/FALSE_VALUE (``True``/``False``), or "" (anything else).
    value: str = ""
    # CALL: the attributes passed as arguments (``receiver.attr`` text, through local
    # aliases and views), e.g. a pool handing its mapping table to another object.
    passes: tuple[str, ...] = ()
    # CALL: the arguments that are the literals ``True``, ``False`` or ``None``, as
    # (position or keyword, literal): they decide a callee's conditions on its parameters.
    literals: tuple[tuple[str, str], ...] = ()
    # The CST node (call, or written target); ``None`` once made picklable.
    node: Any = field(default=None, compare=False, repr=False)

    def bare(self) -> Event:
        """This event without its CST node (picklable)."""
        return replace(self, node=None) if self.node is not None else self


_LITERALS = {"None": NONE, "True": TRUE_VALUE, "False": FALSE_VALUE}


def _bound_value(value: cst.BaseExpression) -> str:
    """NEW for ``Cls(...)``/``mod.Cls(...)`` (a capitalised callee), NONE for ``None``,
    TRUE_VALUE/FALSE_VALUE for ``True``/``False``."""
    if isinstance(value, cst.Name) and value.value in _LITERALS:
        return _LITERALS[value.value]
    if isinstance(value, cst.Call):
        name = dotted_name(value.func)
        if name and name.rsplit(".", 1)[-1][:1].isupper():
            return NEW
    return ""


class EventCollector:
    """Walks the expressions of CFG nodes and lists their events."""

    def __init__(self, aliases: dict[str, AttrRef], positions: Any = None) -> None:
        self.aliases = aliases
        self.positions = positions
        self.events: list[Event] = []
        self._conditional = 0

    def _line(self, node: cst.CSTNode) -> int:
        if self.positions is None:
            return 0
        try:
            return self.positions[node].start.line
        except KeyError:
            return 0

    def collect(self, exprs: Sequence[cst.CSTNode]) -> list[Event]:
        self.events = []
        for expr in exprs:
            self.stmt(expr)
        return self.events

    # -- emitting ----------------------------------------------------------------

    def _write(
        self,
        ref: AttrRef | None,
        node: cst.CSTNode,
        how: str,
        possible: bool = False,
        rebinding: bool = False,
        value: str = "",
    ) -> None:
        if ref is None:
            return
        self.events.append(
            Event(
                WRITE,
                ref.attr,
                ref.receiver,
                self._line(node),
                how,
                self._conditional > 0,
                possible,
                ref.via,
                rebinding,
                value,
                node=node,
            )
        )

    def _call(self, call: cst.Call) -> None:
        func = call.func
        if isinstance(func, cst.Attribute):
            name = func.attr.value
            receiver: str | None = dotted_name(func.value) or "?"
            value = func.value
            if (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Name)
                and value.func.value == "super"
            ):
                receiver = "super()"
        elif isinstance(func, cst.Name):
            name, receiver = func.value, None
        else:
            return
        passes = tuple(
            ref.text for arg in call.args if (ref := attr_ref(arg.value, self.aliases)) is not None
        )
        literals = tuple(
            (arg.keyword.value if arg.keyword is not None else str(position), arg.value.value)
            for position, arg in enumerate(call.args)
            if isinstance(arg.value, cst.Name)
            and arg.value.value in _LITERALS
            and not arg.star
            and (arg.keyword is not None or all(a.keyword is None for a in call.args[:position]))
        )
        self.events.append(
            Event(
                CALL,
                name,
                receiver,
                self._line(call),
                conditional=self._conditional > 0,
                passes=passes,
                literals=literals,
                node=call,
            )
        )

    # -- statements (the roots a CFG node evaluates) --------------------------------

    def stmt(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            self.expr(node.value)
            for target in node.targets:
                self.store(target.target, "assignment", value=_bound_value(node.value))
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.expr(node.value)
                self.store(node.target, "assignment", value=_bound_value(node.value))
        elif isinstance(node, cst.AugAssign):
            self.load_parts(node.target)
            self.expr(node.value)
            target = node.target
            if isinstance(target, cst.Name):
                self._write(attr_ref(target, self.aliases), target, "augmented assignment")
            else:
                self.store(target, "augmented assignment", augmented=True)
        elif isinstance(node, cst.Expr):
            self.expr(node.value)
        elif isinstance(node, cst.Return):
            if node.value is not None:
                self.expr(node.value)
        elif isinstance(node, cst.Raise):
            if node.exc is not None:
                self.expr(node.exc)
            if node.cause is not None:
                self.expr(node.cause.item)
        elif isinstance(node, cst.Assert):
            self.expr(node.test)
            if node.msg is not None:
                self._conditional += 1
                self.expr(node.msg)
                self._conditional -= 1
        elif isinstance(node, cst.Del):
            self.load_parts(node.target)
        elif isinstance(node, cst.WithItem):
            self.expr(node.item)
            if node.asname is not None:
                self.store(node.asname.name, "assignment")
        elif isinstance(node, cst.BaseExpression):
            self.expr(node)
        elif isinstance(node, cst.Decorator):
            self.expr(node.decorator)
        # Import, Pass, Global, Break, ...: no events.

    def store(
        self, target: cst.BaseExpression, how: str, augmented: bool = False, value: str = ""
    ) -> None:
        if isinstance(target, cst.Attribute):
            self.expr(target.value)
            receiver = dotted_name(target.value) or "?"
            self._write(
                AttrRef(receiver, target.attr.value),
                target,
                how,
                rebinding=not augmented,
                value=value if not augmented else "",
            )
        elif isinstance(target, cst.Subscript):
            self.load_parts(target)
            kind = "augmented subscript store" if augmented else "subscript store"
            self._write(attr_ref(target.value, self.aliases), target, kind)
        elif isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self.store(element.value, how)
        elif isinstance(target, cst.StarredElement):
            self.store(target.value, how)

    def load_parts(self, target: cst.BaseExpression) -> None:
        """Evaluate what a store target reads (its receiver and index)."""
        if isinstance(target, cst.Subscript):
            self.expr(target.value)
            for element in target.slice:
                self.expr(element.slice)
        elif isinstance(target, cst.Attribute):
            self.expr(target.value)
        elif isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self.load_parts(element.value)

    # -- expressions --------------------------------------------------------------

    def expr(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Name | cst.BaseNumber | cst.SimpleString):
            return
        if isinstance(node, cst.Call):
            self.call(node)
        elif isinstance(node, cst.Attribute):
            self.expr(node.value)
        elif isinstance(node, cst.BooleanOperation):
            self.expr(node.left)
            self._conditional += 1
            self.expr(node.right)
            self._conditional -= 1
        elif isinstance(node, cst.IfExp):
            self.expr(node.test)
            self._conditional += 1
            self.expr(node.body)
            self.expr(node.orelse)
            self._conditional -= 1
        elif isinstance(node, cst.Lambda):
            return
        elif isinstance(node, cst.ListComp | cst.SetComp | cst.GeneratorExp | cst.DictComp):
            self.expr(node.for_in.iter)
            self._conditional += 1
            for child in children(node):
                if child is not node.for_in:
                    self.expr(child)
            self._comp_for(node.for_in)
            self._conditional -= 1
        elif isinstance(node, cst.CompFor):
            self._comp_for(node)
        else:
            for child in children(node):
                self.expr(child)

    def _comp_for(self, node: cst.CompFor) -> None:
        # The first iterable is evaluated by the caller; the rest is conditional.
        for cond in node.ifs:
            self.expr(cond.test)
        if node.inner_for_in is not None:
            self.expr(node.inner_for_in.iter)
            self._comp_for(node.inner_for_in)

    def call(self, call: cst.Call) -> None:
        func = call.func
        self.expr(func)
        for arg in call.args:
            self.expr(arg.value)
        if isinstance(func, cst.Subscript):
            # ``kernel[grid](...)``: a Triton launch may write any tensor argument.
            for arg in call.args:
                self._write(
                    attr_ref(arg.value, self.aliases), arg.value, "kernel launch", possible=True
                )
            return
        self._call(call)
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                values = (
                    [e.value for e in arg.value.elements]
                    if isinstance(arg.value, cst.Tuple | cst.List)
                    else [arg.value]
                )
                for value in values:
                    self._write(attr_ref(value, self.aliases), value, "`out=` argument")
        if isinstance(func, cst.Attribute) and is_inplace_method(func.attr.value):
            name = func.attr.value
            module = dotted_name(func.value)
            if module is not None and _is_torch_module(module):
                positional = [a for a in call.args if a.keyword is None]
                if positional:
                    self._write(
                        attr_ref(positional[0].value, self.aliases), call, f"`{module}.{name}()`"
                    )
            else:
                self._write(attr_ref(func.value, self.aliases), call, f"in-place `{name}()`")


def node_events(
    exprs: Sequence[cst.CSTNode], aliases: dict[str, AttrRef], positions: Any = None
) -> list[Event]:
    """The events of one CFG node's expressions, in evaluation order."""
    return EventCollector(aliases, positions).collect(exprs)
