"""SWA001 mapping-write-without-invalidation."""

from __future__ import annotations

import libcst as cst

from swacheck.analysis.order import (
    FunctionFlow,
    Step,
    function_flow,
    invalidation_receiver,
    statement_of,
    writes_delegated,
)
from swacheck.analysis.scope import config_terms
from swacheck.analysis.writes import WRITE
from swacheck.config import Config
from swacheck.finding import Applicability, Fix
from swacheck.fix_safety import safe_fix, unsafe_fix
from swacheck.order_rule import MEMOISING_TRANSLATE, OrderRule
from swacheck.rule import Invalid, Valid

_MEMO = MEMOISING_TRANSLATE

_POOL = (
    """
class SWAKVPool:
    def register_mapping(self, table):
        self.full_to_swa_index_mapping = table
        self.invalidate_loc_cache()

    def invalidate_loc_cache(self):
        self._cached_loc_key = None
"""
    + _MEMO
)


class MappingWriteWithoutInvalidation(OrderRule):
    """
    ## What it does
    Flags a write to the full→SWA mapping table (`mapping-attributes`) that is not
    covered by an invalidation of the translation cache (`invalidate-methods`): some
    path from the write to the end of the writing function passes no invalidation,
    and no invalidation precedes the write with no cache fill (`translate-methods`
    call) in between.

    A write is a rebinding (`self.full_to_swa_index_mapping = m` outside the
    constructor), a subscript or augmented store, an in-place tensor method
    (`fill_`, `copy_`, `index_put_`, any public `*_` method), `torch.index_put_`-style
    functions, an `out=` argument, a Triton launch `kernel[grid](..., mapping)` (when
    `kernel-launch-writes` is on), all of these through a local alias or view
    (`t = self.full_to_swa_index_mapping; t[:-1].fill_(0)`), and a call of a private
    helper of the same file whose own write it leaves to its callers. Calls are
    followed through `self.helper()`, inherited methods, `super()`, attributes and
    locals whose class the audit knows, and module-level functions, across the files
    of the audit; an unresolvable call has no effect.

    The constructor's writes before any fill are exempt (nothing can have cached yet),
    and so are writes to the mapping of an object the function has itself just built
    (`self.pool = SWAKVPool(...)` on every path before the write, no fill since: start-up
    wiring), and paths that end in `raise`. A private helper that leaves its write to
    its callers is reported once, at the outermost caller that does not cover it.
    Branches under a mode guard (`if self.is_hybrid_swa:`) are taken as the hybrid-SWA
    configuration runs them.
    Only writes a translation cache can see count (DESIGN.md's scope rules): the rule
    applies where a cache exists or cannot be ruled out. A cache is a memoising
    translate method, in any shape: it keeps its result on `self` between calls
    (`self._cached_swa_loc = ...`, a single-entry tuple `self._last = (key, out)`, a
    dict `self._loc_cache[key] = out`), in a helper object it holds
    (`self.loc_cache.put(key, out)`), or under a `functools` cache (`@lru_cache` on the
    translate or on a function it calls); or whatever the invalidation method drops
    (`self._loc_cache.clear()`, `self.loc_cache.reset()`,
    `self._gather.cache_clear()`, `self.attn_backend.swa_loc_cache = None`: a cache held
    by another object) unless that is proven to be no cache: an attribute nothing
    stores into, or one refilled on the caller's schedule as well as on its own state
    (`if layer_id == self.start_layer or self.cached_loc is None:`, once per forward).
    A class whose invalidation drops a cache has one, wherever it is held. A write into
    the table counts where an object that may hold the same tensor caches: the object
    written (or a subclass of its type), an object it handed the table to
    (`self._kvcache.register_mapping(self.full_to_swa_index_mapping)`), or one that
    handed the table to it; rebinding the attribute counts only where the object itself
    caches; a write through an object of unknown class counts where the audit holds any
    cache. A fill is a translation that can be served from a cache, or a store into
    what the invalidation drops; dropping it again inline (`self._loc_cache.clear()`,
    `self.cached_loc = None`) is an invalidation. A helper that invalidates only on a
    condition counts on the paths where it does: a condition on its object's state that
    the caller's path leaves open (`if not self.capturing:`) is taken as the helper's
    judgement, one the caller's path decides (a test of it, `x.capturing = True`, a
    literal argument) as decided, one on a parameter the caller leaves open as a branch.
    The rule is inactive where no audited file defines an invalidation method or holds
    a translation cache.

    ## Why is this bad?
    The pool memoises the last translation (I1). A mapping write that is not followed
    by an invalidation leaves a cached translation computed from the old mapping;
    the next `translate_loc_from_full_to_swa` on the same location tensor returns stale
    SWA slots, and attention reads or writes the wrong SWA KV entries. SGLang PR
    #25824 had to add `invalidate_loc_cache()` to each of `alloc`, `free_swa`, `clear`,
    `set_full_to_swa_mapping` and `register_mapping`; a new mutation point that forgets
    it brings the bug back.

    ## Fix safety
    The fix inserts the invalidation right after the write statement, on the receiver
    that owns the cache. Where it is unsafe, check that the receiver is the right pool
    and is never `None` there.
    """

    code = "SWA001"
    name = "mapping-write-without-invalidation"
    summary = "Mapping write not followed (or preceded) by a translation-cache invalidation"
    fixes = (
        safe_fix("the receiver's class is known to define the invalidation method"),
        unsafe_fix("the receiver is borrowed from another call in the class"),
    )
    config_keys = (
        "mapping-attributes",
        "invalidate-methods",
        "translate-methods",
        "kernel-launch-writes",
    )
    invariant = "I1"
    origin = "SGLang PR #25824 items 1-3"

    VALID = [
        # the constructor builds the table before anything can have cached
        Valid(
            """
import torch

class SWAKVPool:
    def __init__(self, size):
        self.full_to_swa_index_mapping = torch.empty(size + 1, dtype=torch.int64)
        self.full_to_swa_index_mapping[-1] = -1

    def invalidate_loc_cache(self):
        self._cached_loc_key = None
"""
            + _MEMO
        ),
        # every branch invalidates; early return before the write is fine
        Valid(
            """
class Allocator:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def alloc(self, need_size):
        if need_size > self.available_size():
            return None
        full = self.full_attn_allocator.alloc(need_size)
        self.full_to_swa_index_mapping[full] = self.swa_attn_allocator.alloc(need_size)
        if full is None:
            self.invalidate_loc_cache()
            return None
        self.invalidate_loc_cache()
        return full
"""
            + _MEMO
        ),
        # try/finally: the finally body runs on every exit
        Valid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def set_full_to_swa_mapping(self, mapping):
        try:
            if mapping is None:
                return
            self.full_to_swa_index_mapping.copy_(mapping)
        finally:
            self.invalidate_loc_cache()
"""
            + _MEMO
        ),
        # invalidation first, no fill in between
        Valid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def clear(self):
        self.invalidate_loc_cache()
        head = self.full_to_swa_index_mapping[:-1]
        head.fill_(0)
"""
            + _MEMO
        ),
        # writes in a loop, invalidation after it; a raise path does not count
        Valid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def free_many(self, chunks):
        for idx in chunks:
            if idx is None:
                continue
            self.full_to_swa_index_mapping[idx] = 0
        if self.full_to_swa_index_mapping[0] != 0:
            raise RuntimeError("sentinel clobbered")
        self.invalidate_loc_cache()
