"""The base of the order rules (SWA001, SWA004, SWA005, SWA007): their shared scope."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from swacheck.analysis.names import Names
from swacheck.analysis.scope import ScopeFacts, activation, config_terms, scope_facts
from swacheck.analysis.summaries import project_resolver
from swacheck.rule import Rule

if TYPE_CHECKING:
    from swacheck.analysis.caches import CacheModel
    from swacheck.analysis.index import ProjectIndex
    from swacheck.config import Config
    from swacheck.context import FileContext

# The examples' translation cache (SGLang #25824's): a translate that memoises its
# result, as a method to append to an example's class, and a pool that holds it. Without
# a cache in the audited files an order rule does not apply.
MEMOISING_TRANSLATE = """
    def translate_loc_from_full_to_swa(self, kv_indices):
        key = (kv_indices.data_ptr(), kv_indices.numel())
        if key != self._cached_loc_key:
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices]
            self._cached_loc_key = key
        return self._cached_swa_loc
"""
MEMOISING_POOL = (
    """
class SWAKVPool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None
"""
    + MEMOISING_TRANSLATE
)

# The same cache in the other shapes DESIGN.md names, for the examples: a dict, a helper
# object, a functools cache, and a cache held by another object (the attention backend)
# that the pool's invalidation drops.
DICT_POOL = """
class SWAKVPool:
    def invalidate_loc_cache(self):
        self._loc_cache.clear()

    def translate_loc_from_full_to_swa(self, kv_indices):
        key = (kv_indices.data_ptr(), kv_indices.numel())
        if key not in self._loc_cache:
            self._loc_cache[key] = self.full_to_swa_index_mapping[kv_indices]
        return self._loc_cache[key]
"""
HELPER_POOL = """
class SWAKVPool:
    def invalidate_loc_cache(self):
        self.loc_cache.reset()

    def translate_loc_from_full_to_swa(self, kv_indices):
        hit = self.loc_cache.get(kv_indices.data_ptr(), kv_indices.numel())
        if hit is None:
            hit = self.full_to_swa_index_mapping[kv_indices]
            self.loc_cache.put(kv_indices.data_ptr(), kv_indices.numel(), hit)
        return hit
"""
LRU_POOL = """
import functools

class SWAKVPool:
    def invalidate_loc_cache(self):
        self.translate_loc_from_full_to_swa.cache_clear()

    @functools.lru_cache(maxsize=4)
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]
"""
BACKEND_POOL = """
class TritonAttnBackend:
    def init_forward_metadata(self, forward_batch):
        if self.swa_loc is None:
            self.swa_loc = self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)

class SWAKVPool:
    def __init__(self, backend: TritonAttnBackend):
        self.attn_backend = backend

    def invalidate_loc_cache(self):
        self.attn_backend.swa_loc = None

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]
"""


class OrderRule(Rule):
    """Base of the order rules (SWA001, SWA004, SWA005, SWA007): their shared scope.

    They read method summaries and share one per-file :class:`ScopeFacts`. They apply
    only where a translation cache exists or cannot be ruled out
    (:mod:`swacheck.analysis.caches`) and the audit defines an invalidation method: the
    second is decided on raw bytes before parsing (``activation``), both on the parsed
    facts (``inactive_reason``). Their trigger set is the configured names
    (``config_terms``); a rule may add to it.
    """

    @classmethod
    def needs_skeletons(cls, context: FileContext) -> bool:
        """Files that take part in summaries (a configured name) or mention SWA (the
        classes a capture runner may hold); other files' functions are read off their
        tree when the file itself is checked."""
        return scope_facts(context).mentions_swa

    @classmethod
    def triggers(cls, config: Config) -> frozenset[str] | None:
        return config_terms(config)

    @classmethod
    def activation(cls, config: Config) -> tuple[frozenset[str], re.Pattern[bytes]]:
        return activation(config)

    @classmethod
    def inactive_reason(cls, project: ProjectIndex, config: Config) -> str | None:
        facts = [f for _, f in project.rule_facts(cls.code) if isinstance(f, ScopeFacts)]
        if not any(f.defines_invalidate for f in facts):
            return f"no audited file defines {', '.join(config.invalidate_methods)}"
        caches = project_resolver(project, Names(config)).caches
        if not cls.applies_to(caches):
            return cls.missing_cache(config)
        return None

    @classmethod
    def applies_to(cls, caches: CacheModel) -> bool:
        """Whether the audit's caches are of a kind the rule is about."""
        return caches.any_cache

    @classmethod
    def missing_cache(cls, config: Config) -> str:
        translate = ", ".join(config.translate_methods)
        return (
            f"no translation cache in the audited files: no memoising {translate}, and "
            "nothing the invalidation drops can hold a translation"
        )

    @classmethod
    def collect_facts(cls, context: FileContext) -> ScopeFacts:
        return scope_facts(context)
