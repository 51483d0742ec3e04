"""Order queries the SWA rules share: "is this write followed by an invalidation on every
path?", "is the cache surely invalidated, with no fill since, when we get here?".

A :class:`Graph` is a function's control flow (normal and exceptional edges) with, per
node, its *effects* in evaluation order: ``inv`` (an invalidation, or a call of a
function whose summary says it invalidates), ``fill`` (a translation, or a call that may
translate), ``write`` (a mapping write, or a call of a private helper whose write its
callers must cover), each marked conditional when it may not run. Mode guards
(``if self.is_hybrid_swa:``, ``if hasattr(pool, "invalidate_loc_cache"):``) are assumed
to hold: the rules reason about the hybrid-SWA configuration, so the branch a guard
excludes is pruned.

:class:`Dataflow` answers the queries with three classic analyses, each solved once per
graph by round-robin iteration:

* backward *must*: every normal path from here to the function's exit passes an
  unconditional invalidation (paths ending in ``raise`` do not count: an exception
  abandons the operation);
* forward *must*: on every path from the entry (through exceptional edges too) the last
  invalidation/fill event was an invalidation ("clean");
* forward *may*: some fill can have run before this point.

:class:`FunctionFlow` builds all this for a function of the file being checked (CST
nodes attached, memoised in the :class:`~swacheck.context.FileContext`), and
:func:`resolver` gives the audit's :class:`~swacheck.analysis.summaries.SummaryResolver`.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from swacheck.analysis.cfg import CFG, FALSE, TRUE
from swacheck.analysis.summaries import (
    CONSTRUCTORS,
    FILL,
    INV,
    NO_EFFECT,
    WRITE,
    FunctionAnalysis,
    FunctionSkeleton,
    Summary,
    SummaryResolver,
    Target,
    analyse_function,
    guard_key,
    swa_guard_polarity,
)
from swacheck.analysis.writes import NEW, Event
from swacheck.rule import Rule

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo, ProjectIndex
    from swacheck.analysis.names import Names
    from swacheck.config import Config
    from swacheck.context import FileContext

# The rules that share the scope facts below (their collect_facts return them).
ORDER_RULES = ("SWA001", "SWA004", "SWA005", "SWA007")

Effect = tuple[str, bool]  # (kind, conditional)


def config_terms(config: Config) -> frozenset[str]:
    """The configured names every order rule's prefilter includes."""
    return frozenset(
        {*config.mapping_attributes, *config.invalidate_methods, *config.translate_methods}
    )


def relevant_text(text: str, config: Config) -> bool:
    """Whether a file takes part in summaries: it holds a configured name (any case)."""
    lowered = text.lower()
    return any(term.lower() in lowered for term in config_terms(config))


@dataclass(frozen=True)
class ScopeFacts:
    """What the order rules learn about each file in the first pass (picklable)."""

    relevant: bool
    defines_invalidate: bool


def activation(config: Config) -> tuple[frozenset[str], re.Pattern[bytes]]:
    """The order rules apply only where some audited file defines an invalidation method."""
    names = "|".join(re.escape(name) for name in config.invalidate_methods)
    pattern = re.compile(rf"\bdef\s+(?:{names})\s*\(".encode())
    return frozenset(config.invalidate_methods), pattern


class OrderRule(Rule):
    """Base of the order rules (SWA001, SWA004, SWA005, SWA007): their shared scope.

    They read method summaries, apply only where the audit defines an invalidation
    method (decided on raw bytes before parsing, then on the parsed facts), and share
    one per-file :class:`ScopeFacts`. Their trigger set is the configured names
    (``config_terms``); a rule may add to it.
    """

    uses_summaries = True

    @classmethod
    def triggers(cls, config: Config) -> frozenset[str] | None:
        return config_terms(config)

    @classmethod
    def activation(cls, config: Config) -> tuple[frozenset[str], re.Pattern[bytes]]:
        return activation(config)

    @classmethod
    def is_active(cls, project: ProjectIndex) -> bool:
        return order_rule_active(cls.code, project)

    @classmethod
    def collect_facts(cls, context: FileContext) -> ScopeFacts:
        return scope_facts(context)


