"""Method summaries: does a method write the mapping, invalidate on every path, fill the cache?

Two halves, so that worker processes and the result cache only ever carry plain data:

* **first pass, config-free** (:func:`module_skeletons`, called from
  :func:`swacheck.analysis.index.index_module`): each module-level function and each
  method gets a :class:`FunctionSkeleton` — its control-flow graph reduced to
  successor lists, the :class:`~swacheck.analysis.writes.Event` list of every node
  (calls with their receivers, attribute writes), the tests that look like mode
  guards, and the parameter/local types it can read off annotations and constructor
  calls. Nothing here knows which names are "the mapping" or "the invalidation".
* **on demand, with the configuration** (:class:`SummaryResolver`): a
  :class:`Summary` per function, computed by running the shared dataflow of
  :mod:`swacheck.analysis.order` over the skeleton, following calls on ``self`` (through
  the class's bases known to the audit), ``super()``, attributes and locals whose class
  is known (``self.pool = SWAKVPool(...)``, ``pool: SWAKVPool``), and module-level
  functions, across files. Recursion is cut (a function being summarised counts as
  having no effect at its recursive call sites), unresolvable calls are unknown and
  have no effect.

Only files that contain one of the configured names (mapping attributes,
invalidation and translation methods) take part in resolution; see
:func:`swacheck.analysis.order.relevant_text`. That keeps the prefilter sound: the same
files count whether or not the prefilter parsed the others.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from swacheck.analysis.aliases import local_aliases
from swacheck.analysis.cfg import CFG, FALSE, TRUE, cfg_for
from swacheck.analysis.names import dotted_name
from swacheck.analysis.writes import CALL, NONE, WRITE, Event, node_events

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo, ProjectIndex
    from swacheck.analysis.names import Names

CONSTRUCTORS = frozenset({"__init__", "__post_init__", "__new__", "__setstate__"})


# -- first pass -----------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionSkeleton:
    """A function's control flow and events, without CST nodes (picklable)."""

    name: str
    cls: str | None  # the class it is a method of, or None
    line: int
    params: tuple[str, ...]
    # Parameter / local name -> class name, from annotations and ``x = Cls(...)``.
    local_types: tuple[tuple[str, str], ...]
    # Body is only a docstring / ``pass`` / ``...`` / ``return`` / ``raise``.
    trivial: bool
    succs: tuple[tuple[int, ...], ...]
    exc_succs: tuple[tuple[int, ...], ...]
    events: tuple[tuple[Event, ...], ...]
    # (node, guard key, {succ: label}) for tests that look like a mode guard.
    guards: tuple[tuple[int, str, tuple[tuple[int, str], ...]], ...]

    @property
    def types(self) -> dict[str, str]:
        return dict(self.local_types)


def annotation_class(annotation: cst.BaseExpression | None) -> str | None:
    """``SWAKVPool`` for ``SWAKVPool``, ``Optional[SWAKVPool]``, ``SWAKVPool | None``, ``"X"``."""
    if annotation is None:
        return None
    if isinstance(annotation, cst.SimpleString):
        value = annotation.evaluated_value
        if isinstance(value, str) and re.fullmatch(r"[A-Za-z_][\w.]*", value):
            return value.rsplit(".", 1)[-1]
        return None
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        left, right = annotation_class(annotation.left), annotation_class(annotation.right)
        if left == "None":
            return right
        return left if right in (None, "None") else None
    if isinstance(annotation, cst.Subscript):
        name = dotted_name(annotation.value) or ""
        if name.rsplit(".", 1)[-1] == "Optional" and len(annotation.slice) == 1:
            inner = annotation.slice[0].slice
            if isinstance(inner, cst.Index):
                return annotation_class(inner.value)
        return None
    name = dotted_name(annotation)
    return name.rsplit(".", 1)[-1] if name else None


def constructed_class(value: cst.BaseExpression | None) -> str | None:
    """``Cls`` for ``Cls(...)``/``mod.Cls(...)`` (a capitalised callee), else None."""
    if isinstance(value, cst.Call):
        name = dotted_name(value.func)
        if name:
            last = name.rsplit(".", 1)[-1]
            if last[:1].isupper():
                return last
    return None