"""
            + _MEMO
        ),
        # the invalidation under a mode guard counts (SWA mode is what matters)
        Valid(
            """
from pool import SWAKVPool

class Allocator:
    def __init__(self, kvcache: SWAKVPool, size):
        self.full_to_swa_index_mapping = torch.zeros(size + 1, dtype=torch.int64)
        self._kvcache = kvcache
        self._kvcache.register_mapping(self.full_to_swa_index_mapping)

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
        if self.is_hybrid_swa:
            self._kvcache.invalidate_loc_cache()
""",
            files={"pool.py": _POOL},
        ),
        # reads and copies are not writes
        Valid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def snapshot(self, kv_indices):
        table = self.full_to_swa_index_mapping.clone()
        table.fill_(0)
        gathered = self.full_to_swa_index_mapping[kv_indices]
        gathered.zero_()
        return table, self.full_to_swa_index_mapping.to("cpu")
"""
            + _MEMO
        ),
        # a private helper whose callers (same file) all invalidate
        Valid(
            """
class Allocator:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def _set_rows(self, idx, rows):
        self.full_to_swa_index_mapping[idx] = rows

    def alloc(self, idx, rows):
        self._set_rows(idx, rows)
        self.invalidate_loc_cache()
"""
            + _MEMO
        ),
        # the table handed to a caching pool in another file, whose helper invalidates
        Valid(
            """
from pool import SWAKVPool

class Allocator:
    def __init__(self, kvcache: SWAKVPool):
        self._kvcache = kvcache
        self._kvcache.register_mapping(self.full_to_swa_index_mapping)

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
        self._kvcache.flush()
""",
            files={
                "pool.py": _POOL
                + """
    def flush(self):
        self.invalidate_loc_cache()
"""
            },
        ),
        # an inherited helper (base class in another file) that invalidates
        Valid(
            """
from base import BasePool

class Pool(BasePool):
    def clear(self):
        self.full_to_swa_index_mapping.zero_()
        self._reset_translation()
""",
            files={
                "base.py": """
class BasePool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def _reset_translation(self):
        self.invalidate_loc_cache()
"""
                + _MEMO
            },
        ),
        # a closure that writes; its caller invalidates after calling it
        Valid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def rebuild(self, rows):
        def apply():
            self.full_to_swa_index_mapping[rows] = 0

        apply()
        self.invalidate_loc_cache()
