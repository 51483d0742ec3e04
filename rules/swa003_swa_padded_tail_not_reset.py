"""SWA003 swa-padded-tail-not-reset."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import libcst as cst

from swacheck.analysis.buffers import (
    BufferOwners,
    FileFacts,
    buffers_of,
    file_buffer_facts,
    local_bindings,
    top_statement,
)
from swacheck.analysis.cfg import CFG, cfg_for
from swacheck.analysis.graph_buffers import (
    Fill,
    FunctionBuffers,
    hands_over,
    swa_buffer_role,
)
from swacheck.analysis.padding import (
    LOCATION_WORDS,
    BufferWrite,
    block_writes,
    is_location_name,
    is_padded_size,
    is_raw_size,
    padding_block,
    padding_trigger_strings,
)
from swacheck.analysis.walk import walk
from swacheck.config import DEFAULT_SWA_LOC_PATTERN, Config
from swacheck.finding import Applicability, Fix
from swacheck.fix_safety import safe_fix
from swacheck.rule import Invalid, Rule, Valid
from swacheck.semantics.dtypes import decider
from swacheck.semantics.function import BIND, CALL, FILL, RETURN, Event, Span
from swacheck.semantics.model import WRITE, all_models, words
from swacheck.semantics.project import Function
from swacheck.semantics.rows import constant, full_value, uninitialised
from swacheck.semantics.terms import (
    Attr,
    Call,
    Const,
    Filled,
    Global,
    Index,
    Local,
    Op,
    Param,
    Phi,
    Seq,
    Slice,
    Term,
    alternatives,
    render,
)
from swacheck.semantics.unit import FileUnit
from swacheck.semantics.uses import role_uses
from swacheck.semantics.values import Ctx, rows_root, tensor_root
from swacheck.triggers import Trigger, all_of, word

if TYPE_CHECKING:
    from swacheck.context import FileContext


# A file of a vLLM tree (its slot mappings are padded with PAD_SLOT_ID = -1): the
# examples that are vLLM's are audited with vLLM's model.
_VLLM_UTILS = "PAD_SLOT_ID = -1  # the padding entry of a slot_mapping\n"


@dataclass
class _OwnerGroup:
    owner: cst.BaseExpression
    code: str
    resets: list[BufferWrite]


class SwaPaddedTailNotReset(Rule):
    """
    ## What it does
    Checks invariant I4 wherever a buffer that a captured CUDA graph reads is filled: the
    rows past the live batch must hold the sentinel slot 0 before the graph replays. It
    reports two shapes.

    **A live-row fill with no tail reset.** A function copies a batch's rows into a prefix
    of an SWA buffer a captured graph reads (`buf[:n].copy_(src)`, `buf[:n] = src`,
    `torch.index_select(..., out=buf[:n])`, a copy-list entry `dsts.append(buf[:n])` fed to
    `torch._foreach_copy_`), and some path through the fill in that function resets no
    `buf[n:]`, neither before the fill nor after it (a path that raises replays nothing).
    A reset is one of the tail (`buf[n:].zero_()`, `buf[n:] = 0`, `buf[n:m].fill_(0)`,
    any write of `buf[k:]`) or of the whole buffer (`buf.zero_()`, also inside a padding
    branch), a method of the buffer's owner that resets it (`self._zero_swa_tail(n)`), or
    a call handed the tail (`zero_tail(buf[n:])`) or the buffer with the live count
    (`zero_tail(buf, n)`; the helper's body is not read).

    A buffer that a captured graph reads is recognised by how it is made, not by one
    name: a tensor allocated (`torch.zeros(...)`, `x if is_swa else None`, a
    `self._alloc_*(...)` helper) outside the replay path, by graph code: the attribute
    or the allocating method is named for the graph (`cuda_graph_swa_out_cache_loc`,
    `full_cg_prefill_swa_out_cache_loc`, `init_cuda_graph_state`), or the class captures,
    replays or populates (`capture*`, `*replay*`, `populate_from_forward_batch`,
    `fill_from`, `load_batch`); a tensor field of such a class
    (`DecodeInputBuffers.out_cache_loc_swa`); an entry of a dict so allocated
    (`self.decode_cuda_graph_metadata["swa_out_cache_loc"]`); a field of another object
    that graph code allocates, or that a method of the same class binds to a view of one
    (`metadata.swa_out_cache_loc = self.cuda_graph_swa_out_cache_loc[:n]`); a local bound
    once to any of these.

    SWA buffers have two roles. *Write locations* (names matching `swa-loc-pattern` with
    the word `loc` or `slot`: `swa_out_cache_loc`, `out_cache_loc_swa`) are where padded
    tokens store their K/V, so any prefix counts as the live rows unless its bound is
    named as the padded size (`static_num_tokens`, `padded_bs`, `captured_bs`).
    *Tables* that attention reads (`swa_page_table`, `swa_kv_indices`) are read only up to
    each request's length, and a backend's replay fills them for the whole padded batch,
    so a fill of one counts only where its row bound is named as the raw size (`raw_bs`,
    `real_num_reqs`); a column prefix (`tbl[:, :pages]`) is never a live-row fill.

    **A padding branch that misses an SWA buffer** (the shape of the original bug). The
    branch a CUDA-graph runner takes when the batch was padded up to a captured size is
    recognised by comparing a raw size with a padded one in any spelling: `if bs !=
    raw_bs:`, `if raw_bs < bs:`, `if num_tokens != self.raw_num_tokens:`, `if
    static_num_tokens != num_tokens:` (one side named with the word `raw`, `real` or
    `unpadded`, or with `static`, `padded` or `captured`), `elif bs > raw_bs:`, the
    `else:` of `if bs == raw_bs:`, `if padded:` where `padded = bs != raw_bs`, and
    `and`/`or`/`not` combinations of these. When that branch resets at least one
    location buffer of an object (`obj.out_cache_loc.zero_()`, `.fill_(0)`,
    `obj.out_cache_loc[raw:] = 0`), every SWA location buffer *the same object owns* must
    be reset too: in the branch, guarded or not, in a `self.helper()` the branch calls, or
    as a `zero_()`/`fill_()` elsewhere in the same function. An object owns an attribute
    when the audited tree assigns it on `self` in a method of its class or a base class,
    declares it as a (dataclass) field, or passes it by keyword to `cls(...)` in a factory
    classmethod; the object is `self`, or a local or `self` attribute whose class an
    annotation or a construction gives. An SWA buffer that nothing in the audited tree
    ever fills holds only its initial zeros, so its tail already is the sentinel: it is
    not reported. A fill in a function whose padding branch resets the same object's
    location buffers is this shape's to report, once, at the branch.

    The same holds for a reset outside a padding branch: a function that resets an
    object's write locations whole and unconditionally (`self.out_cache_loc.zero_()`, a
    dict entry `self.buffers["out_cache_loc"].zero_()`, one by one or in a loop over a
    tuple of names) resets the object's SWA twin too (`out_cache_loc_swa`,
    `swa_out_cache_loc`, a field of its class or an entry its class stores), unless a
    function it calls writes the twin or a method of the class copies into all of the
    twin's rows (it is then rewritten whole on each step).

    **Padded rows that hold no sentinel** (I4, I12), read off the values:

    - a padding step that writes another value than the SWA pool's padding slot (the
      model's sentinel, slot 0 in SGLang) into an SWA write-location buffer: its tail
      filled with it (`buf[n:].fill_(-1)`, `buf[n:] = -1`), the buffer allocated full of
      it (`torch.full((n,), -1)`), a padding call's fill value
      (`self._pad_tensor_to_size(self.out_cache_loc_swa, n, value=-1)`): `-1` indexes the
      last SWA slot, a live one;
    - rows left uninitialised: a tensor allocated without its rows being written
      (`ids.new_empty(n)`, `torch.empty(n)`, `torch.empty_like(x)`) whose prefix alone
      is then filled (`padded[: ids.shape[0]].copy_(ids)`), handed on as SWA write
      locations (bound to one, copied into one) or returned by a padding helper (a
      function named for padding or a sink): its padded rows hold whatever memory held,
      slots of other requests. Followed through views, casts and the functions that
      return it; reported at the allocation.

    **A sentinel write whose result is dropped.** An out-of-place method with an in-place
    twin (`slots.masked_fill(~mask, PAD)`, `clamp`, `index_fill`, `scatter`) as a statement
    of its own, on a location: the locations keep what they held. Padding appended to a
    location by `torch.cat` from an uninitialised allocation (`new_empty`) is reported
    like a buffer allocated uninitialised, where the value lands.

    **A padded slot mapping indexing the cache in Python** (vLLM: the model's
    `clamp-before-indexing`). A subscript store or an in-place scatter (`index_copy_`,
    `index_add_`, `scatter_`) into the KV cache, or a view of it (`flat =
    cache.flatten(0, 1)`), whose index is the forward's padded slot mapping (through
    arithmetic, slices, casts, `remainder`), not clamped: `-1` (`PAD_SLOT_ID`) wraps to
    the last slot, a live block's.

    ## Why is this bad?
    Padded slots of a replayed graph still run attention and still write K/V through the
    location buffers. Reset to 0, a padded token writes only to the sentinel slot; left
    holding the previous replay's slots, it overwrites the SWA KV of live requests
    (invariant I4). SGLang's `DecodeInputBuffers.populate_from_forward_batch` zeroed
    `out_cache_loc` in its `if bs != raw_bs:` branch but not the `out_cache_loc_swa` buffer
    PR #23552 added; the padding fix that added the guarded `zero_()` recovered 10 points
    of AIME24-25 accuracy on MiMoV2.5 Pro. From SGLang 0.5.13 each attention backend
    translates the batch's write locations into its own graph buffer before every replay
    (`self.cuda_graph_swa_out_cache_loc[:n].copy_(...)`), after an unconditional
    `self.cuda_graph_swa_out_cache_loc[n:].zero_()`: without that line the regression is
    back.

    ## Fix safety
    For a fill, the fix inserts `<buffer>[<n>:].zero_()` right before the statement that
    fills the prefix, in the same block and so under the same guards; for a branch, it
    inserts `<obj>.<buffer>.zero_()` right after the branch's last location reset, guarded
    by `if <obj>.<buffer> is not None:` when the branch guards its other resets that way
    or the buffer may be `None` (an `Optional` field, `x if is_hybrid_swa else None`, a
    `None` check elsewhere in the file). Either only writes the sentinel into rows the
    replay does not fill with real tokens, so it is safe. No fix is offered for a branch
    on one line with its `if`.
    """

    code = "SWA003"
    name = "swa-padded-tail-not-reset"
    summary = "Captured SWA buffer filled without resetting the rows past the live batch"
    fixes = (safe_fix(),)
    config_keys = ("swa-loc-pattern",)
    invariant = "I4"
    origin = (
        "SGLang padding fix (zero out_cache_loc_swa on padded replays) after PR #23552; "
        "the backends' graph buffers from 0.5.13"
    )

    VALID = [
        # the same in place, and out of place with its result kept
        Valid(
            """
