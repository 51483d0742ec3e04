"""The cache model: which classes hold a translation cache and what each can see."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from swacheck.analysis.caches import CacheModel
from swacheck.analysis.index import ProjectIndex, index_module
from swacheck.analysis.names import Names
from swacheck.analysis.scope import ScopeFacts
from swacheck.analysis.summaries import SummaryResolver
from swacheck.config import Config


def _model(files: dict[str, str]) -> tuple[CacheModel, SummaryResolver]:
    modules = []
    for path, text in files.items():
        wrapper = MetadataWrapper(cst.parse_module(textwrap.dedent(text)))
        facts = index_module(wrapper.module, path, positions=wrapper.resolve(PositionProvider))
        facts.rule_facts["SWA001"] = ScopeFacts(True, True)
        modules.append(facts)
    resolver = SummaryResolver(ProjectIndex(modules), Names(Config()), frozenset(files))
    return resolver.caches, resolver


def _class(resolver: SummaryResolver, name: str):  # type: ignore[no-untyped-def]
    info = resolver.resolve_class(name)
    assert info is not None, name
    return info


MEMO = """
    class CachedPool:
        def register_mapping(self, table):
            self.full_to_swa_index_mapping = table
            self.invalidate_loc_cache()

        def invalidate_loc_cache(self):
            self._key = None

        def translate_loc_from_full_to_swa(self, loc):
            key = (loc.data_ptr(), loc.numel())
            if key != self._key:
                self._swa = self.full_to_swa_index_mapping[loc]
                self._key = key
            return self._swa
"""

PLAIN = """
    class PlainPool:
        def register_mapping(self, table):
            self.full_to_swa_index_mapping = table

        def invalidate_loc_cache(self):
            pass

        def translate_loc_from_full_to_swa(self, loc):
            return self.full_to_swa_index_mapping[loc]
"""


def test_a_memoising_translate_is_a_cache_and_a_plain_gather_is_not() -> None:
    model, resolver = _model({"cached.py": MEMO, "plain.py": PLAIN})
    assert model.caches(_class(resolver, "CachedPool"))
    assert not model.caches(_class(resolver, "PlainPool"))
    assert model.any_memo and model.any_cache


def test_a_memo_behind_an_early_return_is_a_cache() -> None:
    source = """
        class Pool:
            def invalidate_loc_cache(self):
                self._key = None

            def translate_loc_from_full_to_swa(self, loc):
                if self._key == loc.data_ptr():
                    return self._swa
                self._swa = self.full_to_swa_index_mapping[loc]
                self._key = loc.data_ptr()
                return self._swa
    """
    model, resolver = _model({"pool.py": source})
    assert model.memoising and model.caches(_class(resolver, "Pool"))


def test_an_attribute_filled_when_empty_is_a_cache_a_refreshed_one_is_not() -> None:
    kept = """
        class Kept:
            def invalidate_loc_cache(self):
                self.cached_loc = None

            def translate_loc_from_full_to_swa(self, loc):
                return self.full_to_swa_index_mapping[loc]

            def write(self, raw_loc):
                if self.cached_loc is None:
                    self.cached_loc = self.translate_loc_from_full_to_swa(raw_loc)
                return self.cached_loc
    """
    # Refilled whenever the caller's schedule says so, whatever the cache holds: the
    # refill runs under `layer_id == self.first_layer` alone (DeepSeek V4's pool).
    refreshed = kept.replace("Kept", "Refreshed").replace(
        "if self.cached_loc is None:",
        "if layer_id == self.first_layer or self.cached_loc is None:",
    )
    # The same written as the `else` of an `and`.
    negated = """
        class Negated:
            def invalidate_loc_cache(self):
                self.cached_loc = None

            def write(self, layer_id, raw_loc):
                if self.cached_loc is not None and layer_id != self.first_layer:
                    return self.cached_loc
                else:
                    self.cached_loc = self.pool.translate_loc_from_full_to_swa(raw_loc)
                return self.cached_loc
    """
    # The attribute the invalidation does not reset is not the cache it clears.
    unreset = kept.replace("Kept", "Unreset").replace(
        "self.cached_loc = None", "self.other = None", 1
    )
    model, resolver = _model(
        {"kept.py": kept, "refreshed.py": refreshed, "negated.py": negated, "unreset.py": unreset}
    )
    assert model.caches(_class(resolver, "Kept"))
    assert not model.caches(_class(resolver, "Refreshed"))
    assert not model.caches(_class(resolver, "Negated"))
    assert not model.caches(_class(resolver, "Unreset"))
    assert not model.any_memo  # an attribute cache is not served by translate calls


ALLOCATOR = """
    import torch
    from cached import CachedPool
    from plain import PlainPool

    class SharingAllocator:
        def __init__(self, kvcache: CachedPool, size):
            self.full_to_swa_index_mapping = torch.zeros(size)
            self._kvcache = kvcache
            self._kvcache.register_mapping(self.full_to_swa_index_mapping)

        def translate_loc_from_full_to_swa(self, loc):
            return self._kvcache.translate_loc_from_full_to_swa(loc)

    class PlainAllocator:
        def __init__(self, kvcache: PlainPool, size):
            self.full_to_swa_index_mapping = torch.zeros(size)
            self._kvcache = kvcache
            kvcache.register_mapping(self.full_to_swa_index_mapping)

        def translate_loc_from_full_to_swa(self, loc):
            return self._kvcache.translate_loc_from_full_to_swa(loc)

    class LooseAllocator:
        def __init__(self, kvcache, size):
            self.full_to_swa_index_mapping = torch.zeros(size)
            kvcache.register_mapping(self.full_to_swa_index_mapping)
            torch.save(self.full_to_swa_index_mapping, "table.pt")

    class Keeper:
        def __init__(self, size):
            self.full_to_swa_index_mapping = torch.zeros(size)
            torch.save(self.full_to_swa_index_mapping, "table.pt")
