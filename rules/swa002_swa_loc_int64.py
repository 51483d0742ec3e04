"""SWA002 swa-loc-int64."""

from __future__ import annotations

import re

from swacheck.config import DEFAULT_SWA_LOC_PATTERN, Config
from swacheck.engine.fixer import rows
from swacheck.finding import Applicability, Edit, Fix, Position
from swacheck.fix_safety import safe_fix, unsafe_fix
from swacheck.rule import Invalid, Rule, Valid
from swacheck.semantics.conventions import Convention, Conventions
from swacheck.semantics.dtypes import (
    ALLOCATION,
    CAST,
    DEFAULT,
    ENGINE,
    TRANSLATION,
    Decision,
    Dtypes,
    asserted_parameters,
    decider,
)
from swacheck.semantics.function import CALL, Span
from swacheck.semantics.model import (
    PAGE_TABLE,
    SWA,
    WRITE,
    all_models,
    location_triggers,
    words,
)
from swacheck.semantics.project import Function
from swacheck.semantics.terms import Attr, Call, Global, consistent
from swacheck.semantics.unit import FileUnit
from swacheck.semantics.uses import Use
from swacheck.semantics.values import TABLE, Ctx
from swacheck.triggers import Trigger

# The pools of the examples: a translation to int32 (releases to 0.5.12) and the int64
# gather of the mapping table (0.5.13 and later).
_POOL_INT32 = """
import torch

class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices].to(torch.int32)


class ForwardBatch:
    def init(self, pool):
        self.out_cache_loc_swa = pool.translate_loc_from_full_to_swa(self.out_cache_loc)
"""
_POOL_INT64 = """
import torch

class SWATokenToKVPoolAllocator:
    def __init__(self, size, device):
        self.full_to_swa_index_mapping = torch.cat(
            [
                torch.zeros(size, dtype=torch.int64, device=device),
                torch.tensor([-1], dtype=torch.int64, device=device),
            ]
        )


class SWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        # -1 in kv_indices maps to -1 via the sentinel appended to the mapping.
        return self.full_to_swa_index_mapping[kv_indices]
"""