def guard_key(test: cst.BaseExpression | None) -> str | None:
    """A config-free description of a test that may be a mode guard.

    ``name:is_hybrid_swa`` (a name or attribute), ``hasattr:<attr>``,
    ``isinstance:<Class>``; a leading ``!`` for ``not``.
    """
    if test is None:
        return None
    negated = False
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        negated = not negated
        test = test.expression
    key = None
    if isinstance(test, cst.Name | cst.Attribute):
        name = dotted_name(test)
        if name:
            key = f"name:{name.rsplit('.', 1)[-1]}"
    elif isinstance(test, cst.Call) and isinstance(test.func, cst.Name):
        args = [a.value for a in test.args]
        if test.func.value == "hasattr" and len(args) == 2:
            if isinstance(args[1], cst.SimpleString) and isinstance(args[1].evaluated_value, str):
                key = f"hasattr:{args[1].evaluated_value}"
        elif test.func.value == "isinstance" and len(args) == 2:
            name = dotted_name(args[1])
            if name:
                key = f"isinstance:{name.rsplit('.', 1)[-1]}"
    if key is None:
        return None
    return f"!{key}" if negated else key


def _is_trivial(function: cst.FunctionDef) -> bool:
    body = function.body
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for stmt in statements:
        smalls = (
            stmt.body
            if isinstance(stmt, cst.SimpleStatementLine | cst.SimpleStatementSuite)
            else None
        )
        if smalls is None:
            return False
        for small in smalls:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(
                small.value, cst.SimpleString | cst.ConcatenatedString | cst.Ellipsis
            ):
                continue
            if isinstance(small, cst.Return) and (
                small.value is None
                or (isinstance(small.value, cst.Name) and small.value.value == "None")
            ):
                continue
            if isinstance(small, cst.Raise):
                continue
            return False
    return True


def params_of(function: cst.FunctionDef) -> list[cst.Param]:
    p = function.params
    out = [*p.posonly_params, *p.params, *p.kwonly_params]
    if isinstance(p.star_arg, cst.Param):
        out.append(p.star_arg)
    if p.star_kwarg is not None:
        out.append(p.star_kwarg)
    return out


@dataclass
class FunctionAnalysis:
    """A function's CFG with its events (CST nodes attached): shared by both passes."""

    function: cst.FunctionDef
    cfg: CFG
    params: tuple[str, ...]
    events: list[list[Event]]
    local_types: dict[str, str]


# Like the CFG cache: a serial audit's second pass reuses the first pass's analyses.
_ANALYSES: OrderedDict[int, tuple[cst.CSTNode, Any, FunctionAnalysis]] = OrderedDict()
_ANALYSES_SIZE = 50_000


def analyse_function(function: cst.FunctionDef, positions: Any) -> FunctionAnalysis:
    """CFG, aliases, events and local types of ``function`` (memoised across passes)."""
    key = id(function)
    hit = _ANALYSES.get(key)
    if hit is not None and hit[0] is function and hit[1] is positions:
        _ANALYSES.move_to_end(key)
        return hit[2]
    analysis = _analyse(function, positions)
    _ANALYSES[key] = (function, positions, analysis)
    if len(_ANALYSES) > _ANALYSES_SIZE:
        _ANALYSES.popitem(last=False)
    return analysis


def _analyse(function: cst.FunctionDef, positions: Any) -> FunctionAnalysis:
    cfg = cfg_for(function)
    params = params_of(function)
    names = tuple(p.name.value for p in params)
    statements = [n.stmt for n in cfg.nodes if n.stmt is not None]
    aliases = local_aliases(statements, names)
    events = [node_events(node.exprs, aliases, positions) for node in cfg.nodes]
    types: dict[str, str] = {}
    for param in params:
        if param.annotation is not None:
            cls = annotation_class(param.annotation.annotation)
            if cls:
                types[param.name.value] = cls
    for stmt in statements:
        if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0].target
            cls = constructed_class(stmt.value)
            if isinstance(target, cst.Name) and cls:
                types.setdefault(target.value, cls)
        elif isinstance(stmt, cst.AnnAssign) and isinstance(stmt.target, cst.Name):
            cls = annotation_class(stmt.annotation.annotation)
            if cls:
                types.setdefault(stmt.target.value, cls)
    return FunctionAnalysis(function, cfg, names, events, types)