"""
            + _MEMO
        ),
        # an inline invalidation: the write resets what `invalidate_loc_cache` resets
        Valid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self.cached_swa = None

    def translate_loc_from_full_to_swa(self, loc):
        if self.cached_swa is None:
            self.cached_swa = self.full_to_swa_index_mapping[loc]
        return self.cached_swa

    def register_mapping(self, table):
        self.full_to_swa_index_mapping = table
        self.cached_swa = None
"""
        ),
        # wiring at start-up: the pool was just built here, nothing can have cached
        Valid(
            """
from pool import SWAKVPool

class Runner:
    def init_pools(self, size, shared):
        self.kv_pool = SWAKVPool(size)
        if shared is not None:
            self.kv_pool.full_to_swa_index_mapping = shared.full_to_swa_index_mapping
        return self.kv_pool
""",
            files={"pool.py": _POOL},
        ),
        # a fill only in code the mode guard rules out (SWA mode is assumed) does not
        # flow into the code after the branch
        Valid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def reset(self, loc):
        self.invalidate_loc_cache()
        if not self.is_hybrid_swa:
            self.translate_loc_from_full_to_swa(loc)
        self.full_to_swa_index_mapping.zero_()
"""
            + _MEMO
        ),
        # no cache can see this table: the pool it is handed to translates with a plain
        # gather, although another class of the audit caches
        Valid(
            """
import torch
from pool import SWAKVPool

class PlainPool:
    def register_mapping(self, table):
        self.full_to_swa_index_mapping = table

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices].to(torch.int32)

class Allocator:
    def __init__(self, kvcache: PlainPool, size):
        self.full_to_swa_index_mapping = torch.zeros(size + 1, dtype=torch.int64)
        self._kvcache = kvcache
        self._kvcache.register_mapping(self.full_to_swa_index_mapping)

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
""",
            files={"pool.py": _POOL},
        ),
        # an attribute refilled on the caller's schedule (at every forward's first layer)
        # is not a cache an entry outlives: nothing here can be served stale
        Valid(
            """
class LayeredPool:
    def invalidate_loc_cache(self):
        self.cached_loc = None

    def register_mapping(self, table):
        self.full_to_swa_index_mapping = table

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]

    def write_swa_kv(self, layer_id, raw_loc, k):
        if layer_id == self.first_layer or self.cached_loc is None:
            self.cached_loc = self.translate_loc_from_full_to_swa(raw_loc)
        self.swa_pool.set(self.cached_loc, k)

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
"""
        ),
        # no translation cache in the audit at all: nothing to invalidate
        Valid(
            """
class Pool:
    def invalidate_loc_cache(self):
        pass

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
"""
        ),
        # a dict memo: the write is followed by the inline drop of the dict
        Valid(
            """