def scope_facts(context: FileContext) -> ScopeFacts:
    """This file's :class:`ScopeFacts` (memoised: the four rules share one)."""

    def compute() -> ScopeFacts:
        config = context.config
        defines = any(
            re.search(rf"\bdef\s+{re.escape(name)}\s*\(", context.text)
            for name in config.invalidate_methods
        )
        return ScopeFacts(relevant_text(context.text, config), defines)

    return context.memo(("swacheck.order.scope",), compute)


def order_rule_active(code: str, project: Any) -> bool:
    """DESIGN.md's scope rule: some audited file defines an invalidation method."""
    return any(
        isinstance(facts, ScopeFacts) and facts.defines_invalidate
        for _, facts in project.rule_facts(code)
    )


def resolver(context: FileContext) -> SummaryResolver:
    """The audit's summary resolver (memoised on the project index)."""
    project = context.project
    config = context.config

    def compute() -> SummaryResolver:
        relevant = set()
        for path, facts in project.modules.items():
            for code in ORDER_RULES:
                scope = facts.rule_facts.get(code)
                if isinstance(scope, ScopeFacts) and scope.relevant:
                    relevant.add(path)
        return SummaryResolver(project, context.names, frozenset(relevant))

    return project.memo(("swacheck.summaries", config.fingerprint()), compute)


# -- the graph ------------------------------------------------------------------------


@dataclass
class Graph:
    succs: list[list[int]]
    exc: list[list[int]]
    effects: list[list[Effect]]
    entry: int = 0
    exit: int = 1
    raise_exit: int = 2

    def __post_init__(self) -> None:
        n = len(self.succs)
        self.preds: list[list[int]] = [[] for _ in range(n)]
        for a in range(n):
            for b in self.succs[a]:
                self.preds[b].append(a)
            for b in self.exc[a]:
                self.preds[b].append(a)

    @staticmethod
    def _prune(
        succs: list[list[int]],
        guards: Sequence[tuple[int, str | None, dict[int, str]]],
        names: Names,
    ) -> None:
        for node, key, labels in guards:
            if key is None:
                continue
            polarity = swa_guard_polarity(key, names)
            if polarity is None:
                continue
            drop = FALSE if polarity else TRUE
            kept = [s for s in succs[node] if labels.get(s) != drop]
            if kept:
                succs[node] = kept

    @classmethod
    def from_skeleton(
        cls, skeleton: FunctionSkeleton, effects: list[list[Effect]], names: Names
    ) -> Graph:
        succs = [list(s) for s in skeleton.succs]
        guards = [(node, key, dict(labels)) for node, key, labels in skeleton.guards]
        cls._prune(succs, guards, names)
        return cls(succs, [list(s) for s in skeleton.exc_succs], effects)

    @classmethod
    def from_cfg(cls, cfg: CFG, effects: list[list[Effect]], names: Names) -> Graph:
        succs = [list(n.succs) for n in cfg.nodes]
        guards = [(n.id, guard_key(n.test), n.labels) for n in cfg.nodes if n.test is not None]
        cls._prune(succs, guards, names)
        return cls(succs, [list(n.exc_succs) for n in cfg.nodes], effects)

    def reachable(self) -> set[int]:
        seen = {self.entry}
        stack = [self.entry]
        while stack:
            node = stack.pop()
            for s in self.succs[node] + self.exc[node]:
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return seen


def constructed_before(
    graph: Graph, events: Sequence[Sequence[Event]], node: int, index: int, receiver: str | None
) -> bool:
    """Every path from the entry to event ``index`` of ``node`` binds ``receiver`` (dotted
    text such as ``self.token_to_kv_pool``) to a newly constructed object (``Cls(...)``).

    A write to the mapping of an object this function has just built is an initialisation,
    like a constructor's own writes: nothing can have cached a translation through it yet.
    """
    if not receiver or receiver in ("self", "?", "super()"):
        return False

    def transfer(evs: Sequence[Event], state: bool) -> bool:
        for event in evs:
            if event.kind != WRITE or not event.rebinding or event.receiver is None:
                continue
            bound = f"{event.receiver}.{event.name}"
            if bound == receiver:
                state = event.value == NEW
            elif receiver.startswith(bound + "."):
                state = False  # an object on the way to the receiver was replaced
        return state

    n = len(graph.succs)
    reach = graph.reachable()  # code a mode guard prunes must not spoil the paths that run
    state = [True] * n
    state[graph.entry] = False
    changed = True
    while changed:
        changed = False
        for current in range(n):
            if current == graph.entry:
                continue
            value = all(transfer(events[p], state[p]) for p in graph.preds[current] if p in reach)
            if value != state[current]:
                state[current] = value
                changed = True
    return transfer(events[node][:index], state[node])