def skeleton_of(analysis: FunctionAnalysis, cls: str | None, line: int) -> FunctionSkeleton:
    cfg = analysis.cfg
    guards = []
    for node in cfg.nodes:
        key = guard_key(node.test)
        if key is not None:
            guards.append((node.id, key, tuple(node.labels.items())))
    return FunctionSkeleton(
        name=analysis.function.name.value,
        cls=cls,
        line=line,
        params=analysis.params,
        local_types=tuple(sorted(analysis.local_types.items())),
        trivial=_is_trivial(analysis.function),
        succs=tuple(tuple(n.succs) for n in cfg.nodes),
        exc_succs=tuple(tuple(n.exc_succs) for n in cfg.nodes),
        events=tuple(tuple(e.bare() for e in events) for events in analysis.events),
        guards=tuple(guards),
    )


def function_key(cls: str | None, name: str) -> str:
    return f"{cls}.{name}" if cls else name


def module_skeletons(module: cst.Module, positions: Any) -> dict[str, FunctionSkeleton]:
    """Skeletons of the module-level functions and the methods of every class."""
    out: dict[str, FunctionSkeleton] = {}

    def visit(statements: Any, cls: str | None) -> None:
        for stmt in statements:
            if isinstance(stmt, cst.FunctionDef):
                analysis = analyse_function(stmt, positions)
                line = positions[stmt].start.line if positions is not None else 0
                out.setdefault(function_key(cls, stmt.name.value), skeleton_of(analysis, cls, line))
            elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                visit(stmt.body.body, stmt.name.value)
            elif isinstance(stmt, cst.If | cst.Try) and cls is None:
                # ``if TYPE_CHECKING:``/``try: import`` blocks at module level
                for part in (stmt.body, getattr(stmt, "orelse", None)):
                    if isinstance(part, cst.IndentedBlock):
                        visit(part.body, cls)
                    elif isinstance(part, cst.Else) and isinstance(part.body, cst.IndentedBlock):
                        visit(part.body.body, cls)

    visit(module.body, None)
    return out


# -- resolution, with the configuration -------------------------------------------------

# Effect kinds of a node's events, in order.
INV = "inv"  # an invalidation that surely runs
FILL = "fill"  # a translation (or anything that may fill the cache)
WRITE = WRITE  # a mapping write


@dataclass(frozen=True)
class Summary:
    """What calling a function does to the translation cache (config-aware)."""

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

    @property
    def effects(self) -> tuple[str, ...]:
        """The function's effect as a sequence of effect kinds at its call sites."""
        if self.leaves_clean:
            return (INV,)
        if self.must_invalidate:
            return (INV, FILL) if self.may_fill else (INV,)
        return (FILL,) if self.may_fill else ()


NO_EFFECT = Summary()

# Kept in step with the prefilter's ``word("swa")``/``exact("SWA")`` triggers.
_SWA_WORD = re.compile(r"SWA|(?<![A-Za-z0-9])swa(?![A-Za-z0-9])")


def is_swa_word(name: str) -> bool:
    """``is_hybrid_swa``, ``swa_pool``, ``SWAKVPool`` (not ``swap``)."""
    return _SWA_WORD.search(name) is not None


# A flag that states the SWA mode itself: a predicate (``is_``, ``has_``, ``use_``,
# ``enable_``...) whose subject is SWA, such as ``is_hybrid_swa``, ``has_swa``, ``use_swa``,
# ``is_swa_enabled``. Flags that only mention SWA choose a sub-mode or a layer kind
# (``_swa_req_ring``, ``is_swa_layer``, ``is_hybrid_swa_compress``, ``_skip_swa``): in SWA
# mode they go either way, so their branches are both kept.
_SWA_MODE_FLAG = re.compile(
    r"_?(is|has|use|uses|using|enable|enabled|with)_(\w+_)?swa(_enabled|_mode|_model)?",
    re.IGNORECASE,
)


def is_swa_mode_flag(name: str) -> bool:
    return _SWA_MODE_FLAG.fullmatch(name) is not None