class SWAKVPool:
    def invalidate_loc_cache(self):
        self._loc_cache.clear()

    def translate_loc_from_full_to_swa(self, kv_indices):
        key = (kv_indices.data_ptr(), kv_indices.numel())
        if key not in self._loc_cache:
            self._loc_cache[key] = self.full_to_swa_index_mapping[kv_indices]
        return self._loc_cache[key]

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
        self._loc_cache.clear()
"""
        ),
        # a helper object keeps the translations; resetting it is the invalidation
        Valid(
            """
class LocCache:
    def __init__(self):
        self.entries = {}

    def put(self, key, value):
        self.entries[key] = value

    def get(self, key):
        return self.entries.get(key)

class SWAKVPool:
    def __init__(self):
        self.loc_cache = LocCache()

    def invalidate_loc_cache(self):
        self.loc_cache = LocCache()

    def translate_loc_from_full_to_swa(self, kv_indices):
        out = self.loc_cache.get(kv_indices.data_ptr())
        if out is None:
            out = self.full_to_swa_index_mapping[kv_indices]
            self.loc_cache.put(kv_indices.data_ptr(), out)
        return out

    def clear(self):
        self.full_to_swa_index_mapping[:-1].fill_(0)
        self.invalidate_loc_cache()
"""
        ),
        # what the invalidation drops is proven no cache: nothing stores into it
        Valid(
            """
class SWAKVPool:
    def invalidate_loc_cache(self):
        self.swa_loc_hint = None

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
"""
        ),
        # the helper invalidates unless the pool is detached: a condition on its own
        # state, which the writing method leaves open
        Valid(
            """
class Allocator:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def _flush_translations(self):
        if self._kvcache is not None:
            self._kvcache.invalidate_loc_cache()
        self.invalidate_loc_cache()

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
        self._flush_translations()
"""
            + _MEMO
        ),
        # Triton launches do not count when configured so
        Valid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def remap(self, idx):
        remap_kernel[(1,)](self.full_to_swa_index_mapping, idx)
"""
            + _MEMO,
            config={"kernel-launch-writes": False},
        ),
        # custom names from [tool.swacheck]
        Valid(
            """
class Pool:
    def flush_translations(self):
        self._cache = None

    def free(self, idx):
        self.token_map[idx] = 0
        self.flush_translations()
        self.full_to_swa_index_mapping[idx] = 0

    def translate_loc_from_full_to_swa(self, loc):
        if self._cache is None:
            self._cache = self.token_map[loc]
        return self._cache
""",
            config={
                "mapping-attributes": ["token_map"],
                "invalidate-methods": ["flush_translations"],
            },
        ),
    ]
    INVALID = [
        # #25824: free_swa wrote the mapping and never invalidated
        Invalid(
            """
class SWATokenToKVPoolAllocator:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def free_swa(self, free_index):
        swa_indices = self.full_to_swa_index_mapping[free_index]
        self.swa_attn_allocator.free(swa_indices)
        self.full_to_swa_index_mapping[free_index] = 0
"""
            + _MEMO,
            line=9,
            fixed="""
class SWATokenToKVPoolAllocator:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def free_swa(self, free_index):
        swa_indices = self.full_to_swa_index_mapping[free_index]
        self.swa_attn_allocator.free(swa_indices)
        self.full_to_swa_index_mapping[free_index] = 0
        self.invalidate_loc_cache()
"""
            + _MEMO,
        ),
        # an early return skips the invalidation
        Invalid(
            """
class Allocator:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def alloc(self, need_size):
        full = self.full_attn_allocator.alloc(need_size)
        self.full_to_swa_index_mapping[full] = self.swa_attn_allocator.alloc(need_size)
        if need_size == 1:
            return full
        self.invalidate_loc_cache()
        return full
"""
            + _MEMO,
            line=8,
            fixed="""
class Allocator:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def alloc(self, need_size):
        full = self.full_attn_allocator.alloc(need_size)
        self.full_to_swa_index_mapping[full] = self.swa_attn_allocator.alloc(need_size)
        self.invalidate_loc_cache()
        if need_size == 1:
            return full
        self.invalidate_loc_cache()
        return full
"""
            + _MEMO,
        ),
        # an alias and a view: t[:-1].fill_(0) writes the mapping; one branch misses
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def clear(self, full):
        t = self.full_to_swa_index_mapping
        t[:-1].fill_(0)
        if full:
            self.invalidate_loc_cache()
"""
            + _MEMO,
            line=8,
        ),
        # tuple unpacking makes an alias too
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def reset(self):
        table, other = self.full_to_swa_index_mapping, self.other
        table.zero_()
"""
            + _MEMO,
            line=8,
        ),
        # try/except: only the failure path invalidates
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def set_full_to_swa_mapping(self, mapping):
        try:
            self.full_to_swa_index_mapping.copy_(mapping)
        except RuntimeError:
            self.invalidate_loc_cache()
            raise