def _must_inv(effects: Sequence[Effect]) -> bool:
    return any(kind == INV and not cond for kind, cond in effects)


class Dataflow:
    """The three analyses of one :class:`Graph` (see the module docstring)."""

    def __init__(self, graph: Graph, entry_clean: bool = False) -> None:
        self.graph = graph
        self.entry_clean = entry_clean
        self._covered: list[bool] | None = None
        self._covered_strict: list[bool] | None = None
        self._clean: list[bool] | None = None
        self._filled: list[bool] | None = None
        self._reach: set[int] | None = None

    @property
    def reach(self) -> set[int]:
        if self._reach is None:
            self._reach = self.graph.reachable()
        return self._reach

    # -- backward must: an invalidation on every path to exit ----------------------------

    def _backward(self, stop_at_fill: bool) -> list[bool]:
        g = self.graph
        n = len(g.succs)
        # per node: True (invalidation first), False (fill first, strict), None (neither)
        first: list[bool | None] = []
        for effects in g.effects:
            verdict: bool | None = None
            for kind, cond in effects:
                if kind == INV and not cond:
                    verdict = True
                    break
                if stop_at_fill and kind == FILL:
                    verdict = False
                    break
            first.append(verdict)
        covered_in = [True] * n
        covered_in[g.exit] = False
        changed = True
        while changed:
            changed = False
            for node in range(n - 1, -1, -1):
                if node in (g.exit, g.raise_exit):
                    continue
                if first[node] is not None:
                    value = bool(first[node])
                else:
                    value = all(covered_in[s] for s in g.succs[node])
                if value != covered_in[node]:
                    covered_in[node] = value
                    changed = True
        return covered_in

    def covered_in(self, stop_at_fill: bool = False) -> list[bool]:
        if stop_at_fill:
            if self._covered_strict is None:
                self._covered_strict = self._backward(True)
            return self._covered_strict
        if self._covered is None:
            self._covered = self._backward(False)
        return self._covered

    def covered_after(self, node: int, position: int, stop_at_fill: bool = False) -> bool:
        """Every normal path from after effect ``position`` of ``node`` invalidates
        (before any fill, with ``stop_at_fill``)."""
        for kind, cond in self.graph.effects[node][position + 1 :]:
            if kind == INV and not cond:
                return True
            if stop_at_fill and kind == FILL:
                return False
        covered = self.covered_in(stop_at_fill)
        return all(covered[s] for s in self.graph.succs[node])

    # -- forward must: clean ----------------------------------------------------------

    @staticmethod
    def _transfer_clean(effects: Sequence[Effect], state: bool) -> bool:
        for kind, cond in effects:
            if kind == INV and not cond:
                state = True
            elif kind == FILL:
                state = False
        return state

    def clean_in(self) -> list[bool]:
        if self._clean is None:
            g = self.graph
            n = len(g.succs)
            clean = [True] * n
            clean[g.entry] = self.entry_clean
            reach = self.reach  # code a mode guard prunes has no say
            changed = True
            while changed:
                changed = False
                for node in range(n):
                    if node == g.entry:
                        continue
                    preds = [p for p in g.preds[node] if p in reach]
                    value = all(self._transfer_clean(g.effects[p], clean[p]) for p in preds)
                    if value != clean[node]:
                        clean[node] = value
                        changed = True
            self._clean = clean
        return self._clean

    def clean_before(self, node: int, position: int) -> bool:
        """The last invalidation/fill before effect ``position`` of ``node`` is surely an
        invalidation."""
        state = self.clean_in()[node]
        return self._transfer_clean(self.graph.effects[node][:position], state)

    # -- forward may: filled ----------------------------------------------------------------

    def filled_in(self) -> list[bool]:
        if self._filled is None:
            g = self.graph
            n = len(g.succs)
            filled = [False] * n
            reach = self.reach
            changed = True
            while changed:
                changed = False
                for node in range(n):
                    if filled[node] or node == g.entry:
                        continue
                    for p in g.preds[node]:
                        if p not in reach:
                            continue
                        if filled[p] or any(k == FILL for k, _ in g.effects[p]):
                            filled[node] = True
                            changed = True
                            break
            self._filled = filled
        return self._filled

    def filled_before(self, node: int, position: int) -> bool:
        if self.filled_in()[node]:
            return True
        return any(k == FILL for k, _ in self.graph.effects[node][:position])

    # -- what the summaries and rules ask ---------------------------------------------------

    def write_covered(self, node: int, position: int, initialising: bool) -> bool:
        """I1 for the write at effect ``position`` of ``node``; ``initialising``: the write
        is a constructor's, or to an object built here (exempt before any fill)."""
        if initialising and not self.filled_before(node, position):
            return True
        return self.covered_after(node, position) or self.clean_before(node, position)

    def exit_reachable(self) -> bool:
        return self.graph.exit in self.reach

    def entry_must_invalidate(self) -> bool:
        return self.exit_reachable() and self.covered_in()[self.graph.entry]

    def may_fill(self) -> bool:
        return any(any(k == FILL for k, _ in self.graph.effects[node]) for node in self.reach)

    def leaves_clean(self) -> bool:
        if not self.exit_reachable():
            return False
        dirty = Dataflow(self.graph, entry_clean=False)
        return dirty.clean_in()[self.graph.exit]

    def uncovered_path(self, node: int, position: int) -> list[int]:
        """A normal path from after ``position`` of ``node`` to the exit with no
        invalidation (empty when there is none)."""
        g = self.graph
        for kind, cond in g.effects[node][position + 1 :]:
            if kind == INV and not cond:
                return []
        parents: dict[int, int] = {node: -1}
        queue = deque([node])
        while queue:
            current = queue.popleft()
            for succ in g.succs[current]:
                if succ in parents:
                    continue
                parents[succ] = current
                if succ == g.exit:
                    path = [succ]
                    while parents[path[-1]] != -1:
                        path.append(parents[path[-1]])
                    return path[::-1]
                if _must_inv(g.effects[succ]) or succ == g.raise_exit:
                    continue
                queue.append(succ)
        return []

    def dirty_path(self, node: int) -> list[int]:
        """A path from the entry (or from a fill) into ``node`` with no invalidation."""
        g = self.graph
        parents: dict[int, int] = {node: -1}
        queue = deque([node])
        while queue:
            current = queue.popleft()
            for pred in g.preds[current]:
                if pred in parents:
                    continue
                parents[pred] = current
                effects = g.effects[pred]
                last = None
                for kind, cond in effects:
                    if kind == INV and not cond:
                        last = INV
                    elif kind == FILL:
                        last = FILL
                if last == INV:
                    continue
                if pred == g.entry or last == FILL:
                    path = [pred]
                    while parents[path[-1]] != -1:
                        path.append(parents[path[-1]])
                    return path
                queue.append(pred)
        return []