def swa_guard_polarity(key: str, names: Names) -> bool | None:
    """True/False when the guard ``key`` holds exactly in SWA mode / outside it, else None."""
    negated = key.startswith("!")
    kind, _, value = key.lstrip("!").partition(":")
    if kind == "name":
        hit = is_swa_mode_flag(value)
    elif kind == "hasattr":
        hit = names.is_invalidate(value) or names.is_translate(value) or names.is_mapping(value)
    elif kind == "isinstance":
        hit = is_swa_word(value)
    else:
        hit = False
    if not hit:
        return None
    return not negated


@dataclass(frozen=True)
class Target:
    """A resolved callee: the file and the function's key there."""

    path: str
    key: str
    cls: str | None
    name: str


class SummaryResolver:
    """Config-aware summaries over the audit's skeletons (memoised per audit)."""

    def __init__(self, project: ProjectIndex, names: Names, relevant: frozenset[str]) -> None:
        self.project = project
        self.names = names
        self.kernel_writes = names.config.kernel_launch_writes
        self.relevant = relevant
        self._summaries: dict[Target, Summary] = {}
        self._active: set[Target] = set()
        self._classes: dict[str, list[ClassInfo]] = {}
        self._functions: dict[str, list[str]] = {}
        for path in sorted(relevant):
            facts = project.modules.get(path)
            if facts is None:
                continue
            for info in facts.classes:
                self._classes.setdefault(info.name, []).append(info)
            for key in facts.functions:
                if "." not in key:
                    self._functions.setdefault(key, []).append(path)
        self._callers: dict[Target, list[tuple[str, str, Event]]] | None = None
        self._cache_attrs: dict[tuple[str, str], frozenset[str]] = {}

    # -- classes ------------------------------------------------------------------

    def resolve_class(self, name: str, near: str | None = None) -> ClassInfo | None:
        candidates = self._classes.get(name.rsplit(".", 1)[-1], [])
        for info in candidates:
            if info.path == near:
                return info
        return candidates[0] if len(candidates) == 1 else None

    def mro(self, info: ClassInfo) -> list[ClassInfo]:
        seen: dict[tuple[str, str], ClassInfo] = {}

        def walk(cls: ClassInfo) -> None:
            if (cls.path, cls.name) in seen:
                return
            seen[(cls.path, cls.name)] = cls
            for base in cls.bases:
                resolved = self.resolve_class(base, near=cls.path)
                if resolved is not None:
                    walk(resolved)

        walk(info)
        return list(seen.values())

    def find_method(self, info: ClassInfo, name: str, skip_self: bool = False) -> Target | None:
        for cls in self.mro(info)[1 if skip_self else 0 :]:
            if name in cls.methods:
                return Target(cls.path, function_key(cls.name, name), cls.name, name)
        return None

    def attribute_class(self, info: ClassInfo, attr: str) -> ClassInfo | None:
        for cls in self.mro(info):
            type_name = cls.attribute_types.get(attr)
            if type_name:
                return self.resolve_class(type_name, near=cls.path)
        return None

    def defines(self, info: ClassInfo, name: str) -> bool:
        return self.find_method(info, name) is not None

    def cache_attributes(self, info: ClassInfo) -> frozenset[str]:
        """The attributes the class's invalidation method resets on ``self``.

        Resetting one of them to ``None`` directly (``self._cached_loc_key = None``, DSV4's
        ``self.cached_loc = None`` in ``register_mapping``) is an inline invalidation.
        """
        key = (info.path, info.name)
        cached = self._cache_attrs.get(key)
        if cached is not None:
            return cached
        attrs: set[str] = set()
        for method in self.names.config.invalidate_methods:
            target = self.find_method(info, method)
            skeleton = self.skeleton(target) if target is not None else None
            if skeleton is None:
                continue
            for events in skeleton.events:
                for event in events:
                    if event.kind == WRITE and event.rebinding and event.receiver == "self":
                        attrs.add(event.name)
        result = frozenset(attrs)
        self._cache_attrs[key] = result
        return result

    # -- skeletons -------------------------------------------------------------------

    def skeleton(self, target: Target) -> FunctionSkeleton | None:
        facts = self.project.modules.get(target.path)
        return facts.functions.get(target.key) if facts is not None else None

    def receiver_class(
        self, receiver: str | None, cls: ClassInfo | None, types: dict[str, str], path: str
    ) -> ClassInfo | None:
        """The class of a dotted receiver (``self``, ``self.pool``, ``pool``), if known."""
        if receiver is None or receiver == "?":
            return None
        parts = receiver.split(".")
        if parts[0] == "self":
            current = cls
        elif parts[0] in types:
            current = self.resolve_class(types[parts[0]], near=path)
        else:
            return None
        for attr in parts[1:]:
            if current is None:
                return None
            current = self.attribute_class(current, attr)
        return current

    def resolve_call(
        self, event: Event, cls: ClassInfo | None, types: dict[str, str], path: str
    ) -> Target | None:
        """The function a CALL event runs, when the audit knows it."""
        if event.receiver is None:
            if event.name in types:
                return None
            paths = self._functions.get(event.name, [])
            if path in paths:
                return Target(path, event.name, None, event.name)
            if len(paths) == 1:
                return Target(paths[0], event.name, None, event.name)
            return None
        if event.receiver == "super()":
            return self.find_method(cls, event.name, skip_self=True) if cls else None
        owner = self.receiver_class(event.receiver, cls, types, path)
        if owner is None:
            return None
        return self.find_method(owner, event.name)

    def class_of(self, path: str, name: str | None) -> ClassInfo | None:
        if name is None:
            return None
        facts = self.project.modules.get(path)
        if facts is None:
            return None
        for info in facts.classes:
            if info.name == name:
                return info
        return None

    # -- summaries ---------------------------------------------------------------------

    def event_effects(
        self, event: Event, cls: ClassInfo | None, types: dict[str, str], path: str
    ) -> tuple[tuple[str, Target | None], ...]:
        """Effect kinds of one event, with the callee they come from (if a call)."""
        names = self.names
        if event.kind == WRITE:
            if names.is_mapping(event.name) and (not event.possible or self.kernel_writes):
                return ((WRITE, None),)
            if event.rebinding and event.value == NONE and not event.conditional:
                owner = self.receiver_class(event.receiver, cls, types, path)
                if owner is not None and event.name in self.cache_attributes(owner):
                    return ((INV, None),)
            return ()
        if names.is_invalidate(event.name):
            return ((INV, None),)
        if names.is_translate(event.name):
            return ((FILL, None),)
        target = self.resolve_call(event, cls, types, path)
        if target is None:
            return ()
        summary = self.summary(target)
        out: list[tuple[str, Target | None]] = [(kind, target) for kind in summary.effects]
        if summary.uncovered_write is not None and self.delegates(target):
            out.insert(0, (WRITE, target))
        return tuple(out)

    def summary(self, target: Target) -> Summary:
        cached = self._summaries.get(target)
        if cached is not None:
            return cached
        if target in self._active:
            return NO_EFFECT
        skeleton = self.skeleton(target)
        if skeleton is None:
            return NO_EFFECT
        self._active.add(target)
        try:
            result = self._summarise(target, skeleton)
        finally:
            self._active.discard(target)
        self._summaries[target] = result
        return result

    def _summarise(self, target: Target, skeleton: FunctionSkeleton) -> Summary:
        from swacheck.analysis import order

        cls = self.class_of(target.path, skeleton.cls)
        types = skeleton.types
        effects = [
            [
                (kind, event.conditional)
                for event in events
                for kind, _ in self.event_effects(event, cls, types, target.path)
            ]
            for events in skeleton.events
        ]
        graph = order.Graph.from_skeleton(skeleton, effects, self.names)
        flow = order.Dataflow(graph)
        uncovered = None
        writes = False
        constructor = skeleton.name in CONSTRUCTORS
        for node, events in enumerate(skeleton.events):
            position = 0
            for index, event in enumerate(events):
                for kind, _ in self.event_effects(event, cls, types, target.path):
                    if kind == WRITE:
                        writes = True
                        initialising = constructor or (
                            event.kind == WRITE
                            and order.constructed_before(
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


def iter_skeletons(project: ProjectIndex) -> Iterator[tuple[str, str, FunctionSkeleton]]:
    for path, facts in project.modules.items():
        for key, skeleton in facts.functions.items():
            yield path, key, skeleton


__all__ = [
    "CONSTRUCTORS",
    "FALSE",
    "FILL",
    "INV",
    "TRUE",
    "WRITE",
    "FunctionSkeleton",
    "Summary",
    "SummaryResolver",
    "Target",
    "analyse_function",
    "module_skeletons",
]
