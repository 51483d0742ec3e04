"""SWA007 fresh-tensor-translation-without-flush."""

from __future__ import annotations

import libcst as cst

from swacheck.analysis.caches import CacheModel
from swacheck.analysis.dataflow import FILL
from swacheck.analysis.fresh import FreshTensors, translating_helpers
from swacheck.analysis.order import FunctionFlow, function_flow
from swacheck.analysis.scope import config_terms
from swacheck.analysis.writes import CALL
from swacheck.config import Config
from swacheck.order_rule import (
    BACKEND_POOL,
    DICT_POOL,
    HELPER_POOL,
    LRU_POOL,
    MEMOISING_POOL,
    OrderRule,
)
from swacheck.rule import Invalid, Valid

_POOL = MEMOISING_POOL


class FreshTensorTranslationWithoutFlush(OrderRule):
    """
    ## What it does
    Flags a call of a translation method (`translate-methods`) on a freshly computed
    index tensor (one this function creates, gathers such as a page table
    `self.req_to_token[req_pool_indices, idx]`, or fills in place, by a kernel launch
    or through `out=`, such as `window_kv_indices`), or a call handing such a tensor to
    a function of the same file that translates (a view of) that parameter, directly
    or through another such function (`self._copy_swa_page_table(metadata, pages)`
    reaching `self._maybe_translate_swa(pages)`), that is not bracketed by
    invalidations: some path reaches the call without an invalidation since the last
    fill, or leaves it without an invalidation before the next fill or the end of the
    function. Translating the batch's own location tensor (`out_cache_loc`,
    `forward_batch.out_cache_loc`, slices and aliases of it) or a tensor of unknown
    origin (a parameter) is the cache's normal use and is not flagged.

    Only translations a cache can serve count (DESIGN.md's scope rules): the translate
    method of the receiver's class (or of a subclass of it) memoises in any shape — it
    keeps its result on `self` between calls (an attribute, a single-entry tuple, a dict
    `self._loc_cache[key] = out`), in a helper object (`self.loc_cache.put(...)`), or
    under a `functools` cache — or hands the call to an object whose translation does
    (`return self._kvcache.translate_loc_from_full_to_swa(loc)`); a receiver of unknown
    class counts where the audit has a memoising translate. A plain gather serves
    nothing from a cache, and an attribute cache filled elsewhere (a pool's own KV
    writes, an attention backend's metadata) is not filled by a translation made here,
    so the rule is inactive where no audited file has a memoising translate.

    ## Why is this bad?
    The pool memoises one translation keyed on the location tensor (I7). Translating
    a fresh tensor without a flush first hits the key of the previous batch's tensor
    (spurious "loc tensor changed" warnings, or a stale hit if the new tensor reuses
    its address); without a flush after, the fresh tensor's translation stays cached
    and the next `set_kv_buffer` on `out_cache_loc` misses or, worse, hits it. SGLang
    PR #26152 bracketed the translation of `window_kv_indices` in
    `update_sliding_window_buffer` with `invalidate_loc_cache()` before and after.
    """

    code = "SWA007"
    name = "fresh-tensor-translation-without-flush"
    summary = "Translation of a freshly computed index tensor not bracketed by invalidations"
    config_keys = ("translate-methods", "invalidate-methods", "mapping-attributes")
    invariant = "I7"
    origin = "SGLang PR #26152"

    VALID = [
        # #26152's fix: flush before and after
        Valid(
            """
import torch

def update_sliding_window_buffer(window_kv_indptr, bs, token_to_kv_pool=None):
    window_kv_indices = torch.empty(window_kv_indptr[-1], dtype=torch.int32)
    create_kv_indices_triton[(bs,)](window_kv_indptr, window_kv_indices)
    if hasattr(token_to_kv_pool, "translate_loc_from_full_to_swa"):
        kv_last_index = window_kv_indptr[-1]
        token_to_kv_pool.invalidate_loc_cache()
        window_kv_indices[:kv_last_index] = token_to_kv_pool.translate_loc_from_full_to_swa(
            window_kv_indices[:kv_last_index]
        )
        token_to_kv_pool.invalidate_loc_cache()
    return window_kv_indices
""",
            files={"pool.py": _POOL},
        ),
        # the batch's own locations are what the cache is for
        Valid(
            _POOL
            + """
    def set_kv_buffer(self, layer, loc):
        loc = self.translate_loc_from_full_to_swa(loc)
        self.swa_kv_pool.set_kv_buffer(None, loc)

    def prepare(self, forward_batch, bs):
        out_loc = forward_batch.out_cache_loc[:bs]
        return self.translate_loc_from_full_to_swa(out_loc)
"""
        ),
        # a flush through a helper in another file, in a loop
        Valid(
            """
import torch
from pool import SWAKVPool

class Backend:
    def __init__(self, pool: SWAKVPool):
        self.pool = pool

    def update(self, chunks):
        for chunk in chunks:
            indices = torch.cat(chunk)
            self.pool.flush()
            self.pool.translate_loc_from_full_to_swa(indices)
            self.pool.flush()
""",
            files={
                "pool.py": _POOL
                + """
    def flush(self):
        self.invalidate_loc_cache()
"""
            },
        ),
        # a pool whose class the audit knows translates with a plain gather: nothing is
        # served from a cache, although another class of the audit memoises
        Valid(
            """
import torch
from pool import PlainPool

def translate_window(pool: PlainPool, n):
    idx = torch.arange(n)
    return pool.translate_loc_from_full_to_swa(idx)
""",
            files={
                "pool.py": """
import torch

class PlainPool:
    def invalidate_loc_cache(self):
        pass

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices].to(torch.int32)
""",
                "cached.py": _POOL,
            },
        ),
        # a helper translates what it is handed; the caller flushes around the call
        Valid(
            """
import torch

class PagedBackend:
    def _to_swa(self, token_indices):
        return self.pool.translate_loc_from_full_to_swa(token_indices.reshape(-1))

    def _fill_swa_pages(self, metadata, page_indices):
        metadata.swa_pages.copy_(self._to_swa(page_indices))

    def init_metadata(self, metadata, req_pool_indices, strided):
        page_indices = self.req_to_token[req_pool_indices[:, None], strided[None, :]]
        self.pool.invalidate_loc_cache()
        self._fill_swa_pages(metadata, page_indices)
        self.pool.invalidate_loc_cache()
""",
            files={"pool.py": _POOL},
        ),
        # the only cache is the backend's, filled from the batch's own locations: a
        # translation of a fresh tensor here is served from nothing
        Valid(
            """
import torch

def window_slots(token_to_kv_pool, n):
    return token_to_kv_pool.translate_loc_from_full_to_swa(torch.arange(n))
""",
            files={"pool.py": BACKEND_POOL},
        ),
    ]
    INVALID = [
        # #26152: window_kv_indices translated with no flush around it
        Invalid(
            """
import torch

def update_sliding_window_buffer(window_kv_indptr, bs, token_to_kv_pool_allocator=None):
    window_kv_indices = torch.empty(window_kv_indptr[-1], dtype=torch.int32)
    create_kv_indices_triton[(bs,)](window_kv_indptr, window_kv_indices)
    if hasattr(token_to_kv_pool_allocator, "translate_loc_from_full_to_swa"):
        kv_last_index = window_kv_indptr[-1]
        window_kv_indices[:kv_last_index] = (
            token_to_kv_pool_allocator.translate_loc_from_full_to_swa(
                window_kv_indices[:kv_last_index]
            )
        )
    return window_kv_indices
""",
            line=10,
            files={"pool.py": _POOL},
        ),
        # a parameter filled in place by a kernel here is fresh too; flush only before
        Invalid(
            """
def update_window(window_kv_indptr, bs, token_to_kv_pool, window_kv_indices):
    create_kv_indices_triton[(bs,)](window_kv_indptr, window_kv_indices)
    token_to_kv_pool.invalidate_loc_cache()
    out = token_to_kv_pool.translate_loc_from_full_to_swa(window_kv_indices)
    return out
""",
            line=5,
            files={"pool.py": _POOL},
        ),
        # the early return skips the flush after
        Invalid(
            """
import torch

class Backend:
    def window(self, n, early):
        idx = torch.arange(n, device=self.device)
        self.pool.invalidate_loc_cache()
        swa = self.pool.translate_loc_from_full_to_swa(idx)
        if early:
            return swa
        self.pool.invalidate_loc_cache()
        return swa
""",
            line=8,
            files={"pool.py": _POOL},
        ),
        # in a loop, one flush before the loop covers only the first iteration
        Invalid(
            """
import torch

class Backend:
    def windows(self, chunks):
        self.pool.invalidate_loc_cache()
        for chunk in chunks:
            idx = torch.cat(chunk)
            self.pool.translate_loc_from_full_to_swa(idx)
        self.pool.invalidate_loc_cache()
""",
            line=9,
            files={"pool.py": _POOL},
        ),
        # the allocator hands the translation to its pool, whose translate memoises
        Invalid(
            """
import torch
from alloc import Allocator

class Backend:
    def __init__(self, allocator: Allocator):
        self.allocator = allocator

    def window(self, n):
        idx = torch.arange(n)
        return self.allocator.translate_loc_from_full_to_swa(idx)
""",
            line=11,
            files={
                "pool.py": _POOL,
                "alloc.py": """
from pool import SWAKVPool

class Allocator:
    def __init__(self, kvcache: SWAKVPool):
        self._kvcache = kvcache

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self._kvcache.translate_loc_from_full_to_swa(kv_indices)
""",
            },
        ),
        # a page-table gather is a fresh tensor, translated here through two helpers
        Invalid(
            """
import torch

class PagedBackend:
    def _to_swa(self, token_indices):
        return self.pool.translate_loc_from_full_to_swa(token_indices.reshape(-1))

    def _fill_swa_pages(self, metadata, page_indices):
        metadata.swa_pages.copy_(self._to_swa(page_indices))

    def init_metadata(self, metadata, req_pool_indices, strided):
        page_indices = self.req_to_token[req_pool_indices[:, None], strided[None, :]]
        self._fill_swa_pages(metadata, page_indices)
""",
            line=13,
            files={"pool.py": _POOL},
        ),
        # a gather translated directly
        Invalid(
            """
def window_pages(token_to_kv_pool, req_to_token, req_pool_indices):
    pages = req_to_token[req_pool_indices]
    return token_to_kv_pool.translate_loc_from_full_to_swa(pages)
""",
            line=4,
            files={"pool.py": _POOL},
        ),
        # a dict memo: the window's translation stays in the dict for the next lookup
        Invalid(
            """
def update_sliding_window_buffer(window_kv_indptr, bs, token_to_kv_pool, window_kv_indices):
    create_kv_indices_triton[(bs,)](window_kv_indptr, window_kv_indices)
    token_to_kv_pool.invalidate_loc_cache()
    return token_to_kv_pool.translate_loc_from_full_to_swa(window_kv_indices)
""",
            line=5,
            files={"pool.py": DICT_POOL},
        ),
        # a helper object and a functools cache: the gather's pages, not flushed before
        Invalid(
            """
from pool import SWAKVPool
from cached import CachedPool

def swa_pages(pool: SWAKVPool, other: CachedPool, req_to_token, req_pool_indices):
    pages = req_to_token[req_pool_indices]
    swa = pool.translate_loc_from_full_to_swa(pages)
    pool.invalidate_loc_cache()
    again = other.translate_loc_from_full_to_swa(pages.flatten())
    other.invalidate_loc_cache()
    return swa, again
""",
            line=7,
            files={
                "pool.py": HELPER_POOL,
                "cached.py": LRU_POOL.replace("SWAKVPool", "CachedPool"),
            },
        ),
        # custom names from [tool.swacheck]
        Invalid(
            """
import torch

class Pool:
    def flush_translations(self):
        self._cache = None

    def to_swa(self, idx):
        if self._cache is None:
            self._cache = self.table[idx]
        return self._cache

    def window(self, n):
        return self.to_swa(torch.arange(n))
""",
            line=14,
            config={
                "translate-methods": ["to_swa"],
                "invalidate-methods": ["flush_translations"],
                "mapping-attributes": ["table"],
            },
        ),
    ]

    @classmethod
    def triggers(cls, config: Config) -> frozenset[str] | None:
        """Mapping, invalidation and translation names.

        A finding sits on a call of a translation method by name, so its file holds a
        translation name; the other names make every file that takes part in summaries
        (``order.relevant_text``) and the file defining the invalidation method (the
        scope rule) candidates, whichever order rules are selected.
        """
        return config_terms(config)

    @classmethod
    def applies_to(cls, caches: CacheModel) -> bool:
        """Only a memoising translate is filled and served by a translation call."""
        return caches.any_memo

    @classmethod
    def missing_cache(cls, config: Config) -> str:
        return f"no memoising {', '.join(config.translate_methods)} in the audited files"

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        names = self.context.names
        if names.is_translate(node.name.value) or names.is_invalidate(node.name.value):
            return
        flow = function_flow(self.context, node)
        fresh = FreshTensors(self.context, flow)
        helpers = translating_helpers(self.context)
        cls = flow.cls.name if flow.cls is not None else None
        for cfg_node, position, step in flow.positions_of(FILL):
            event = step.event
            if event.kind != CALL:
                continue
            call = event.node
            if names.is_translate(event.name):
                handed = [a.value for a in call.args if a.keyword is None][:1]
                through = ""
            else:
                callee = helpers.callee(call, cls) if step.target is not None else None
                if callee is None:
                    continue
                handed = helpers.handed(call, callee)
                through = f" (translated in `{callee.name.value}()`)"
            for arg in handed:
                described = fresh.describe(arg)
                if described is not None:
                    self._check(flow, cfg_node, position, call, f"`{described}`{through}")
                    break

    def _check(
        self, flow: FunctionFlow, cfg_node: int, position: int, call: cst.Call, what: str
    ) -> None:
        before = flow.data.clean_before(cfg_node, position)
        after = flow.data.covered_after(cfg_node, position, stop_at_fill=True)
        if before and after:
            return
        method = self.context.config.invalidate_methods[0]
        missing = [side for side, ok in (("before", before), ("after", after)) if not ok]
        self.report(
            call,
            f"Translation of the freshly computed {what} is not bracketed by "
            f"`{method}()`: no flush {' and '.join(missing)} it on every path (I7)",
        )
