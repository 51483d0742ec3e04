"""SWA009 swa-value-from-full-side."""

from __future__ import annotations

from collections.abc import Iterator

from swacheck.config import Config
from swacheck.rule import Invalid, Rule, Valid
from swacheck.semantics.function import BIND, CALL, FILL, RETURN, Event, Span
from swacheck.semantics.model import (
    FULL,
    SWA,
    WRITE,
    Model,
    location_triggers,
    model_for,
    words,
)
from swacheck.semantics.modes import hybrid_polarity, is_presence, outside_hybrid
from swacheck.semantics.project import Function
from swacheck.semantics.terms import (
    Attr,
    Call,
    Const,
    Local,
    Phi,
    Term,
    alternatives,
    consistent,
    parts,
    render,
    view_root,
)
from swacheck.semantics.unit import FileUnit
from swacheck.semantics.uses import TRANSLATOR, Use, uses
from swacheck.semantics.values import Ctx, Space, Values, rows_root
from swacheck.triggers import Trigger

# A backend of the same project that takes each SWA value from the SWA side: the
# names the INVALID examples bind from the full pool are SWA-space names in the project.
_TRANSLATING_BACKEND = """
class TRTLLMHABackend:
    def init_forward_metadata(self, forward_batch, metadata):
        pool = self.token_to_kv_pool
        metadata.swa_out_cache_loc = pool.translate_loc_from_full_to_swa(
            forward_batch.out_cache_loc
        )
        metadata.swa_page_table = pool.translate_loc_from_full_to_swa(metadata.page_table)
        self.buffers = {"swa_out_cache_loc": metadata.swa_out_cache_loc}

    def forward_extend(self, layer, forward_batch, k, v):
        swa_loc = self.forward_metadata.swa_out_cache_loc
        self.token_to_kv_pool.set_kv_buffer(
            layer, KVWriteLoc(forward_batch.out_cache_loc, swa_loc=swa_loc), k, v
        )


def update_sliding_window_buffer(window_kv_indptr, window_kv_indices, allocator):
    n = window_kv_indptr[-1]
    window_kv_indices[:n] = allocator.translate_loc_from_full_to_swa(window_kv_indices[:n])
    swa_page_table = allocator.translate_loc_from_full_to_swa(window_kv_indices)
    return swa_page_table
"""