"""


def test_a_table_handed_to_a_caching_pool_is_seen_by_its_cache() -> None:
    model, resolver = _model({"cached.py": MEMO, "plain.py": PLAIN, "alloc.py": ALLOCATOR})
    assert model.sees_table(_class(resolver, "SharingAllocator"))
    assert not model.sees_table(_class(resolver, "PlainAllocator"))
    # handed to an object of unknown class: any pool that binds a table may hold it
    assert model.sees_table(_class(resolver, "LooseAllocator"))
    # handed only to functions that keep no table
    assert not model.sees_table(_class(resolver, "Keeper"))
    # an object of unknown class may be any
    assert model.sees_table(None)
    # rebinding changes one object's attribute: only that object's own cache sees it
    assert not model.sees_rebinding(_class(resolver, "SharingAllocator"))
    assert not model.sees_rebinding(_class(resolver, "PlainPool"))
    assert model.sees_rebinding(_class(resolver, "CachedPool"))


def test_a_translation_is_served_from_a_cache_through_delegation() -> None:
    model, resolver = _model({"cached.py": MEMO, "plain.py": PLAIN, "alloc.py": ALLOCATOR})
    assert model.serves(_class(resolver, "CachedPool"))
    assert model.serves(_class(resolver, "SharingAllocator"))
    assert not model.serves(_class(resolver, "PlainPool"))
    assert not model.serves(_class(resolver, "PlainAllocator"))
    assert model.serves(None)  # unknown: a memoising translate exists in the audit


def test_an_object_typed_by_a_base_may_be_a_caching_subclass() -> None:
    base = """
        class BasePool:
            def invalidate_loc_cache(self):
                pass

            def register_mapping(self, table):
                raise NotImplementedError

            def translate_loc_from_full_to_swa(self, loc):
                raise NotImplementedError
    """
    sub = MEMO.replace("class CachedPool:", "class CachedPool(BasePool):")
    alloc = """
        from base import BasePool

        class Allocator:
            def __init__(self, kvcache: BasePool):
                self._kvcache = kvcache
                kvcache.register_mapping(self.full_to_swa_index_mapping)
    """
    model, resolver = _model({"base.py": base, "cached.py": sub, "alloc.py": alloc})
    assert model.serves(_class(resolver, "BasePool"))
    assert model.sees_table(_class(resolver, "Allocator"))
    assert model.sees_rebinding(_class(resolver, "BasePool"))


def test_no_cache_anywhere() -> None:
    model, _resolver = _model({"plain.py": PLAIN})
    assert not model.any_cache and not model.any_memo
    assert not model.sees_table(None) and not model.serves(None)


SHAPES = {
    "dict.py": """
        class DictPool:
            def invalidate_loc_cache(self):
                self._loc_cache.clear()

            def translate_loc_from_full_to_swa(self, loc):
                key = (loc.data_ptr(), loc.numel())
                if key not in self._loc_cache:
                    self._loc_cache[key] = self.full_to_swa_index_mapping[loc]
                return self._loc_cache[key]
    """,
    "helper.py": """
        class LocCache:
            def __init__(self):
                self._entries = {}

            def lookup(self, key):
                return self._entries.get(key)

            def remember(self, key, value):
                self._entries[key] = value

        class HelperPool:
            def __init__(self):
                self.loc_cache = LocCache()

            def invalidate_loc_cache(self):
                self.loc_cache = LocCache()

            def translate_loc_from_full_to_swa(self, loc):
                hit = self.loc_cache.lookup(loc.data_ptr())
                if hit is None:
                    hit = self.full_to_swa_index_mapping[loc]
                    self.loc_cache.remember(loc.data_ptr(), hit)
                return hit

        class ForeignHelperPool:
            def invalidate_loc_cache(self):
                pass

            def translate_loc_from_full_to_swa(self, loc):
                out = self.full_to_swa_index_mapping[loc]
                self.memo.put(loc.data_ptr(), out)
                return out
    """,
    "lru.py": """
        import functools

        @functools.cache
        def _gather(table, key):
            return table[key]

        class LruPool:
            def invalidate_loc_cache(self):
                self.translate_loc_from_full_to_swa.cache_clear()

            @functools.lru_cache(maxsize=1)
            def translate_loc_from_full_to_swa(self, loc):
                return self.full_to_swa_index_mapping[loc]

        class ModuleLruPool:
            def invalidate_loc_cache(self):
                _gather.cache_clear()

            def translate_loc_from_full_to_swa(self, loc):
                return _gather(self.full_to_swa_index_mapping, loc)
    """,
    "tuple.py": """
        class TuplePool:
            def invalidate_loc_cache(self):
                self._last = (None, None)

            def translate_loc_from_full_to_swa(self, loc):
                if self._last[0] is loc:
                    return self._last[1]
                out = self._lookup(loc)
                return out

            def _lookup(self, loc):
                out = self.full_to_swa_index_mapping[loc]
                self._last = (loc, out)
                return out
    """,
}


def test_memoising_translates_in_every_shape() -> None:
    model, resolver = _model({**SHAPES, "plain.py": PLAIN})
    for name in ("DictPool", "HelperPool", "ForeignHelperPool", "LruPool", "ModuleLruPool"):
        assert model.serves(_class(resolver, name)), name
    # the tuple is stored by a helper the translation calls on `self`
    assert model.serves(_class(resolver, "TuplePool"))
    assert not model.serves(_class(resolver, "PlainPool"))
    assert not model.caches(_class(resolver, "LocCache"))


BACKEND = """
    class Pool:
        def __init__(self, backend: Backend):
            self.attn_backend = backend

        def register_mapping(self, table):
            self.full_to_swa_index_mapping = table

        def invalidate_loc_cache(self):
            self.attn_backend.swa_loc_cache = None

        def translate_loc_from_full_to_swa(self, loc):
            return self.full_to_swa_index_mapping[loc]

    class Backend:
        def init_forward_metadata(self, forward_batch):
            if self.swa_loc_cache is None:
                swa = self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
                self.swa_loc_cache = swa
            return self.swa_loc_cache

    class RefreshingBackend:
        def init_forward_metadata(self, forward_batch):
            self.swa_page_table = self.pool.translate_loc_from_full_to_swa(forward_batch.pages)

    class RefreshedPool:
        def invalidate_loc_cache(self):
            self.backend.swa_page_table = None