class SwaLocInt64(Rule):
    """
    ## What it does
    Flags an SWA location whose integer dtype is not what its consumer takes (I3). An SWA
    location plays one of two roles, each with its own convention in a project:

    - *write locations*, the KV stores' scatter targets (`out_cache_loc_swa`,
      `swa_out_cache_loc`, `swa_loc=` of `KVWriteLoc`, a graph runner's or backend's
      write-location buffer): names that match `swa-loc-pattern` and hold `loc` or
      `slot`;
    - *page tables and window indices*, what attention kernels read (`swa_page_table`,
      `window_kv_indices`, `swa_kv_indices`): names that match `swa-loc-pattern` with
      `indices`/`index`, or hold `swa` or `window` with `page_table`/`block_table`, or
      `window` with `indices`.

    Under `swa-loc-dtype = "auto"` (the default) each role's dtype is inferred from the
    code, nearest evidence first:

    - write locations: the file's own casts of them (a cast is a choice made for a
      consumer, such as `translate(loc).to(torch.int32)` before a KV store of its own, or
      `swa_loc.to(torch.int32)` at a store's boundary) or asserts
      (`assert swa_loc.dtype == torch.int32`); else what the project's translation returns
      (`translate-methods`: a gather from the int64 mapping table, or a cast of it), the
      producer every path hands to the KV stores, or what the KV stores
      (`kv-write-methods`) assert on an SWA location parameter; else int32;
    - page tables and window indices (kernels differ per backend, so the file decides
      first): the file's casts or asserts; else the file's own allocations; else the
      project's casts; else int32.

    Evidence that disagrees with itself decides nothing; the next level does; where no
    level decides and one disagreed (translations that return both dtypes, as 0.5.16's
    unified pool beside the SWA pool), the role has no convention in that file and is not
    checked against one; int32 stands only where no level has any evidence. So SGLang's
    releases to 0.5.12 (translation `.to(torch.int32)`) want int32 write locations, and
    0.5.13 and later (translation = the int64 gather, "int64 scatter index (unlike the
    int32 read page table above)") want int64 ones, while a backend that converts its
    write locations to int32 for its own kernels (DeepSeek-V4's) keeps its int32.
    `swa-loc-dtype` set to a dtype, or to a table of roles (`{ write = "int64", page-table
    = "int32" }`), replaces the inference for the roles it names.

    Where a dtype is decided is followed through views, dtype-keeping methods,
    arithmetic with a scalar, both branches of an `if` (a binding on one branch never
    reaches a use on the other) and a function's locals: an allocation
    (`dtype=torch.int64`, a factory that is int64 by default such as `torch.arange(n)`,
    a dtype held in a variable or default argument, another tensor's dtype
    (`dtype=forward_batch.out_cache_loc.dtype`, `torch.empty_like(x)`), the engine's own
    tensors' dtypes as its model states them), a cast (`.long()`,
    `.to(torch.int64)`, `.type(torch.LongTensor)`), a gather from the mapping table, a
    translation, and a helper of the project (a module-level function or a method,
    `_alloc_loc_buffer(n)`, `self._alloc_swa_page_table(bs)`, whose returns are followed
    the same way, in any file of the project that mentions SWA; a dtype the call passes
    for the helper's `dtype` parameter counts instead of its default). Targets are names,
    attributes, dict keys, keyword arguments and dataclass fields of a role. A value bound
    to a local of a function is a location where it is used as one: a gather, cast or
    translation into a local is an intermediate (host-side bookkeeping, a value converted
    again before use) unless the value leaves the function before the local is bound
    again (returned, stored into an attribute or container, passed to a Triton launch);
    an allocation also counts when handed to a call (a buffer holder's constructor),
    except an allocator's (`self.swa_allocator.alloc_extend(..., swa_last_loc, ...)`: its
    own input, in its index space and dtype), and a cast handed to a call is evidence of
    what the callee takes. Mapping tables may be int64 and are never flagged.

    A value also must not reach a function that asserts another dtype for it: an SWA
    location (a name of a role, a translation or a gather) passed to a parameter its
    function asserts (`assert loc.dtype == torch.int32`, `if loc.dtype != torch.int32:
    raise ...`) or annotates (`loc: torch.IntTensor`) as another dtype is flagged where
    it is passed.

    ## Why is this bad?
    A location of the wrong dtype is converted implicitly on the hot path, fails a
    kernel's signature, or doubles the memory of every CUDA-graph bucket. SGLang PR
    #23552 allocated `out_cache_loc_swa` as int64 while the translation and the KV store
    worked in int32; review asked for int32 and the padding fix changed it (0.5.12), but
    the breakable runner's and the EAGLE draft-extend runner's buffers stayed int64. The
    reverse holds from 0.5.13: the trtllm-gen kernels require int32 page tables, so
    dropping the `.to(torch.int32)` of a translated SWA page table hands them int64.

    ## Fix safety
    Rewriting a literal dtype (`torch.int64` -> `torch.int32`, `.long()` -> `.int()`, a
    missing `dtype=` on an int64-by-default factory) is safe only where the consumer is
    known to take the new dtype: the file binds the same name to a value of it, or some
    file binds it straight from the translation. Elsewhere it is unsafe (`--unsafe-fixes`).
    Adding a cast to a gather or translation is unsafe (it changes the returned tensor).
    A dtype held in a variable or returned by a helper is reported without a fix: the
    variable or helper may serve other tensors.
    """

    code = "SWA002"
    name = "swa-loc-int64"
    summary = "SWA location or page table whose dtype is not what its consumer takes"
    fixes = (
        safe_fix(
            "it rewrites a literal dtype or adds a missing `dtype=` where the consumer is "
            "known to take the new dtype"
        ),
        unsafe_fix(
            "it rewrites a literal dtype where nothing shows what the consumers take, or "
            "casts a gather from the mapping table or a translation"
        ),
    )
    config_keys = (
        "swa-loc-pattern",
        "swa-loc-dtype",
        "mapping-attributes",
        "translate-methods",
        "kv-write-methods",
    )
    invariant = "I3"
    semantic = True
    origin = "SGLang PR #23552 review, the padding fix, and 0.5.13's int64 write locations"

    VALID = [
        # two translations of one name that agree, one delegating to the other
        Valid(
            """
import torch

class SWAAllocator:
    def translate_loc_from_full_to_swa(self, kv_indices):
        out = self._kvcache.translate_loc_from_full_to_swa(kv_indices)
        return out.to(torch.int32)
""",
            files={"pool.py": _POOL_INT32},
        ),
        # the int64 dtype is bound on the other branch: it never reaches the page table
        Valid(
            """
import torch

class Backend:
    def alloc(self, n, is_draft):
        if is_draft:
            dt = torch.int64
            self.draft_positions = torch.zeros(n, dtype=dt)
        else:
            dt = torch.int32
            self.cuda_graph_swa_page_table = torch.zeros(n, dtype=dt)
"""
        ),
        # releases to 0.5.12: the translation is int32, and so are the runners' buffers
        Valid(
            """
import torch

class CudaGraphRunner:
    def __init__(self, max_num_token):
        self.out_cache_loc_swa = torch.zeros((max_num_token,), dtype=torch.int32)
""",
            files={"pool.py": _POOL_INT32},
        ),
        # 0.5.13+: int64 write locations by design, int32 page tables for the kernels
        Valid(
            """
import torch

class TRTLLMHABackend:
    def init_cuda_graph_state(self, max_bs, max_num_tokens, max_pages):
        # int64 scatter index (unlike the int32 read page table)
        self.cuda_graph_swa_out_cache_loc = torch.zeros(max_num_tokens, dtype=torch.int64)
        self.cuda_graph_swa_page_table = torch.zeros(max_bs, max_pages, dtype=torch.int32)

    def init_forward_metadata(self, metadata, forward_batch):
        pool = self.token_to_kv_pool
        out_cache_loc = forward_batch.out_cache_loc
        metadata.swa_out_cache_loc = pool.translate_loc_from_full_to_swa(out_cache_loc)
        metadata.swa_page_table = pool.translate_loc_from_full_to_swa(metadata.page_table).to(
            torch.int32
        )
""",
            files={"pool.py": _POOL_INT64},
        ),
        # a backend that converts its write locations for its own int32 kernels
        Valid(
            """
import torch

class DeepseekV4Backend:
    def init_cuda_graph_state(self, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = torch.zeros(max_num_tokens, dtype=torch.int32)

    def init_forward_metadata(self, metadata, out_cache_loc):
        swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(out_cache_loc).to(torch.int32)
        metadata.core.swa_out_cache_loc = swa_out_cache_loc
""",
            files={"pool.py": _POOL_INT64},
        ),
        # a cast at the KV store's boundary: that store's dtype (DeepSeek-V4's speculative
        # commit path), in a project whose translation is int64
        Valid(
            """
import torch

class DraftCommit:
    def store_commit_kv(self, kvs, swa_loc, pool):
        swa_loc = swa_loc.to(torch.int32)
        pool.set_swa_key_buffer_fused(kvs, swa_loc)

    def commit_layout(self, n, device):
        swa_loc = torch.empty(n, dtype=torch.int32, device=device)
        _commit_layout_kernel[(n,)](swa_loc)
        return swa_loc
""",
            files={"pool.py": _POOL_INT64},
        ),
        # two pools translate to different dtypes (0.5.16's unified pool beside the SWA
        # pool): write locations have no one convention there
        Valid(
            """
import torch

class FlashInferBackend:
    def init_cuda_graph_state(self, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = torch.zeros(max_num_tokens, dtype=torch.int64)
""",
            files={
                "pool.py": _POOL_INT64,
                "unified_pool.py": """
class UnifiedSWAKVPool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self._swa_allocator.virtual_to_physical[kv_indices].to(torch.int32)
""",
            },
        ),
        # window indices of a kernel that takes int64, beside int32 page tables elsewhere
        Valid(
            """
import torch

class TritonAttnBackend:
    def init_cuda_graph_state(self, max_num_tokens, window):
        self.cuda_graph_window_kv_indices = torch.zeros(max_num_tokens * window, dtype=torch.int64)

def update_sliding_window_buffer(window_kv_indptr, device):
    window_kv_indices = torch.empty(window_kv_indptr[-1], dtype=torch.int64, device=device)
    return window_kv_indptr, window_kv_indices
""",
            files={
                "flashinfer_backend.py": """
class FlashInferBackend:
    def init_cuda_graph_state(self, max_bs, max_pages):
        self.swa_page_table = torch.zeros(max_bs, max_pages, dtype=torch.int32)
"""
            },
        ),
        Valid(
            """
import torch

class Pool:
    def __init__(self, size):
        # the mapping table itself may be int64
        self.full_to_swa_index_mapping = torch.empty(size + 1, dtype=torch.int64)
        self.out_cache_loc = torch.zeros(size, dtype=torch.int64)
"""
        ),
        Valid(
            """
def free_swa(self, free_index):
    # a local gather for host-side bookkeeping is not a location buffer
    swa_indices = self.full_to_swa_index_mapping[free_index]
    self.swa_attn_allocator.free(swa_indices[swa_indices > 0])
"""
        ),
        Valid(
            """
import torch

class Translator:
    def build_table(self, plan, space, rows, width):
        out = torch.empty((rows, width), dtype=torch.int32)
        build_kv_read_table(req_to_token=self.req_to_token, v2p=space.read_v2p, out=out)
        return KVIndexTable(ids=out, row_ids=self._rows[:rows], row_stride=out.stride(0))
"""
        ),
        Valid(
            """
class Allocator:
    def free_swa(self, free_index):
        # a helper freeing SWA slots: its parameter goes to the allocator only
        swa_indices = self.full_to_swa_index_mapping[free_index]
        self._release_swa(swa_indices)

    def _release_swa(self, swa_indices):
        swa_indices = swa_indices[swa_indices > 0]
        self.swa_attn_allocator.free(swa_indices)
"""
        ),
        Valid(
            """
def transfer_indices(self, full_indices):
    swa_indices = self.translate_loc_from_full_to_swa(full_indices)
    # an explicit conversion into a local, for an API that takes int64
    live_swa_indices = swa_indices[swa_indices > 0].to(torch.int64)
    return live_swa_indices.cpu().tolist()
"""
        ),
        Valid(
            """
# `block` holds the letters of `loc`, but block offsets are not locations
_swa_block_offsets = torch.arange(block_size)
swa_window = torch.arange(n)
"""
        ),
        # the allocator's own input (its index space is int64 by design), not a KV location
        Valid(
            """
def alloc_tail(self, seq_lens, tail_len):
    swa_prev_loc = torch.tensor([-1], dtype=torch.int64, device=self.device)
    return self.swa_allocator.alloc_extend(seq_lens, swa_prev_loc, tail_len)
"""
        ),
        # cast again before it leaves the function: still an intermediate
        Valid(
            """
def slots_for_kernel(self, loc):
    swa_loc = loc.long()
    swa_loc = swa_loc.clamp(min=0).int()
    return swa_loc
"""
        ),
        # a parametric helper, given the project's dtype
        Valid(
            """
import torch

def _alloc_index_buffer(size, device, dtype=torch.int64):
    return torch.zeros(size, dtype=dtype, device=device)

class Runner:
    def __init__(self, size, device):
        self.out_cache_loc_swa = _alloc_index_buffer(size, device, dtype=torch.int32)
""",
            files={"pool.py": _POOL_INT32},
        ),
        # configured per role
        Valid(
            """
self.cuda_graph_swa_out_cache_loc = torch.zeros(n, dtype=torch.int64)
self.swa_page_table = torch.zeros(bs, pages, dtype=torch.int32)
""",
            config={"swa-loc-dtype": {"write": "int64", "page-table": "int32"}},
        ),
        Valid(
            """
swa_loc = torch.arange(n).long()
""",
            config={"swa-loc-dtype": "int64"},
        ),
    ]
    INVALID = [
        # the allocator's translation cast back to its callers' int64 locations, where the
        # pool's translation of the same name returns int32
        Invalid(
            """
import torch

class SWAAllocator:
    def translate_loc_from_full_to_swa(self, kv_indices):
        return self._kvcache.translate_loc_from_full_to_swa(kv_indices).type_as(kv_indices)

def write_loc(allocator: SWAAllocator, forward_batch):
    loc = forward_batch.out_cache_loc.to(torch.int64)
    return allocator.translate_loc_from_full_to_swa(loc)
""",
            line=6,
            files={"pool.py": _POOL_INT32},
        ),
        # a page table allocated with another tensor's dtype: the batch's int64 locations
        Invalid(
            """
import torch

class Backend:
    def init_cuda_graph_state(self, max_bs, max_pages, forward_batch):
        self.cuda_graph_page_table = torch.zeros(max_bs, max_pages, dtype=torch.int32)
        self.cuda_graph_swa_page_table = torch.zeros(
            max_bs, max_pages, dtype=forward_batch.out_cache_loc.dtype
        )
""",
            line=8,
        ),
        # a write-location buffer made like the int64 locations in a project whose
        # translation is int32
        # one SWA page table allocated int64 among the file's int32 ones: judged by the
        # others (its own dtype is no evidence of the convention it breaks)
        Invalid(
            """
import torch

class Backend:
    def init_cuda_graph_state(self, max_bs, max_pages):
        self.decode_cuda_graph_metadata = {
            "page_table": torch.zeros(max_bs, max_pages, dtype=torch.int32),
        }
        self.decode_cuda_graph_metadata["swa_page_table"] = torch.zeros(
            max_bs, max_pages, dtype=torch.long
        )

    def init_forward_metadata(self, metadata, bs, max_pages):
        metadata.page_table = torch.zeros(bs, max_pages, dtype=torch.int32)
        metadata.swa_page_table = torch.zeros(bs, max_pages, dtype=torch.int32)
""",
            line=10,
        ),
        # the buffers' factory takes the full pool's dtype from its caller for both
        Invalid(
            """
import torch

class Buffers:
    @classmethod
    def create(cls, *, max_num_token, cache_loc_dtype, is_hybrid_swa):
        out_cache_loc = torch.zeros((max_num_token,), dtype=cache_loc_dtype)
        out_cache_loc_swa = torch.zeros((max_num_token,), dtype=cache_loc_dtype)
        return cls(out_cache_loc, out_cache_loc_swa if is_hybrid_swa else None)

class Runner:
    def __init__(self, n):
        self.buffers = Buffers.create(
            max_num_token=n, cache_loc_dtype=torch.int64, is_hybrid_swa=True
        )
""",
            line=8,
            files={"pool.py": _POOL_INT32},
        ),
        # 0.5.21+: a translator's page table, typed after the batch's request rows; the
        # kernel that fills it (the model's sinks) takes int32, whichever pool it is for
        Invalid(
            """
import torch

class Translator:
    def build_table(self, plan, space, rows, width):
        out = torch.empty((rows, width), dtype=plan.req_pool_indices.dtype)
        build_kv_read_table(req_to_token=self.req_to_token, v2p=space.read_v2p, out=out)
        return KVIndexTable(ids=out, row_ids=self._rows[:rows], row_stride=out.stride(0))
""",
            line=6,
        ),
        Invalid(
            """
import torch

class Runner:
    def __init__(self, forward_batch):
        self.out_cache_loc = torch.zeros_like(forward_batch.out_cache_loc)
        self.out_cache_loc_swa = torch.empty_like(self.out_cache_loc)
""",
            line=7,
            files={"pool.py": _POOL_INT32},
        ),
        # 0.5.11: an int64 buffer in a project whose translation (and KV store) is int32;
        # the batch's field of that name holds the translation, so the fix is safe
        Invalid(
            """
import torch

class CudaGraphRunner:
    def make_buffers(self, max_num_token, is_hybrid_swa):
        out_cache_loc_swa = (
            torch.zeros((max_num_token,), dtype=torch.int64) if is_hybrid_swa else None
        )
        return GraphInputBuffers(out_cache_loc_swa=out_cache_loc_swa)
""",
            line=7,
            files={"pool.py": _POOL_INT32},
            fixed="""
import torch

class CudaGraphRunner:
    def make_buffers(self, max_num_token, is_hybrid_swa):
        out_cache_loc_swa = (
            torch.zeros((max_num_token,), dtype=torch.int32) if is_hybrid_swa else None
        )
        return GraphInputBuffers(out_cache_loc_swa=out_cache_loc_swa)
""",
        ),
        # the EAGLE draft-extend runner's dict buffer
        Invalid(
            """
import torch

class DraftExtendCudaGraphRunner:
    def __init__(self, max_num_tokens):
        self.cuda_graph_buffers = {}
        self.cuda_graph_buffers["swa_out_cache_loc"] = torch.ones(
            (max_num_tokens,), dtype=torch.int64
        )
""",
            line=8,
            files={"pool.py": _POOL_INT32},
            fixed="""
import torch

class DraftExtendCudaGraphRunner:
    def __init__(self, max_num_tokens):
        self.cuda_graph_buffers = {}
        self.cuda_graph_buffers["swa_out_cache_loc"] = torch.ones(
            (max_num_tokens,), dtype=torch.int32
        )
""",
        ),
        # int64 through a module-level helper that never mentions SWA
        Invalid(
            """
import torch

def _make_loc_buffer(size, device):
    return torch.zeros(size, dtype=torch.int64, device=device)

class PiecewiseCudaGraphRunner:
    def __init__(self, max_num_tokens, device):
        self.out_cache_loc_swa = _make_loc_buffer(max_num_tokens, device)
""",
            line=9,
            files={"pool.py": _POOL_INT32},
        ),
        # ... and through a helper of another file, whose default dtype the call keeps
        Invalid(
            """
from buffers import alloc_index_buffer

class BreakableCudaGraphRunner:
    def __init__(self, max_num_tokens, device):
        self.out_cache_loc_swa = alloc_index_buffer(max_num_tokens, device)
""",
            line=6,
            files={
                "pool.py": _POOL_INT32,
                "buffers.py": """
\"\"\"Index buffers of the CUDA-graph runners (full and SWA).\"\"\"
import torch

def alloc_index_buffer(size, device, dtype=torch.long):
    buffer = torch.zeros(size, dtype=dtype, device=device)
    return buffer
""",
            },
        ),
        # 0.5.13+: the cast the trtllm-gen kernels need dropped from the SWA page table;
        # this file's page tables are int32, the translation is int64
        Invalid(
            """
import torch

class TRTLLMHABackend:
    def _alloc_swa_page_table(self, max_bs, max_pages):
        return torch.zeros(max_bs, max_pages, dtype=torch.int32, device=self.device)

    def _translate_swa(self, token_indices):
        shape = token_indices.shape
        return self.swa_pool.translate_loc_from_full_to_swa(token_indices.reshape(-1)).reshape(
            shape
        )

    def init_cuda_graph_state(self, max_bs, max_pages):
        self.decode_metadata = {"swa_page_table": self._alloc_swa_page_table(max_bs, max_pages)}

    def init_forward_metadata(self, metadata):
        metadata.swa_page_table = self._translate_swa(metadata.page_table)
""",
            line=18,
            files={"pool.py": _POOL_INT64},
        ),
        # an int64 page table handed to a kernel wrapper that requires int32
        Invalid(
            """
import torch

def paged_swa_decode(q, swa_page_table, seq_lens):
    assert swa_page_table.dtype == torch.int32, "the kernel indexes pages with int32"
    return q

class Backend:
    def forward_decode(self, q, metadata):
        swa_page_table = self.pool.translate_loc_from_full_to_swa(metadata.page_table)
        return paged_swa_decode(q, swa_page_table, metadata.seq_lens)
""",
            line=11,
            files={"pool.py": _POOL_INT64},
        ),
        # 0.5.13+: a new backend's int32 graph buffer, while its eager path hands the
        # translation's int64 to the same KV store
        Invalid(
            """
import torch

class NewBackend:
    def init_cuda_graph_state(self, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = torch.zeros(max_num_tokens, dtype=torch.int32)

    def init_forward_metadata(self, metadata, forward_batch):
        metadata.swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(
            forward_batch.out_cache_loc
        )
""",
            line=6,
            files={"pool.py": _POOL_INT64},
            fixed="""
import torch

class NewBackend:
    def init_cuda_graph_state(self, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = torch.zeros(max_num_tokens, dtype=torch.int64)

    def init_forward_metadata(self, metadata, forward_batch):
        metadata.swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(
            forward_batch.out_cache_loc
        )
""",
        ),
        # a backend that converts to int32 for its kernels, but not on this path
        Invalid(
            """
import torch

class DeepseekV4Backend:
    def init_forward_metadata(self, metadata, out_cache_loc):
        metadata.core.swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(
            out_cache_loc
        ).to(torch.int32)

    def init_forward_metadata_draft(self, metadata, out_cache_loc):
        metadata.core.swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(out_cache_loc)
""",
            line=11,
            files={"pool.py": _POOL_INT64},
        ),
        # where the project shows nothing else, SWA write locations are int32 (the fix
        # is unsafe: nothing shows what the consumers take)
        Invalid(
            """
import torch

out_cache_loc_swa = torch.zeros((max_num_token,), dtype=torch.int64)
""",
            line=4,
            fixed="""
import torch

out_cache_loc_swa = torch.zeros((max_num_token,), dtype=torch.int32)
""",
        ),
        # one path casts to int64 where the file and the translation say int32
        Invalid(
            """
class Backend:
    def init_forward_metadata(self, metadata, loc):
        metadata.swa_loc = self.pool.translate_loc_from_full_to_swa(loc).int()

    def init_forward_metadata_replay(self, metadata, loc):
        metadata.swa_loc = loc.long()
""",
            line=7,
            files={"pool.py": _POOL_INT32},
            fixed="""
class Backend:
    def init_forward_metadata(self, metadata, loc):
        metadata.swa_loc = self.pool.translate_loc_from_full_to_swa(loc).int()

    def init_forward_metadata_replay(self, metadata, loc):
        metadata.swa_loc = loc.int()
""",
        ),
        Invalid(
            """
bufs["swa_out_cache_loc"] = loc.to(torch.long)
""",
            line=2,
            config={"swa-loc-dtype": "int32"},
            fixed="""
bufs["swa_out_cache_loc"] = loc.to(torch.int32)
""",
        ),
        Invalid(
            """
swa_slots = torch.arange(num_tokens, device=device)
""",
            line=2,
            fixed="""
swa_slots = torch.arange(num_tokens, device=device, dtype=torch.int32)
""",
        ),
        Invalid(
            """
def alloc(n, dtype=torch.int64):
    swa_slots = torch.empty(n, dtype=dtype)
    return swa_slots
""",
            line=3,
        ),
        Invalid(
            """
from dataclasses import dataclass, field

@dataclass
class DecodeInputBuffers:
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: torch.Tensor = field(
        default_factory=lambda: torch.zeros(16, dtype=torch.long)
    )
""",
            line=8,
        ),
        Invalid(
            """
buffers = DecodeInputBuffers(out_cache_loc_swa=torch.full((bs,), 0))
""",
            line=2,
        ),
        Invalid(
            """
metadata.swa_loc = loc.to(device, dtype=torch.int64, non_blocking=True)
""",
            line=2,
            config={"swa-loc-dtype": {"write": "int32"}},
        ),
        # a local gather that escapes: returned
        Invalid(
            """
def swa_slots(self, loc):
    swa_slots = self.full_to_swa_index_mapping[loc]
    return swa_slots[: loc.numel()]
""",
            line=3,
        ),
        Invalid(
            """
def store(self, k, loc, grid):
    swa_loc = loc.to(torch.int64)
    store_kv_kernel[grid](k, swa_loc.contiguous(), self.k_buffer)
""",
            line=3,
            config={"swa-loc-dtype": "int32"},
        ),
        # configured: the translation's own result is checked too
        Invalid(
            """
def translate_loc_from_full_to_swa(self, kv_indices):
    return self.full_to_swa_index_mapping[kv_indices]
""",
            line=3,
            config={"swa-loc-dtype": "int32"},
        ),
        Invalid(
            """
self.swa_loc = loc.int()
""",
            line=2,
            config={"swa-loc-dtype": {"write": "int64"}},
            fixed="""
self.swa_loc = loc.long()
""",
        ),
    ]

    @classmethod
    def triggers(cls, config: Config) -> frozenset[Trigger] | None:
        """Every role's name names the SWA side (``model.location_triggers``); a custom
        ``swa-loc-pattern`` has no known fixed part: no prefilter."""
        if config.swa_loc_pattern != DEFAULT_SWA_LOC_PATTERN:
            return None
        return location_triggers(all_models(config))

    def check(self, unit: FileUnit) -> None:
        conventions = _conventions(unit)
        self._text = unit.text
        reported: set[tuple[int, int]] = set()
        for function, use in conventions.uses(unit.module):
            judged = (unit.module.path, use.place.line)
            expected = conventions.convention(unit.module, use.role or WRITE, judged)
            if expected is None:
                continue
            if any(f.space == TABLE for f in unit.values.space(use.value, Ctx(function))):
                continue  # the full->SWA table itself, whatever it is called: may be int64
            for d in conventions.decisions(function, use):
                if d.dtype == expected.dtype:
                    continue
                if use.handed and d.kind not in (ALLOCATION, DEFAULT):
                    # handed to a call only: a buffer allocated for it counts; a cast there
                    # is what the callee takes, a gather or translation an intermediate
                    continue
                if not consistent(use.event.guard, use.guard, d.guard):
                    continue
                self._report(unit, conventions, function, use, d, expected, reported)
                break
        self._translations(unit, conventions, reported)
        self._requirements(unit, reported)
        self._sinks(unit, conventions, reported)

    def _report(
        self,
        unit: FileUnit,
        conventions: Conventions,
        function: Function,
        use: Use,
        d: Decision,
        expected: Convention,
        reported: set[tuple[int, int]],
        noun: str | None = None,
    ) -> None:
        # where the dtype is decided: here, or in a helper made for SWA values only
        # (``_alloc_swa_page_table``); a shared helper's literal serves other tensors too
        own = d.function is function or (
            d.function is not None
            and bool(d.via)
            and d.kind in (ALLOCATION, DEFAULT, CAST)
            and all(unit.model.is_swa_word(name) for name in d.via)
        )
        near = use.event if d.function is function else None
        event = decider(d.function, d.call, near) if own and d.function and d.call else None
        place = use.place
        if event is not None:
            place = event.decides or event.span
        elif d.kind == TRANSLATION and not d.via and use.event.vspan is not None:
            place = use.event.vspan  # the gather or translation bound here
        key = (place.line, place.col)
        if key in reported:
            return
        reported.add(key)
        role = use.role or WRITE
        slot = use.slot or use.where.strip("`")
        safe = expected.known or conventions.slot_takes(unit.module, role, slot, expected.dtype)
        self.report_span(
            place,
            f"{noun or _noun(role, slot)} `{slot}` {_phrase(d)}{use.leaves}; {expected.why} (I3)",
            fix=self._fix_for(d, event, use, function, expected.dtype, safe),
        )

    def _fix_for(
        self, d: Decision, event: object, use: Use, function: Function, dtype: str, safe: bool
    ) -> Fix | None:
        if event is not None and d.function is function:
            return self._fix(d, event, dtype, safe)
        # a gather or translation bound right here: cast the value it binds
        vspan = use.event.vspan
        if d.kind == TRANSLATION and not d.via and vspan is not None and self._text is not None:
            value = _slice(self._text, vspan)
            return _replace(
                vspan,
                f"{value}.to(torch.{dtype})",
                f"Cast the SWA locations to torch.{dtype}",
                Applicability.UNSAFE,
            )
        return None

    def _translations(
        self, unit: FileUnit, conventions: Conventions, reported: set[tuple[int, int]]
    ) -> None:
        """A translation's own result, where the configuration or the era sets the
        write dtype; else a translate method that casts its result to another dtype than
        the project's other methods of its name return (one contract: callers take either
        class's translation)."""
        configured = conventions.checks_translations()
        dtypes = conventions.dtypes
        methods = dtypes.translate_methods()
        for function in unit.functions():
            if function not in methods:
                continue
            expected = configured or _peers_convention(function, methods, dtypes)
            if expected is None:
                continue
            span = function.facts.span
            if any(span.line <= line <= span.end_line for line, _ in reported):
                continue  # its memo's binding is reported already
            # a cast to another tensor's dtype (``.type_as(kv_indices)``) is decided by
            # what each caller hands it
            contexts = [Ctx(function)]
            if configured is None:
                contexts += [inner for _, inner in unit.values.callers(function)[:8]]
            for event in function.facts.events:
                if event.kind != "return" or event.value is None:
                    continue
                decisions = [d for ctx in contexts for d in dtypes.of(event.value, ctx)]
                for d in decisions:
                    key = (event.span.line, event.span.col)
                    if (
                        d.dtype != expected.dtype
                        and d.dtype in ("int32", "int64")
                        and key not in reported
                        and (configured is not None or d.kind in (CAST, ALLOCATION))
                    ):
                        reported.add(key)
                        self.report_span(
                            event.span,
                            f"SWA write location `{function.facts.name}()`'s result "
                            f"{_phrase(d)}; {expected.why} (I3)",
                        )
                        break

    def _requirements(self, unit: FileUnit, reported: set[tuple[int, int]]) -> None:
        """An SWA location handed to a parameter whose function asserts another dtype."""
        values = unit.values
        dtypes = _dtypes(unit)
        for function in unit.functions():
            ctx = Ctx(function)
            for event in function.facts.events:
                if event.kind != CALL or not isinstance(event.value, Call):
                    continue
                for callee, inner in values.callees(event.value, ctx):
                    asserted = asserted_parameters(callee.facts)
                    if not asserted:
                        continue
                    for param, term, _ in inner.bindings:
                        wanted = asserted.get(param)
                        if wanted is None:
                            continue
                        swa = any(f.space == SWA and not f.weak for f in values.space(term, ctx))
                        if not swa and unit.model.swa_role(param) is None:
                            continue
                        for d in dtypes.of(term, ctx):
                            key = (event.span.line, event.span.col)
                            if (
                                d.dtype in ("int32", "int64")
                                and d.dtype != wanted
                                and key not in reported
                            ):
                                reported.add(key)
                                self.report_span(
                                    event.span,
                                    f"SWA location handed to `{param}` of "
                                    f"`{callee.facts.name}()` {_phrase(d)}, but "
                                    f"`{callee.facts.name}()` requires torch.{wanted} for it "
                                    f"({callee.module.path}) (I3)",
                                )
                                break

    def _sinks(
        self, unit: FileUnit, conventions: Conventions, reported: set[tuple[int, int]]
    ) -> None:
        """A location handed to an argument a kernel reads with one dtype (the model's
        ``sinks``: ``build_kv_read_table(out=...)``), whichever pool's ids it holds."""
        sinks = unit.model.sinks
        if not sinks:
            return
        for function in unit.functions():
            for event in function.facts.events:
                call = event.value
                if event.kind != CALL or not isinstance(call, Call):
                    continue
                name = call.func.name if isinstance(call.func, Attr | Global) else ""
                for sink in sinks.get(name.rsplit(".", 1)[-1], ()):
                    term = call.argument(sink.position, sink.argument)
                    if term is None:
                        continue
                    slot = f"{sink.argument}=` of `{sink.call}"
                    use = Use(event, term, SWA, sink.role, f"`{slot}`", slot=slot)
                    expected = Convention(
                        sink.dtype,
                        f"its kernel reads it as torch.{sink.dtype} "
                        f"({unit.model.engines[0]}'s model: `{sink.call}`'s `{sink.argument}`)",
                    )
                    noun = "Page table" if sink.role == PAGE_TABLE else "Write location"
                    for d in conventions.decisions(function, use):
                        wrong = d.dtype in ("int32", "int64") and d.dtype != sink.dtype
                        if wrong and consistent(event.guard, d.guard):
                            self._report(
                                unit, conventions, function, use, d, expected, reported, noun
                            )
                            break

    # -- fixes ------------------------------------------------------------------------------

    def _fix(self, d: Decision, event: object, dtype: str, safe: bool) -> Fix | None:
        text = self._text
        if text is None or event is None:
            return None
        applicability = Applicability.SAFE if safe else Applicability.UNSAFE
        decides = getattr(event, "decides", None)
        span = getattr(event, "span", None)
        if d.kind in (ALLOCATION, CAST) and d.literal and decides is not None:
            old = _slice(text, decides)
            if old in ("long", "int"):
                new = "int" if dtype == "int32" else "long"
                return _replace(decides, new, f"Use .{new}()", applicability)
            prefix, _, name = old.rpartition(".")
            if not prefix:
                return None
            if name.endswith("Tensor"):
                new = f"{prefix}.{'IntTensor' if dtype == 'int32' else 'LongTensor'}"
            else:
                new = f"{prefix}.{dtype}"
            return _replace(decides, new, f"Use {new}", applicability)
        if d.kind == DEFAULT and d.literal and span is not None:
            call = _slice(text, span)
            new_call = _with_dtype(call, dtype)
            if new_call is None:
                return None
            return _replace(span, new_call, f"Pass dtype=torch.{dtype}", applicability)
        if d.kind == TRANSLATION and span is not None:
            call = _slice(text, span)
            return _replace(
                span,
                f"{call}.to(torch.{dtype})",
                f"Cast the SWA locations to torch.{dtype}",
                Applicability.UNSAFE,
            )
        return None


