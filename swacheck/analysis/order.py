"""Path queries on a function of the checked file: the order rules are written in these.

:class:`FunctionFlow` builds, for a function of the file being checked (CST nodes
attached, memoised in the :class:`~swacheck.context.FileContext`), its control-flow
graph, its events, their effects (calls resolved through the method summaries of
:mod:`swacheck.analysis.summaries`) and the :class:`~swacheck.analysis.dataflow.Dataflow`
over them, and answers "is this write followed by an invalidation on every path?", "is
the cache surely invalidated, with no fill since, when we get here?", and describes the
paths that break them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from swacheck.analysis.cfg import FALSE, TRUE
from swacheck.analysis.conditions import Facts, path_facts
from swacheck.analysis.dataflow import FILL, INV, Dataflow, Graph, constructed_before, decide
from swacheck.analysis.resolve import Target
from swacheck.analysis.skeletons import (
    CONSTRUCTORS,
    FunctionAnalysis,
    analyse_function,
    conditions_of,
    function_key,
)
from swacheck.analysis.summaries import NO_EFFECT, Summary, resolver
from swacheck.analysis.writes import CALL, WRITE, Event

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo
    from swacheck.context import FileContext


@dataclass(frozen=True)
class Step:
    """One effect of one event at a CFG node."""

    kind: str
    event: Event
    target: Target | None
    conditional: bool


class FunctionFlow:
    """A function of the file being checked: CFG, events, effects and dataflow.

    ``extra`` classifies more events for one rule (e.g. SWA004 counts a forward run as
    a fill); it returns extra effect kinds for an event, placed after its own.
    """

    def __init__(
        self,
        context: FileContext,
        function: cst.FunctionDef,
        extra: Callable[[Event], Sequence[str]] | None = None,
        entry_clean: bool = False,
    ) -> None:
        self.context = context
        self.function = function
        self.analysis: FunctionAnalysis = context.memo(
            ("swacheck.order.analysis", id(function)),
            lambda: analyse_function(function, context.positions),
        )
        self.cfg = self.analysis.cfg
        self.resolver = resolver(context)
        classdef = context.enclosing(function, cst.ClassDef)
        self.cls: ClassInfo | None = (
            self.resolver.class_of(context.path, classdef.name.value)
            if isinstance(classdef, cst.ClassDef)
            else None
        )
        # Functions defined directly in this one, callable by name here.
        self.closures: dict[str, cst.FunctionDef] = {
            node.stmt.name.value: node.stmt
            for node in self.cfg.nodes
            if isinstance(node.stmt, cst.FunctionDef)
        }
        self.conditions = context.memo(
            ("swacheck.order.conditions", id(function)), lambda: conditions_of(self.analysis)
        )
        cfg = self.cfg
        edges = [[*n.succs, *n.exc_succs] for n in cfg.nodes]
        self.facts = path_facts(edges, self.analysis.events, self.conditions, {}, cfg.entry)
        self.steps: list[list[Step]] = []
        for node, events in enumerate(self.analysis.events):
            steps: list[Step] = []
            for event in events:
                for kind, target, conditional in self._effects(event, self.facts[node]):
                    steps.append(Step(kind, event, target, conditional))
                if extra is not None:
                    for kind in extra(event):
                        steps.append(Step(kind, event, None, event.conditional))
            self.steps.append(steps)
        effects = [[(s.kind, s.conditional) for s in steps] for steps in self.steps]
        # Paths the function's own tests rule out (a second test of what an earlier one
        # decided) are dropped; every other branch is taken both ways.
        self.graph = decide(
            Graph.from_cfg(cfg, effects, context.names), self.conditions, self.facts, False
        )
        self.data = Dataflow(self.graph, entry_clean=entry_clean)

    def _effects(
        self, event: Event, facts: Facts | None
    ) -> tuple[tuple[str, Target | None, bool], ...]:
        if event.kind == "call" and event.receiver is None and event.name in self.closures:
            summary = closure_summary(self.context, self.closures[event.name])
            out: list[tuple[str, Target | None, bool]] = [
                (kind, None, event.conditional or maybe) for kind, maybe in summary.effects
            ]
            if summary.uncovered_write is not None:
                out.insert(0, (WRITE, None, event.conditional))
            return tuple(out)
        effects = self.resolver.event_effects(
            event, self.cls, self.analysis.local_types, self.context.path, facts
        )
        if effects or event.kind != CALL:
            return effects
        # A function of this file that has no skeleton (the first pass builds them only
        # where the rules need them): its summary from the tree itself.
        target = self.resolver.resolve_call(
            event, self.cls, self.analysis.local_types, self.context.path
        )
        if target is None or target.path != self.context.path:
            return effects
        if self.resolver.skeleton(target) is not None:
            return effects
        function = file_functions(self.context).get(target.key)
        if function is None:
            return effects
        summary = closure_summary(self.context, function)
        return tuple((kind, target, event.conditional or maybe) for kind, maybe in summary.effects)

    def initialises(self, node: int, step: Step) -> bool:
        """Whether ``step`` writes the mapping of an object built in this function
        (:func:`constructed_before`)."""
        event = step.event
        if event.kind != WRITE or step.target is not None:
            return False
        for index, other in enumerate(self.analysis.events[node]):
            if other is event:
                return constructed_before(
                    self.graph, self.analysis.events, node, index, event.receiver
                )
        return False

    def calls_by_name(self, name: str) -> list[Event]:
        """Plain calls ``name(...)`` made in this function."""
        return [
            event
            for events in self.analysis.events
            for event in events
            if event.kind == "call" and event.receiver is None and event.name == name
        ]

    def summary(self) -> Summary:
        """This function's own summary (as a callee), from its CST flow: its tests that
        read only state are taken the way that invalidates (see
        :mod:`swacheck.analysis.dataflow`)."""
        graph = decide(self.graph, self.conditions, self.facts, True)
        data = Dataflow(graph)
        uncovered = None
        writes = False
        for node, position, step in self.positions_of(WRITE):
            writes = True
            if uncovered is None and not data.write_covered(
                node, position, self.initialises(node, step)
            ):
                uncovered = (step.event.line, step.event.how or "call")
        return Summary(
            must_invalidate=data.entry_must_invalidate(),
            may_fill=data.may_fill(),
            leaves_clean=data.leaves_clean(),
            uncovered_write=uncovered,
            writes_mapping=writes,
            may_invalidate=data.may_invalidate(),
        )

    @property
    def name(self) -> str:
        return self.function.name.value

    def invalidation_data(self) -> Dataflow:
        """Dataflow over invalidations alone (fills ignored): "has the cache been
        invalidated on every path to here?" is its :meth:`Dataflow.clean_before`."""
        if not hasattr(self, "_inv_data"):
            effects = [[(k, c) for k, c in node if k == INV] for node in self.graph.effects]
            graph = Graph(self.graph.succs, self.graph.exc, effects)
            self._inv_data = Dataflow(graph)
        return self._inv_data

    def invalidated_before(self, node: int, position: int) -> bool:
        return self.invalidation_data().clean_before(node, position)

    def describe_entry_path(self, node: int) -> str:
        """How control reaches ``node`` from the entry with no invalidation: the branch
        taken last on the way."""
        path = self.invalidation_data().dirty_path(node)
        return self._first_branch(path, nearest_end=True).strip(" ()") if path else ""

    @property
    def is_constructor(self) -> bool:
        return self.name in CONSTRUCTORS and self.cls is not None

    def positions_of(self, kind: str) -> list[tuple[int, int, Step]]:
        """Every (node, position, step) of effect ``kind`` in reachable code."""
        reach = self.data.reach
        return [
            (node, position, step)
            for node, steps in enumerate(self.steps)
            if node in reach
            for position, step in enumerate(steps)
            if step.kind == kind
        ]

    def any_step(self, kind: str) -> bool:
        return any(step.kind == kind for steps in self.steps for step in steps)

    # -- describing paths -------------------------------------------------------------

    def line(self, node: int) -> int | None:
        stmt = self.cfg.nodes[node].stmt
        if stmt is None:
            return None
        try:
            return self.context.start(stmt).row
        except KeyError:
            return None

    def describe_exit_path(self, path: list[int]) -> str:
        """ "the early return at line 12" / "the path falling off the end of `f` ..."."""
        if len(path) < 2:
            return "a path to the end of the function"
        last = path[-2]
        branch = self._first_branch(path)
        stmt = self.cfg.nodes[last].stmt
        if isinstance(stmt, cst.Return):
            where = f"the return at line {self.line(last)}"
        elif self.cfg.nodes[last].kind == "stmt" and isinstance(stmt, cst.Raise):
            where = f"the raise at line {self.line(last)}"
        else:
            line = self.line(last)
            where = (
                f"the path leaving `{self.name}` after line {line}"
                if line
                else (f"the path leaving `{self.name}`")
            )
        return f"{where}{branch}"

    def _first_branch(self, path: list[int], nearest_end: bool = False) -> str:
        """The first branch decided along ``path`` (the last one, with ``nearest_end``)."""
        pairs = list(itertools.pairwise(path))
        for a, b in reversed(pairs) if nearest_end else pairs:
            node = self.cfg.nodes[a]
            label = node.labels.get(b)
            if label is not None and node.test is not None and len(self.graph.succs[a]) > 1:
                test = self.context.module.code_for_node(node.test).strip()
                if len(test) > 50:
                    test = test[:47] + "..."
                outcome = "true" if label == TRUE else "false"
                return f" (when `{test}` at line {self.line(a)} is {outcome})"
            if node.kind in ("for", "while") and label == FALSE:
                return f" (when the loop at line {self.line(a)} ends)"
        return ""

    def fill_before(self, node: int, position: int) -> Step | None:
        """A cache fill after the last invalidation before effect ``position`` of
        ``node``, if there is one (in the node itself, or where a path without
        invalidation into the node starts)."""
        for step in reversed(self.steps[node][:position]):
            if step.kind == INV and not step.conditional:
                return None
            if step.kind == FILL:
                return step
        path = self.data.dirty_path(node)
        if path and path[0] != self.graph.entry:
            for step in reversed(self.steps[path[0]]):
                if step.kind == FILL:
                    return step
        return None

    def path_lines(self, path: list[int]) -> list[int]:
        lines: list[int] = []
        for node in path:
            line = self.line(node)
            if line is not None and (not lines or lines[-1] != line):
                lines.append(line)
        return lines


