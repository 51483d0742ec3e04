"""Which translation caches exist in the audit, and what each can see.

The order rules are about a cache of translations (DESIGN.md's scope rules): without
one, a mapping write cannot leave a stale entry, a translation cannot be served stale
and a capture cannot record a warm-up's result. Two shapes of cache exist in the
engines, both decided per class over the audit's files:

* a **memoising translate**: the class's translate method (the one its MRO resolves)
  keeps something on ``self`` besides the mapping (SGLang #25824's
  ``self._cached_swa_loc``/``self._cached_loc_key``);
* an **attribute cache**: a method of the class (or of a base) binds a ``self``
  attribute to a value that calls a translate method, and the class's invalidation
  method resets that attribute.

An entry must be able to outlive the call that made it until an invalidation. A fill
that runs on a condition of the caller's schedule as well as on the cache's own state
(``if layer_id == self.start_layer or self.cached_loc is None:``, DeepSeek V4's pool in
SGLang 0.5.12.post1, refilled at every forward's first layer) is a refresh, not a
cache: nothing the invalidation would clear survives the next refresh.

What a cache can see:

* a **mapping write** through an object typed ``R`` changes the tensor it holds; every
  object holding that tensor sees it. An object hands its table to another through a
  method that binds the receiver's own table (``register_mapping``) or a constructor
  (``self._kvcache.register_mapping(self.full_to_swa_index_mapping)``); the tensor
  written may have come from whoever handed it to ``R`` (followed back) and gone on to
  whoever ``R`` or they handed it to (followed forward). The object behind a typed
  receiver may be of any subclass of its type. A *rebinding*
  (``r.full_to_swa_index_mapping = t``) changes only that object: it matters to a
  cache of ``R`` (or a subclass) alone;
* a **translation** ``r.translate_loc_from_full_to_swa(x)`` can be served from a cache
  when the translate method of ``R`` (or of a subclass) memoises, or hands the call to
  another object's translation that can be;
* where the class of an object is unknown, it may be any: it sees (or serves) a cache
  when the audit holds one at all.

A graph capture or a forward dispatch runs the model, which may fill any cache of the
audit: for those, it is enough that a cache exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from swacheck.analysis.cfg import TRUE
from swacheck.analysis.writes import CALL, NONE, WRITE, Event

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo
    from swacheck.analysis.resolve import CallResolver
    from swacheck.analysis.skeletons import FunctionSkeleton

ClassKey = tuple[str, str]
# "Some object whose class the audit does not know".
_UNKNOWN: ClassKey = ("", "?")


def _key(info: ClassInfo) -> ClassKey:
    return (info.path, info.name)


class CacheModel:
    """The audit's translation caches (built once per audit from the skeletons)."""

    def __init__(self, resolver: CallResolver) -> None:
        self.resolver = resolver
        self.names = resolver.names
        classes = resolver.classes()
        self.memoising: set[ClassKey] = set()
        self.attribute: set[ClassKey] = set()
        for info in classes:
            if self._memoises(info):
                self.memoising.add(_key(info))
            if self._fills_attribute(info):
                self.attribute.add(_key(info))
        self.caching = self.memoising | self.attribute
        self.any_memo = bool(self.memoising)
        self.any_cache = bool(self.caching)
        # Which classes' objects may be handed the table of which (and back).
        self._handed: dict[ClassKey, set[ClassKey]] = {}
        self._received: dict[ClassKey, set[ClassKey]] = {}
        self._join_shared_tables(classes)
        self._serves: dict[ClassKey, bool] = {}

    # -- which classes cache -------------------------------------------------------

    def _memoises(self, info: ClassInfo) -> bool:
        """Its translate method keeps a result on ``self`` between calls."""
        for name in self.names.config.translate_methods:
            target = self.resolver.find_method(info, name)
            skeleton = self.resolver.skeleton(target) if target is not None else None
            if skeleton is None:
                continue
            stores = {
                (node, event.name)
                for node, events in enumerate(skeleton.events)
                for event in events
                if _binds_self(event) and not self.names.is_mapping(event.name)
            }
            kept = self.resolver.cache_attributes(info) | {attr for _, attr in stores}
            if any(not _refreshes(skeleton, node, kept) for node, _ in stores):
                return True
        return False

    def _fills_attribute(self, info: ClassInfo) -> bool:
        """A method of it (or of a base) fills an attribute its invalidation resets from a
        translation, other than as a refresh on the caller's schedule."""
        reset = self.resolver.cache_attributes(info)
        if not reset:
            return False
        for cls in self.resolver.mro(info):
            for method in cls.methods:
                skeleton = self.resolver.project.function(cls.path, f"{cls.name}.{method}")
                if skeleton is None:
                    continue
                for node, attr in _translation_fills(skeleton, self):
                    if attr in reset and not _refreshes(skeleton, node, reset):
                        return True
        return False

    def family(self, info: ClassInfo) -> list[ClassInfo]:
        """The classes an object typed ``info`` may have: it and its subclasses."""
        return [info, *self.resolver.subclasses(info)]

    def caches(self, info: ClassInfo) -> bool:
        """An object typed ``info`` may hold a cache."""
        return any(_key(c) in self.caching for c in self.family(info))

    # -- tables shared between objects ---------------------------------------------

    def _join_shared_tables(self, classes: list[ClassInfo]) -> None:
        """Record which classes' objects may be handed which tables: an object passes a
        table (``x.m``, ``m`` a mapping attribute) to a method that binds its own table
        (``register_mapping``), or to a constructor of a class of the audit."""
        resolver = self.resolver
        names = self.names
        binders: dict[str, list[ClassInfo]] = {}
        for info in classes:
            for method in info.methods:
                skeleton = resolver.project.function(info.path, f"{info.name}.{method}")
                if skeleton is not None and _binds_table(skeleton, self):
                    binders.setdefault(method, []).append(info)
        for path in sorted(resolver.relevant):
            facts = resolver.project.modules.get(path)
            if facts is None:
                continue
            for skeleton in facts.functions.values():
                cls = resolver.class_of(path, skeleton.cls)
                types = skeleton.types
                for events in skeleton.events:
                    for event in events:
                        tables = [
                            receiver
                            for receiver, _, attr in (p.rpartition(".") for p in event.passes)
                            if names.is_mapping(attr)
                        ]
                        if event.kind != CALL or not tables:
                            continue
                        holders = self._table_holders(event, cls, types, path, binders)
                        for receiver in tables:
                            source = resolver.receiver_class(receiver, cls, types, path)
                            sources = self._keys(source) if source else [_UNKNOWN]
                            for holder in holders:
                                for key in self._keys(holder):
                                    for origin in sources:
                                        self._handed.setdefault(origin, set()).add(key)
                                        self._received.setdefault(key, set()).add(origin)

    def _keys(self, info: ClassInfo) -> list[ClassKey]:
        return [_key(c) for c in self.family(info)]

    def _table_holders(
        self,
        event: Event,
        cls: ClassInfo | None,
        types: dict[str, str],
        path: str,
        binders: dict[str, list[ClassInfo]],
    ) -> list[ClassInfo]:
        """The classes a call may hand a table to (empty: it keeps none)."""
        resolver = self.resolver
        if event.receiver is None:
            built = resolver.resolve_class(event.name, near=path)
            return [built] if built is not None else []
        if event.name not in binders:
            return []
        if event.receiver == "super()":
            return [cls] if cls is not None else []
        callee = resolver.receiver_class(event.receiver, cls, types, path)
        return [callee] if callee is not None else binders[event.name]

    # -- the scope questions ---------------------------------------------------------

    def sees_table(self, info: ClassInfo | None) -> bool:
        """A write into the mapping tensor of an object typed ``info`` (``None``: unknown)
        can leave a stale cache entry: some object that may hold the same tensor caches.

        The tensor came from the object itself or from one that handed it over (followed
        back), and from there may have been handed on to others (followed forward); an
        object handed one of two tables does not make those two one."""
        if info is None:
            return self.any_cache
        origins = set(self._keys(info))
        stack = list(origins)
        while stack:
            for origin in self._received.get(stack.pop(), ()):
                if origin not in origins:
                    origins.add(origin)
                    stack.append(origin)
        if _UNKNOWN in origins:
            return self.any_cache
        holders = set(origins)
        stack = list(holders)
        while stack:
            for holder in self._handed.get(stack.pop(), ()):
                if holder not in holders:
                    holders.add(holder)
                    stack.append(holder)
        return bool(holders & self.caching)

    def sees_rebinding(self, info: ClassInfo | None) -> bool:
        """Rebinding the mapping attribute of an object typed ``info`` can leave a stale
        entry in that object's own cache."""
        return self.any_cache if info is None else self.caches(info)

    def serves(self, info: ClassInfo | None) -> bool:
        """A translation asked of an object typed ``info`` may be served from a cache."""
        if info is None:
            return self.any_memo
        key = _key(info)
        if key not in self._serves:
            self._serves[key] = False  # a cycle of delegations serves nothing new
            self._serves[key] = any(self._translate_serves(c) for c in self.family(info))
        return self._serves[key]

    def _translate_serves(self, info: ClassInfo) -> bool:
        if _key(info) in self.memoising:
            return True
        resolver = self.resolver
        found = False
        for name in self.names.config.translate_methods:
            target = resolver.find_method(info, name)
            skeleton = resolver.skeleton(target) if target is not None else None
            if skeleton is None:
                continue
            found = True
            owner = resolver.class_of(target.path, skeleton.cls) if target else None
            for events in skeleton.events:
                for event in events:
                    if event.kind != CALL or not self.names.is_translate(event.name):
                        continue
                    if event.receiver == "self":
                        continue  # itself, already answered
                    delegate = resolver.receiver_class(
                        event.receiver, owner, skeleton.types, target.path
                    )
                    if self.serves(delegate):
                        return True
        # A class whose translation the audit cannot see may be anything.
        return not found and self.any_memo


