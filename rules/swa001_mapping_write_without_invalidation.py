"""SWA001 mapping-write-without-invalidation."""

from __future__ import annotations

import libcst as cst

from swacheck.analysis.dataflow import FILL, INV
from swacheck.analysis.order import (
    FunctionFlow,
    Step,
    function_flow,
    invalidation_receiver,
    statement_of,
)
from swacheck.analysis.resolve import Target
from swacheck.analysis.scope import config_terms
from swacheck.analysis.skeletons import function_key
from swacheck.analysis.writes import WRITE
from swacheck.config import Config
from swacheck.finding import Applicability, Fix
from swacheck.order_rule import OrderRule
from swacheck.rule import FixSafety, Invalid, Valid

_POOL = """
class SWAKVPool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]
"""


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
    wiring), and paths that end in `raise`. Resetting to `None` an attribute that the
    owner's invalidation method resets (`self.cached_loc = None`) counts as an
    invalidation. A private helper that leaves its write to its callers is reported
    once, at the outermost caller that does not cover it. Branches under a mode guard
    (`if self.is_hybrid_swa:`) are taken as the hybrid-SWA configuration runs them.
    The rule is active only when some audited file defines an invalidation method.

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
    that owns the cache. It is safe when the receiver's class is known to define the
    invalidation method; otherwise (a receiver borrowed from another call in the class)
    it is unsafe: check that the receiver is the right pool and is never `None` there.
    """

    code = "SWA001"
    name = "mapping-write-without-invalidation"
    summary = "Mapping write not followed (or preceded) by a translation-cache invalidation"
    fix_safety = FixSafety.UNSAFE
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
        ),
        # the invalidation under a mode guard counts (SWA mode is what matters)
        Valid(
            """
class Allocator:
    def __init__(self, kvcache):
        self._kvcache = kvcache

    def invalidate_loc_cache(self):
        pass

    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
        if self.is_hybrid_swa:
            self._kvcache.invalidate_loc_cache()
"""
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
        ),
        # helper in another file that invalidates, on an attribute of known class
        Valid(
            """
from pool import SWAKVPool

class Allocator:
    def __init__(self, kvcache: SWAKVPool):
        self._kvcache = kvcache

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

    def translate_loc_from_full_to_swa(self, loc):
        return self.full_to_swa_index_mapping[loc]

    def reset(self, loc):
        self.invalidate_loc_cache()
        if not self.is_hybrid_swa:
            self.translate_loc_from_full_to_swa(loc)
        self.full_to_swa_index_mapping.zero_()
"""
        ),
        # no audited file defines an invalidation method: nothing to invalidate
        Valid(
            """
class Pool:
    def free_swa(self, free_index):
        self.full_to_swa_index_mapping[free_index] = 0
"""
        ),
        # Triton launches do not count when configured so
        Valid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def remap(self, idx):
        remap_kernel[(1,)](self.full_to_swa_index_mapping, idx)
""",
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
""",
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
""",
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
""",
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
""",
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
""",
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
""",
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
""",
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
""",
            line=7,
            fixed="""
class SWAKVPool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def register_mapping(self, full_to_swa_index_mapping):
        self.full_to_swa_index_mapping = full_to_swa_index_mapping
        self.invalidate_loc_cache()
""",
        ),
        # invalidation first, but a translation fills the cache before the write
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]

    def move(self, src, dst, loc):
        self.invalidate_loc_cache()
        swa = self.translate_loc_from_full_to_swa(loc)
        torch.index_put_(self.full_to_swa_index_mapping, (dst,), swa)
""",
            line=12,
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

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]
""",
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
""",
            line=7,
        ),
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self._cached_loc_key = None

    def remap(self, idx):
        remap_kernel[(1,)](self.full_to_swa_index_mapping, idx)
""",
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
""",
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
""",
            line=10,
        ),
        # the pool in another file: its helper fills the cache after our invalidation
        Invalid(
            """
from pool import SWAKVPool

class Allocator:
    def __init__(self, kvcache: SWAKVPool):
        self._kvcache = kvcache

    def move(self, loc, rows):
        self._kvcache.invalidate_loc_cache()
        self._kvcache.prefetch(loc)
        self.full_to_swa_index_mapping[loc] = rows
""",
            line=11,
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

    def translate_loc_from_full_to_swa(self, loc):
        return self.full_to_swa_index_mapping[loc]

    def warm_up(self, loc):
        return self.translate_loc_from_full_to_swa(loc)
"""
            },
        ),
        # resetting an attribute the invalidation method does not reset is no invalidation
        Invalid(
            """
class Pool:
    def invalidate_loc_cache(self):
        self.cached_swa = None

    def register_mapping(self, table):
        self.full_to_swa_index_mapping = table
        self.last_table = None
""",
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
""",
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
        # custom names from [tool.swacheck]
        Invalid(
            """
class Pool:
    def flush_translations(self):
        self._cache = None

    def free(self, idx):
        self.token_map[idx] = 0
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
        delegated = self._delegated(flow)
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

    def _delegated(self, flow: FunctionFlow) -> bool:
        """Whether this function's own writes are its callers' to cover."""
        outer = self.context.enclosing(flow.function, cst.FunctionDef | cst.ClassDef)
        if isinstance(outer, cst.FunctionDef):
            enclosing = function_flow(self.context, outer)
            return bool(enclosing.calls_by_name(flow.name))
        if flow.cls is None and outer is not None:
            return False
        target = Target(
            self.context.path,
            function_key(flow.cls.name if flow.cls else None, flow.name),
            flow.cls.name if flow.cls else None,
            flow.name,
        )
        return flow.resolver.delegates(target)

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
        fill = self._fill_between(flow, cfg_node, position)
        message = f"{what} is not followed by `{method}()` on every path: {how} misses it"
        if fill:
            message += f"; {fill} before it"
        message += " (I1)"
        notes = ()
        if path:
            lines = flow.path_lines(path)
            if lines:
                notes = ("uncovered path through lines " + " -> ".join(map(str, lines)),)
        self.report(event.node, message, fix=self._fix(flow, step), notes=notes)

    def _fill_between(self, flow: FunctionFlow, cfg_node: int, position: int) -> str | None:
        """Describe a cache fill after the last invalidation before the write, if any."""
        steps = flow.steps[cfg_node][:position]
        for step in reversed(steps):
            if step.kind == INV and not step.conditional:
                return None
            if step.kind == FILL:
                return f"`{step.event.name}()` at line {step.event.line} can fill the cache"
        path = flow.data.dirty_path(cfg_node)
        if path and path[0] != flow.graph.entry:
            for step in reversed(flow.steps[path[0]]):
                if step.kind == FILL:
                    return f"`{step.event.name}()` at line {step.event.line} can fill the cache"
        return None

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
