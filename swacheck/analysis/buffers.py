"""Location buffers and the objects that own them: the facts SWA003 (I4) and SWA010 (I10)
reason about.

First pass (:class:`BufferFactsCollector`, plain picklable :class:`FileFacts`): per class,
the class of the objects its attributes hold, the attributes that may be ``None``, what
each method resets on ``self``, the buffers a captured graph reads (allocated in graph
code: :mod:`swacheck.analysis.graph_buffers`); per file, the SWA buffers it fills with
real slots (``buf[:n].copy_(src)``, ``dsts.append(buf[:n])``, ``out=buf``, a kernel
argument, ...), the attributes it compares with ``None``, the fields it binds to views of
captured buffers (``metadata.page_table = self.cuda_graph_page_table[:bs]``) and the
functions that reset a parameter. With the project index (:class:`ProjectBuffers`,
:class:`BufferOwners`): the class of the object a function names, which of its SWA
buffers something resets or fills, which may be ``None``, which a captured graph reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from swacheck.analysis.graph_buffers import (
    BufferName,
    FunctionBuffers,
    allocated_entries,
    buffer_name,
    function_buffers,
    is_allocation,
    is_destination_list,
    is_graph_name,
    is_graph_role_method,
    is_replay_name,
    is_setup_name,
    is_tail,
    is_whole,
    viewed,
)
from swacheck.analysis.names import dotted_name
from swacheck.analysis.padding import BufferWrite, block_writes, is_zero, single_assignments
from swacheck.analysis.skeletons import annotation_class, constructed_class
from swacheck.analysis.walk import walk

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo, ProjectIndex
    from swacheck.analysis.names import Names
    from swacheck.context import FileContext


# -- first-pass facts ------------------------------------------------------------------


@dataclass
class ClassFacts:
    """What SWA003 needs to know about one class beyond the project index."""

    # attribute -> class name of the object it holds (``self.buffers = DecodeInputBuffers(...)``)
    attr_types: dict[str, str] = field(default_factory=dict)
    # attributes that may hold ``None`` (``Optional`` fields, ``x if c else None``, ``= None``)
    optional: set[str] = field(default_factory=set)
    # method -> attributes it resets on ``self`` (``zero_``/``fill_``/slice store/rebinding)
    method_writes: dict[str, set[str]] = field(default_factory=dict)
    # method -> attributes (or dicts) whose whole or tail it resets to the sentinel
    method_resets: dict[str, set[str]] = field(default_factory=dict)
    # attributes a captured graph reads: tensors allocated in graph code (the attribute,
    # the allocating method or the class named for the graph), tensor fields of a class
    # that captures, replays or populates; and dicts of such tensors (their entries are)
    captured: set[str] = field(default_factory=set)
    captured_containers: set[str] = field(default_factory=set)
    # fields of other objects its graph code allocates (``slot.buffer = torch.zeros(...)``)
    allocated_fields: set[str] = field(default_factory=set)


@dataclass
class FileFacts:
    classes: dict[str, ClassFacts] = field(default_factory=dict)
    # attribute names compared with ``None`` anywhere in the file (``x.buf is not None``)
    none_checked: set[str] = field(default_factory=set)
    # SWA attribute names this file fills with real slots (``buf[:n].copy_(src)``,
    # ``dsts.append(buf[:n])``, ``buf[:n] = src``, ``out=buf``, a kernel argument, ...)
    # on an object other than ``self`` (whose class is not known here)
    filled: set[str] = field(default_factory=set)
    # (class, attribute) filled on ``self`` in a method of that class
    self_filled: set[tuple[str, str]] = field(default_factory=set)
    # (field, class, attribute): ``<obj>.<field> = self.<attribute>[...]`` (or a
    # ``<field>=`` keyword) in a method of the class: the field holds a view of the
    # attribute, captured when the attribute is (``metadata.swa_out_cache_loc``)
    view_bindings: set[tuple[str, str, str]] = field(default_factory=set)


def _is_none(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _annotation_optional(annotation: cst.BaseExpression) -> bool:
    if isinstance(annotation, cst.SimpleString):
        value = annotation.evaluated_value
        return isinstance(value, str) and ("Optional" in value or "None" in value)
    if isinstance(annotation, cst.Subscript):
        name = dotted_name(annotation.value) or ""
        return name.rsplit(".", 1)[-1] == "Optional"
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return _is_none(annotation.left) or _is_none(annotation.right)
    return False


def _may_be_none(value: cst.BaseExpression, locals_: dict[str, cst.BaseExpression]) -> bool:
    if _is_none(value):
        return True
    if isinstance(value, cst.IfExp):
        return _may_be_none(value.body, locals_) or _may_be_none(value.orelse, locals_)
    if isinstance(value, cst.Name) and value.value in locals_:
        return _may_be_none(locals_[value.value], {})
    return False


@dataclass
class _Method:
    """The method being walked: its class's facts and what is pending until it ends."""

    cls: ClassFacts
    class_name: str
    name: str
    written: set[str]
    # local name -> values assigned to it
    locals_: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    # (attribute, value) whose None-ness depends on the locals
    pending: list[tuple[str, cst.BaseExpression]] = field(default_factory=list)
    # (attribute, value) bound on ``self``, and dict entries ``self.<attr>["k"] = value``
    bound: list[tuple[str, cst.BaseExpression]] = field(default_factory=list)
    entries: list[tuple[str, cst.BaseExpression]] = field(default_factory=list)
    # (field, value) bound on another object (``slot.buffer = buffer``)
    fields: list[tuple[str, cst.BaseExpression]] = field(default_factory=list)