def _binds_table(skeleton: FunctionSkeleton, model: CacheModel) -> bool:
    """The function rebinds a mapping attribute of ``self`` (``register_mapping``)."""
    return any(
        _binds_self(event) and model.names.is_mapping(event.name)
        for events in skeleton.events
        for event in events
    )


def _binds_self(event: Event) -> bool:
    """``self.<attr> = <value other than None>``."""
    return (
        event.kind == WRITE and event.rebinding and event.receiver == "self" and event.value != NONE
    )


def _translation_fills(skeleton: FunctionSkeleton, model: CacheModel) -> list[tuple[int, str]]:
    """(node, attribute) of the ``self`` attributes bound, in one statement, to a value
    that translates."""
    out: list[tuple[int, str]] = []
    for node, events in enumerate(skeleton.events):
        translated = False
        for event in events:
            if event.kind == CALL and model.names.is_translate(event.name):
                translated = True
            elif translated and _binds_self(event):
                out.append((node, event.name))
    return out


def _refreshes(skeleton: FunctionSkeleton, node: int, cache: frozenset[str] | set[str]) -> bool:
    """Whether the fill at ``node`` is a refresh on the caller's schedule: a test it
    depends on lets it run on a condition that reads the cache (``self.cached_loc is
    None``) *or* on one that does not (``layer_id == self.start_layer``), so it runs
    whenever the latter holds, whatever the cache holds (DeepSeek V4's pool refills at
    every forward's first layer)."""
    for test, labels, when_true, when_false in skeleton.self_tests:
        label = _controlling_label(skeleton, test, dict(labels), node)
        if label is None:
            continue
        operands = when_true if label == TRUE else when_false
        reads_cache = [bool(reads & cache) for reads in operands]
        if len(operands) > 1 and any(reads_cache) and not all(reads_cache):
            return True
    return False


def _controlling_label(
    skeleton: FunctionSkeleton, test: int, labels: dict[int, str], node: int
) -> str | None:
    """The label of the only edge of ``test`` from which ``node`` is reached (without
    coming back through ``test``), or ``None`` when both or neither reach it."""
    reaching = set()
    for succ, label in labels.items():
        seen = {test, succ}
        stack = [succ]
        while stack:
            current = stack.pop()
            if current == node:
                reaching.add(label)
                break
            for nxt in skeleton.succs[current]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
    return reaching.pop() if len(reaching) == 1 else None