"""
            + _MEMO,
            line=8,
        ),
        # rebinding outside the constructor (register_mapping before #25824)
        Invalid(
            """
class SWAKVPool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def register_mapping(self, full_to_swa_index_mapping):
        self.full_to_swa_index_mapping = full_to_swa_index_mapping
"""
            + _MEMO,
            line=7,
            fixed="""
class SWAKVPool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def register_mapping(self, full_to_swa_index_mapping):
        self.full_to_swa_index_mapping = full_to_swa_index_mapping
        self.invalidate_loc_cache()
"""
            + _MEMO,
        ),
        # invalidation first, but a translation fills the cache before the write
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def move(self, src, dst, loc):
        self.invalidate_loc_cache()
        swa = self.translate_loc_from_full_to_swa(loc)
        torch.index_put_(self.full_to_swa_index_mapping, (dst,), swa)
"""
            + _MEMO,
            line=9,
        ),
        # a constructor that writes after a fill is no longer "before any fill"
        Invalid(
            """
class Pool:
    def __init__(self, loc):
        self.full_to_swa_index_mapping = torch.zeros(16)
        self.warm = self.translate_loc_from_full_to_swa(loc)
        self.full_to_swa_index_mapping[loc] = 1

    def invalidate_loc_cache(self):
        self._cached_loc_key = None
"""
            + _MEMO,
            line=6,
        ),
        # out= and Triton launches write too
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def remap(self, src, idx):
        torch.index_select(src, 0, idx, out=self.full_to_swa_index_mapping)
"""
            + _MEMO,
            line=7,
        ),
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def remap(self, idx):
        remap_kernel[(1,)](self.full_to_swa_index_mapping, idx)
"""
            + _MEMO,
            line=7,
        ),
        # a private helper writes; its caller (same class) does not invalidate
        Invalid(
            """
class Allocator:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def _set_rows(self, idx, rows):
        self.full_to_swa_index_mapping[idx] = rows

    def alloc(self, idx, rows):
        self._set_rows(idx, rows)
        return idx
"""
            + _MEMO,
            line=10,
        ),
        # a nested closure writes; the enclosing function calls it and never invalidates
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def rebuild(self, rows):
        def apply():
            self.full_to_swa_index_mapping[rows] = 0

        apply()
        return rows
"""
            + _MEMO,
            line=10,
        ),
        # the table is handed to a caching pool in another file (as SGLang's allocator
        # does), and that pool's helper fills the cache after our invalidation
        Invalid(
            """
from pool import SWAKVPool

class Allocator:
    def __init__(self, kvcache: SWAKVPool):
        self._kvcache = kvcache
        kvcache.register_mapping(self.full_to_swa_index_mapping)

    def move(self, loc, rows):
        self._kvcache.invalidate_loc_cache()
        self._kvcache.prefetch(loc)
        self.full_to_swa_index_mapping[loc] = rows
""",
            line=12,
            files={
                "pool.py": _POOL
                + """
    def prefetch(self, loc):
        self.translate_loc_from_full_to_swa(loc)
"""
            },
        ),
        # inherited from a base class in another file: a helper that fills
        Invalid(
            """
from base import BasePool

class Pool(BasePool):
    def clear(self, loc):
        self.invalidate_loc_cache()
        self.warm_up(loc)
        self.full_to_swa_index_mapping.zero_()
""",
            line=8,
            files={
                "base.py": """
class BasePool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def warm_up(self, loc):
        return self.translate_loc_from_full_to_swa(loc)