def gathered_slots(slot_mapping, gather_idx, keep):
    slots = slot_mapping[gather_idx]
    slots.masked_fill_(~keep, 0)
    clamped = slots.clamp(min=0)
    return slots, clamped
"""
        ),
        # vLLM: the slot mapping clamped before the Python scatter, and its padded tail
        # reset after either branch.
        Valid(
            """
import torch


def store_kv(to_cache, kv_cache, slot_mapping):
    block_size = kv_cache.shape[2]
    slot_mapping = slot_mapping.clamp_min(0)
    kv_cache[slot_mapping // block_size, :, slot_mapping % block_size] = to_cache


def inject(layer_cache, request):
    # a connector's per-request slot mapping: no padding
    layer_cache[request.slot_mapping // 16, :, request.slot_mapping % 16] = request.kv


def slot_mapping_for(self, spec, num_tokens_padded, num_tokens_unpadded):
    if spec.encoder_only:
        slot_mapping = torch.zeros((num_tokens_padded,), dtype=torch.int64, device=self.device)
    else:
        slot_mapping = self.block_table.slot_mapping.gpu[:num_tokens_padded]
    slot_mapping[num_tokens_unpadded:num_tokens_padded].fill_(-1)
    return slot_mapping


class CacheOnlyImpl:
    def do_kv_cache_update(self, layer, to_cache, kv_cache, slot_mapping):
        store_kv(to_cache, kv_cache, slot_mapping)
""",
            files={"vllm/v1/attention/backends/utils.py": _VLLM_UTILS},
        ),
        # A padding helper that pads with the sink (slot 0), and an uninitialised buffer
        # written whole.
        Valid(
            """
import torch


def pad_with_sink(ids, n):
    padded = ids.new_zeros(n)
    padded[: ids.shape[0]].copy_(ids)
    return padded


def stage_swa_locs(out_cache_loc_swa, n):
    swa_loc = torch.empty(n, dtype=torch.int64)
    swa_loc.copy_(out_cache_loc_swa)
    return swa_loc
"""
        ),
        # The backends' shape from SGLang 0.5.13: the tail reset unconditionally before
        # the live rows are copied in (capture writes zeros, replay the translation).
        Valid(
            """
import torch


class TRTLLMHAAttnBackend:
    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = (
            torch.zeros(max_num_tokens, dtype=torch.int64)
            if self.use_sliding_window_kv_pool
            else None
        )

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        if self.use_sliding_window_kv_pool and forward_batch.out_cache_loc is not None:
            n = forward_batch.out_cache_loc.shape[0]
            self.cuda_graph_swa_out_cache_loc[n:].zero_()
            if in_capture:
                self.cuda_graph_swa_out_cache_loc[:n].zero_()
            else:
                self.cuda_graph_swa_out_cache_loc[:n].copy_(
                    self.translator.sliding_window_write_loc_for(forward_batch.out_cache_loc)
                )
"""
        ),
        # The reset done by a method of the buffer's owner, and by a free helper handed
        # the buffer and the live count (its body is not read).
        Valid(
            """
import torch


class TritonAttnBackend:
    def init_cuda_graph_state(self, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = torch.zeros(max_num_tokens, dtype=torch.int64)
        self.cuda_graph_out_cache_loc_swa = torch.zeros(max_num_tokens, dtype=torch.int64)

    def _zero_swa_tail(self, live):
        self.cuda_graph_swa_out_cache_loc[live:] = 0

    def init_forward_metadata_replay_cuda_graph(self, forward_batch):
        live = len(forward_batch.out_cache_loc)
        self._zero_swa_tail(live)
        self.cuda_graph_swa_out_cache_loc[:live].copy_(forward_batch.swa_loc)
        zero_padded_tail(self.cuda_graph_out_cache_loc_swa, live)
        self.cuda_graph_out_cache_loc_swa[:live] = forward_batch.swa_loc
"""
        ),
        # A whole reset before the fill, a reset after it, and a prefix bound that is
        # the padded size itself (no tail): every path leaves the tail at the sentinel.
        Valid(
            """
import torch


class PiecewiseRunner:
    def __init__(self, max_num_tokens):
        self.out_cache_loc_swa = torch.zeros(max_num_tokens, dtype=torch.int32)
        self.swa_slot_buf = torch.zeros(max_num_tokens, dtype=torch.int32)
        self.padded_swa_loc = torch.zeros(max_num_tokens, dtype=torch.int32)

    def replay_prepare(self, forward_batch, static_num_tokens):
        num_tokens = forward_batch.out_cache_loc.numel()
        self.out_cache_loc_swa.zero_()
        self.out_cache_loc_swa[:num_tokens].copy_(forward_batch.out_cache_loc_swa)
        self.swa_slot_buf[:num_tokens].copy_(forward_batch.out_cache_loc_swa)
        self.swa_slot_buf[num_tokens:static_num_tokens].fill_(0)
        self.padded_swa_loc[:static_num_tokens].copy_(forward_batch.padded_swa_loc)
"""
        ),
        # Tables attention reads: filled for the whole padded batch in a backend's replay
        # (rows up to `bs`, columns up to the longest request), read only up to each
        # request's length, so no tail to reset.
        Valid(
            """
import torch


class FlashAttentionBackend:
    def init_cuda_graph_state(self, max_bs, max_pages):
        self.decode_cuda_graph_metadata = {
            "swa_page_table": torch.zeros(max_bs, max_pages, dtype=torch.int32),
        }

    def init_forward_metadata_replay_cuda_graph(self, bs, req_pool_indices, max_seq_pages):
        pages = self.req_to_token[req_pool_indices[:bs], :max_seq_pages]
        table = self.decode_cuda_graph_metadata["swa_page_table"]
        table[:bs, :max_seq_pages].copy_(self.pool.translate_loc_from_full_to_swa(pages))
        table[:, :max_seq_pages].copy_(self.pool.translate_loc_from_full_to_swa(pages))
"""
        ),
        # Not a buffer a captured graph reads: a pool's per-batch buffer, in a class that
        # neither captures nor replays, named for no graph.
        Valid(
            """
import torch


class SWAKVPool:
    def __init__(self, size):
        self.swa_loc_buf = torch.zeros(size, dtype=torch.int32)

    def set_batch(self, out_cache_loc):
        n = out_cache_loc.numel()
        self.swa_loc_buf[:n].copy_(self.translate_loc_from_full_to_swa(out_cache_loc))
"""
        ),
        Valid(
            """
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class DecodeInputBuffers:
    seq_lens: torch.Tensor
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: Optional[torch.Tensor]

    def populate_from_forward_batch(self, forward_batch, raw_bs, bs, seq_len_fill_value):
        if bs != raw_bs:
            self.seq_lens.fill_(seq_len_fill_value)
            self.out_cache_loc.zero_()
            if self.out_cache_loc_swa is not None:
                self.out_cache_loc_swa.zero_()
"""
        ),
        # An object that owns no SWA buffer has nothing to miss.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.out_cache_loc.zero_()
"""
        ),
        # Not a padding test: a size compared with a literal.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def step(self, raw_bs):
        if raw_bs > 0:
            self.out_cache_loc.zero_()
"""
        ),
        # The SWA buffer reset by a helper the branch calls.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def _reset_swa(self):
        self.out_cache_loc_swa.zero_()

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.out_cache_loc.zero_()
            self._reset_swa()
"""
        ),
        # The whole SWA buffer is zeroed before the branch, on every path.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        self.out_cache_loc_swa.fill_(0)
        if bs != raw_bs:
            self.out_cache_loc.zero_()
"""
        ),
        # A branch that resets no location buffer is not about slots (out of scope).
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.seq_lens = torch.ones(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.seq_lens.fill_(1)
"""
        ),
        # Another object's buffers: `other` is not known to own an SWA buffer.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, other, raw_bs, bs):
        if bs != raw_bs:
            other.out_cache_loc.zero_()