class SwaValueFromFullSide(Rule):
    """
    ## What it does
    Flags a location handed to one pool's side when it holds the other's ids: a value
    of the full pool's index space where SWA ids are needed, or an SWA value where full
    ones are (I9). Values are followed through the code, not read off their names:

    - *full-pool values*: the batch's `out_cache_loc`, `req_to_token` pages, the full
      page table, a full sub-allocator's allocation, a full-space translator's result
      (`translate_write_loc`, a `KVIndexTranslator` read or write of `IdSpaceKind.FULL`,
      also by a per-kind call left at its default kind), a kernel that reads
      `req_to_token` pages and is handed neither the full->SWA table nor a translator,
      a parameter the function itself translates or gathers through the table;
    - *SWA values*: a translation (`translate_loc_from_full_to_swa`, the per-kind calls
      of `IdSpaceKind.SLIDING_WINDOW`), a gather through the full->SWA table, an SWA
      sub-allocator's allocation, a kernel handed the table;
    - followed through locals, both branches of an `if` (with the branch each binding
      is made on: a binding on one branch never reaches a use on the other), views,
      casts and arithmetic, in-place fills (`buf[:n] = translate(buf[:n])` translates
      `buf`), fields of objects, module-level names, helpers' results and parameters,
      across the files of the project.

    Where SWA ids are needed: a name of an SWA write location or page table / window
    index (a field, dict entry, local, keyword or parameter: `metadata.swa_out_cache_loc
    = ...`, `KVWriteLoc(loc, swa_loc=...)`, `bufs["swa_page_table"] = ...`), a buffer so
    named filled in place or by a kernel, the location arguments of a hybrid pool's
    SWA half (`self.swa_kv_pool`, `self.swa_attn_allocator`: the `swa_` attribute of an
    object that also has the `full_` one), the values written into the full->SWA
    table, and the translators and tables of an entry keyed by the sliding-window space
    (`IdSpace(key=(IdSpaceKind.SLIDING_WINDOW, ...), write=..., read_v2p=...)`). Where
    full ids are: the full half's arguments, the table's rows, and the input of a
    full->SWA translation (an SWA value translated again). A parameter its function
    hands to any of these makes the callers' arguments uses too. A value of unknown
    space that a test sends to the SWA half on one branch and to the full half on the
    other, while the value itself does not follow the test, is flagged at the SWA half.
    So is an argument that is SWA ids on one path and full-pool ids on another in
    hybrid-SWA mode, where the test that tells the paths apart is about neither the pool,
    the layer nor the window (a speculative branch translated on the plain branch only);
    so is a value a function returns that way. A method of no known body handed
    `req_to_token` returns full-pool ids.

    It stays silent in a branch that runs only outside hybrid-SWA mode (`if not
    self.is_hybrid_swa:`, `if self._swa_kv_pool is None:`), where the two spaces are one,
    unless the path is also an SWA layer's (`is_swa` of the pool's `layers_mapping`, the
    model's `layer-tables`): there, a batch found without an SWA location
    (`forward_batch.out_cache_loc_swa is None`) is still in hybrid mode, and falling back
    to the full-pool value is the bug. It also stays silent where the value may be
    either space, and for a local translated later in the same function (filled from
    `req_to_token`, then translated in place).

    ## Why is this bad?
    SWA values live in the SWA pool's index space; full-pool slot numbers go through
    the full->SWA mapping first (`translate_loc_from_full_to_swa`, from 0.5.13 each
    backend's metadata, from 0.5.21 a `KVIndexTranslator` per `IdSpaceKind`). A write
    location taken from the full side stores the SWA layers' K/V at full-pool slot
    numbers, over other requests' SWA KV or past the end of the smaller SWA pool; a page
    table or window index built from `req_to_token` makes the SWA layers read the wrong
    tokens; a translation applied twice addresses slots that belong to nobody. Nothing
    fails: the model quietly loses accuracy, as the seed reports' AIME regression did.

    ## Fix safety
    No autofix: which translation applies (the pool's, the backend's translator, a
    translation already made for the batch) is the author's choice.
    """

    code = "SWA009"
    name = "swa-value-from-full-side"
    summary = "SWA location, page table or window index taken from the wrong pool's side"
    config_keys = ("swa-loc-pattern", "translate-methods", "mapping-attributes")
    invariant = "I9"
    origin = "the current design: translation in the attention backends (#27617)"
    semantic = True

    VALID = [
        # the full-pool location where the batch carries no SWA one: outside hybrid mode
        Valid(
            """
class Backend:
    def cache_loc(self, forward_batch):
        if forward_batch.out_cache_loc_swa is None:
            return forward_batch.out_cache_loc
        return forward_batch.out_cache_loc_swa
"""
        ),
        # each layer its own pool's locations
        Valid(
            """
class Backend:
    def _get_layer_cache_loc(self, layer, forward_batch):
        _, is_swa = self._swa_kv_pool.layers_mapping[layer.layer_id]
        if is_swa:
            return forward_batch.out_cache_loc_swa
        return forward_batch.out_cache_loc
"""
        ),
        # a helper of unknown body handed both the pages and the full->SWA table
        Valid(
            """
class Backend:
    def init_forward_metadata(self, forward_batch, metadata, bs):
        pages = self.builder.window_pages(self.req_to_token, self.full_to_swa_index_mapping, bs)
        metadata.swa_page_table = pages
"""
        ),
        # the layer decides the pool, and so the ids (SGLang's SWAKVPool)
        Valid(
            """
class HybridPool:
    def store(self, layer_id, forward_batch, k, v):
        loc = forward_batch.out_cache_loc
        if self.layers_mapping[layer_id][1]:
            loc = self.translate_loc_from_full_to_swa(loc)
        self.write_kv(layer_id, loc, k, v)
"""
        ),
        # the same through the SWA sub-allocator: its own physical ids
        Valid(
            """
class UnifiedHybridAllocator:
    def __init__(self, full, swa):
        self.full_attn_allocator = full
        self.swa_attn_allocator = swa

    def translate_loc_from_full_to_swa(self, kv_indices, out=None):
        return self.swa_attn_allocator.translate_kv_loc(kv_indices, out=out)
"""
        ),
        # SWA pages for a sliding-window layer, full pages for the others: the test that
        # tells the paths apart is the layer's
        Valid(
            """
class Backend:
    def pages(self, layer, forward_batch, bs):
        pages = self.req_to_token[forward_batch.req_pool_indices[:bs]]
        if layer.sliding_window_size > 0:
            pages = self.token_to_kv_pool.translate_loc_from_full_to_swa(pages)
        self.decode_kernel(pages)
"""
        ),
        # the pool is chosen by the same test as the location (SGLang's SWAKVPool)
        Valid(
            """
class HybridPool:
    def __init__(self, full, swa):
        self.full_kv_pool = full
        self.swa_kv_pool = swa

    def set_kv_buffer(self, layer, loc, swa_loc, k, v):
        _, is_swa = self.layers_mapping[layer.layer_id]
        pool = self.swa_kv_pool if is_swa else self.full_kv_pool
        if is_swa:
            loc = swa_loc
        pool.set_kv_buffer(None, loc, k, v)
"""
        ),
        # a window's full pages, named for the window, handed to the translation
        Valid(
            """
def transfer(self, req, n):
    window_indices = self.req_to_token_pool.req_to_token[req.req_pool_idx, :n].to(torch.int64)
    swa_indices = self.allocator.translate_swa_indices_for_transfer(window_indices)
    return swa_indices
"""
        ),
        # virtual ids shared by both halves of a unified allocator, and a call of the SWA
        # half that takes both sides' pages
        Valid(
            """
class UnifiedAllocator:
    def __init__(self, full, swa):
        self.full_attn_allocator = full
        self.swa_attn_allocator = swa

    def set_inflight(self, out_cache_loc_virtual):
        self.full_attn_allocator.set_inflight_forward(out_cache_loc_virtual)
        self.swa_attn_allocator.set_inflight_forward(out_cache_loc_virtual)

    def set_full_to_swa_mapping(self, full_indices, swa_indices):
        self.swa_attn_allocator.bind(full_indices // self.page_size, swa_indices // self.page_size)
"""
        ),
        # a kind that may name either space (a property choosing it) decides nothing
        Valid(
            """
class Translator:
    @property
    def window_kv_kind(self):
        return IdSpaceKind.SLIDING_WINDOW if self.has_window_pool else IdSpaceKind.FULL


class Backend:
    def refill(self, translator: Translator, plan, metadata):
        translator.copy_page_table(
            plan, out=metadata.swa_page_table, kind=translator.window_kv_kind
        )
"""
        ),
        # translated before the branch that stores it: the full value never reaches it
        Valid(
            """
def init_forward_metadata(self, forward_batch, metadata):
    loc = forward_batch.out_cache_loc
    if self.is_hybrid_swa:
        loc = self.token_to_kv_pool.translate_loc_from_full_to_swa(loc)
        metadata.swa_out_cache_loc = loc
"""
        ),
        # 0.5.13+: the backend translates in its metadata
        Valid(
            """
class TRTLLMHABackend:
    def init_forward_metadata(self, forward_batch):
        metadata = self.forward_metadata
        metadata.page_table = self.req_to_token[forward_batch.req_pool_indices, : self.max_len]
        metadata.swa_page_table = self._swa_kv_pool.translate_loc_from_full_to_swa(
            metadata.page_table
        ).to(torch.int32)
        metadata.swa_out_cache_loc = self.token_to_kv_pool.translate_loc_from_full_to_swa(
            forward_batch.out_cache_loc
        )
"""
        ),
        # window indices filled with full-pool indices, then translated in place
        Valid(
            """
def update_sliding_window_buffer(window_kv_indptr, req_to_token, seq_lens, req_pool_indices,
                                 bs, device, token_to_kv_pool_allocator=None):
    window_kv_indices = torch.empty(window_kv_indptr[-1], dtype=torch.int64, device=device)
    create_flashinfer_kv_indices_triton[(bs,)](
        req_to_token, req_pool_indices, seq_lens, window_kv_indptr, None, window_kv_indices,
        req_to_token.stride(0),
    )
    if hasattr(token_to_kv_pool_allocator, "translate_loc_from_full_to_swa"):
        n = window_kv_indptr[-1]
        window_kv_indices[:n] = token_to_kv_pool_allocator.translate_loc_from_full_to_swa(
            window_kv_indices[:n]
        )
    return window_kv_indices
"""
        ),
        # a helper that translates unless told to skip, called with the default: the
        # untranslated return is the non-hybrid pool's, the caller's buffer is never None
        Valid(
            """
def fill_window(indptr, req_to_token, bs, pool=None, out=None, skip_translate=False):
    if out is None:
        out = torch.empty(indptr[-1], dtype=torch.int64)
    build_kv_indices_kernel[(bs,)](req_to_token, indptr, out)
    if not skip_translate and hasattr(pool, "translate_loc_from_full_to_swa"):
        out[: indptr[-1]] = pool.translate_loc_from_full_to_swa(out[: indptr[-1]])
    return indptr, out


class Backend:
    def init_forward_metadata(self, forward_batch, bs):
        indptr, window_kv_indices = fill_window(
            self.window_indptr, self.req_to_token, bs, self.token_to_kv_pool
        )
        self.forward_metadata = (indptr, window_kv_indices)
"""
        ),
        # a full-pool location in a local named for the SWA write, handed to the
        # translator's own helper (which calls a translation kept in a field) before use
        Valid(
            """
class Translator:
    def __init__(self, pool):
        self._to_swa = pool.translate_loc_from_full_to_swa

    def window_write_loc(self, loc):
        return self._to_swa(loc)


class Backend:
    def __init__(self, pool):
        self.translator = Translator(pool)

    def refill(self, forward_batch):
        swa_out_cache_loc = forward_batch.out_cache_loc
        n = swa_out_cache_loc.shape[0]
        self.graph_swa_loc[:n].copy_(self.translator.window_write_loc(swa_out_cache_loc))
"""
        ),
        # a helper that has a kernel fill the buffer it is handed, then translates it in
        # place: what its caller stores afterwards is on the SWA side
        Valid(
            """
class DraftBackend:
    def _fill_window(self, forward_batch, window_buffer, bs):
        fill_window_kernel[(bs,)](self.req_to_token, forward_batch.req_pool_indices, window_buffer)
        for i in range(self.steps):
            row = window_buffer[i]
            row.copy_(self.token_to_kv_pool.translate_loc_from_full_to_swa(row))

    def prepare(self, forward_batch, window_buffer, bs):
        self._fill_window(forward_batch, window_buffer, bs)
        for i in range(self.steps):
            forward_batch.spec_info.window_kv_indices = window_buffer[i]
"""
        ),
        # outside hybrid-SWA mode the two index spaces coincide
        Valid(
            """
def write_loc(self, forward_batch):
    if not self.is_hybrid_swa:
        swa_loc = forward_batch.out_cache_loc
    else:
        swa_loc = self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
    return KVWriteLoc(forward_batch.out_cache_loc, swa_loc=swa_loc)
"""
        ),
        # a full-pool name, translated into its SWA twin
        Valid(
            """
def transfer(self, req_to_token, req, window):
    window_kv_indices_full = req_to_token[req.req_pool_idx, window]
    window_kv_indices_swa = self.allocator.translate_loc_from_full_to_swa(window_kv_indices_full)
    return window_kv_indices_swa.cpu().numpy()
"""
        ),
        # a name the project never takes from the SWA side lives in the full pool's index
        # space (prefill-aware SWA reads the full pool through its own page table)
        Valid(
            """
def init_forward_metadata_capture(self, metadata):
    metadata.page_table = self.decode_cuda_graph_metadata["page_table"][:bs, :]
    if self.is_prefill_aware_swa:
        metadata.pa_swa_page_table = metadata.page_table
""",
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # a kernel handed the mapping (here through a local cast of it) translates as it
        # fills
        Valid(
            """
def fill(self, metadata, req_pool_indices, cache_seqlens):
    swa_slot_mapping = self.swa_kv_pool.full_to_swa_index_mapping.long()
    swa_page_table = torch.zeros(bs, max_blocks, dtype=torch.int32, device=self.device)
    scatter_page_table_kernel[(bs,)](
        self.req_to_token, req_pool_indices, cache_seqlens, swa_page_table, swa_slot_mapping
    )
    return swa_page_table
""",
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # a kernel handed the mapping translates while it fills
        Valid(
            """
def fill(self, metadata, req_pool_indices, cache_seqlens):
    build_page_table_kernel[(bs,)](
        self.req_to_token, req_pool_indices, cache_seqlens, metadata.page_table,
        metadata.swa_page_table, self.pool.full_to_swa_index_mapping,
    )
"""
        ),
        # the table under a kernel wrapper's own name (SGLang 0.5.23's trtllm page table
        # and DSpark layouts: `full_to_swa`, `swa_mapping`, `full_to_swa_mapping`)
        Valid(
            """
def build_page_table(req_to_token, page_table, swa_page_table, full_to_swa):
    create_kv_indices_triton[(bs,)](req_to_token, page_table, full_to_swa, swa_page_table)
"""
        ),
        Valid(
            """
def commit_layout(req_to_token, swa_mapping, n):
    swa_loc = torch.empty(n, dtype=torch.int32)
    _commit_kernel[(n,)](req_to_token, swa_mapping, swa_loc)
    return swa_loc
"""
        ),
        # two constructions written alike are two values (vLLM 0.33's warm-up inputs)
        Valid(
            """
def warmup_inputs(self):
    return dict(
        swa_indices=TritonWarmupTensor(torch.int32, shape=(1, 1)),
        block_table=TritonWarmupTensor(torch.int32, shape=(1, 1)),
    )
"""
        ),
        # one row of the table written with one value (a full id keyed, an SWA id stored)
        Valid(
            """
import torch

class SWAKVPool:
    def __init__(self, size):
        self.full_to_swa_index_mapping = torch.empty(size + 1, dtype=torch.int64)
        self.full_to_swa_index_mapping[-1] = -1
"""
        ),
        # a loop over both sub-pools, each handed its own half's locations
        Valid(
            """
class SWAKVPool:
    def __init__(self, full_kv_pool, swa_kv_pool, mapping):
        self.full_kv_pool = full_kv_pool
        self.swa_kv_pool = swa_kv_pool
        self.full_to_swa_index_mapping = mapping

    def load_cpu_copy(self, kv_cache_cpu, indices):
        swa_indices = self.full_to_swa_index_mapping[indices]
        for pool, kv_cpu, loc in (
            (self.full_kv_pool, kv_cache_cpu["full"], indices),
            (self.swa_kv_pool, kv_cache_cpu["swa"], swa_indices),
        ):
            pool.load_cpu_copy(kv_cpu, loc)
"""
        ),
    ]
    INVALID = [
        # a loop over both sub-pools that hands the SWA one the full-pool locations
        Invalid(
            """
class SWAKVPool:
    def __init__(self, full_kv_pool, swa_kv_pool):
        self.full_kv_pool = full_kv_pool
        self.swa_kv_pool = swa_kv_pool

    def load_cpu_copy(self, kv_cache_cpu, indices):
        for pool, kv_cpu in (
            (self.full_kv_pool, kv_cache_cpu["full"]),
            (self.swa_kv_pool, kv_cache_cpu["swa"]),
        ):
            pool.load_cpu_copy(kv_cpu, indices)
""",
            line=12,
        ),
        # an SWA layer's write location falling back to the full-pool one when the batch
        # carries none
        Invalid(
            """
class Backend:
    def _get_layer_cache_loc(self, layer, forward_batch):
        _, is_swa = self._swa_kv_pool.layers_mapping[layer.layer_id]
        if is_swa:
            if (swa_loc := forward_batch.out_cache_loc_swa) is None:
                swa_loc = forward_batch.out_cache_loc
            return swa_loc
        return forward_batch.out_cache_loc
""",
            line=7,
        ),
        # returned as SWA ids on the eager path, as full-pool ids under capture
        Invalid(
            """
class Backend:
    def swa_pages(self, metadata, in_capture):
        if self.use_sliding_window_kv_pool:
            if in_capture:
                pages = metadata.page_table
            else:
                pages = self.token_to_kv_pool.translate_loc_from_full_to_swa(
                    metadata.page_table
                )
            return pages
        return metadata.page_table
""",
            line=6,
        ),
        # translated only outside capture: the captured graph bakes in full-pool ids
        Invalid(
            """
class Backend:
    def init_forward_metadata(self, forward_batch, in_capture):
        loc = forward_batch.out_cache_loc
        if not in_capture:
            loc = self.token_to_kv_pool.translate_loc_from_full_to_swa(loc)
        self.write_swa_kv(loc)
""",
            line=4,
        ),
        # the unified allocator's SWA translation resolved through the full sub-allocator
        Invalid(
            """
class UnifiedHybridAllocator:
    def __init__(self, full, swa):
        self.full_attn_allocator = full
        self.swa_attn_allocator = swa

    def translate_loc_from_full_to_swa(self, kv_indices, out=None):
        return self.full_attn_allocator.translate_kv_loc(kv_indices, out=out)
""",
            line=8,
        ),
        # translated on the plain branch only: the speculative branch's indices, computed
        # from `req_to_token`, reach the same wrapper untranslated in hybrid mode
        Invalid(
            """
class PrefillUpdater:
    def call_begin_forward(self, wrapper, req_pool_indices, kv_indptr, spec_info, use_swa):
        if spec_info is None:
            kv_indices = torch.empty(kv_indptr[-1], dtype=torch.int32)
            fill_kv_indices[(1,)](self.req_to_token, req_pool_indices, kv_indptr, kv_indices)
            if use_swa:
                kv_indices = self.pool.translate_loc_from_full_to_swa(kv_indices)
        else:
            kv_indices = spec_info.generate_attn_arg_prefill(req_pool_indices, self.req_to_token)
        wrapper.begin_forward(kv_indptr, kv_indices)
""",
            line=10,
        ),
        # the full locations handed to the SWA sub-allocator instead of their SWA slots
        Invalid(
            """
class HybridAllocator:
    def __init__(self, full, swa):
        self.full_attn_allocator = full
        self.swa_attn_allocator = swa

    def free_swa(self, free_index):
        swa_indices = self.full_to_swa_index_mapping[free_index]
        self.full_to_swa_index_mapping[free_index] = 0
        self.swa_attn_allocator.free(free_index)
""",
            line=10,
        ),
        # the full sub-pool's translator filed under the sliding-window space
        Invalid(
            """
def build_spaces(alloc):
    spaces = {}
    spaces[IdSpaceKind.FULL] = IdSpace(
        key=(IdSpaceKind.FULL, id(alloc)), write=alloc.translate_write_loc
    )
    spaces[IdSpaceKind.SLIDING_WINDOW] = IdSpace(
        key=(IdSpaceKind.SLIDING_WINDOW, id(alloc)), write=alloc.translate_write_loc
    )
    return spaces
""",
            line=7,
        ),
        # a helper that hands out the full space's write ids, stored as the SWA ones
        Invalid(
            """
class Backend:
    def _window_write_ids(self, forward_batch):
        return self.kv_index_translator.write_ids(forward_batch, IdSpaceKind.FULL)

    def init_forward_metadata(self, forward_batch, metadata):
        metadata.swa_out_cache_loc = self._window_write_ids(forward_batch)
""",
            line=7,
        ),
        # a per-kind page-table fill without its kind fills the full table
        Invalid(
            """
def refill(self, plan, metadata, bs):
    self.kv_index_translator.copy_page_table(plan, out=metadata.page_table[:bs])
    self.kv_index_translator.copy_page_table(plan, out=metadata.swa_page_table[:bs])
""",
            line=4,
        ),
        # the pool follows the layer, the location does not
        Invalid(
            """
class HybridPool:
    def __init__(self, full, swa):
        self.full_kv_pool = full
        self.swa_kv_pool = swa

    def store(self, layer, loc, swa_loc, k, v):
        is_swa = self.layers_mapping[layer.layer_id][1]
        pool = self.swa_kv_pool if is_swa else self.full_kv_pool
        pool.set_kv_buffer(None, loc, k, v)
""",
            line=10,
        ),
        # arguments swapped for a helper that writes the table
        Invalid(
            """
class Allocator:
    def set_mapping(self, full_indices, swa_indices):
        self.full_to_swa_index_mapping[full_indices] = swa_indices

    def alloc(self, n):
        full = self.full_attn_allocator.alloc(n)
        swa = self.swa_attn_allocator.alloc(n)
        self.set_mapping(swa, full)
        return full

    def __init__(self, full, swa):
        self.full_attn_allocator = full
        self.swa_attn_allocator = swa
""",
            line=9,
        ),
        # SWA KV stored at full slot numbers
        Invalid(
            """
class FlashAttentionBackend:
    def init_forward_metadata(self, forward_batch):
        metadata = FlashAttentionMetadata()
        if self.use_sliding_window_kv_pool:
            metadata.swa_out_cache_loc = forward_batch.out_cache_loc
        self.forward_metadata = metadata
""",
            line=6,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # the page table of SWA layers copied from full-pool pages
        Invalid(
            """
def init_forward_metadata_replay_cuda_graph(self, bs, req_pool_indices, seq_lens):
    metadata = self.decode_cuda_graph_metadata[bs]
    max_len = int(seq_lens.max())
    page_indices = self.req_to_token[req_pool_indices, :max_len]
    metadata.page_table[:, :max_len].copy_(page_indices // self.page_size)
    metadata.swa_page_table[:, :max_len].copy_(page_indices // self.page_size)
""",
            line=7,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        Invalid(
            """
def init_forward_metadata(self, forward_batch):
    metadata = self.forward_metadata
    metadata.swa_page_table = self.req_to_token[forward_batch.req_pool_indices, : self.max_len]
""",
            line=4,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # the SWA location is the full one
        Invalid(
            """
def forward_extend(self, q, k, v, layer, forward_batch):
    loc = forward_batch.out_cache_loc
    forward_batch.token_to_kv_pool.set_kv_buffer(layer, KVWriteLoc(loc, swa_loc=loc), k, v)
""",
            line=4,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # window indices computed from req_to_token and never translated
        Invalid(
            """
def update_sliding_window_buffer_cuda_graph(window_kv_indptr, window_kv_indices, req_to_token,
                                            seq_lens, req_pool_indices, bs):
    window_kv_lens = torch.minimum(seq_lens, torch.tensor(4096))
    window_kv_indptr[1 : bs + 1] = torch.cumsum(window_kv_lens, dim=0)
    create_flashinfer_kv_indices_triton[(bs,)](
        req_to_token, req_pool_indices, window_kv_lens, window_kv_indptr, None,
        window_kv_indices, req_to_token.stride(0),
    )
    return window_kv_indptr, window_kv_indices
""",
            line=8,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # a local SWA buffer filled by slice assignment from full-pool pages
        Invalid(
            """
def build(self, req_pool_indices, bs, max_pages):
    swa_page_table = torch.zeros(bs, max_pages, dtype=torch.int32, device=self.device)
    swa_page_table[:, :max_pages] = self.req_to_token[req_pool_indices, :max_pages]
    return swa_page_table
""",
            line=4,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
        # through a dict of graph buffers
        Invalid(
            """
def load(self, forward_batch, n):
    buffers = {"swa_out_cache_loc": forward_batch.out_cache_loc[:n]}
    self.registry.fill_from(buffers)
""",
            line=3,
            files={"trtllm_backend.py": _TRANSLATING_BACKEND},
        ),
    ]

    @classmethod
    def triggers(cls, config: Config) -> frozenset[Trigger] | None:
        """Every use names one side or a space (``model.location_triggers``); a custom
        ``swa-loc-pattern`` has no known fixed part: no prefilter."""
        from swacheck.config import DEFAULT_SWA_LOC_PATTERN

        if config.swa_loc_pattern != DEFAULT_SWA_LOC_PATTERN:
            return None
        return location_triggers(model_for(config))

    def check(self, unit: FileUnit) -> None:
        values = unit.values
        for function in unit.functions():
            self._function(function, values)

    def _function(self, function: Function, values: Values) -> None:
        ctx = Ctx(function)
        reported: set[tuple[int, str]] = set()
        translated = None
        found = list(uses(function, values))
        for use in found:
            if use.checks == TRANSLATOR:
                facts = values.translator_space(use.value, ctx)
            else:
                facts = values.space(use.value, ctx)
            for fact in facts:
                if fact.space not in (FULL, SWA) or fact.space == use.space:
                    continue
                if use.space == FULL and fact.weak:
                    continue  # named for the SWA side only: a buffer translated in place
                if not consistent(use.event.guard, use.guard, fact.guard):
                    continue
                if outside_hybrid(use.event.guard | use.guard | fact.guard, values.model):
                    continue
                if use.local is not None:
                    if _translated_later(function, use, values, ctx):
                        continue
                    if translated is None:
                        handed = values.translated_arguments(function)
                        translated = {rows_root(argument) for _, argument in handed}
                    if rows_root(use.value) in translated:
                        continue
                key = (use.place.line, use.where)
                if key not in reported:
                    reported.add(key)
                    self._report(use, fact)
                break
        self._conflicts(found, values, ctx, reported)
        self._mixed(function, values, ctx, reported)
        self._translator_result(function, values, ctx, reported)

    def _translator_result(
        self, function: Function, values: Values, ctx: Ctx, reported: set[tuple[int, str]]
    ) -> None:
        """The body of a full->SWA translator of the model returning full-pool ids."""
        translator = values.model.translators.get(function.facts.name)
        if translator is None or translator.to != SWA:
            return
        for event in function.facts.events:
            if event.kind != RETURN or event.value is None:
                continue
            for fact in values.space(event.value, ctx):
                if fact.space != FULL or fact.weak or outside_hybrid(fact.guard, values.model):
                    continue
                key = (event.span.line, "return")
                if key not in reported:
                    reported.add(key)
                    self.report_span(
                        event.span,
                        f"`{function.facts.name}` translates into the SWA side but returns "
                        f"{fact.why}, a full-pool value: every caller hands SWA layers "
                        "full-pool slot numbers; return the SWA sub-pool's ids (I9)",
                    )
                break

    def _mixed(
        self, function: Function, values: Values, ctx: Ctx, reported: set[tuple[int, str]]
    ) -> None:
        """An argument that is SWA ids on one path and full-pool ids on another, in
        hybrid-SWA mode, where what tells the paths apart is no test of the pool or the
        layer (a speculative branch, a capture branch): the consumer takes one space,
        and one of the paths hands it the other."""
        model = values.model
        for event in function.facts.events:
            if _on_either(event):
                continue  # the consumer is one object per path too (a loop over both pools)
            for arg, written, place, to in _handed(event, model):
                choices = alternatives(arg)
                if len(choices) < 2:
                    continue
                sides: dict[str, list[tuple[frozenset, Space, Term]]] = {FULL: [], SWA: []}
                for guard, value in choices:
                    if not consistent(guard, event.guard):
                        continue
                    for fact in values.space(value, ctx):
                        both = guard | fact.guard | event.guard
                        if (
                            fact.space in sides
                            and not fact.weak
                            and consistent(both)
                            and not outside_hybrid(both, model)
                        ):
                            sides[fact.space].append((both, fact, value))
                pair = next(
                    (
                        (swa, full)
                        for swa in sides[SWA]
                        for full in sides[FULL]
                        if _told_apart_by_other_tests(swa[0], full[0], model)
                    ),
                    None,
                )
                what = f"`{written}`" if written else "the value"
                if pair is None:
                    continue
                (_, swa_fact, _), (_, full_fact, full_value) = pair
                # where the path that lacks the translation binds the value: the fix's place
                bound = next(
                    (
                        e
                        for e in function.facts.events
                        if e.kind == BIND and e.value == full_value and isinstance(e.target, Local)
                    ),
                    None,
                )
                at = bound.span if bound is not None else place
                key = (at.line, what)
                if key in reported:
                    continue
                reported.add(key)
                self.report_span(
                    at,
                    f"{what} is {to} (line {place.line}) as SWA "
                    f"ids on one path ({swa_fact.why}) and as full-pool ids on this one "
                    f"({full_fact.why}), in hybrid-SWA mode, where no test of the pool or "
                    "the layer tells the paths apart: on this path the consumer reads the "
                    "wrong pool's slots; translate it on every path (I9)",
                )

    def _conflicts(
        self, found: list[Use], values: Values, ctx: Ctx, reported: set[tuple[int, str]]
    ) -> None:
        """A value of unknown space that a test sends to the SWA half on one branch and
        to the full half on the other, while the value does not follow the test; or that
        one call hands to either half (its object one of both sub-pools: a loop over
        ``(full_kv_pool, swa_kv_pool)``)."""
        needs: dict[object, list[tuple[str, Use, frozenset]]] = {}
        for use in found:
            if use.checks == TRANSLATOR:
                continue
            for guard, value in alternatives(use.value):
                if not consistent(guard, use.guard, use.event.guard):
                    continue
                if isinstance(value, Const) or values.space(value, ctx):
                    continue
                needs.setdefault(view_root(value), []).append(
                    (use.space, use, guard | use.guard | use.event.guard)
                )
        for items in needs.values():
            fulls = [(u, g) for space, u, g in items if space == FULL]
            for space, use, guard in items:
                if space != SWA or outside_hybrid(guard, values.model):
                    continue
                # one value for both halves of a call made on either sub-pool (a loop's
                # value per half is a join)
                one = [
                    u
                    for u, _ in fulls
                    if u.event is use.event
                    and _on_either(use.event)
                    and not isinstance(use.value, Phi)
                ]
                other = one or [u for u, g in fulls if not consistent(g, guard)]
                key = (use.place.line, use.where)
                if other and key not in reported:
                    reported.add(key)
                    what = (
                        f"{use.where} is one call made on either half, with the same value for both"
                        if one
                        else f"{use.where} is handed the same value as {other[0].where} on "
                        f"line {other[0].place.line}, the full half's, while a test sends "
                        "them to different halves"
                    )
                    self.report_span(
                        use.place,
                        f"{what}: the SWA half gets full-pool ids, over other requests' SWA "
                        "KV; translate it for the SWA half (I9)",
                    )

    def _report(self, use: Use, fact: Space) -> None:
        if use.space == FULL:
            message = (
                f"{use.where} takes full-pool locations but is handed {fact.why}, already "
                "on the SWA side: translated again (or written as a full slot) it addresses "
                "slots that belong to other tokens (I9)"
            )
        elif use.checks == TRANSLATOR:
            message = (
                f"{use.where} is {fact.why}, a translator into the full space: every id "
                "it yields for the sliding-window sub-pool addresses full-pool slots, over "
                "other requests' SWA KV; use the SWA side's translator (I9)"
            )
        else:
            if use.role == WRITE:
                noun = "SWA write location"
                effect = (
                    "its SWA layers' K/V are stored at full-pool slot numbers, over other "
                    "requests' SWA KV or past the end of the smaller SWA pool"
                )
            elif use.role is not None:
                noun = "SWA page table or window index"
                effect = "SWA layers read SWA KV at full-pool slot numbers: the wrong tokens"
            else:
                noun = "SWA-side location"
                effect = "the SWA pool is addressed at full-pool slot numbers"
            message = (
                f"{noun} {use.where} is handed {fact.why}, a full-pool value, with no "
                f"translation to the SWA side: {effect}; translate it "
                "(`translate_loc_from_full_to_swa`, the backend's translator) (I9)"
            )
        self.report_span(use.place, message)


def _handed(event: Event, model: Model) -> Iterator[tuple[Term, str | None, Span, str]]:
    """What ``event`` hands on, to one consumer: each argument of a call (not of a
    translation), with its name as written and where; the value a ``return`` gives its
    callers."""
    value = event.value
    if event.kind == RETURN and value is not None:
        yield value, None, event.span, "returned"
        return
    if event.kind != CALL or not isinstance(value, Call) or _translates(value, model):
        return
    to = f"handed to `{render(value.func)}`"
    names = (*event.names, *[None] * len(value.args))
    for arg, written in zip(value.args, names, strict=False):
        if written:
            yield arg, written[0], written[1], to
        else:
            yield arg, None, event.span, to
    for keyword, item in value.kwargs:
        yield item, keyword, event.span, to


def _translates(call: Call, model: Model) -> bool:
    func = call.func
    return isinstance(func, Attr) and model.translator(func.name) is not None


def _told_apart_by_other_tests(one: frozenset, other: frozenset, model: Model) -> bool:
    """Whether the literals on which two paths disagree exist and none is a test of
    the pool, the layer or the mode (a name of the SWA side, a mode flag). Whether the
    batch carries an SWA location (``out_cache_loc_swa is None``) is no such test where
    both paths are in hybrid mode already (an SWA layer's)."""
    polarity = dict(one)
    split = [key for key, holds in other if polarity.get(key, holds) != holds]
    hybrid = _in_hybrid(one, model) and _in_hybrid(other, model)
    return bool(split) and not any(
        _about_swa(key, model) and not (hybrid and is_presence(key, model)) for key in split
    )


def _in_hybrid(guard: frozenset, model: Model) -> bool:
    return any(hybrid_polarity(key, model) is True and holds for key, holds in guard)


# Words of a test that tells the pool or the layer apart: paths it separates may rightly
# hand one consumer either side's ids (``layers_mapping[layer_id]``, ``is_hybrid``).
_POOL_TEST_WORDS = frozenset({"window", "layer", "layers", "hybrid", "pool", "local"})


def _about_swa(key: Term, model: Model) -> bool:
    if hybrid_polarity(key, model) is not None:
        return True
    stack = [key]
    while stack:
        term = stack.pop()
        name = getattr(term, "name", None)
        if isinstance(name, str) and (
            model.is_swa_word(name)
            or model.is_mode_flag(name)
            or words(name.rsplit(".", 1)[-1]) & _POOL_TEST_WORDS
        ):
            return True
        stack += parts(term)
    return False


def _translated_later(function: Function, use: Use, values: Values, ctx: Ctx) -> bool:
    """The local is rebound or filled from the SWA side after the use."""
    after = (use.event.span.line, use.event.span.col)
    local = Local(use.local or "")
    for event in function.facts.events:
        if (event.span.line, event.span.col) <= after or event.value is None:
            continue
        if (
            event.kind in (BIND, FILL)
            and event.target == local
            and any(f.space == SWA for f in values.space(event.value, ctx))
        ):
            return True
    return False


__all__ = ["Span", "SwaValueFromFullSide"]


def _on_either(event: Event) -> bool:
    """Whether ``event`` calls a method of an object that differs by path (``pool`` of
    ``for pool in (self.full_kv_pool, self.swa_kv_pool):``)."""
    call = event.value
    return (
        isinstance(call, Call)
        and isinstance(call.func, Attr)
        and len(alternatives(call.func.base)) > 1
    )