@dataclass
class _ClassScratch:
    """What a class's captured buffers are decided on when its body ends."""

    # attribute -> the method allocating it (a tensor, or a dict of them)
    allocated: dict[str, str] = field(default_factory=dict)
    containers: dict[str, str] = field(default_factory=dict)
    tensor_fields: set[str] = field(default_factory=set)
    # another object's field -> every method allocating it
    fields: dict[str, set[str]] = field(default_factory=dict)


class BufferFactsCollector(cst.CSTVisitor):
    """One walk of a module collecting :class:`FileFacts`."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.facts = FileFacts()
        # innermost scope last: a ClassFacts for a class body, a _Method or None for a function
        self._scopes: list[ClassFacts | _Method | None] = []
        self._class_names: list[str] = []
        self._scratch: list[_ClassScratch] = []

    # -- fills of SWA buffers (any object, any scope) ------------------------------------

    def _fill(self, expr: cst.BaseExpression) -> None:
        while isinstance(expr, cst.Subscript):
            expr = expr.value
        if not isinstance(expr, cst.Attribute) or not self.names.is_swa_loc(expr.attr.value):
            return
        method = self._method
        if _is_self_attribute(expr) and method is not None:
            self.facts.self_filled.add((method.class_name, expr.attr.value))
        else:
            self.facts.filled.add(expr.attr.value)

    def _note_fills(self, node: cst.Call) -> None:
        """Destinations only: a source (``srcs.append(forward_batch.out_cache_loc_swa)``)
        fills nothing."""
        func = node.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method.endswith("_") and not method.startswith("_"):
                # in-place on the buffer: everything but a reset to the sentinel fills it
                zero = method == "zero_" or (
                    method == "fill_" and len(node.args) == 1 and is_zero(node.args[0].value)
                )
                if not zero:
                    self._fill(func.value)
            if method in ("append", "extend", "insert") and is_destination_list(func.value):
                for arg in node.args:
                    self._fill_all(arg.value)
        positional = [a for a in node.args if a.keyword is None]
        name = (dotted_name(func) or "").lower()
        if positional and any(word in name for word in ("copy", "scatter")):
            # ``torch._foreach_copy_(dsts, srcs)``, ``copy_into(dst, src)``: the first is written
            self._fill_all(positional[0].value)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                self._fill_all(arg.value)
            elif isinstance(func, cst.Subscript) and _is_self_attribute(_strip(arg.value)):
                # a kernel launch writing into the object's own buffer
                self._fill(arg.value)

    def _fill_all(self, expr: cst.BaseExpression) -> None:
        if isinstance(expr, cst.List | cst.Tuple):
            for element in expr.elements:
                self._fill(element.value)
        else:
            self._fill(expr)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        facts = self.facts.classes.setdefault(node.name.value, ClassFacts())
        self._scopes.append(facts)
        self._class_names.append(node.name.value)
        scratch = _ClassScratch()
        self._scratch.append(scratch)
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        for stmt in body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    annotation = small.annotation.annotation
                    self._annotated(facts, small.target.value, annotation)
                    if small.value is not None and _may_be_none(small.value, {}):
                        facts.optional.add(small.target.value)
                    if "Tensor" in _CODE.code_for_node(annotation):
                        scratch.tensor_fields.add(small.target.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        facts = self._scopes.pop()
        self._class_names.pop()
        scratch = self._scratch.pop()
        assert isinstance(facts, ClassFacts)
        # Graph code: the class captures, replays or populates, or the attribute or the
        # method allocating it is named for the graph.
        graph_class = any(is_graph_role_method(m) for m in facts.method_writes)
        for found, into in (
            (scratch.allocated, facts.captured),
            (scratch.containers, facts.captured_containers),
        ):
            for attr, method in found.items():
                if graph_class or is_graph_name(attr) or is_graph_name(method):
                    into.add(attr)
        # Another object's field is a graph buffer only when graph code sets it up once,
        # before capture (a graph class's ``register_slot``, ``init_cuda_graph_state``): a
        # graph class's per-step method binding a fresh tensor to it each step makes it
        # per-step state, and so does any method of a class that is not graph code.
        for attr, methods in scratch.fields.items():
            if is_graph_name(attr) or any(
                (graph_class and is_setup_name(method)) or is_graph_name(method)
                for method in methods
            ):
                facts.allocated_fields.add(attr)
        if graph_class:
            facts.captured |= scratch.tensor_fields

    @staticmethod
    def _annotated(facts: ClassFacts, attr: str, annotation: cst.BaseExpression) -> None:
        cls_name = annotation_class(annotation)
        if cls_name and cls_name not in ("Tensor", "Optional"):
            facts.attr_types.setdefault(attr, cls_name)
        if _annotation_optional(annotation):
            facts.optional.add(attr)

    @property
    def _method(self) -> _Method | None:
        scope = self._scopes[-1] if self._scopes else None
        return scope if isinstance(scope, _Method) else None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        parent = self._scopes[-1] if self._scopes else None
        if isinstance(parent, ClassFacts):
            written = parent.method_writes.setdefault(node.name.value, set())
            self._scopes.append(_Method(parent, self._class_names[-1], node.name.value, written))
        else:
            self._scopes.append(None)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        method = self._scopes.pop()
        if not isinstance(method, _Method):
            return
        single = {k: v[0] for k, v in method.locals_.items() if len(v) == 1}
        for attr, value in method.pending:
            if _may_be_none(value, single):
                method.cls.optional.add(attr)
        if is_replay_name(method.name) or not self._scratch:
            return
        # allocations in any method but a replay path (constructors, factories,
        # ``init_cuda_graph_state``, lazy allocation helpers)
        scratch = self._scratch[-1]
        # a local that some assignment allocates (``buf = torch.zeros(n)``, then maybe
        # ``buf = share(buf)``) holds an allocation
        allocated = {
            name: value
            for name, values in method.locals_.items()
            for value in values
            if is_allocation(value, single)
        }
        for attr, value in method.bound:
            if is_allocation(value, allocated):
                scratch.allocated.setdefault(attr, method.name)
            elif allocated_entries(value):
                scratch.containers.setdefault(attr, method.name)
        for attr, value in method.entries:
            if is_allocation(value, allocated):
                scratch.containers.setdefault(attr, method.name)
        for attr, value in method.fields:
            if is_allocation(value, allocated):
                scratch.fields.setdefault(attr, set()).add(method.name)

    def _self_write(self, attr: str, value: cst.BaseExpression | None, bind: bool) -> None:
        method = self._method
        if method is None:
            return
        method.written.add(attr)
        if bind and value is not None:
            method.pending.append((attr, value))
            method.bound.append((attr, value))
            built = constructed_class(value, factories=True)
            if built:
                method.cls.attr_types.setdefault(attr, built)

    def visit_Call(self, node: cst.Call) -> None:
        self._note_fills(node)
        method = self._method
        if method is None:
            return
        func = node.func
        if isinstance(func, cst.Name) and func.value == "cls":
            # factories: ``cls(out_cache_loc_swa=x if c else None)``
            for arg in node.args:
                if arg.keyword is not None:
                    method.pending.append((arg.keyword.value, arg.value))
        elif isinstance(func, cst.Attribute) and func.attr.value in ("zero_", "fill_"):
            target = func.value
            while isinstance(target, cst.Subscript):
                target = target.value
            if _is_self_attribute(target):
                assert isinstance(target, cst.Attribute)
                self._self_write(target.attr.value, None, bind=False)
            if func.attr.value == "zero_" or (len(node.args) == 1 and is_zero(node.args[0].value)):
                self._self_reset(func.value)
        self._note_views(node)

    def _self_reset(self, target: cst.BaseExpression) -> None:
        """A reset of the whole or the tail of ``self.<attr>`` (or of an entry of it)."""
        method = self._method
        if method is None or not (is_tail(target) or is_whole(target)):
            return
        buffer = buffer_name(target, {})
        if (
            buffer is not None
            and isinstance(buffer.owner, cst.Name)
            and buffer.owner.value == "self"
        ):
            method.cls.method_resets.setdefault(method.name, set()).add(
                buffer.container or buffer.attr
            )

    def _note_views(self, node: cst.Call) -> None:
        """``Metadata(page_table=self.cuda_graph_page_table[:bs])``: a constructor's
        keyword views."""
        if constructed_class(node) is None:
            return
        for arg in node.args:
            if arg.keyword is not None:
                self._view_binding(arg.keyword.value, arg.value)

    def _view_binding(self, field_name: str, value: cst.BaseExpression) -> None:
        method = self._method
        if method is None:
            return
        source = _view_source(value)
        if source is not None:
            self.facts.view_bindings.add((field_name, method.class_name, source))

    def _store(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name) and value is not None and is_destination_list(target):
            # ``dsts = [self.out_cache_loc_swa[:n], ...]``
            self._fill_all(value)
        # ``buf[:n] = src`` / ``self.out_cache_loc_swa = forward_batch.out_cache_loc_swa``
        if (
            value is not None
            and not is_zero(value)
            and not _is_none(value)
            and (
                isinstance(target, cst.Subscript)
                or (
                    isinstance(target, cst.Attribute)
                    and isinstance(value, cst.Attribute | cst.Subscript)
                )
            )
        ):
            self._fill(target)
        method = self._method
        if method is None:
            return
        if isinstance(target, cst.Name):
            method.locals_.setdefault(target.value, []).append(value or cst.Name("None"))
        elif _is_self_attribute(target):
            assert isinstance(target, cst.Attribute)
            self._self_write(target.attr.value, value, bind=True)
        elif isinstance(target, cst.Subscript):
            base = target.value
            while isinstance(base, cst.Subscript):
                base = base.value
            if _is_self_attribute(base):
                assert isinstance(base, cst.Attribute)
                self._self_write(base.attr.value, None, bind=False)
                if value is not None and is_zero(value):
                    self._self_reset(target)
                if value is not None and target.value is base:
                    # ``self.buffers["x"] = torch.zeros(...)``: an entry of a dict
                    method.entries.append((base.attr.value, value))
        elif isinstance(target, cst.Attribute) and value is not None:
            # ``metadata.swa_out_cache_loc = self.cuda_graph_swa_out_cache_loc[:n]``
            self._view_binding(target.attr.value, value)
            method.fields.append((target.attr.value, value))
        elif isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self._store(element.value, None)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._store(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._store(node.target, node.value)
        method = self._method
        if method is None:
            return
        if _is_self_attribute(node.target):
            assert isinstance(node.target, cst.Attribute)
            self._annotated(method.cls, node.target.attr.value, node.annotation.annotation)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._store(node.target, None)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1:
            return
        comparison = node.comparisons[0]
        if (
            isinstance(comparison.operator, cst.Is | cst.IsNot)
            and _is_none(comparison.comparator)
            and isinstance(node.left, cst.Attribute)
        ):
            self.facts.none_checked.add(node.left.attr.value)


def _strip(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr


_CODE = cst.Module([])


def _view_source(value: cst.BaseExpression) -> str | None:
    """``A`` for a view of ``self.A`` or of an entry of ``self.A`` (``self.A[:n]``,
    ``self.A["k"][:bs].view(-1)``), else ``None``."""
    expr = viewed(value)
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    if _is_self_attribute(expr):
        assert isinstance(expr, cst.Attribute)
        return expr.attr.value
    return None


def _is_self_attribute(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )


# -- the project-wide view of those facts ---------------------------------------------


class ProjectBuffers:
    """The buffer facts of every audited file, looked up by (path, class name)."""

    def __init__(self, project: ProjectIndex, code: str) -> None:
        self.by_class: dict[tuple[str, str], ClassFacts] = {}
        self.none_checked: dict[str, set[str]] = {}
        self.filled: set[str] = set()
        self.self_filled: set[tuple[str, str, str]] = set()
        self.view_bindings: set[tuple[str, str, str, str]] = set()
        for path, facts in project.rule_facts(code):
            for name, cls in facts.classes.items():
                self.by_class[(path, name)] = cls
            self.none_checked[path] = facts.none_checked
            self.filled |= facts.filled
            self.self_filled |= {(path, cls, attr) for cls, attr in facts.self_filled}
            self.view_bindings |= {(path, *binding) for binding in facts.view_bindings}
        # Resolved through the whole project's classes: on the first question only (an
        # editor's audit of a file with no rebinding asks none).
        self._captured_fields: dict[tuple[str, str], set[str]] | None = None

    def of(self, info: ClassInfo) -> ClassFacts:
        return self.by_class.get((info.path, info.name), ClassFacts())

    def captured(self, project: ProjectIndex, info: ClassInfo, attr: str) -> bool:
        """Whether ``attr`` of ``info`` (or a base) is a buffer a captured graph reads."""
        return any(attr in self.of(cls).captured for cls in project.mro(info))

    def captured_container(self, project: ProjectIndex, info: ClassInfo, attr: str) -> bool:
        """Whether ``attr`` of ``info`` (or a base) is a dict of captured buffers."""
        return any(attr in self.of(cls).captured_containers for cls in project.mro(info))

    def _resolve_captured_fields(self, project: ProjectIndex) -> dict[tuple[str, str], set[str]]:
        """Per class, the fields of other objects its methods bind to a view of one of its
        captured buffers (``metadata.swa_out_cache_loc = self.cuda_graph_swa_out_cache_loc[:n]``)
        or that its graph code allocates (``slot.buffer = torch.zeros(...)``)."""
        fields: dict[tuple[str, str], set[str]] = {}
        for path, field_name, cls_name, source in self.view_bindings:
            info = project.resolve_class(cls_name, near=path)
            if info is not None and (
                self.captured(project, info, source)
                or self.captured_container(project, info, source)
            ):
                fields.setdefault((info.path, info.name), set()).add(field_name)
        for key, cls in self.by_class.items():
            if cls.allocated_fields:
                fields.setdefault(key, set()).update(cls.allocated_fields)
        return fields

    def captured_field(self, project: ProjectIndex, info: ClassInfo, field_name: str) -> bool:
        """Whether methods of ``info`` (or a base) bind ``field_name`` of some object (a
        graph's metadata) to a view of a captured buffer."""
        if self._captured_fields is None:
            self._captured_fields = self._resolve_captured_fields(project)
        fields = self._captured_fields
        return any(field_name in fields.get((cls.path, cls.name), ()) for cls in project.mro(info))


def file_buffer_facts(context: FileContext) -> FileFacts:
    """The buffer facts of the checked file: one walk, shared by the rules that read them."""

    def compute() -> FileFacts:
        collector = BufferFactsCollector(context.names)
        walk(context.module, collector)
        return collector.facts

    return context.tree_memo(("buffers.file_facts",), compute)


def project_buffers(project: ProjectIndex, code: str) -> ProjectBuffers:
    """The buffer facts that rule ``code`` collected from every file (memoised)."""
    return project.memo(("buffers", code), lambda: ProjectBuffers(project, code))


# -- queries from a checked file -------------------------------------------------------


def local_bindings(context: FileContext, func: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
    """``func``'s locals bound exactly once, with their values (memoised per file: every
    rule asking about a function's locals shares one walk of it)."""
    return context.tree_memo(("buffers.locals", func), lambda: single_assignments(func))


def buffers_of(context: FileContext, func: cst.FunctionDef) -> FunctionBuffers:
    """``func``'s fills, resets, rebindings and calls (memoised per file)."""
    return context.tree_memo(
        ("graph_buffers", func), lambda: function_buffers(func, local_bindings(context, func))
    )


class BufferOwners:
    """The buffers of the objects a checked file's code names, with the facts of every
    file of the audit."""

    def __init__(self, context: FileContext, code: str) -> None:
        self.context = context
        self.facts = project_buffers(context.project, code)

    def filled(self, info: ClassInfo, attr: str) -> bool:
        """Whether anything fills ``attr``: on another object, or on ``self`` in the class,
        a base or a subclass of ``info``."""
        facts = self.facts
        if attr in facts.filled:
            return True
        project = self.context.project
        family = {(c.path, c.name) for c in project.mro(info)}
        key = (info.path, info.name)
        for path, cls_name, filled_attr in facts.self_filled:
            if filled_attr != attr:
                continue
            if (path, cls_name) in family:
                return True
            other = project.resolve_class(cls_name, near=path)
            if other is not None and any((c.path, c.name) == key for c in project.mro(other)):
                return True
        return False

    def owner_class(
        self, owner: cst.BaseExpression, func: cst.FunctionDef | None
    ) -> ClassInfo | None:
        """The class of the object ``owner`` (``self``, ``self.buffers``, a local) names."""
        ctx = self.context
        project = ctx.project
        if isinstance(owner, cst.Name) and owner.value == "self":
            return self.self_class(owner)
        if (
            isinstance(owner, cst.Attribute)
            and isinstance(owner.value, cst.Name)
            and owner.value.value == "self"
        ):
            return self.attribute_class(self.self_class(owner), owner.attr.value)
        if isinstance(owner, cst.Name) and func is not None:
            name = owner.value
            for param in _all_params(func):
                if param.name.value == name and param.annotation is not None:
                    cls_name = annotation_class(param.annotation.annotation)
                    return project.resolve_class(cls_name, near=ctx.path) if cls_name else None
            annotated = _local_annotation(func, name)
            if annotated is not None:
                cls_name = annotation_class(annotated)
                return project.resolve_class(cls_name, near=ctx.path) if cls_name else None
            flags = local_bindings(ctx, func)
            value = flags.get(name)
            if value is None:
                return None
            if (
                isinstance(value, cst.Attribute)
                and isinstance(value.value, cst.Name)
                and value.value.value == "self"
            ):
                return self.attribute_class(self.self_class(owner), value.attr.value)
            built = constructed_class(value, factories=True)
            return project.resolve_class(built, near=ctx.path) if built else None
        return None

    def self_class(self, node: cst.CSTNode) -> ClassInfo | None:
        ctx = self.context
        cls = ctx.enclosing(node, cst.ClassDef)
        if cls is None:
            return None
        return ctx.project.resolve_class(cls.name.value, near=ctx.path)

    def attribute_class(self, info: ClassInfo | None, attr: str) -> ClassInfo | None:
        if info is None:
            return None
        facts = self.facts
        for cls in self.context.project.mro(info):
            # the index's types also follow annotated parameters (``self.buffers = buffers``)
            cls_name = facts.of(cls).attr_types.get(attr) or cls.attribute_types.get(attr)
            if cls_name:
                return self.context.project.resolve_class(cls_name, near=cls.path)
        return None

    def covered(
        self,
        code: str,
        func: cst.FunctionDef | None,
        writes: tuple[BufferWrite, ...],
        calls: tuple[cst.Call, ...],
        info: ClassInfo,
    ) -> set[str]:
        """The buffers of the object written ``code`` that the block's ``writes`` set, that
        ``func`` resets anywhere, or that a method the block calls on it resets."""
        ctx = self.context
        covered = {w.attr for w in writes if ctx.module.code_for_node(w.owner) == code}
        if func is not None:
            everywhere = ctx.memo(("swa003-func-writes", func), lambda: block_writes(func.body))
            covered |= {
                w.attr
                for w in everywhere.writes
                if (w.kind == "reset" or w.zero) and ctx.module.code_for_node(w.owner) == code
            }
        facts = self.facts
        for call in calls:
            assert isinstance(call.func, cst.Attribute)
            if ctx.module.code_for_node(call.func.value) != code:
                continue
            found = ctx.project.find_method(info, call.func.attr.value)
            if found is not None:
                cls, method = found
                covered |= facts.of(cls).method_writes.get(method.name, set())
        return covered

    def is_captured_view(
        self,
        value: cst.BaseExpression,
        func: cst.FunctionDef | None,
        local_values: Mapping[str, cst.BaseExpression],
    ) -> bool:
        """Whether ``value`` is a view of a buffer a captured graph reads (``self.buf[:n]``,
        ``self.graph_bufs["x"].view(-1)``, a local bound once to one), or ``None``: what
        a captured buffer may be bound to after capture without leaving the graph."""
        if isinstance(value, cst.Name) and value.value == "None":
            return True
        if isinstance(value, cst.IfExp):
            return self.is_captured_view(value.body, func, local_values) and (
                self.is_captured_view(value.orelse, func, local_values)
            )
        base = viewed(value)
        if isinstance(base, cst.Name) and base.value in local_values:
            return self.is_captured_view(local_values[base.value], func, {})
        buffer = buffer_name(base, local_values)
        return buffer is not None and self.holds_captured(buffer, func)

    def holds_captured(self, buffer: BufferName, func: cst.FunctionDef | None) -> bool:
        """Whether ``buffer`` is captured or a dict of captured buffers."""
        if self.is_captured(buffer, func):
            return True
        info = self.owner_class(buffer.owner, func) if buffer.container is None else None
        return info is not None and self.facts.captured_container(
            self.context.project, info, buffer.attr
        )

    def is_captured(self, buffer: BufferName, func: cst.FunctionDef | None) -> bool:
        """Whether ``buffer`` (as ``func`` names it) is one a captured graph reads: a
        captured attribute or dict entry of its owner's class, or a field bound to a view
        of one (a graph's metadata)."""
        project = self.context.project
        info = self.owner_class(buffer.owner, func)
        if buffer.container is not None:
            return info is not None and self.facts.captured_container(
                project, info, buffer.container
            )
        if info is not None and self.facts.captured(project, info, buffer.attr):
            return True
        # a field of a graph's metadata, named in a method of the class that binds it
        here = self.self_class(buffer.owner)
        return here is not None and self.facts.captured_field(project, here, buffer.attr)

    def optional(self, info: ClassInfo) -> set[str]:
        """The buffers of ``info`` that may be ``None``, and those compared with ``None``
        in the checked file."""
        optional = set(self.facts.none_checked.get(self.context.path, set()))
        for cls in self.context.project.mro(info):
            optional |= self.facts.of(cls).optional
        return optional


def _all_params(func: cst.FunctionDef) -> list[cst.Param]:
    params = func.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _local_annotation(func: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    found: list[cst.BaseExpression] = []

    class Visitor(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is func

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name:
                found.append(node.annotation.annotation)

    walk(func, Visitor())
    return found[0] if len(found) == 1 else None


def top_statement(
    ctx: FileContext, node: cst.CSTNode, block: cst.IndentedBlock
) -> cst.BaseStatement | None:
    """The statement directly in ``block`` that contains ``node``."""
    current: cst.CSTNode | None = node
    while current is not None:
        parent = ctx.parent(current)
        if parent is block:
            return current if isinstance(current, cst.BaseStatement) else None
        current = parent
    return None