"""
        ),
        # An SWA buffer nothing in the audited tree ever fills holds only zeros:
        # its padded tail already is the sentinel (a dead buffer).
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.out_cache_loc.zero_()
        self.out_cache_loc[:raw_bs].copy_(self.src)
"""
        ),
        # The padded tail of the SWA buffer is written by a slice assignment.
        Valid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_num_tokens, num_tokens):
        if raw_num_tokens < num_tokens:
            self.out_cache_loc[raw_num_tokens:] = 0
            self.out_cache_loc_swa[raw_num_tokens:] = 0
"""
        ),
        # the shared buffers reset in a loop over names that holds the SWA one too
        Valid(
            """
import torch

class DraftExtendRunner:
    def __init__(self, n):
        self.buffers = {}
        self.buffers["out_cache_loc"] = torch.zeros(n, dtype=torch.int64)
        self.buffers["swa_out_cache_loc"] = torch.zeros(n, dtype=torch.int32)

    def reset_buffers(self):
        for name in ("out_cache_loc", "swa_out_cache_loc"):
            self.buffers[name].zero_()
"""
        ),
        # the SWA twin reset by a helper the reset calls
        Valid(
            """
import torch

class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def reset(self):
        self.out_cache_loc.zero_()
        self._reset_swa()

    def _reset_swa(self):
        self.out_cache_loc_swa.fill_(0)
"""
        ),
        # the SWA twin rewritten whole on every step: its padded rows come from the reset
        Valid(
            """
import torch

class Runner:
    def __init__(self, n, pool):
        self.pool = pool
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def reset(self):
        self.out_cache_loc.zero_()

    def step(self):
        self.out_cache_loc_swa.copy_(self.pool.translate_loc_from_full_to_swa(self.out_cache_loc))
"""
        ),
        # an object with no SWA twin
        Valid(
            """
import torch

class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)

    def reset(self):
        self.out_cache_loc.zero_()
"""
        ),
    ]
    INVALID = [
        # the shared buffers reset in a loop over names that leaves the SWA one out
        Invalid(
            """
import torch

class DraftExtendRunner:
    def __init__(self, n):
        self.buffers = {}
        self.buffers["out_cache_loc"] = torch.zeros(n, dtype=torch.int64)
        self.buffers["swa_out_cache_loc"] = torch.zeros(n, dtype=torch.int32)
        self.buffers["positions"] = torch.zeros(n, dtype=torch.int64)

    def reset_buffers(self):
        for name in ("out_cache_loc", "positions"):
            self.buffers[name].zero_()
""",
            line=13,
        ),
        # a reset of the full write locations alone, the SWA field left
        Invalid(
            """
import torch

class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def reset(self):
        self.out_cache_loc.zero_()
        self.positions.zero_()
""",
            line=10,
        ),
        # the padding mask applied out of place, its result dropped
        Invalid(
            """
def gathered_slots(slot_mapping, gather_idx, keep):
    slots = slot_mapping[gather_idx]
    slots.masked_fill(~keep, 0)
    return slots
""",
            line=4,
        ),
        # a padding helper that appends uninitialised rows, used for the SWA locations
        Invalid(
            """
class ForwardBatch:
    def _pad(self, tensor, size):
        return torch.cat([tensor, tensor.new_empty(size - tensor.shape[0])], dim=0)

    def pad_inputs(self, num_tokens):
        self.out_cache_loc_swa = self._pad(self.out_cache_loc_swa, num_tokens)