"""
                + _MEMO
            },
        ),
        # an attribute cache filled from a translation and kept until invalidated
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self.cached_loc = None

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]

    def write_swa_kv(self, raw_loc, k):
        if self.cached_loc is None:
            self.cached_loc = self.translate_loc_from_full_to_swa(raw_loc)
        self.swa_pool.set(self.cached_loc, k)

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
""",
            line=15,
        ),
        # resetting an attribute the invalidation method does not reset is no invalidation
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def register_mapping(self, table):
        self.full_to_swa_index_mapping = table
        self.last_table = None
"""
            + _MEMO,
            line=7,
        ),
        # a flag naming an SWA sub-mode (a ring buffer) is not the SWA mode switch: the
        # write after its early return runs in SWA mode too
        Invalid(
            """
class Allocator:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def alloc_decode(self, last_loc, rows):
        if self._swa_req_ring:
            return self.full_attn_allocator.alloc_decode(last_loc)
        full = self.full_attn_allocator.alloc_decode(last_loc)
        self.full_to_swa_index_mapping[full] = rows
        return full
"""
            + _MEMO,
            line=10,
        ),
        # a pool built elsewhere (a parameter) gets no start-up exemption
        Invalid(
            """
from pool import SWAKVPool

class Runner:
    def share_mapping(self, draft_pool: SWAKVPool, shared):
        draft_pool.full_to_swa_index_mapping = shared.full_to_swa_index_mapping
""",
            line=6,
            files={"pool.py": _POOL},
        ),
        # a dict memo: the write leaves the dict's entries in place
        Invalid(
            """
class SWAKVPool:
    def register_mapping(self, table):
        self.full_to_swa_index_mapping = table
        self._loc_cache.clear()

    def invalidate_loc_cache(self):
        self._loc_cache.clear()

    def translate_loc_from_full_to_swa(self, kv_indices):
        key = (kv_indices.data_ptr(), kv_indices.numel())
        if key not in self._loc_cache:
            self._loc_cache[key] = self.full_to_swa_index_mapping[kv_indices]
        return self._loc_cache[key]

class Allocator:
    def __init__(self, kvcache: SWAKVPool):
        self._kvcache = kvcache
        kvcache.register_mapping(self.full_to_swa_index_mapping)

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
""",
            line=22,
        ),
        # a functools cache on the gather the translate calls
        Invalid(
            """
import functools

class SWAKVPool:
    def invalidate_loc_cache(self):
        self._gather.cache_clear()

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self._gather(kv_indices)

    @functools.lru_cache(maxsize=8)
    def _gather(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]

    def set_full_to_swa_mapping(self, full, swa):
        self.full_to_swa_index_mapping[full] = swa
""",
            line=16,
        ),
        # a single-entry tuple kept by a helper of the translate
        Invalid(
            """
class SWAKVPool:
    def invalidate_loc_cache(self):
        self._last = None

    def translate_loc_from_full_to_swa(self, kv_indices):
        if self._last is not None and self._last[0] is kv_indices:
            return self._last[1]
        return self._remember(kv_indices)

    def _remember(self, kv_indices):
        out = self.full_to_swa_index_mapping[kv_indices]
        self._last = (kv_indices, out)
        return out

    def alloc(self, full, swa):
        self.full_to_swa_index_mapping[full] = swa
        return full
""",
            line=17,
        ),
        # the cache is the attention backend's; the pool's invalidation drops it
        Invalid(
            """
class Backend:
    def init_forward_metadata(self, forward_batch):
        if self.swa_out_loc is None:
            self.swa_out_loc = self.pool.translate_loc_from_full_to_swa(
                forward_batch.out_cache_loc
            )

class SWAKVPool:
    def __init__(self, backend: Backend):
        self.backend = backend

    def invalidate_loc_cache(self):
        self.backend.swa_out_loc = None

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
""",
            line=20,
        ),
        # the helper invalidates only when its caller asks, and this caller does not
        Invalid(
            """
class Allocator:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def _flush(self, everything):
        if everything:
            self.invalidate_loc_cache()

    def free_swa(self, free_index, everything):
        self.full_to_swa_index_mapping[free_index] = 0
        self._flush(everything)
"""
            + _MEMO,
            line=11,
        ),
        # custom names from [tool.swacheck]
        Invalid(
            """
