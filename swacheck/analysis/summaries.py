"""Method summaries: does a method write the mapping, invalidate on every path, fill the cache?

Computed on demand, with the configuration, over the first-pass skeletons
(:mod:`swacheck.analysis.skeletons`): a :class:`Summary` per function, from the shared
dataflow of :mod:`swacheck.analysis.dataflow` run over the skeleton, following calls on
``self`` (through the class's bases known to the audit), ``super()``, attributes and
locals whose class is known (``self.pool = SWAKVPool(...)``, ``pool: SWAKVPool``), and
module-level functions, across files. Recursion is cut (a function being summarised
counts as having no effect at its recursive call sites), unresolvable calls are unknown
and have no effect. Worker processes and the result cache only ever carry the plain
skeletons; summaries live in the process that computes them.

Only files that contain one of the configured names (mapping attributes,
invalidation and translation methods) take part in resolution; see
:func:`swacheck.analysis.scope.relevant_text`. That keeps the prefilter sound: the same
files count whether or not the prefilter parsed the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from swacheck.analysis.caches import CacheModel
from swacheck.analysis.conditions import Facts, carry_facts, path_facts
from swacheck.analysis.dataflow import FILL, INV, Dataflow, Graph, constructed_before, decide
from swacheck.analysis.resolve import CallResolver, Target
from swacheck.analysis.scope import ORDER_RULES, ScopeFacts
from swacheck.analysis.skeletons import CONSTRUCTORS, FunctionSkeleton
from swacheck.analysis.writes import CALL, WRITE, Event

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo, ProjectIndex
    from swacheck.analysis.names import Names
    from swacheck.context import FileContext


@dataclass(frozen=True)
class Summary:
    """What calling a function does to the translation cache (config-aware), under what
    its caller's path decides about its tests (see :mod:`swacheck.analysis.dataflow`)."""

    # Every normal path from entry to exit passes an invalidation.
    must_invalidate: bool = False
    # Some path may fill the cache (a translation) ...
    may_fill: bool = False
    # ... and on leaving, the cache is surely invalidated (last event an invalidation)
    # whatever state it was called in.
    leaves_clean: bool = False
    # Some mapping write is not covered inside the function (line, how).
    uncovered_write: tuple[int, str] | None = None
    # The function writes the mapping at all.
    writes_mapping: bool = False
    # Some path invalidates (on a condition its caller left open, when not every path).
    may_invalidate: bool = False

    @property
    def effects(self) -> tuple[tuple[str, bool], ...]:
        """The function's effect at its call sites: (kind, conditional) in order."""
        if self.leaves_clean:
            return ((INV, False),)
        if self.must_invalidate:
            return ((INV, False), (FILL, False)) if self.may_fill else ((INV, False),)
        maybe = ((INV, True),) if self.may_invalidate else ()
        return (*maybe, (FILL, False)) if self.may_fill else maybe


NO_EFFECT = Summary()