""",
            line=4,
        ),
        # the padding branch zeroes only the live rows of the SWA buffer (overwritten
        # next anyway): its tail keeps an earlier batch's slots
        Invalid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int64)

    def replay_prepare(self, forward_batch, raw_num_tokens, num_tokens):
        if num_tokens != raw_num_tokens:
            self.out_cache_loc.zero_()
            self.out_cache_loc_swa[:raw_num_tokens].zero_()
        self.out_cache_loc[:raw_num_tokens].copy_(forward_batch.out_cache_loc)
        self.out_cache_loc_swa[:raw_num_tokens].copy_(forward_batch.out_cache_loc_swa)
""",
            line=8,
        ),
        # vLLM: a Python scatter through the padded slot mapping, not clamped: its -1
        # padding (PAD_SLOT_ID) wraps to the last block.
        Invalid(
            """
def store_kv(to_cache, kv_cache, slot_mapping):
    block_size = kv_cache.shape[2]
    kv_cache[slot_mapping // block_size, :, slot_mapping % block_size] = to_cache


class CacheOnlyImpl:
    def do_kv_cache_update(self, layer, to_cache, kv_cache, slot_mapping):
        store_kv(to_cache, kv_cache, slot_mapping)
""",
            line=4,
            files={"vllm/v1/attention/backends/utils.py": _VLLM_UTILS},
        ),
        # vLLM: a scatter through a view of the cache, its index brought in range with
        # `remainder`: -1 becomes the last slot, as Python indexing would make it
        Invalid(
            """
def scatter(cache, src, slot_mapping):
    flat = cache.flatten(0, 1)
    flat.index_copy_(0, slot_mapping.remainder(flat.shape[0]), src)


class CacheOnlyImpl:
    def do_kv_cache_update(self, layer, key, kv_cache, slot_mapping):
        scatter(kv_cache, key, slot_mapping[: key.shape[0]])
""",
            line=4,
            files={"vllm/v1/attention/backends/utils.py": _VLLM_UTILS},
        ),
        # vLLM: the padded tail of the slot mapping set on one branch only; the other
        # hands on the persistent buffer's view with the previous step's slots.
        Invalid(
            """
import torch


def slot_mapping_for(self, spec, num_tokens_padded, num_tokens_unpadded):
    if spec.encoder_only:
        slot_mapping = torch.zeros((num_tokens_padded,), dtype=torch.int64, device=self.device)
        slot_mapping[num_tokens_unpadded:num_tokens_padded].fill_(-1)
    else:
        slot_mapping = self.block_table.slot_mapping.gpu[:num_tokens_padded]
    return slot_mapping
""",
            line=8,
            files={"vllm/v1/attention/backends/utils.py": _VLLM_UTILS},
        ),
        # Padded rows left uninitialised by a padding helper (a plan's sink padding made
        # with `new_empty`): the rows past the ids hold whatever memory held.
        Invalid(
            """
import torch


def pad_swa_locs(swa_ids, n):
    if swa_ids.shape[0] >= n:
        return swa_ids
    padded = swa_ids.new_empty(n)
    padded[: swa_ids.shape[0]].copy_(swa_ids)
    return padded
""",
            line=8,
        ),
        # The SWA write locations padded with -1, which indexes the last SWA slot.
        Invalid(
            """
class ForwardBatch:
    def prepare_padding(self, num_tokens):
        self.out_cache_loc = self._pad_tensor_to_size(self.out_cache_loc, num_tokens)
        self.out_cache_loc_swa = self._pad_tensor_to_size(
            self.out_cache_loc_swa, num_tokens, value=-1
        )
""",
            line=5,
        ),
        # A graph buffer's tail reset to -1 instead of the padding slot.
        Invalid(
            """
import torch


class TritonAttnBackend:
    def init_cuda_graph_state(self, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = torch.zeros(max_num_tokens, dtype=torch.int64)

    def init_forward_metadata_out_graph(self, forward_batch):
        n = forward_batch.out_cache_loc.shape[0]
        self.cuda_graph_swa_out_cache_loc[n:].fill_(-1)
        self.cuda_graph_swa_out_cache_loc[:n].copy_(forward_batch.out_cache_loc_swa)
""",
            line=11,
        ),
        # An uninitialised buffer whose prefix alone is filled, bound as the SWA locations.
        Invalid(
            """
import torch


class Runner:
    def load(self, forward_batch, num_tokens):
        swa = torch.empty(num_tokens, dtype=torch.int64, device=self.device)
        swa[: forward_batch.num_real_tokens].copy_(forward_batch.out_cache_loc_swa)
        self.input_buffers.out_cache_loc_swa = swa
""",
            line=7,
        ),
        # The padding reset deleted from a backend's replay path (SGLang 0.5.13+ design):
        # the SWA write-location graph buffer keeps the previous replay's tail.
        Invalid(
            """
import torch


class TRTLLMHAAttnBackend:
    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = (
            torch.zeros(max_num_tokens, dtype=torch.int64)
            if self.use_sliding_window_kv_pool
            else None
        )

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        if self.use_sliding_window_kv_pool and forward_batch.out_cache_loc is not None:
            n = forward_batch.out_cache_loc.shape[0]
            if in_capture:
                self.cuda_graph_swa_out_cache_loc[:n].zero_()
            else:
                self.cuda_graph_swa_out_cache_loc[:n].copy_(
                    self.translator.sliding_window_write_loc_for(forward_batch.out_cache_loc)
                )
""",
            line=19,
            fixed="""
import torch


class TRTLLMHAAttnBackend:
    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = (
            torch.zeros(max_num_tokens, dtype=torch.int64)
            if self.use_sliding_window_kv_pool
            else None
        )

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        if self.use_sliding_window_kv_pool and forward_batch.out_cache_loc is not None:
            n = forward_batch.out_cache_loc.shape[0]
            if in_capture:
                self.cuda_graph_swa_out_cache_loc[:n].zero_()
            else:
                self.cuda_graph_swa_out_cache_loc[n:].zero_()
                self.cuda_graph_swa_out_cache_loc[:n].copy_(
                    self.translator.sliding_window_write_loc_for(forward_batch.out_cache_loc)
                )
""",
        ),
        # A slice assignment, the live count named otherwise, a buffer allocated in the
        # constructor of a class that captures and replays.
        Invalid(
            """
import torch


class SwaGraphRunner:
    def __init__(self, max_tokens):
        self.swa_loc_buf = torch.zeros(max_tokens, dtype=torch.int32)

    def capture(self):
        self.graph = torch.cuda.CUDAGraph()

    def replay_prepare(self, locs):
        num_live = len(locs)
        self.swa_loc_buf[:num_live] = self.pool.translate_loc_from_full_to_swa(locs)
""",
            line=14,
            fixed="""
import torch


class SwaGraphRunner:
    def __init__(self, max_tokens):
        self.swa_loc_buf = torch.zeros(max_tokens, dtype=torch.int32)

    def capture(self):
        self.graph = torch.cuda.CUDAGraph()

    def replay_prepare(self, locs):
        num_live = len(locs)
        self.swa_loc_buf[num_live:].zero_()
        self.swa_loc_buf[:num_live] = self.pool.translate_loc_from_full_to_swa(locs)
""",
        ),
        # A dict of graph buffers, a local alias, `torch.index_select(..., out=)`.
        Invalid(
            """
import torch


class DraftGraphRunner:
    def __init__(self, max_num_tokens):
        self.graph_buffers = {
            "swa_out_cache_loc": torch.zeros(max_num_tokens, dtype=torch.int64),
        }

    def replay(self, forward_batch):
        dst = self.graph_buffers["swa_out_cache_loc"]
        live_tokens = forward_batch.out_cache_loc.numel()
        torch.index_select(self.mapping, 0, forward_batch.out_cache_loc, out=dst[:live_tokens])
""",
            line=14,
            fixed="""
import torch


class DraftGraphRunner:
    def __init__(self, max_num_tokens):
        self.graph_buffers = {
            "swa_out_cache_loc": torch.zeros(max_num_tokens, dtype=torch.int64),
        }

    def replay(self, forward_batch):
        dst = self.graph_buffers["swa_out_cache_loc"]
        live_tokens = forward_batch.out_cache_loc.numel()
        dst[live_tokens:].zero_()
        torch.index_select(self.mapping, 0, forward_batch.out_cache_loc, out=dst[:live_tokens])
""",
        ),
        # The runner's input dataclass with no padding branch at all: a copy list.
        Invalid(
            """
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class PrefillInputBuffers:
    input_ids: torch.Tensor
    out_cache_loc_swa: Optional[torch.Tensor]

    def populate_from_forward_batch(self, forward_batch, raw_num_tokens):
        dsts = [self.input_ids[:raw_num_tokens]]
        srcs = [forward_batch.input_ids]
        if self.out_cache_loc_swa is not None:
            dsts.append(self.out_cache_loc_swa[:raw_num_tokens])
            srcs.append(forward_batch.out_cache_loc_swa)
        torch._foreach_copy_(dsts, srcs)
""",
            line=17,
            fixed="""
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class PrefillInputBuffers:
    input_ids: torch.Tensor
    out_cache_loc_swa: Optional[torch.Tensor]

    def populate_from_forward_batch(self, forward_batch, raw_num_tokens):
        dsts = [self.input_ids[:raw_num_tokens]]
        srcs = [forward_batch.input_ids]
        if self.out_cache_loc_swa is not None:
            self.out_cache_loc_swa[raw_num_tokens:].zero_()
            dsts.append(self.out_cache_loc_swa[:raw_num_tokens])
            srcs.append(forward_batch.out_cache_loc_swa)
        torch._foreach_copy_(dsts, srcs)
""",
        ),
        # An SWA page table filled for the raw requests only: the padded requests' rows
        # keep the previous replay's pages.
        Invalid(
            """
import torch


class FlashAttentionBackend:
    def init_cuda_graph_state(self, max_bs, max_pages):
        self.cuda_graph_swa_page_table = torch.zeros(max_bs, max_pages, dtype=torch.int32)

    def init_forward_metadata_replay_cuda_graph(self, raw_bs, bs, req_pool_indices):
        pages = self.req_to_token[req_pool_indices[:raw_bs]]
        self.cuda_graph_swa_page_table[:raw_bs, : pages.shape[1]].copy_(
            self.pool.translate_loc_from_full_to_swa(pages)
        )
""",
            line=11,
        ),
        # A field of the captured metadata (bound to a view of the graph buffer at
        # capture), reset on one path only.
        Invalid(
            """
import torch


class HybridBackend:
    def init_cuda_graph_state(self, max_num_tokens):
        self.cuda_graph_swa_loc = torch.zeros(max_num_tokens, dtype=torch.int64)

    def init_forward_metadata_capture_cuda_graph(self, bs, num_tokens):
        metadata = Metadata()
        metadata.swa_out_cache_loc = self.cuda_graph_swa_loc[:num_tokens]
        self.graph_metadata[bs] = metadata

    def init_forward_metadata_replay_cuda_graph(self, bs, forward_batch):
        metadata = self.graph_metadata[bs]
        n = forward_batch.out_cache_loc.shape[0]
        if forward_batch.forward_mode.is_target_verify():
            metadata.swa_out_cache_loc[n:].zero_()
        swa_loc = self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
        metadata.swa_out_cache_loc[:n].copy_(swa_loc)
""",
            line=20,
        ),
        # Seed 003: the dataclass-declared buffer, created by a factory with a
        # multi-line conditional allocation, missed in the `bs != raw_bs` branch.
        Invalid(
            """
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class DecodeInputBuffers:
    seq_lens: torch.Tensor
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: Optional[torch.Tensor]
    mamba_track_indices: Optional[torch.Tensor]

    @classmethod
    def create(cls, max_bs, max_num_token, is_hybrid_swa=False):
        out_cache_loc_swa = (
            torch.zeros((max_num_token,), dtype=torch.int32)
            if is_hybrid_swa
            else None
        )
        return cls(
            seq_lens=torch.ones((max_bs,), dtype=torch.int32),
            out_cache_loc=torch.zeros((max_num_token,), dtype=torch.int64),
            out_cache_loc_swa=out_cache_loc_swa,
            mamba_track_indices=None,
        )

    def populate_from_forward_batch(self, forward_batch, raw_bs, bs, seq_len_fill_value):
        if bs != raw_bs:
            self.seq_lens.fill_(seq_len_fill_value)
            self.out_cache_loc.zero_()
            if self.mamba_track_indices is not None:
                self.mamba_track_indices.zero_()

        dsts = [self.out_cache_loc[:raw_bs]]
        if self.out_cache_loc_swa is not None:
            dsts.append(self.out_cache_loc_swa[:raw_bs])
""",
            line=30,
            fixed="""
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class DecodeInputBuffers:
    seq_lens: torch.Tensor
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: Optional[torch.Tensor]
    mamba_track_indices: Optional[torch.Tensor]

    @classmethod
    def create(cls, max_bs, max_num_token, is_hybrid_swa=False):
        out_cache_loc_swa = (
            torch.zeros((max_num_token,), dtype=torch.int32)
            if is_hybrid_swa
            else None
        )
        return cls(
            seq_lens=torch.ones((max_bs,), dtype=torch.int32),
            out_cache_loc=torch.zeros((max_num_token,), dtype=torch.int64),
            out_cache_loc_swa=out_cache_loc_swa,
            mamba_track_indices=None,
        )

    def populate_from_forward_batch(self, forward_batch, raw_bs, bs, seq_len_fill_value):
        if bs != raw_bs:
            self.seq_lens.fill_(seq_len_fill_value)
            self.out_cache_loc.zero_()
            if self.out_cache_loc_swa is not None:
                self.out_cache_loc_swa.zero_()
            if self.mamba_track_indices is not None:
                self.mamba_track_indices.zero_()

        dsts = [self.out_cache_loc[:raw_bs]]
        if self.out_cache_loc_swa is not None:
            dsts.append(self.out_cache_loc_swa[:raw_bs])
""",
        ),
        # `raw < padded` spelling; an unguarded buffer gets an unguarded reset.
        Invalid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if raw_bs < bs:
            self.out_cache_loc.zero_()
        self.out_cache_loc[:raw_bs].copy_(self.src)
        self.out_cache_loc_swa[:raw_bs].copy_(self.src_swa)