def _peers_convention(
    function: Function, methods: list[Function], dtypes: Dtypes
) -> Convention | None:
    """The one integer dtype the project's other translate methods named as ``function``
    return, if they agree."""
    found: set[str] = set()
    where = ""
    for other in methods:
        if other is function or other.facts.name != function.facts.name:
            continue
        for d in dtypes.of(other.facts.returns, Ctx(other)):
            if d.dtype in ("int32", "int64"):
                found.add(d.dtype)
                where = where or f"{other.module.path}, `{other.qual.rsplit('.', 2)[-2]}`"
    if len(found) != 1:
        return None
    dtype = found.pop()
    return Convention(
        dtype,
        f"the project's other `{function.facts.name}()` returns torch.{dtype} ({where}): "
        "callers take either",
    )


def _conventions(unit: FileUnit) -> Conventions:
    config = unit.analysis.config
    return unit.values.once("swa002-conventions", lambda: Conventions(_dtypes(unit), config))


def _dtypes(unit: FileUnit) -> Dtypes:
    return unit.values.once("dtypes", lambda: Dtypes(unit.values))


def _noun(role: str, slot: str) -> str:
    if role == WRITE:
        return "SWA write location"
    # the name's last part: ``metadata['swa_page_table']``, ``self.cuda_graph_page_table``
    last = re.split(r"\W+", slot.strip("`'\"[]"))[-1]
    return "SWA page table" if "table" in words(last) else "SWA window index"