class Pool:
    def flush_translations(self):
        self._cache = None

    def free(self, idx):
        self.token_map[idx] = 0

    def translate_loc_from_full_to_swa(self, loc):
        if self._cache is None:
            self._cache = self.token_map[loc]
        return self._cache
""",
            line=7,
            config={
                "mapping-attributes": ["token_map"],
                "invalidate-methods": ["flush_translations"],
            },
            fixed="""
class Pool:
    def flush_translations(self):
        self._cache = None

    def free(self, idx):
        self.token_map[idx] = 0
        self.flush_translations()

    def translate_loc_from_full_to_swa(self, loc):
        if self._cache is None:
            self._cache = self.token_map[loc]
        return self._cache
""",
        ),
    ]

    @classmethod
    def triggers(cls, config: Config) -> frozenset[str] | None:
        """Mapping, invalidation and translation names.

        Every finding sits on a write in the checked file: a direct write names a mapping
        attribute (an alias is bound from it in the same function), and a call site is
        reported only for a private helper whose every caller is in the helper's own file,
        which names the mapping. So a finding needs a mapping name in its file. The
        invalidation and translation names are added so that every file that can change
        a finding elsewhere is parsed: the file defining the invalidation method (the
        scope rule) and every file that takes part in summaries, which by construction
        (``order.relevant_text``) is exactly a file holding one of these names.
        """
        return config_terms(config)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        names = self.context.names
        if names.is_invalidate(node.name.value) or names.is_translate(node.name.value):
            return
        flow = function_flow(self.context, node)
        writes = flow.positions_of(WRITE)
        if not writes:
            return
        delegated = writes_delegated(self.context, flow)
        reported: set[int] = set()
        for cfg_node, position, step in writes:
            if step.conditional and step.event.possible:
                continue
            if id(step.event.node) in reported:
                continue
            if delegated:
                # Its callers are reported instead: for a direct write and for a call of
                # another delegating helper alike (one finding per chain, at the top).
                continue
            initialising = flow.is_constructor or flow.initialises(cfg_node, step)
            if flow.data.write_covered(cfg_node, position, initialising):
                continue
            reported.add(id(step.event.node))
            self._report(flow, cfg_node, position, step)

    def _report(self, flow: FunctionFlow, cfg_node: int, position: int, step: Step) -> None:
        config = self.context.config
        method = config.invalidate_methods[0]
        event = step.event
        if event.kind == WRITE:
            via = f" through `{event.via}`" if event.via else ""
            what = f"Write to `{event.receiver}.{event.name}` ({event.how}{via})"
        else:
            callee = step.target.name if step.target else event.name
            what = (
                f"Call of `{callee}()`, which writes the mapping and leaves the "
                "invalidation to its callers,"
            )
        path = flow.data.uncovered_path(cfg_node, position)
        how = flow.describe_exit_path(path) if path else "a path to the end of the function"
        fill = flow.fill_before(cfg_node, position)
        message = f"{what} is not followed by `{method}()` on every path: {how} misses it"
        if fill:
            message += (
                f"; `{fill.event.name}()` at line {fill.event.line} can fill the cache before it"
            )
        message += " (I1)"
        notes = ()
        if path:
            lines = flow.path_lines(path)
            if lines:
                notes = ("uncovered path through lines " + " -> ".join(map(str, lines)),)
        self.report(event.node, message, fix=self._fix(flow, step), notes=notes)

    def _fix(self, flow: FunctionFlow, step: Step) -> Fix | None:
        event = step.event
        if step.conditional:
            return None
        anchor = statement_of(self.context, event.node)
        if not isinstance(anchor, cst.SimpleStatementLine) or len(anchor.body) != 1:
            return None
        if isinstance(anchor.body[0], cst.Return | cst.Raise):
            return None
        receiver = invalidation_receiver(
            self.context, flow, event.receiver if event.kind == WRITE else None
        )
        if receiver is None:
            return None
        text, sure = receiver
        method = self.context.config.invalidate_methods[0]
        return self.context.insert_statements(
            anchor,
            [f"{text}.{method}()"],
            f"Call `{text}.{method}()` after the write",
            after=True,
            applicability=Applicability.SAFE if sure else Applicability.UNSAFE,
        )