def function_flow(context: FileContext, function: cst.FunctionDef) -> FunctionFlow:
    """The shared :class:`FunctionFlow` of ``function`` (no rule-specific effects)."""
    return context.memo(
        ("swacheck.order.flow", id(function)), lambda: FunctionFlow(context, function)
    )


def writes_delegated(context: FileContext, flow: FunctionFlow) -> bool:
    """Whether ``flow``'s own mapping writes are its callers' to cover: a nested function
    its enclosing function calls, or a private helper whose every caller is in its file
    (:meth:`~swacheck.analysis.summaries.SummaryResolver.delegates`)."""
    outer = context.enclosing(flow.function, cst.FunctionDef | cst.ClassDef)
    if isinstance(outer, cst.FunctionDef):
        return bool(function_flow(context, outer).calls_by_name(flow.name))
    if flow.cls is None and outer is not None:
        return False
    cls = flow.cls.name if flow.cls else None
    target = Target(context.path, function_key(cls, flow.name), cls, flow.name)
    return flow.resolver.delegates(target)


def file_functions(context: FileContext) -> dict[str, cst.FunctionDef]:
    """The checked file's module-level functions and methods by key (``name``,
    ``Class.name``), as the first pass keys their skeletons."""

    def compute() -> dict[str, cst.FunctionDef]:
        out: dict[str, cst.FunctionDef] = {}

        def visit(statements: Sequence[cst.CSTNode], cls: str | None) -> None:
            for stmt in statements:
                if isinstance(stmt, cst.FunctionDef):
                    out.setdefault(function_key(cls, stmt.name.value), stmt)
                elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                    visit(stmt.body.body, stmt.name.value)

        visit(context.module.body, None)
        return out

    return context.memo(("swacheck.order.functions",), compute)