"""


def test_a_cache_held_by_another_object_that_the_invalidation_drops() -> None:
    model, resolver = _model({"backend.py": BACKEND})
    # the pool translates by a plain gather, but its invalidation drops the backend's
    # cache, filled from a translation and kept until dropped
    assert model.caches(_class(resolver, "Pool"))
    assert model.caches(_class(resolver, "Backend"))
    assert not model.serves(_class(resolver, "Pool"))
    # a slot stored at every call is still kept between calls, and a translation
    # reaches the store: it cannot be ruled out as a cache
    assert model.caches(_class(resolver, "RefreshedPool"))


def test_what_an_invalidation_drops_is_no_cache_only_where_proven() -> None:
    source = """
        class Counter:
            def invalidate_loc_cache(self):
                self.resets = 0
                self.far.away = None

        class Unfilled:
            def invalidate_loc_cache(self):
                self.nothing = None
    """
    model, resolver = _model({"pool.py": source})
    # `far.away` belongs to an object the audit does not hold: it cannot be ruled out
    assert model.caches(_class(resolver, "Counter"))
    # nothing anywhere stores into `nothing`: no cache
    assert not model.caches(_class(resolver, "Unfilled"))


def test_stores_and_drops_of_a_cache_slot_are_cache_effects() -> None:
    from swacheck.analysis.dataflow import FILL, INV
    from swacheck.analysis.writes import CALL, NONE, WRITE, Event

    model, resolver = _model(SHAPES)
    dict_pool = _class(resolver, "DictPool")
    helper_pool = _class(resolver, "HelperPool")
    path = "dict.py"

    def effect(event, owner):  # type: ignore[no-untyped-def]
        return model.slot_effect(event, owner, {}, path)

    assert effect(Event(CALL, "clear", "self._loc_cache"), dict_pool) == INV
    assert effect(Event(CALL, "get", "self._loc_cache"), dict_pool) is None
    assert effect(Event(CALL, "setdefault", "self._loc_cache"), dict_pool) == FILL
    assert effect(Event(WRITE, "_loc_cache", "self", how="subscript store"), dict_pool) == FILL
    # the helper object's slot: rebinding it to a new object empties it
    assert effect(Event(WRITE, "loc_cache", "self", rebinding=True), helper_pool) == FILL
    assert effect(Event(WRITE, "loc_cache", "self", rebinding=True, value=NONE), helper_pool) == (
        INV
    )
    assert effect(Event(CALL, "remember", "self.loc_cache"), helper_pool) == FILL
    # an attribute no invalidation drops is nothing to the cache
    assert effect(Event(CALL, "clear", "self.other"), dict_pool) is None
    lru = _class(resolver, "LruPool")
    cleared = Event(CALL, "cache_clear", "self.translate_loc_from_full_to_swa")
    assert model.slot_effect(cleared, lru, {}, "lru.py") == INV


def test_a_cache_dropped_through_a_method_of_the_object_that_holds_it() -> None:
    source = """
        class Backend:
            def init_forward_metadata(self, forward_batch):
                if self.swa_loc is None:
                    self.swa_loc = self.pool.translate_loc_from_full_to_swa(forward_batch.loc)

            def reset_swa(self):
                self.swa_loc = None

            def reset_stats(self):
                self.calls = 0

        class Pool:
            def __init__(self, backend: Backend):
                self.backend = backend

            def invalidate_loc_cache(self):
                self.backend.reset_swa()

        class StatsPool:
            def __init__(self, backend: Backend):
                self.backend = backend

            def invalidate_loc_cache(self):
                self.backend.reset_stats()

        class UnknownPool:
            def invalidate_loc_cache(self):
                self.helper.reset()
    """
    model, resolver = _model({"pool.py": source})
    # followed into the backend's method: it drops a cache filled from a translation
    assert model.caches(_class(resolver, "Pool"))
    # ... or a counter nothing fills from a translation: no cache
    assert not model.caches(_class(resolver, "StatsPool"))
    # a method of an object of unknown class cannot be ruled out
    assert model.caches(_class(resolver, "UnknownPool"))
    # the same call elsewhere is an invalidation
    from swacheck.analysis.dataflow import INV
    from swacheck.analysis.writes import CALL, Event

    event = Event(CALL, "reset", "self.helper")
    assert model.slot_effect(event, _class(resolver, "UnknownPool"), {}, "pool.py") == INV