class SummaryResolver(CallResolver):
    """Config-aware summaries over the audit's skeletons (memoised per audit)."""

    def __init__(self, project: ProjectIndex, names: Names, relevant: frozenset[str]) -> None:
        super().__init__(project, names, relevant)
        self.kernel_writes = names.config.kernel_launch_writes
        self._summaries: dict[tuple[Target, frozenset[tuple[str, bool]]], Summary] = {}
        self._active: set[Target] = set()
        self._callers: dict[Target, list[tuple[str, str, Event]]] | None = None

    @cached_property
    def caches(self) -> CacheModel:
        """The audit's translation caches: what the order rules are about."""
        return CacheModel(self)

    # -- summaries ---------------------------------------------------------------------

    def event_effects(
        self,
        event: Event,
        cls: ClassInfo | None,
        types: dict[str, str],
        path: str,
        facts: Facts | None = None,
    ) -> tuple[tuple[str, Target | None, bool], ...]:
        """Effects of one event: (kind, the callee it comes from, conditional), where
        ``facts`` (:mod:`swacheck.analysis.conditions`) hold; a call's effect is its
        callee's summary under what they decide of the callee's tests."""
        names = self.names
        conditional = event.conditional
        if event.kind == WRITE and names.is_mapping(event.name):
            if event.possible and not self.kernel_writes:
                return ()
            owner = self.receiver_class(event.receiver, cls, types, path)
            caches = self.caches
            seen = caches.sees_rebinding(owner) if event.rebinding else caches.sees_table(owner)
            return ((WRITE, None, conditional),) if seen else ()
        slot = self.caches.slot_effect(event, cls, types, path)
        if slot is not None:
            return ((slot, None, conditional),)
        if event.kind == WRITE:
            return ()
        if names.is_invalidate(event.name):
            return ((INV, None, conditional),)
        if names.is_translate(event.name):
            served = self.caches.serves(self.receiver_class(event.receiver, cls, types, path))
            return ((FILL, None, conditional),) if served else ()
        target = self.resolve_call(event, cls, types, path)
        if target is None:
            return ()
        summary = self.summary(target, self.carried(target, event, facts))
        out: list[tuple[str, Target | None, bool]] = [
            (kind, target, conditional or maybe) for kind, maybe in summary.effects
        ]
        if summary.uncovered_write is not None and self.delegates(target):
            out.insert(0, (WRITE, target, conditional))
        return tuple(out)

    def carried(
        self, target: Target, event: Event, facts: Facts | None
    ) -> frozenset[tuple[str, bool]]:
        """What the caller's ``facts`` at ``event`` decide of ``target``'s tests."""
        skeleton = self.skeleton(target)
        if skeleton is None or not skeleton.conditions:
            return frozenset()
        carried = carry_facts(event, facts or {}, skeleton.params, target.cls is not None)
        if not carried:
            return carried
        texts = {o.text for c in skeleton.conditions for o in c.operands}
        return frozenset((text, value) for text, value in carried if text in texts)

    def summary(
        self, target: Target, decided: frozenset[tuple[str, bool]] = frozenset()
    ) -> Summary:
        """``target``'s summary where its caller's path decides ``decided`` of its tests."""
        key = (target, decided)
        cached = self._summaries.get(key)
        if cached is not None:
            return cached
        if target in self._active:
            return NO_EFFECT
        skeleton = self.skeleton(target)
        if skeleton is None:
            return NO_EFFECT
        self._active.add(target)
        try:
            result = self._summarise(target, skeleton, decided)
        finally:
            self._active.discard(target)
        self._summaries[key] = result
        return result

    def _summarise(
        self, target: Target, skeleton: FunctionSkeleton, decided: frozenset[tuple[str, bool]]
    ) -> Summary:
        cls = self.class_of(target.path, skeleton.cls)
        types = skeleton.types
        edges = [[*s, *e] for s, e in zip(skeleton.succs, skeleton.exc_succs, strict=True)]
        facts = path_facts(edges, skeleton.events, skeleton.conditions, dict(decided))
        per_event = [
            [self.event_effects(event, cls, types, target.path, facts[node]) for event in events]
            for node, events in enumerate(skeleton.events)
        ]
        effects = [
            [(kind, cond) for found in node for kind, _, cond in found] for node in per_event
        ]
        graph = decide(
            Graph.from_skeleton(skeleton, effects, self.names), skeleton.conditions, facts, True
        )
        flow = Dataflow(graph)
        uncovered = None
        writes = False
        constructor = skeleton.name in CONSTRUCTORS
        for node, events in enumerate(skeleton.events):
            position = 0
            for index, event in enumerate(events):
                for kind, _, _ in per_event[node][index]:
                    if kind == WRITE:
                        writes = True
                        initialising = constructor or (
                            event.kind == WRITE
                            and constructed_before(
                                graph, skeleton.events, node, index, event.receiver
                            )
                        )
                        if uncovered is None and not flow.write_covered(
                            node, position, initialising
                        ):
                            uncovered = (event.line, event.how or "call")
                    position += 1
        return Summary(
            must_invalidate=flow.entry_must_invalidate(),
            may_fill=flow.may_fill(),
            leaves_clean=flow.leaves_clean(),
            uncovered_write=uncovered,
            writes_mapping=writes,
            may_invalidate=flow.may_invalidate(),
        )

    # -- delegation ---------------------------------------------------------------------

    def callers(self, target: Target) -> list[tuple[str, str, Event]]:
        """Resolved call sites of ``target``: (path, caller key, event)."""
        if self._callers is None:
            index: dict[Target, list[tuple[str, str, Event]]] = {}
            for path in sorted(self.relevant):
                facts = self.project.modules.get(path)
                if facts is None:
                    continue
                for key, skeleton in facts.functions.items():
                    cls = self.class_of(path, skeleton.cls)
                    types = skeleton.types
                    for events in skeleton.events:
                        for event in events:
                            if event.kind != CALL or event.name.startswith("__"):
                                continue
                            if not event.name.startswith("_"):
                                continue  # only private helpers delegate
                            callee = self.resolve_call(event, cls, types, path)
                            if callee is not None:
                                index.setdefault(callee, []).append((path, key, event))
            self._callers = index
        return self._callers.get(target, [])

    def delegates(self, target: Target) -> bool:
        """Whether an uncovered write in ``target`` is its callers' to cover.

        True for a private helper (``_name``, not a dunder) whose every known call site
        is in its own file: the write is reported at those call sites instead.
        """
        name = target.name
        if not name.startswith("_") or name.startswith("__"):
            return False
        sites = self.callers(target)
        return bool(sites) and all(path == target.path for path, _, _ in sites)


def project_resolver(project: ProjectIndex, names: Names) -> SummaryResolver:
    """The audit's summary resolver (memoised on the project index per configuration)."""

    def compute() -> SummaryResolver:
        relevant = set()
        for path, facts in project.modules.items():
            for code in ORDER_RULES:
                scope = facts.rule_facts.get(code)
                if isinstance(scope, ScopeFacts) and scope.relevant:
                    relevant.add(path)
        return SummaryResolver(project, names, frozenset(relevant))

    return project.memo(("swacheck.summaries", names.config.fingerprint()), compute)


def resolver(context: FileContext) -> SummaryResolver:
    """The summary resolver of the audit ``context``'s file belongs to."""
    return project_resolver(context.project, context.names)
