"""CUDA-graph capture and warm-up runs: where they are, what runs a forward in them.

The structure SWA004 (I5) reasons about, as path queries on a checked function
(:class:`~swacheck.analysis.order.FunctionFlow`):

* **capture regions**: the body of ``with torch.cuda.graph(...)`` (any ``*.graph(...)``
  context, or a graph-capture context such as ``BreakableCUDAGraphCapture(...)``) and
  the code between ``capture_begin()`` and ``capture_end()``;
* **warm-up loops**: loops of a function that captures or is named as a capture routine;
* **capture bodies**: local functions called there or passed to a ``*capture*`` call;
* **forward runs**: calls that run the model (:func:`is_forward_run`), directly or
  through methods of the audit that do (:class:`ForwardRuns`);
* **SWA code** (:func:`swa_related`): the enclosing class or module mentions SWA or a
  configured name.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from swacheck.analysis.dataflow import FILL
from swacheck.analysis.modes import guard_key, is_swa_word, swa_guard_polarity
from swacheck.analysis.names import call_name, dotted_name
from swacheck.analysis.order import file_functions, function_flow
from swacheck.analysis.resolve import CallResolver
from swacheck.analysis.scope import ORDER_RULES, ScopeFacts, config_terms
from swacheck.analysis.summaries import resolver
from swacheck.analysis.walk import walk
from swacheck.analysis.writes import CALL, Event

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo
    from swacheck.analysis.names import Names
    from swacheck.analysis.order import FunctionFlow, Step
    from swacheck.analysis.resolve import Target
    from swacheck.context import FileContext


def is_forward_run(event: Event) -> bool:
    """A call that runs the model: ``forward(...)``, ``self.model.forward_decode(...)``,
    ``self.eagle_worker.draft_forward(...)``."""
    words = [w for w in event.name.split("_") if w]
    return event.kind == CALL and bool(words) and "forward" in (words[0], words[-1])


def is_graph_context(item: cst.WithItem) -> bool:
    """``torch.cuda.graph(...)``, ``self.device_module.graph(...)``, and capture contexts
    such as ``BreakableCUDAGraphCapture(...)`` (a callee naming a graph capture)."""
    if not isinstance(item.item, cst.Call):
        return False
    name = (call_name(item.item) or "").lower()
    return name == "graph" or ("graph" in name and "capture" in name)


def is_capture_routine(function: cst.FunctionDef) -> bool:
    """A function named as a graph capture routine (``capture_one_batch_size``,
    ``_capture_one``): its warm-up loop runs capture bodies even where the capture itself
    is implicit (piecewise graphs are captured by the compiler backend on a later call)."""
    return "capture" in function.name.value.lower()


def is_warmup_routine(function: cst.FunctionDef) -> bool:
    """A function named as a warm-up (``warmup_compile``, ``_warmup``, ``warm_up``): the
    forwards it runs before a capture start from whatever the cache holds."""
    words = [w for w in function.name.value.lower().split("_") if w]
    return "warmup" in words or ("warm", "up") in itertools.pairwise(words)


def swa_related(context: FileContext, function: cst.FunctionDef) -> bool:
    """Whether ``function`` is SWA code: its class (or module) mentions an SWA word or a
    configured name, or the class holds an object that is SWA code
    (:func:`holds_swa_object`)."""
    outer = context.enclosing(function, cst.ClassDef)
    scope: cst.CSTNode = outer if outer is not None else context.module

    def compute() -> bool:
        text = context.text if scope is context.module else context.module.code_for_node(scope)
        if any(t in text for t in config_terms(context.config)):
            return True
        if any(is_swa_word(word) for word in re.findall(r"\w*swa\w*", text, re.I)):
            return True
        return isinstance(scope, cst.ClassDef) and holds_swa_object(context, scope)

    return context.memo(("capture.swa_related", id(scope)), compute)


def holds_swa_object(context: FileContext, classdef: cst.ClassDef) -> bool:
    """Whether the class holds, in an attribute of ``self``, an object of an SWA class of
    the audit: one that owns SWA location buffers (an input holder with
    ``out_cache_loc_swa``), or whose methods name SWA or a configured name (a model runner
    with ``is_hybrid_swa`` and the invalidation). The attribute's class is the one the
    source gives (annotation, constructor) or, where it gives none, the class of the
    audit named like the attribute (``self.model_runner``: ``ModelRunner``)."""
    res = swa_class_resolver(context)
    info = res.class_of(context.path, classdef.name.value)
    if info is None:
        return False
    for attr in sorted(held_attributes(res, info) | self_attributes_read(classdef)):
        held = res.attribute_class(info, attr) or res.resolve_class(_class_name(attr))
        if held is not None and held is not info and swa_class(res, held):
            return True
    return False


def swa_class_resolver(context: FileContext) -> CallResolver:
    """Class resolution over the files that mention SWA or a configured name: exactly the
    files SWA004's triggers parse, so the classes it sees do not depend on the prefilter."""
    project = context.project

    def compute() -> CallResolver:
        files = {
            path
            for path, facts in project.modules.items()
            for code in ORDER_RULES
            if isinstance(scope := facts.rule_facts.get(code), ScopeFacts) and scope.mentions_swa
        }
        return CallResolver(project, context.names, frozenset(files))

    return project.memo(("capture.swa_classes", context.config.fingerprint()), compute)