# -- a function of the checked file ---------------------------------------------------------


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
        self.steps: list[list[Step]] = []
        for events in self.analysis.events:
            steps: list[Step] = []
            for event in events:
                for kind, target in self._effects(event):
                    steps.append(Step(kind, event, target, event.conditional))
                if extra is not None:
                    for kind in extra(event):
                        steps.append(Step(kind, event, None, event.conditional))
            self.steps.append(steps)
        effects = [[(s.kind, s.conditional) for s in steps] for steps in self.steps]
        self.graph = Graph.from_cfg(self.cfg, effects, context.names)
        self.data = Dataflow(self.graph, entry_clean=entry_clean)

    def _effects(self, event: Event) -> tuple[tuple[str, Target | None], ...]:
        if event.kind == "call" and event.receiver is None and event.name in self.closures:
            summary = closure_summary(self.context, self.closures[event.name])
            out: list[tuple[str, Target | None]] = [(kind, None) for kind in summary.effects]
            if summary.uncovered_write is not None:
                out.insert(0, (WRITE, None))
            return tuple(out)
        return self.resolver.event_effects(
            event, self.cls, self.analysis.local_types, self.context.path
        )

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
        """This function's own summary (as a callee), from its CST flow."""
        data = self.data
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
        """How control reaches ``node`` from the entry with no invalidation."""
        path = self.invalidation_data().dirty_path(node)
        return self._first_branch(path).strip(" ()") if path else ""

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

    def _first_branch(self, path: list[int]) -> str:
        for a, b in itertools.pairwise(path):
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