""",
            line=8,
            fixed="""
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if raw_bs < bs:
            self.out_cache_loc.zero_()
            self.out_cache_loc_swa.zero_()
        self.out_cache_loc[:raw_bs].copy_(self.src)
        self.out_cache_loc_swa[:raw_bs].copy_(self.src_swa)
""",
        ),
        # `elif` padding branch against a raw size kept on `self`; a multi-line
        # conditional allocation in `__init__` makes the buffer optional.
        Invalid(
            """
class PiecewiseRunner:
    def __init__(self, n, is_hybrid_swa):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)
        self.out_cache_loc_swa = (
            torch.zeros(n, dtype=torch.int32)
            if is_hybrid_swa
            else None
        )

    def replay_prepare(self, num_tokens, use_eager):
        if use_eager:
            return
        elif num_tokens != self.raw_num_tokens:
            self.out_cache_loc.fill_(0)
        self.out_cache_loc_swa[:num_tokens] = self.swa_src
""",
            line=14,
            fixed="""
class PiecewiseRunner:
    def __init__(self, n, is_hybrid_swa):
        self.out_cache_loc = torch.zeros(n, dtype=torch.int64)
        self.out_cache_loc_swa = (
            torch.zeros(n, dtype=torch.int32)
            if is_hybrid_swa
            else None
        )

    def replay_prepare(self, num_tokens, use_eager):
        if use_eager:
            return
        elif num_tokens != self.raw_num_tokens:
            self.out_cache_loc.fill_(0)
            if self.out_cache_loc_swa is not None:
                self.out_cache_loc_swa.zero_()
        self.out_cache_loc_swa[:num_tokens] = self.swa_src
""",
        ),
        # A padding flag, and a buffers object whose class declares the SWA buffer.
        Invalid(
            """
from dataclasses import dataclass

import torch


@dataclass
class Buffers:
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: torch.Tensor


def prepare(buffers: Buffers, raw_bs: int, bs: int):
    padded = bs != raw_bs
    if padded:
        buffers.out_cache_loc[raw_bs:] = 0
    buffers.out_cache_loc_swa[:raw_bs].copy_(buffers.out_cache_loc[:raw_bs])
""",
            line=15,
            fixed="""
from dataclasses import dataclass

import torch


@dataclass
class Buffers:
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: torch.Tensor


def prepare(buffers: Buffers, raw_bs: int, bs: int):
    padded = bs != raw_bs
    if padded:
        buffers.out_cache_loc[raw_bs:] = 0
        buffers.out_cache_loc_swa.zero_()
    buffers.out_cache_loc_swa[:raw_bs].copy_(buffers.out_cache_loc[:raw_bs])
""",
        ),
        # A subclass in another file: the base class owns the SWA buffer.
        Invalid(
            """
from base_runner import BaseRunner


class DraftRunner(BaseRunner):
    def replay_prepare(self, raw_bs, bs):
        if bs == raw_bs:
            return
        else:
            self.out_cache_loc.zero_()
""",
            line=7,
            files={
                "base_runner.py": (
                    "class BaseRunner:\n"
                    "    def __init__(self, n):\n"
                    "        self.out_cache_loc = torch.zeros(n)\n"
                    "        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)\n"
                    "\n"
                    "    def populate(self, forward_batch, n):\n"
                    "        self.out_cache_loc_swa[:n].copy_(forward_batch.out_cache_loc_swa)\n"
                )
            },
            fixed="""
from base_runner import BaseRunner


class DraftRunner(BaseRunner):
    def replay_prepare(self, raw_bs, bs):
        if bs == raw_bs:
            return
        else:
            self.out_cache_loc.zero_()
            self.out_cache_loc_swa.zero_()
""",
        ),
        # The piecewise runner's spelling (padded size named `static_...`), through a
        # local alias of a buffers object built by a factory of a class in another file.
        Invalid(
            """
from buffers import PrefillInputBuffers


class PiecewiseCudaGraphRunner:
    def __init__(self, max_num_tokens, is_hybrid_swa):
        self.buffers = PrefillInputBuffers.create(max_num_tokens, is_hybrid_swa)

    def replay_prepare(self, num_tokens):
        buffers = self.buffers
        static_num_tokens = self.capture_num_tokens[self.bucket(num_tokens)]
        if static_num_tokens != num_tokens:
            buffers.out_cache_loc.zero_()
            buffers.input_ids[num_tokens:static_num_tokens].zero_()
        if buffers.out_cache_loc_swa is not None:
            buffers.out_cache_loc_swa[:num_tokens].copy_(self.swa_src)
""",
            line=12,
            files={
                "buffers.py": (
                    "from dataclasses import dataclass\n"
                    "from typing import Optional\n"
                    "\n"
                    "\n"
                    "@dataclass\n"
                    "class PrefillInputBuffers:\n"
                    "    input_ids: torch.Tensor\n"
                    "    out_cache_loc: torch.Tensor\n"
                    "    out_cache_loc_swa: Optional[torch.Tensor]\n"
                )
            },
            fixed="""
from buffers import PrefillInputBuffers


class PiecewiseCudaGraphRunner:
    def __init__(self, max_num_tokens, is_hybrid_swa):
        self.buffers = PrefillInputBuffers.create(max_num_tokens, is_hybrid_swa)

    def replay_prepare(self, num_tokens):
        buffers = self.buffers
        static_num_tokens = self.capture_num_tokens[self.bucket(num_tokens)]
        if static_num_tokens != num_tokens:
            buffers.out_cache_loc.zero_()
            if buffers.out_cache_loc_swa is not None:
                buffers.out_cache_loc_swa.zero_()
            buffers.input_ids[num_tokens:static_num_tokens].zero_()
        if buffers.out_cache_loc_swa is not None:
            buffers.out_cache_loc_swa[:num_tokens].copy_(self.swa_src)
""",
        ),
        # The branch on the `if` line: reported, but no line-insertion fix.
        Invalid(
            """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs: self.out_cache_loc.zero_()
        self.out_cache_loc_swa[:raw_bs].copy_(self.src)
