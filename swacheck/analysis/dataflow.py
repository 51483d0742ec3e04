"""The dataflow of one function over its cache effects: the order questions' answers.

A :class:`Graph` is a function's control flow (normal and exceptional edges) with, per
node, its *effects* in evaluation order: ``inv`` (an invalidation, or a call of a
function whose summary says it invalidates), ``fill`` (a translation, or a call that may
translate), ``write`` (a mapping write, or a call of a private helper whose write its
callers must cover), each marked conditional when it may not run. Mode guards
(``if self.is_hybrid_swa:``, ``if hasattr(pool, "invalidate_loc_cache"):``) are assumed
to hold: the rules reason about the hybrid-SWA configuration, so the branch a guard
excludes is pruned (:mod:`swacheck.analysis.modes`).

:class:`Dataflow` answers the queries with three classic analyses, each solved once per
graph by round-robin iteration:

* backward *must*: every normal path from here to the function's exit passes an
  unconditional invalidation (paths ending in ``raise`` do not count: an exception
  abandons the operation);
* forward *must*: on every path from the entry (through exceptional edges too) the last
  invalidation/fill event was an invalidation ("clean");
* forward *may*: some fill can have run before this point.

A callee is summarised under what its caller's path decides about its tests
(:mod:`swacheck.analysis.conditions`): :func:`decide` drops the edges those facts rule
out and, for a test they leave open that reads only the object's (or the module's) state
(``if not self.capturing:``), keeps the edges that invalidate, as a mode guard's branch
is kept: the helper is taken to know when its object needs the invalidation, unless the
caller's path says otherwise. A test on a parameter the caller left open stays a branch:
the helper invalidates there only when its caller asks.

Graphs come from a first-pass skeleton (method summaries) or from a function of the
checked file (:class:`swacheck.analysis.order.FunctionFlow`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from swacheck.analysis.cfg import CFG, FALSE, TRUE
from swacheck.analysis.modes import guard_key, swa_guard_polarity
from swacheck.analysis.writes import NEW, WRITE, Event

if TYPE_CHECKING:
    from swacheck.analysis.conditions import Condition
    from swacheck.analysis.names import Names
    from swacheck.analysis.skeletons import FunctionSkeleton

# Effect kinds of a node's events, in order.
INV = "inv"  # an invalidation that surely runs
FILL = "fill"  # a translation (or anything that may fill the cache)
# WRITE (from :mod:`swacheck.analysis.writes`): a mapping write

Effect = tuple[str, bool]  # (kind, conditional)


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

    def with_succs(self, succs: list[list[int]]) -> Graph:
        return Graph(succs, self.exc, self.effects, self.entry, self.exit, self.raise_exit)

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


def decide(
    graph: Graph,
    conditions: Sequence[Condition],
    facts: Sequence[Mapping[str, bool] | None],
    angelic: bool,
) -> Graph:
    """``graph`` with the edges of the tests that ``facts`` (per node) decide dropped; with
    ``angelic``, at each test they leave open that reads only state, only the edges that
    lead to an invalidation on every path are kept (when some do)."""
    succs = [list(s) for s in graph.succs]
    open_state: list[int] = []
    for condition in conditions:
        known = facts[condition.node] if condition.node < len(facts) else None
        if known is None:
            continue
        value = condition.value(known)
        if value is not None:
            keep = TRUE if value else FALSE
            labels = dict(condition.labels)
            kept = [s for s in succs[condition.node] if labels.get(s, keep) == keep]
            if kept:
                succs[condition.node] = kept
        elif angelic and condition.state_only(known):
            open_state.append(condition.node)
    decided = graph.with_succs(succs)
    if not open_state:
        return decided
    covered = Dataflow(decided)._backward(False, angelic=frozenset(open_state))
    for node in open_state:
        kept = [s for s in succs[node] if covered[s]]
        if kept:
            succs[node] = kept
    return decided.with_succs(succs)


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

    def _backward(self, stop_at_fill: bool, angelic: frozenset[int] = frozenset()) -> list[bool]:
        """Per node: every normal path from it invalidates (some path, at ``angelic``
        nodes)."""
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
                elif node in angelic:
                    value = any(covered_in[s] for s in g.succs[node])
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

    def may_invalidate(self) -> bool:
        return any(any(k == INV for k, _ in self.graph.effects[node]) for node in self.reach)

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
