"""Which translation caches exist in the audit, and what each can see.

The order rules are about a cache of translations (DESIGN.md's scope rules): without
one, a mapping write cannot leave a stale entry, a translation cannot be served stale
and a capture cannot record a warm-up's result. They apply where a cache exists *or
cannot be ruled out*; "no cache here" is said only where it is proven. Decided per class
over the audit's files:

* a **memoising translate**: the class's translate method (the one its MRO resolves), or
  a helper of its own it calls, keeps something between calls: it stores on ``self``
  besides the mapping (SGLang #25824's ``self._cached_swa_loc``, a single-entry tuple
  ``self._last = (key, out)``, a dict ``self._loc_cache[key] = out``), calls a helper
  object the class holds (``self.loc_cache.put(key, out)``) that its invalidation drops
  or that keeps state itself, or is (or calls) a function under a ``functools`` cache
  (``@functools.lru_cache``, ``@functools.cache``, cachetools' ``@cached``);
* what the **invalidation drops**: every attribute the invalidation method (and the
  helpers of its own it calls) rebinds, stores into or calls a method of, on ``self``
  (``self._loc_cache.clear()``, ``self.loc_cache.reset()``) or on another object
  (``self.attn_backend.swa_loc_cache = None``, ``self.attn_backend.reset_swa_cache()``: a
  cache held by the backend, followed into the backend's method where the audit holds
  it), and every function cache it clears
  (``self.translate_loc_from_full_to_swa.cache_clear()``). Each such *slot* is a cache
  unless proven not to be one: a slot of a class the audit knows is a cache when
  something stores into it inside a translate method, or from a translation (an
  attribute cache, ``self.cached_loc = self.translate_loc_from_full_to_swa(loc)``),
  other than as a refresh; a slot nothing fills is no cache; a function cache, a method
  of an object of unknown class called on the slot (``self._loc_cache.clear()``), or a
  slot of an object whose class the audit does not hold at all, cannot be ruled out. A
  class whose invalidation drops a cache *has* one, whoever holds it: a mapping write it
  sees must be followed by its invalidation.

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

Stores into and resets of a cache slot anywhere are cache effects of their own
(:meth:`CacheModel.slot_effect`): rebinding a slot to ``None`` or calling a method the
invalidation calls on it (``clear()``, ``reset()``) invalidates, storing into it fills.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from swacheck.analysis.cfg import TRUE
from swacheck.analysis.dataflow import FILL, INV
from swacheck.analysis.resolve import Target
from swacheck.analysis.writes import CALL, NONE, WRITE, Event

if TYPE_CHECKING:
    from swacheck.analysis.index import ClassInfo
    from swacheck.analysis.resolve import CallResolver
    from swacheck.analysis.skeletons import FunctionSkeleton

ClassKey = tuple[str, str]
# "Some object whose class the audit does not know".
_UNKNOWN: ClassKey = ("", "?")

# Decorators that memoise a function's results (functools, cachetools and the like).
CACHE_DECORATORS = frozenset(
    {"lru_cache", "cache", "cached", "cachedmethod", "memoize", "memoized"}
)
# Methods of a cache object that only look an entry up: they store nothing.
READ_VERBS = frozenset(
    {"get", "__getitem__", "__contains__", "keys", "values", "items", "__len__", "copy", "peek"}
)
# Methods that empty a cache object whatever the invalidation method calls on it.
DROP_VERBS = frozenset({"clear", "cache_clear"})
# Methods that store into an object (a dict, a cache object) whose class is unknown.
STORE_VERBS = frozenset(
    {"put", "set", "update", "setdefault", "add", "append", "insert", "store", "__setitem__"}
)


def _key(info: ClassInfo) -> ClassKey:
    return (info.path, info.name)


@dataclass(frozen=True)
class Slot:
    """What an invalidation drops: attribute ``attr`` of an object of class ``holder``
    (``None``: a class the audit does not know), or the cache of ``function``; ``opaque``
    names what the audit cannot see into (a function cache it cannot resolve, a method of
    an object of unknown class called on the attribute): it cannot be ruled out."""

    holder: ClassKey | None
    attr: str = ""
    function: Target | None = None
    opaque: str = ""


def is_cache_decorator(name: str) -> bool:
    return name.rsplit(".", 1)[-1] in CACHE_DECORATORS


class CacheModel:
    """The audit's translation caches (built once per audit from the skeletons)."""

    def __init__(self, resolver: CallResolver) -> None:
        self.resolver = resolver
        self.names = resolver.names
        classes = resolver.classes()
        self._contexts: dict[ClassKey, list[tuple[Target, FunctionSkeleton]]] = {}
        self._fills: dict[ClassKey, dict[str, list[tuple[Target, FunctionSkeleton, int, Event]]]]
        self._fills = {}
        # What each class's invalidation drops, and the methods it calls on each slot.
        self._drops: dict[ClassKey, dict[Slot, set[str]]] = {
            _key(info): self._dropped(info) for info in classes
        }
        verdicts: dict[Slot, bool] = {}
        for drops in self._drops.values():
            for slot in drops:
                if slot not in verdicts:
                    verdicts[slot] = self._is_cache(slot)
        self.cache_slots = {slot for slot, cache in verdicts.items() if cache}
        # Per slot attribute, the methods an invalidation calls on it (``reset``).
        self._verbs: dict[str, set[str]] = {}
        self._slot_attrs: dict[str, list[Slot]] = {}
        self._function_slots: set[Target] = set()
        for drops in self._drops.values():
            for slot, verbs in drops.items():
                if slot not in self.cache_slots:
                    continue
                if slot.function is not None:
                    self._function_slots.add(slot.function)
                elif slot.attr:
                    self._verbs.setdefault(slot.attr, set()).update(verbs)
                    self._slot_attrs.setdefault(slot.attr, []).append(slot)
        self.memoising: set[ClassKey] = {_key(info) for info in classes if self._memoises(info)}
        # Classes that hold a cache slot, and classes whose invalidation drops one.
        self.attribute: set[ClassKey] = set()
        for slot in self.cache_slots:
            if slot.attr and slot.holder is not None:
                self.attribute.add(slot.holder)
            elif slot.attr:
                self.attribute.update(_key(c) for c in self._owners(slot.attr))
        self.dropping: set[ClassKey] = {
            key for key, drops in self._drops.items() if any(s in self.cache_slots for s in drops)
        }
        self.caching = self.memoising | self.attribute | self.dropping
        self.any_memo = bool(self.memoising)
        self.any_cache = bool(self.caching)
        # Which classes' objects may be handed the table of which (and back).
        self._handed: dict[ClassKey, set[ClassKey]] = {}
        self._received: dict[ClassKey, set[ClassKey]] = {}
        self._join_shared_tables(classes)
        self._serves: dict[ClassKey, bool] = {}

    # -- the invalidation's slots ------------------------------------------------------

    def _dropped(self, info: ClassInfo) -> dict[Slot, set[str]]:
        """The slots the invalidation method of ``info`` (as its MRO resolves it) drops."""
        out: dict[Slot, set[str]] = {}
        seen: set[Target] = set()
        for name in self.names.config.invalidate_methods:
            target = self.resolver.find_method(info, name)
            if target is not None:
                self._collect_drops(info, target, out, seen)
        return out

    def _collect_drops(
        self, info: ClassInfo, target: Target, out: dict[Slot, set[str]], seen: set[Target]
    ) -> None:
        if target in seen:
            return
        seen.add(target)
        resolver = self.resolver
        skeleton = resolver.skeleton(target)
        if skeleton is None:
            return
        owner = resolver.class_of(target.path, skeleton.cls)
        types = skeleton.types
        for events in skeleton.events:
            for event in events:
                receiver = event.receiver
                if event.kind == WRITE:
                    if self.names.is_mapping(event.name) or not receiver or receiver == "?":
                        continue
                    if receiver == "self":
                        out.setdefault(Slot(_key(info), event.name), set())
                    else:
                        holder = resolver.receiver_class(receiver, owner, types, target.path)
                        key = _key(holder) if holder is not None else None
                        out.setdefault(Slot(key, event.name), set())
                    continue
                if event.kind != CALL or self.names.is_invalidate(event.name):
                    continue  # another object's invalidation: that object's cache
                if event.name == "cache_clear":
                    function = self.function_of(receiver, owner, types, target.path)
                    opaque = "" if function else f"{receiver}.cache_clear"
                    out.setdefault(Slot(None, function=function, opaque=opaque), set())
                elif receiver in (None, "self", "super()"):
                    callee = resolver.resolve_call(event, owner, types, target.path)
                    if callee is not None:
                        self._collect_drops(info, callee, out, seen)
                elif receiver != "?" and receiver.startswith("self."):
                    prefix, _, attr = receiver.rpartition(".")
                    if self.names.is_mapping(attr):
                        continue
                    if prefix == "self":
                        key: ClassKey | None = _key(info)
                    else:
                        holder = resolver.receiver_class(prefix, owner, types, target.path)
                        key = _key(holder) if holder is not None else None
                    # A method of an object of a class the audit holds drops what it
                    # drops there; one the audit cannot see cannot be ruled out.
                    held = resolver.receiver_class(receiver, owner, types, target.path)
                    callee = resolver.find_method(held, event.name) if held else None
                    if callee is not None and held is not None:
                        self._collect_drops(held, callee, out, seen)
                        out.setdefault(Slot(key, attr), set()).add(event.name)
                    else:
                        out.setdefault(Slot(key, attr, opaque=event.name), set()).add(event.name)

    def function_of(
        self, receiver: str | None, owner: ClassInfo | None, types: dict[str, str], path: str
    ) -> Target | None:
        """The function ``receiver`` names (``self.method``, ``function``, ``Cls.method``)."""
        resolver = self.resolver
        if not receiver or receiver == "?":
            return None
        prefix, _, name = receiver.rpartition(".")
        if not prefix:
            event = Event(CALL, name, None)
            return resolver.resolve_call(event, owner, types, path)
        if prefix == "self":
            return resolver.find_method(owner, name) if owner is not None else None
        cls = resolver.receiver_class(prefix, owner, types, path) or resolver.resolve_class(
            prefix, near=path
        )
        return resolver.find_method(cls, name) if cls is not None else None

    def _family_classes(self, info: ClassInfo) -> list[ClassInfo]:
        """``info``, its bases and its subclasses: every class whose methods an object
        typed ``info`` may run."""
        found = {_key(c): c for c in self.resolver.mro(info)}
        for sub in self.resolver.subclasses(info):
            for cls in self.resolver.mro(sub):
                found.setdefault(_key(cls), cls)
        return list(found.values())

    def _owners(self, attr: str) -> list[ClassInfo]:
        return [info for info in self.resolver.classes() if attr in info.owned_attributes]

    def _is_cache(self, slot: Slot) -> bool:
        """Whether what the invalidation drops may be a translation cache."""
        if slot.function is not None or slot.opaque:
            return True  # a functools cache: it keeps results by definition
        if slot.holder is not None:
            info = self._class(slot.holder)
            owners = self._family_classes(info) if info is not None else []
        else:
            owners = self._owners(slot.attr)
        if not owners:
            return True  # held by an object the audit does not hold: cannot be ruled out
        slots = {slot.attr}
        for cls in owners:
            context = {target for target, _ in self._context(cls)}
            slots |= {s.attr for s in self._drops.get(_key(cls), {}) if s.attr}
            for target, skeleton, node, event in self._fills_of(cls).get(slot.attr, []):
                if event.kind == WRITE and event.rebinding and _refreshes(skeleton, node, slots):
                    continue
                if target in context or self._translation_reaches(skeleton, target, node, event):
                    return True
        return False

    def _class(self, key: ClassKey) -> ClassInfo | None:
        return self.resolver.class_of(key[0], key[1])

    def _fills_of(
        self, info: ClassInfo
    ) -> dict[str, list[tuple[Target, FunctionSkeleton, int, Event]]]:
        """Per attribute, the stores into ``self.<attr>`` in the methods ``info`` defines:
        a rebinding to anything but ``None``, a subscript or in-place store, a call of a
        method of the object it holds other than a lookup or a drop."""
        key = _key(info)
        cached = self._fills.get(key)
        if cached is not None:
            return cached
        out: dict[str, list[tuple[Target, FunctionSkeleton, int, Event]]] = {}
        for method in info.methods:
            skeleton = self.resolver.project.function(info.path, f"{info.name}.{method}")
            if skeleton is None:
                continue
            target = Target(info.path, f"{info.name}.{method}", info.name, method)
            for node, events in enumerate(skeleton.events):
                for event in events:
                    attr = _stored_attr(event)
                    if attr is not None:
                        out.setdefault(attr, []).append((target, skeleton, node, event))
        self._fills[key] = out
        return out

    def _translation_reaches(
        self, skeleton: FunctionSkeleton, target: Target, node: int, store: Event
    ) -> bool:
        """A translation (a translate call, or a call of a function of the audit that
        makes one) runs before ``store`` at ``node`` on some path through the function."""
        owner = self.resolver.class_of(target.path, skeleton.cls)
        sources = set()
        for at, events in enumerate(skeleton.events):
            for event in events:
                if event is store:
                    break
                if event.kind == CALL and self._translates(event, owner, skeleton, target.path):
                    if at == node:
                        return True
                    sources.add(at)
        if not sources:
            return False
        seen = set(sources)
        stack = list(sources)
        while stack:
            current = stack.pop()
            for succ in skeleton.succs[current]:
                if succ == node:
                    return True
                if succ not in seen:
                    seen.add(succ)
                    stack.append(succ)
        return False

    def _translates(
        self, event: Event, owner: ClassInfo | None, skeleton: FunctionSkeleton, path: str
    ) -> bool:
        if self.names.is_translate(event.name):
            return True
        callee = self.resolver.resolve_call(event, owner, skeleton.types, path)
        body = self.resolver.skeleton(callee) if callee is not None else None
        return body is not None and any(
            e.kind == CALL and self.names.is_translate(e.name) for evs in body.events for e in evs
        )

    # -- memoising translates ----------------------------------------------------------

    def _context(self, info: ClassInfo) -> list[tuple[Target, FunctionSkeleton]]:
        """The translate method of ``info`` (MRO) and the helpers on ``self`` it calls."""
        key = _key(info)
        cached = self._contexts.get(key)
        if cached is not None:
            return cached
        resolver = self.resolver
        out: list[tuple[Target, FunctionSkeleton]] = []
        seen: set[Target] = set()
        stack = [
            t
            for name in self.names.config.translate_methods
            if (t := resolver.find_method(info, name)) is not None
        ]
        while stack:
            target = stack.pop()
            if target in seen:
                continue
            seen.add(target)
            skeleton = resolver.skeleton(target)
            if skeleton is None:
                continue
            out.append((target, skeleton))
            for events in skeleton.events:
                for event in events:
                    if event.kind == CALL and event.receiver in ("self", "super()"):
                        if self.names.is_translate(event.name) and event.receiver == "self":
                            continue
                        callee = resolver.resolve_call(event, info, skeleton.types, target.path)
                        if callee is not None:
                            stack.append(callee)
        self._contexts[key] = out
        return out

    def _memoises(self, info: ClassInfo) -> bool:
        """Its translation keeps a result between calls (see the module docstring)."""
        resolver = self.resolver
        context = self._context(info)
        dropped = {s.attr for s in self._drops.get(_key(info), {}) if s.attr}
        kept = dropped | {
            attr
            for _, skeleton in context
            for events in skeleton.events
            for event in events
            if (attr := _stored_attr(event)) is not None
        }
        for target, skeleton in context:
            owner = resolver.class_of(target.path, skeleton.cls)
            if self._cached_function(target, skeleton):
                return True
            for node, events in enumerate(skeleton.events):
                for event in events:
                    if event.kind == WRITE:
                        attr = _stored_attr(event)
                        if attr is None or self.names.is_mapping(attr):
                            continue
                        if event.rebinding and _refreshes(skeleton, node, kept):
                            continue
                        return True
                    if event.kind != CALL:
                        continue
                    callee = resolver.resolve_call(event, owner, skeleton.types, target.path)
                    if callee is not None and self._cached_function(callee, None):
                        return True
                    if self._keeps_in_helper(event, owner, skeleton, target.path, dropped):
                        return True
        return False

    def _cached_function(self, target: Target, skeleton: FunctionSkeleton | None) -> bool:
        """``target`` is under a ``functools``-style cache decorator."""
        skeleton = skeleton or self.resolver.skeleton(target)
        if skeleton is not None and any(map(is_cache_decorator, skeleton.decorators)):
            return True
        if target.cls is not None:
            info = self.resolver.class_of(target.path, target.cls)
            method = info.methods.get(target.name) if info is not None else None
            return method is not None and any(map(is_cache_decorator, method.decorators))
        return False

    def _keeps_in_helper(
        self,
        event: Event,
        owner: ClassInfo | None,
        skeleton: FunctionSkeleton,
        path: str,
        dropped: set[str],
    ) -> bool:
        """``self.<attr>.<method>(...)`` keeps a result in a helper object: one the
        invalidation drops, one whose method stores on its own object, or one of a class
        the audit does not know called with a storing method (``put``, ``update``)."""
        receiver = event.receiver
        if not receiver or not receiver.startswith("self.") or receiver.count(".") != 1:
            return False
        attr = receiver.split(".", 1)[1]
        if self.names.is_mapping(attr) or self.names.is_translate(event.name):
            return False  # a gather from the table, or a delegation (see ``serves``)
        if attr in dropped:
            return True
        callee = self.resolver.resolve_call(event, owner, skeleton.types, path)
        if callee is None:
            return event.name in STORE_VERBS
        body = self.resolver.skeleton(callee)
        return body is not None and any(
            _stored_attr(stored) is not None for events in body.events for stored in events
        )

    def family(self, info: ClassInfo) -> list[ClassInfo]:
        """The classes an object typed ``info`` may have: it and its subclasses."""
        return [info, *self.resolver.subclasses(info)]

    def caches(self, info: ClassInfo) -> bool:
        """An object typed ``info`` may hold (or drop) a cache."""
        return any(_key(c) in self.caching for c in self.family(info))

    # -- cache effects of single events -----------------------------------------------

    def slot_effect(
        self, event: Event, owner: ClassInfo | None, types: dict[str, str], path: str
    ) -> str | None:
        """INV, FILL or ``None`` for an event on a cache slot: rebinding a slot to ``None``
        or calling a method the invalidation calls on it (or ``clear()``,
        ``cache_clear()``) invalidates; storing into it fills; a lookup does nothing.
        ``owner``: the class of the function the event is in."""
        if not self.cache_slots:
            return None
        receiver = event.receiver
        if not receiver or receiver == "?":
            return None
        resolver = self.resolver
        if event.kind == WRITE:
            holder = resolver.receiver_class(receiver, owner, types, path)
            if not self._is_slot(holder, event.name, receiver):
                return None
            if event.rebinding:
                return INV if event.value == NONE else FILL
            return FILL
        if event.kind != CALL:
            return None
        if event.name == "cache_clear":
            function = self.function_of(receiver, owner, types, path)
            return INV if function is not None and function in self._function_slots else None
        prefix, _, attr = receiver.rpartition(".")
        if not prefix:
            return None
        holder = resolver.receiver_class(prefix, owner, types, path)
        if not self._is_slot(holder, attr, prefix):
            return None
        if event.name in DROP_VERBS or event.name in self._verbs.get(attr, ()):
            return INV
        return None if event.name in READ_VERBS else FILL

    def _is_slot(self, holder: ClassInfo | None, attr: str, receiver: str) -> bool:
        slots = self._slot_attrs.get(attr)
        if not slots:
            return False
        if holder is None:
            # An object of unknown class may be any that holds such a slot; a local or a
            # parameter of unknown class only when the audit knows no class for the slot.
            return receiver.startswith("self") or any(s.holder is None for s in slots)
        keys = {_key(c) for c in self._family_classes(holder)}
        return any(s.holder is None or s.holder in keys for s in slots)

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


def _stored_attr(event: Event) -> str | None:
    """The attribute of ``self`` an event stores into: a rebinding to anything but
    ``None``, a subscript or in-place store (``self.a[k] = v``, ``self.a.fill_(0)``), a
    call ``self.a.m(...)`` of a method other than a lookup or ``clear``."""
    if event.kind == WRITE:
        if event.receiver != "self" or (event.rebinding and event.value == NONE):
            return None
        return event.name
    if event.kind == CALL and event.receiver and event.receiver.startswith("self."):
        if event.name in READ_VERBS or event.name in DROP_VERBS:
            return None
        receiver = event.receiver
        if receiver.count(".") == 1:
            return receiver.split(".", 1)[1]
    return None


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