def closure_summary(context: FileContext, function: cst.FunctionDef) -> Summary:
    """The summary of a nested function, for the calls its enclosing function makes."""
    active: set[int] = context.memo(("swacheck.order.active",), set)
    key = ("swacheck.order.closure", id(function))
    if key in context._memo:
        return context._memo[key]
    if id(function) in active:
        return NO_EFFECT
    active.add(id(function))
    try:
        result = function_flow(context, function).summary()
    finally:
        active.discard(id(function))
    return context.memo(key, lambda: result)


def statement_of(context: FileContext, node: cst.CSTNode) -> cst.BaseStatement | None:
    """The whole statement (line) holding ``node``."""
    for ancestor in [node, *context.ancestors(node)]:
        if isinstance(ancestor, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            return ancestor
    return None


def invalidation_receiver(
    context: FileContext, flow: FunctionFlow, write_receiver: str | None
) -> tuple[str, bool] | None:
    """Where to call the invalidation after a write: (receiver text, surely right?).

    Prefer a receiver this function already invalidates on, then one its class does,
    then ``self``/the write's receiver when its class defines the invalidation method,
    then one used anywhere in the file.
    """
    names = context.names
    res = flow.resolver
    method = context.config.invalidate_methods[0]

    def receivers(events_lists: Sequence[Sequence[Event]]) -> list[str]:
        out = []
        for events in events_lists:
            for event in events:
                if (
                    event.kind == "call"
                    and names.is_invalidate(event.name)
                    and event.receiver
                    and event.receiver != "?"
                ):
                    out.append(event.receiver)
        return out

    def known(receiver: str) -> bool:
        owner = res.receiver_class(receiver, flow.cls, flow.analysis.local_types, context.path)
        return owner is not None and res.defines(owner, method)

    own = receivers(flow.analysis.events)
    if own:
        return own[0], known(own[0])
    if write_receiver and write_receiver != "?" and known(write_receiver):
        return write_receiver, True
    if flow.cls is not None and res.defines(flow.cls, method):
        return "self", True
    if flow.cls is not None:
        facts = context.project.modules.get(context.path)
        if facts is not None:
            for skeleton in facts.functions.values():
                if skeleton.cls == flow.cls.name:
                    found = receivers(skeleton.events)
                    if found:
                        return found[0], False
    return None