def self_attributes_read(classdef: cst.ClassDef) -> set[str]:
    """The attributes of ``self`` the methods of a class of the checked file name."""
    found: set[str] = set()

    class Visitor(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                found.add(node.attr.value)

    walk(classdef, Visitor())
    return found


def held_attributes(res: CallResolver, info: ClassInfo) -> set[str]:
    """The attributes of ``self`` a class (with its bases) assigns, or reads where the
    first pass built skeletons."""
    attrs: set[str] = set()
    for cls in res.mro(info):
        attrs |= cls.owned_attributes
        for method in cls.methods:
            skeleton = res.project.function(cls.path, f"{cls.name}.{method}")
            if skeleton is None:
                continue
            for events in skeleton.events:
                for event in events:
                    parts = (event.receiver or "").split(".")
                    if len(parts) > 1 and parts[0] == "self":
                        attrs.add(parts[1])
    return attrs


def swa_class(res: CallResolver, info: ClassInfo) -> bool:
    """A class of the audit that is SWA code: it (or a base) owns an SWA location buffer
    or an SWA-named attribute, or a method calls or tests something SWA-named or a
    configured name."""
    names = res.names

    def swa_named(name: str) -> bool:
        return (
            is_swa_word(name)
            or names.is_swa_loc(name)
            or names.is_invalidate(name)
            or names.is_translate(name)
            or names.is_mapping(name)
        )

    for cls in res.mro(info):
        if any(swa_named(attr) for attr in cls.owned_attributes):
            return True
        for method in cls.methods:
            skeleton = res.project.function(cls.path, f"{cls.name}.{method}")
            if skeleton is None:
                continue
            if any(swa_named(key.lstrip("!").partition(":")[2]) for _, key, _ in skeleton.guards):
                return True
            for events in skeleton.events:
                for event in events:
                    if swa_named(event.name) or any(
                        swa_named(part) for part in (event.receiver or "").split(".")
                    ):
                        return True
    return False


def _class_name(attr: str) -> str:
    """``ModelRunner`` for ``model_runner`` / ``_model_runner``."""
    return "".join(word.capitalize() for word in attr.split("_") if word)


class ForwardRuns:
    """Classifies the events of a function for SWA004: a forward run is a fill.

    A call of a method the audit knows (``self._run_forward(...)``) runs a forward when
    its body does, directly or through such calls (followed a few levels deep). Passed
    as a :class:`~swacheck.analysis.order.FunctionFlow`'s ``extra``.
    """

    def __init__(self, context: FileContext, function: cst.FunctionDef) -> None:
        self.context = context
        self.resolver = resolver(context)
        classdef = context.enclosing(function, cst.ClassDef)
        self.cls = (
            self.resolver.class_of(context.path, classdef.name.value)
            if isinstance(classdef, cst.ClassDef)
            else None
        )
        # Ids of call events found to run a forward through a helper.
        self._helpers: set[int] = set()

    def runs_forward(self, target: Target, depth: int, seen: set[Target]) -> bool:
        # A capture routine (``capture_one_batch_size``) is checked on its own: its
        # callers drive captures, they do not run a forward inside one.
        if target in seen or depth > 3 or "capture" in target.name.lower():
            return False
        seen.add(target)
        res = self.resolver
        skeleton = res.skeleton(target)
        if skeleton is not None:
            owner = res.class_of(target.path, skeleton.cls)
            types, event_lists = skeleton.types, skeleton.events
        elif target.path == self.context.path and target.key in file_functions(self.context):
            # A function of this file without a skeleton: read its events off the tree.
            analysis = function_flow(self.context, file_functions(self.context)[target.key])
            owner, types = analysis.cls, analysis.analysis.local_types
            event_lists = analysis.analysis.events
        else:
            return False
        for events in event_lists:
            for event in events:
                if is_forward_run(event):
                    return True
                if event.kind == CALL and event.receiver is not None:
                    callee = res.resolve_call(event, owner, types, target.path)
                    if callee is not None and self.runs_forward(callee, depth + 1, seen):
                        return True
        return False

    def __call__(self, event: Event) -> list[str]:
        if event.node is not None and isinstance(self.context.parent(event.node), cst.WithItem):
            return []  # ``with self.forward_context(batch):`` runs no forward
        if is_forward_run(event):
            return [FILL]
        if event.kind == CALL and event.receiver is not None:
            target = self.resolver.resolve_call(event, self.cls, {}, self.context.path)
            if target is not None and self.runs_forward(target, 0, set()):
                self._helpers.add(id(event))
                return [FILL]
        return []

    def forwards(self, flow: FunctionFlow) -> Iterator[tuple[int, int, Step]]:
        """The forward runs of ``flow`` (built with this classifier): node, position, step."""
        reach = flow.data.reach
        for cfg_node, steps in enumerate(flow.steps):
            if cfg_node not in reach:
                continue
            for position, step in enumerate(steps):
                if step.kind != FILL or step.target is not None:
                    continue
                if is_forward_run(step.event) or id(step.event) in self._helpers:
                    yield cfg_node, position, step


def nodes_inside(flow: FunctionFlow, compound: cst.CSTNode) -> set[int]:
    """The CFG nodes of the statements nested in ``compound``'s body."""
    out: set[int] = set()

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            for cfg_node in flow.cfg.nodes_of(node):
                out.add(cfg_node.id)
            return not isinstance(node, cst.FunctionDef | cst.ClassDef | cst.Lambda)

    body = getattr(compound, "body", None)
    if body is not None:
        walk(body, Collect())
    return out


def capture_regions(flow: FunctionFlow) -> set[int]:
    """CFG nodes run under a graph context or between capture_begin/capture_end."""
    cfg = flow.cfg
    region: set[int] = set()
    for cfg_node in cfg.nodes:
        stmt = cfg_node.stmt
        if (
            cfg_node.kind == "with"
            and isinstance(stmt, cst.With)
            and any(is_graph_context(item) for item in stmt.items)
        ):
            region |= nodes_inside(flow, stmt)
    for cfg_node, events in enumerate(flow.analysis.events):
        if any(e.kind == CALL and e.name == "capture_begin" for e in events):
            stack = list(cfg.nodes[cfg_node].succs)
            while stack:
                current = stack.pop()
                if current in region:
                    continue
                region.add(current)
                if any(
                    e.kind == CALL and e.name == "capture_end"
                    for e in flow.analysis.events[current]
                ):
                    continue
                stack.extend(cfg.nodes[current].succs)
    return region


def loop_nodes(flow: FunctionFlow) -> set[int]:
    """The CFG nodes inside the function's loops."""
    out: set[int] = set()
    for cfg_node in flow.cfg.nodes:
        if cfg_node.kind in ("for", "while") and cfg_node.stmt is not None:
            out |= nodes_inside(flow, cfg_node.stmt)
    return out


def closures_passed_to_capture(flow: FunctionFlow) -> set[str]:
    """Local functions handed to a ``*capture*`` call (``self._capture_graph(..., run_once)``)."""
    out: set[str] = set()
    for events in flow.analysis.events:
        for event in events:
            if event.kind != CALL or "capture" not in event.name.lower():
                continue
            for arg in event.node.args:
                if isinstance(arg.value, cst.Name) and arg.value.value in flow.closures:
                    out.add(arg.value.value)
    return out


def invalidation_snippet(context: FileContext) -> tuple[list[str], str] | None:
    """An invalidation the file already makes, for a fix to copy: its lines (with its
    ``if self.is_hybrid_swa:`` guard, if it has one) and the name its receiver starts at."""
    names = context.names
    module = context.module

    def compute() -> tuple[list[str], str] | None:
        found: list[tuple[list[str], str]] = []

        class Visitor(cst.CSTVisitor):
            def visit_If(self, node: cst.If) -> None:
                key = guard_key(node.test)
                if key is None or swa_guard_polarity(key, names) is not True:
                    return
                body = node.body
                if not isinstance(body, cst.IndentedBlock) or len(body.body) != 1:
                    return
                call = _invalidation_call(body.body[0], names)
                if call is not None:
                    test = module.code_for_node(node.test)
                    found.append(
                        ([f"if {test}:", f"    {module.code_for_node(call)}"], _root(call))
                    )

            def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
                call = _invalidation_call(node, names)
                if call is not None:
                    found.append(([module.code_for_node(call)], _root(call)))

        walk(module, Visitor())
        return found[0] if found else None

    return context.memo(("capture.invalidation_snippet",), compute)


def _invalidation_call(stmt: cst.CSTNode, names: Names) -> cst.Call | None:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        if not call.args and names.is_invalidate(call_name(call) or ""):
            return call
    return None


def _root(call: cst.Call) -> str:
    name = dotted_name(call.func) or ""
    return name.split(".", 1)[0]