def _phrase(d: Decision) -> str:
    """How the value gets its dtype, for a message."""
    via = f" (through `{'()`, `'.join(d.via)}()`)" if d.via else ""
    if d.kind == DEFAULT:
        return f"is created by {d.what}, which is torch.{d.dtype} by default{via}"
    if d.kind == CAST:
        return f"is cast with {d.what} to torch.{d.dtype}{via}"
    if d.kind == TRANSLATION:
        return f"is {d.what}'s torch.{d.dtype} result with no cast{via}"
    if d.kind == ENGINE:
        return f"is torch.{d.dtype}, as {d.what} is{via}"
    return f"gets torch.{d.dtype} from {d.what}{via}"


def _slice(text: str, span: Span) -> str:
    lines = rows(text)  # as Python counts rows (not str.splitlines)
    if span.line == span.end_line:
        return lines[span.line - 1][span.col : span.end_col]
    parts = [lines[span.line - 1][span.col :]]
    parts += lines[span.line : span.end_line - 1]
    parts.append(lines[span.end_line - 1][: span.end_col])
    return "".join(parts)


def _replace(span: Span, new: str, message: str, applicability: Applicability) -> Fix:
    edit = Edit(Position(span.line, span.col), Position(span.end_line, span.end_col), new)
    return Fix(message, (edit,), applicability)


def _with_dtype(call: str, dtype: str) -> str | None:
    """``call`` with ``dtype=torch.<dtype>`` added after its arguments (libcst keeps the
    rest of its text as it is)."""
    import libcst as cst

    try:
        node = cst.parse_expression(call)
    except cst.ParserSyntaxError:
        return None
    if not isinstance(node, cst.Call):
        return None
    head = node.func.value if isinstance(node.func, cst.Attribute) else None
    torch_name = head.value if isinstance(head, cst.Name) else "torch"
    new_arg = cst.Arg(
        keyword=cst.Name("dtype"),
        value=cst.Attribute(cst.Name(torch_name), cst.Name(dtype)),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""),
            whitespace_after=cst.SimpleWhitespace(""),
        ),
    )
    args = list(node.args)
    if args and args[-1].comma is not cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        )
    return cst.Module([]).code_for_node(node.with_changes(args=[*args, new_arg]))