""",
            line=8,
        ),
    ]

    # The fill or padding branch, and the class owning the buffers, are each a trigger block.
    region_safe = True

    # -- padded rows that hold no sentinel (the semantic core) -------------------------

    def check(self, unit: FileUnit) -> None:
        reported: set[tuple[int, int]] = set()
        sentinel = unit.model.sentinel
        for function in unit.functions():
            ctx = Ctx(function)
            for event in function.facts.events:
                for span, value, what in _padding_values(event, unit):
                    if value == sentinel or (span.line, span.col) in reported:
                        continue
                    reported.add((span.line, span.col))
                    self.report_span(
                        span,
                        f"padded rows of {what} hold {value}, not the padding slot "
                        f"{sentinel}: {value} indexes {'the last' if value < 0 else 'a'} "
                        "real SWA slot, so padded tokens write their K/V over a live "
                        f"request's SWA KV; pad with {sentinel} (I12)",
                    )
            self._uninitialised(unit, function, ctx, reported)
            self._twin_left(unit, function, ctx, reported)
            self._discarded(unit, function, reported)
            self._one_path(unit, function, reported)
            if unit.model.clamp_before_indexing:
                self._wrapping(unit, function, reported)

    def _one_path(self, unit: FileUnit, function: Function, reported: set[tuple[int, int]]) -> None:
        """A location value whose padded rows are written with the sentinel on some
        branches and left as they are on others (a persistent buffer's view)."""
        for event in function.facts.events:
            if event.value is None:
                continue
            if event.kind == RETURN:
                pass
            elif (
                event.kind != BIND
                or not event.text
                or unit.model.location_role(event.text.rsplit(".", 1)[-1]) is None
            ):
                continue
            choices = alternatives(event.value)
            if len(choices) < 2:
                continue
            written = [t for _, t in choices if _tail_written(t)]
            left = [t for _, t in choices if not _tail_written(t) and _buffer_view(t)]
            if not written or not left:
                continue
            fill = next(
                (
                    e
                    for e in function.facts.events
                    if e.kind == FILL and Filled(e.before, e.region, e.value) in written  # type: ignore[arg-type]
                ),
                None,
            )
            span = fill.span if fill is not None else event.span
            if (span.line, span.col) in reported:
                continue
            reported.add((span.line, span.col))
            self.report_span(
                span,
                "the padded rows are reset on one branch only: on another, "
                f"`{render(left[0])}` is handed on with the previous step's slots past the "
                "live tokens, which padded tokens then write their K/V through; reset the "
                "tail on every branch (I4)",
            )

    def _twin_left(
        self, unit: FileUnit, function: Function, ctx: Ctx, reported: set[tuple[int, int]]
    ) -> None:
        """A reset of an object's write locations to the sentinel (``out_cache_loc``, a
        field or a dict entry, one by one or in a loop over names) that leaves the same
        object's SWA twin (``swa_out_cache_loc``, ``out_cache_loc_swa``) as it was: the
        function resets what a replay reads, and the SWA buffer keeps the previous
        batch's slots, through which padded tokens write their K/V (the original bug's
        shape outside a padding branch). A twin this function or one it calls writes, or
        that a method of the object's class rewrites whole, is not reported."""
        model = unit.model
        written = set(_written(function))
        for event in function.facts.events:
            if not _whole_reset(event, model.sentinel) or event.guard or event.conditional:
                continue
            for entry in _entries(event):
                if model.swa_role(entry.name) is not None or not model.is_location_name(entry.name):
                    continue
                twins = [
                    twin
                    for twin in entry.twins()
                    if model.swa_role(twin.name) == WRITE
                    and twin not in written
                    and _twin_kept(unit, function, twin, ctx)
                ]
                span = event.span
                if not twins or (span.line, span.col) in reported:
                    continue
                reported.add((span.line, span.col))
                self.report_span(
                    span,
                    f"`{function.facts.name}()` resets `{entry}` to the padding slot but not "
                    f"its SWA twin `{twins[0]}`: the SWA write locations keep the previous "
                    "batch's slots in the rows past the live tokens, and padded tokens write "
                    "their K/V through them over live requests' SWA KV; reset it with the "
                    "others (I4)",
                )

    def _wrapping(self, unit: FileUnit, function: Function, reported: set[tuple[int, int]]) -> None:
        """A Python scatter into the KV cache through padded locations not clamped: the
        negative padding sentinel wraps to the last slot (I12)."""
        for event in function.facts.events:
            if event.kind != FILL:
                continue
            index = _scatter_index(event)
            if index is None:
                continue
            target = (event.text or "").rsplit(".", 1)[-1]
            # the cache itself, or a view of it (``flat = kv_cache.view(-1, d)``)
            held = alternatives(event.before) if event.before is not None else ()
            roots = [rows_root(value) for _, value in held]
            names = [target, *(r.name for r in roots if isinstance(r, Attr | Local | Param))]
            if not any(words(name) & {"cache", "kv"} for name in names):
                continue
            raw = _raw_location(index, unit, Ctx(function))
            if raw is None or (event.span.line, event.span.col) in reported:
                continue
            reported.add((event.span.line, event.span.col))
            sentinel = unit.model.sentinel
            self.report_span(
                event.span,
                f"`{target}` is indexed in Python with `{raw}`, whose padded rows hold "
                f"{sentinel}: Python indexing wraps {sentinel} to the last slot, so padded "
                f"tokens overwrite a live block; clamp first (`{raw}.clamp_min(0)` sends "
                "them to the null block) (I12)",
            )

    def _discarded(
        self, unit: FileUnit, function: Function, reported: set[tuple[int, int]]
    ) -> None:
        """An out-of-place sentinel write whose result is dropped (the whole statement is
        the call): the locations keep the slots it was to overwrite."""
        for event in function.facts.events:
            call = event.value
            if event.kind != CALL or event.stmt != event.span or not isinstance(call, Call):
                continue
            func = call.func
            if not isinstance(func, Attr) or func.name not in _OUT_OF_PLACE:
                continue
            root = tensor_root(func.base)
            name = root.name if isinstance(root, Attr | Local | Param) else ""
            name = name.lstrip("_")
            if unit.model.location_role(name) is None and not unit.model.is_location_name(name):
                continue
            written = render(root)
            if (event.span.line, event.span.col) in reported:
                continue
            reported.add((event.span.line, event.span.col))
            self.report_span(
                event.span,
                f"the result of `{written}.{func.name}(...)` is dropped: out of place, it "
                f"leaves `{written}` as it was, so the padded rows keep live slots and "
                f"padded tokens write their K/V there; use `{func.name}_` (I4)",
            )

    def _uninitialised(
        self, unit: FileUnit, function: Function, ctx: Ctx, reported: set[tuple[int, int]]
    ) -> None:
        values = unit.values
        sinks = [
            (use.value, use.where, use.place)
            for use in role_uses(function, values)
            if use.role == WRITE
        ]
        sinks += [
            (event.value, f"`{event.text}`", event.span)
            for event in function.facts.events
            if event.kind == FILL
            and event.value is not None
            and unit.model.swa_role(event.text.rsplit(".", 1)[-1]) == WRITE
        ]
        if words(function.facts.name) & _PADDING_WORDS and any(
            words(p) & _ID_WORDS for p in function.facts.params
        ):
            # a padding helper of locations (``pad_with_sink(ids, n)``)
            sinks.append(
                (
                    function.facts.returns,
                    f"the result of `{function.facts.name}()`",
                    function.facts.span,
                )
            )
        for value, where, place in sinks:
            allocation = uninitialised(value, ctx, values)
            if allocation is None:
                continue
            # at the allocation (the fix's place) where this file makes it, else where the
            # value lands
            event = decider(function, allocation) or next(
                (e for f in unit.functions() if (e := decider(f, allocation)) is not None), None
            )
            span = event.span if event is not None else place
            if event is not None and event.span.line != place.line:
                where = f"{where} (line {place.line})"
            if (span.line, span.col) in reported:
                continue
            reported.add((span.line, span.col))
            self.report_span(
                span,
                f"padded rows of {where} are left uninitialised: this allocation's rows "
                "past the written prefix hold whatever memory held, slots of other "
                "requests, so padded tokens write their K/V over live SWA KV; allocate "
                "with the padding slot (`new_zeros`, `torch.zeros`) (I4)",
            )

    @classmethod
    def triggers(cls, config: Config) -> frozenset[Trigger] | None:
        """A marked size word with a location word, or ``swa_``/``_swa`` (default names),
        else nothing.

        A fill finding sits on a fill of an SWA buffer, whose name (an attribute, a field
        or a dict key) has the word ``swa`` next to another word under the default
        ``swa-loc-pattern`` (a table's too, by its definition), so its block holds
        ``swa_`` or ``_swa``; so does every fact it reads elsewhere: the class that
        allocates the buffer or its dict, the method that binds a field to a view of it,
        the method of its owner that resets it. A branch finding sits on a padding test,
        which compares a size whose name has a marking ``_``-separated word (``raw``,
        ``real``, ``unpadded``, ``static``, ``padded``, ``captured``) and at least one
        more word, so it holds ``raw_`` or
        ``_raw`` (or the like for the other words; directly, or in the flag's
        assignment in the same function); and its branch zeroes a location buffer, whose
        name holds ``loc``, ``locs``, ``location`` or ``locations`` as a ``_``-separated
        word, or is an SWA location (below). The reported block holds both.
        The facts a finding depends on in *other* blocks and files name the SWA buffer
        the object owns; under the default ``swa-loc-pattern`` that name has the word
        ``swa`` next to another word (it must also hold ``loc``, ``slot``, ``indices`` or
        ``index``), so it holds ``swa_`` or ``_swa``. Listing
        those keeps a base class that declares the buffer in the audit even when it has
        no padding branch. (A class in between that names neither, such as a base that
        only binds ``self.buffers = Buffers()``, is not kept: the engine builds its class
        index from the blocks the prefilter lets through.) A custom pattern may match
        names without ``swa``, so no trigger set is given then.
        """
        if config.swa_loc_pattern != DEFAULT_SWA_LOC_PATTERN:
            return None
        engines = [word(name) for model in all_models(config) for name in model.locations]
        return frozenset(
            {all_of(padding_trigger_strings(), LOCATION_WORDS), "swa_", "_swa", *engines}
        )

    @classmethod
    def collect_facts(cls, context: FileContext) -> FileFacts | None:
        return file_buffer_facts(context)

    # -- checking: live-row fills ---------------------------------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        ctx = self.context
        found = buffers_of(ctx, node)
        if not found.fills:
            return
        branch_owners: set[str] | None = None
        owners = BufferOwners(ctx, self.code)
        reported: set[str] = set()
        for fill in found.fills:
            key = fill.buffer.key
            if key in reported:
                continue
            role = swa_buffer_role(fill.buffer.attr, ctx.names)
            if role is None or not self._live(fill, role, found.local_values):
                continue
            if branch_owners is None:
                branch_owners = self._branch_owners(node)
            if fill.buffer.container is None and fill.buffer.owner_code in branch_owners:
                continue  # the padding branch's own finding
            if not owners.is_captured(fill.buffer, node):
                continue
            if self._reset_on_every_path(fill, found, owners, node):
                continue
            reported.add(key)
            self._report_fill(fill, role)

    def _reset_on_every_path(
        self, fill: Fill, found: FunctionBuffers, owners: BufferOwners, func: cst.FunctionDef
    ) -> bool:
        """Whether every path through ``fill`` resets its buffer's tail, before or after."""
        cfg = cfg_for(func)
        resets = [r.node for r in found.resets if r.buffer.key == fill.buffer.key]
        resets += [c for c in found.calls if self._call_resets(c, fill, found, owners, func)]
        covering = {n for r in resets if (n := self._cfg_node(cfg, r)) is not None}
        at = self._cfg_node(cfg, fill.node)
        if at is None or at in covering:
            return True
        return not _reaches(cfg, cfg.entry, at, covering) or not _reaches(
            cfg, at, cfg.exit, covering
        )

    def _cfg_node(self, cfg: CFG, node: cst.CSTNode) -> int | None:
        current: cst.CSTNode | None = node
        while current is not None:
            ids = cfg.by_stmt.get(id(current))
            if ids:
                return ids[0]
            current = self.context.parent(current)
        return None

    def _call_resets(
        self,
        call: cst.Call,
        fill: Fill,
        found: FunctionBuffers,
        owners: BufferOwners,
        func: cst.FunctionDef,
    ) -> bool:
        """A call resetting ``fill``'s buffer: one handed its tail or the buffer with the
        live count, or a method of its owner that resets it."""
        if hands_over(call, fill, found.local_values):
            return True
        buffer = fill.buffer
        callee = call.func
        if not (
            isinstance(callee, cst.Attribute)
            and self.context.module.code_for_node(callee.value) == buffer.owner_code
        ):
            return False
        info = owners.owner_class(buffer.owner, func)
        method = self.context.project.find_method(info, callee.attr.value) if info else None
        if method is None:
            return False
        cls, definition = method
        resets = owners.facts.of(cls).method_resets.get(definition.name, ())
        return (buffer.container or buffer.attr) in resets

    @staticmethod
    def _live(fill: Fill, role: str, local_values: Mapping[str, cst.BaseExpression]) -> bool:
        """Whether ``fill``'s bound is the live count (see the docstring's roles)."""
        bounds = [fill.bound]
        if isinstance(fill.bound, cst.Name) and fill.bound.value in local_values:
            bounds.append(local_values[fill.bound.value])
        if role == "write":
            return not any(is_padded_size(b) for b in bounds)
        return any(is_raw_size(b) for b in bounds)

    def _branch_owners(self, func: cst.FunctionDef) -> set[str]:
        """The objects whose location buffers a padding branch of ``func`` resets."""
        ctx = self.context
        flags = local_bindings(ctx, func)
        owners: set[str] = set()

        class Visitor(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is func

            def visit_If(self, node: cst.If) -> None:
                block = padding_block(node, flags)
                if block is None:
                    return
                for write in block_writes(block).writes:
                    if write.zero:
                        owners.add(ctx.module.code_for_node(write.owner))

        walk(func, Visitor())
        return owners

    def _report_fill(self, fill: Fill, role: str) -> None:
        ctx = self.context
        view = ctx.module.code_for_node(fill.view)
        base = ctx.module.code_for_node(fill.base)
        bound = ctx.module.code_for_node(fill.bound)
        consequence = (
            "padded tokens write their SWA KV through the previous replay's slots into "
            "live requests"
            if role == "write"
            else "padded requests read SWA KV through the previous replay's rows"
        )
        self.report(
            fill.node,
            f"`{view}` is filled with the batch's live rows, but nothing resets "
            f"`{base}[{bound}:]` to the sentinel: the captured graph reads those rows, and "
            f"{consequence} (I4)",
            fix=self._fill_fix(fill, base, bound),
        )

    def _fill_fix(self, fill: Fill, base: str, bound: str) -> Fix | None:
        ctx = self.context
        anchor = _statement_of(ctx, fill.node)
        if anchor is None:
            return None
        return ctx.insert_statements(
            anchor,
            [f"{base}[{bound}:].zero_()"],
            f"Reset {base}[{bound}:] to the sentinel slot 0 before the fill",
            after=False,
            applicability=Applicability.SAFE,
        )

    # -- checking: padding branches --------------------------------------------------------

    def visit_If(self, node: cst.If) -> None:
        ctx = self.context
        func = ctx.enclosing(node, cst.FunctionDef)
        flags = local_bindings(ctx, func) if func else {}
        block = padding_block(node, flags)
        if block is None:
            return
        writes = block_writes(block)
        groups: dict[str, _OwnerGroup] = {}
        for write in writes.writes:
            if write.zero and self._is_location(write.attr):
                code = ctx.module.code_for_node(write.owner)
                groups.setdefault(code, _OwnerGroup(write.owner, code, [])).resets.append(write)
        for group in groups.values():
            self._check_owner(node, block, func, group, writes.writes, writes.calls)

    def _is_location(self, name: str) -> bool:
        return is_location_name(name) or self.context.names.is_swa_loc(name)

    def _check_owner(
        self,
        node: cst.If,
        block: cst.BaseSuite,
        func: cst.FunctionDef | None,
        group: _OwnerGroup,
        writes: tuple[BufferWrite, ...],
        calls: tuple[cst.Call, ...],
    ) -> None:
        ctx = self.context
        owners = BufferOwners(ctx, self.code)
        info = owners.owner_class(group.owner, func)
        if info is None:
            return
        project = ctx.project
        owned = project.owned_attributes(info)
        swa = sorted(a for a in owned if ctx.names.is_swa_loc(a))
        if not swa:
            return
        covered = owners.covered(group.code, func, writes, calls, info)
        # A buffer nothing in the tree fills keeps its zeros: its tail is the sentinel.
        missing = [a for a in swa if a not in covered and owners.filled(info, a)]
        if not missing:
            return
        reset_names = ", ".join(dict.fromkeys(f"`{group.code}.{w.attr}`" for w in group.resets))
        missing_names = ", ".join(f"`{group.code}.{a}`" for a in missing)
        test = ctx.module.code_for_node(node.test)
        self.report(
            node.test,
            f"padding branch (`{test}`) resets {reset_names} but not {missing_names}; "
            "padded tokens would write through stale SWA slots into live requests' "
            "SWA KV (I4)",
            fix=self._fix(block, group, missing, writes, owners.optional(info)),
        )

    # -- the fix ----------------------------------------------------------------------

    def _fix(
        self,
        block: cst.BaseSuite,
        group: _OwnerGroup,
        missing: list[str],
        writes: tuple[BufferWrite, ...],
        optional: set[str],
    ) -> Fix | None:
        ctx = self.context
        if not isinstance(block, cst.IndentedBlock):
            return None
        anchor = top_statement(ctx, group.resets[-1].node, block)
        if anchor is None:
            return None
        branch_guards = any(w.guard is not None for w in writes)
        indent = ctx.module.default_indent
        lines: list[str] = []
        for attr in missing:
            buffer = f"{group.code}.{attr}"
            if branch_guards or attr in optional:
                lines += [f"if {buffer} is not None:", f"{indent}{buffer}.zero_()"]
            else:
                lines.append(f"{buffer}.zero_()")
        names = ", ".join(f"{group.code}.{a}" for a in missing)
        return ctx.insert_statements(
            anchor,
            lines,
            f"Reset {names} to the sentinel slot 0 in the padding branch",
            after=True,
            applicability=Applicability.SAFE,
        )


def _statement_of(ctx: FileContext, node: cst.CSTNode) -> cst.BaseStatement | None:
    """The statement holding ``node`` directly in an indented block."""
    current: cst.CSTNode | None = node
    while current is not None:
        parent = ctx.parent(current)
        if isinstance(parent, cst.IndentedBlock) and isinstance(current, cst.BaseStatement):
            return current
        current = parent
    return None


def _reaches(cfg: CFG, start: int, target: int, avoiding: set[int]) -> bool:
    """Whether ``target`` is reachable from ``start`` on normal edges without passing
    ``avoiding``."""
    seen = {start}
    stack = [start]
    while stack:
        current = stack.pop()
        if current == target:
            return True
        for nxt in cfg.nodes[current].succs:
            if nxt not in seen and nxt not in avoiding:
                seen.add(nxt)
                stack.append(nxt)
    return False


_PADDING_WORDS = frozenset({"pad", "padded", "padding"})
# A padding helper's parameter that is a location: ``ids``, ``loc``, ``indices``, ``slots``.
_ID_WORDS = frozenset({"ids", "loc", "locs", "slot", "slots", "indices"})


_CLAMPS = frozenset({"clamp", "clamp_min", "clamp_", "clamp_min_", "where", "masked_fill"})
# Wrap a negative sentinel into range like Python's ``%``: -1 becomes the last slot.
_WRAPS = frozenset({"remainder", "fmod"})
# In-place scatters and the position of the index they write at.
_SCATTERS = {"index_copy_": 1, "index_add_": 1, "scatter_": 1, "scatter_add_": 1}


def _scatter_index(event: Event) -> Term | None:
    """The index a write into a tensor goes through: a subscript store's, or a scatter
    method's index argument (``flat.index_copy_(0, slots, src)``)."""
    if isinstance(event.region, Term):
        return event.region
    position = _SCATTERS.get(event.how)
    if position is None or not isinstance(event.value, Call):
        return None
    return event.value.argument(position, "index")


_SAME_ROWS = frozenset({"view", "reshape", "flatten", "long", "int", "to", "contiguous"})


def _raw_location(term: Term, unit: FileUnit, ctx: Ctx, depth: int = 0) -> str | None:
    """The name of a padded location ``term`` indexes with, unclamped, or ``None``: the
    forward's padded locations (:func:`_padded`), through arithmetic and views."""
    if depth > 8:
        return None
    if isinstance(term, Seq):
        for item in term.items:
            found = _raw_location(item, unit, ctx, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(term, Op) and term.op in ("//", "%", "+", "-", "*"):
        for operand in term.operands:
            found = _raw_location(operand, unit, ctx, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(term, Index) and isinstance(term.index, Slice):
        return _raw_location(term.base, unit, ctx, depth + 1)
    if isinstance(term, Call) and isinstance(term.func, Attr):
        if term.func.name in _CLAMPS:
            return None
        if term.func.name in _SAME_ROWS | _WRAPS:
            return _raw_location(term.func.base, unit, ctx, depth + 1)
        return None
    name = term.name if isinstance(term, Param | Attr) else None
    if name is not None and unit.model.location_role(name) == WRITE and _padded(term, unit, ctx):
        return name
    return None


def _padded(term: Term, unit: FileUnit, ctx: Ctx, depth: int = 0) -> bool:
    """Whether a location holds the forward's padding: a field of attention metadata or
    the forward context, a parameter of a KV-cache update, or a parameter some caller
    hands one of these (the model's ``padded-objects`` and ``padded-parameters``)."""
    model = unit.model
    if isinstance(term, Index) and isinstance(term.index, Slice):
        return _padded(term.base, unit, ctx, depth)  # a slice of them: the same rows
    if isinstance(term, Phi):
        return any(_padded(value, unit, ctx, depth) for _, value in term.alternatives)
    if isinstance(term, Attr):
        return bool(words(render(term.base).rsplit(".", 1)[-1]) & model.padded_objects)
    if isinstance(term, Param) and depth < 3:
        if ctx.function.facts.name in model.padded_parameters:
            return True
        for _, inner in unit.values.callers(ctx.function):
            bound = inner.binding(term.name)
            if bound is not None and _padded(bound[0], unit, bound[1], depth + 1):
                return True
    return False


# Out-of-place tensor methods with an in-place twin: a statement of one alone does nothing.
_OUT_OF_PLACE = frozenset(
    {"masked_fill", "index_fill", "masked_scatter", "index_put", "scatter", "clamp", "clamp_min"}
)


@dataclass(frozen=True)
class _Entry:
    """A buffer an object holds: its field ``name``, or its entry ``name`` where
    ``keyed`` (``self.cuda_graph_buffers["out_cache_loc"]``: ``holder`` is the dict)."""

    holder: Term
    name: str
    keyed: bool

    def twins(self) -> list[_Entry]:
        """The SWA twins it may have, as its holder would hold them."""
        return [replace(self, name=n) for n in (f"swa_{self.name}", f"{self.name}_swa")]

    def __str__(self) -> str:
        held = render(self.holder)
        return f"{held}[{self.name!r}]" if self.keyed else f"{held}.{self.name}"


def _keys(region: Term | str | None) -> list[str]:
    """The dict keys a write's rows name: a string, one of several (a loop over names),
    or the key under a slice (``d["k"][:n]``, a chain whose last link is the key)."""
    if isinstance(region, Seq) and region.kind == "chain" and region.items:
        return _keys(region.items[-1])
    if not isinstance(region, Term):
        return []
    found = [t for _, t in alternatives(region)]
    keys = [t.value for t in found if isinstance(t, Const) and isinstance(t.value, str)]
    return keys if len(keys) == len(found) else []


def _entries(event: Event) -> list[_Entry]:
    """The buffers ``event`` writes, as entries of the objects holding them."""
    keys = _keys(event.region)
    if keys and event.target is not None:
        return [_Entry(event.target, key, True) for key in keys]
    if isinstance(event.target, Attr):
        return [_Entry(event.target.base, event.target.name, False)]
    return []


def _written(function: Function) -> Iterator[_Entry]:
    """The buffers ``function`` binds or writes into."""
    for event in function.facts.events:
        if event.kind in (FILL, BIND):
            yield from _entries(event)


def _whole_rows(region: Term | str | None) -> bool:
    """Every row: the whole buffer, ``[:]``, a dict entry, or a full slice of one."""
    full = Slice(None, None, None)
    if region in ("all", full) or (isinstance(region, Term) and _keys(region)):
        if isinstance(region, Seq) and region.kind == "chain":
            return all(item == full for item in region.items[:-1])
        return True
    return False


def _whole_reset(event: Event, sentinel: int) -> bool:
    return (
        event.kind == FILL
        and isinstance(event.value, Const)
        and event.value.value == sentinel
        and _whole_rows(event.region)
    )


def _twin_kept(unit: FileUnit, function: Function, twin: _Entry, ctx: Ctx) -> bool:
    """Whether ``twin`` is a buffer its holder has (a field of its class, an entry a
    method of the function's class stores) that nothing resetting it leaves alone: no
    function ``function`` calls writes it, and no method of the class copies into all
    of its rows (it is then rewritten whole, padded rows included, each time)."""
    project, values = unit.project, unit.values
    cls = project.class_of_function(function)
    methods = list(project.methods_of(cls)) if cls is not None else [function]
    if twin.keyed:
        held = any(twin in _written(method) for method in methods)
    else:
        held = any(project.owns(c, twin.name) for c in values.classes(twin.holder, ctx))
    if not held:
        return False
    for event in function.facts.events:
        if event.kind == CALL and isinstance(event.value, Call):
            for callee, _ in values.callees(event.value, ctx):
                if any(entry.name == twin.name for entry in _written(callee)):
                    return False
    return not any(
        event.kind == FILL and event.how == "copy_" and _whole_rows(event.region)
        for method in methods
        for event in method.facts.events
        if any(entry.name == twin.name for entry in _entries(event))
    )


def _tail_written(term: Term) -> bool:
    """Whether ``term``'s rows past a bound were written with a constant (or it was
    allocated full of one)."""
    while isinstance(term, Filled):
        region = term.region
        if (
            isinstance(region, Slice)
            and region.lower is not None
            and constant(term.value) is not None
        ):
            return True
        if region == "all" and constant(term.value) is not None:
            return True
        term = term.base
    if isinstance(term, Call):
        func = term.func
        name = func.name if isinstance(func, Attr | Global) else ""
        return name.rsplit(".", 1)[-1] in (
            "zeros",
            "full",
            "zeros_like",
            "full_like",
            "new_zeros",
            "new_full",
        )
    return False


def _buffer_view(term: Term) -> bool:
    """A view of a buffer kept on an object (its rows hold what was last written)."""
    while isinstance(term, Index) and isinstance(term.index, Slice):
        term = term.base
    return isinstance(term, Attr)


def _padding_values(event: Event, unit: FileUnit) -> list[tuple[Span, int, str]]:
    """The constants a padding step writes into SWA write locations at ``event``."""
    model = unit.model
    found: list[tuple[Span, int, str]] = []
    if event.kind == FILL and event.text:
        name = event.text.rsplit(".", 1)[-1]
        region = event.region
        tail = region == "all" or (
            isinstance(region, Slice) and region.lower is not None and region.upper is None
        )
        value = constant(event.value)
        if model.location_role(name) == WRITE and tail and value is not None:
            found.append((event.span, value, f"`{event.text}`"))
    elif event.kind == BIND and event.text and event.value is not None:
        name = event.text.rsplit(".", 1)[-1]
        value = full_value(event.value)
        if model.location_role(name) == WRITE and value is not None:
            found.append((event.span, value, f"`{event.text}`"))
    elif event.kind == CALL and isinstance(event.value, Call):
        call = event.value
        func = call.func
        callee = func.name if isinstance(func, Attr | Global) else ""
        if words(callee.rsplit(".", 1)[-1]) & _PADDING_WORDS:
            padded = [n for n in event.names if n is not None]
            value = constant(
                call.keyword("value") or call.keyword("fill_value") or call.keyword("pad_value")
            )
            for name, _ in padded[:1]:
                if model.location_role(name.rsplit(".", 1)[-1]) == WRITE and value is not None:
                    found.append((event.span, value, f"`{name}`"))
    return found
