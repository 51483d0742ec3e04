"""SWA010 captured-buffer-rebound."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from swacheck.analysis.buffers import BufferOwners, FileFacts, buffers_of, file_buffer_facts
from swacheck.analysis.graph_buffers import (
    CG_WORD,
    GRAPH_TEXT,
    TENSOR_TEXT,
    BufferName,
    FunctionBuffers,
    holds_no_tensor,
    is_replay_name,
    is_setup_name,
    swa_buffer_role,
)
from swacheck.config import Config
from swacheck.rule import Invalid, Rule, Valid
from swacheck.semantics.dtypes import decider
from swacheck.semantics.function import BIND, FILL, RETURN, Event
from swacheck.semantics.model import FULL, SWA, all_models, words
from swacheck.semantics.project import Function
from swacheck.semantics.terms import (
    Attr,
    Call,
    Const,
    Global,
    Index,
    Local,
    Param,
    Phi,
    Term,
    alternatives,
    render,
)
from swacheck.semantics.unit import FileUnit
from swacheck.semantics.values import Ctx, rows_root, tensor_root
from swacheck.triggers import Trigger, all_of, compiled, word

if TYPE_CHECKING:
    from swacheck.context import FileContext


# A file of a vLLM tree (its slot mappings are padded with PAD_SLOT_ID = -1): the
# examples that are vLLM's are audited with vLLM's model.
_VLLM_UTILS = "PAD_SLOT_ID = -1  # the padding entry of a slot_mapping\n"


class CapturedBufferRebound(Rule):
    """
    ## What it does
    Finds a buffer that a captured CUDA graph reads being *rebound* on a replay path
    instead of refilled in place: `self.cuda_graph_swa_out_cache_loc = swa_loc`,
    `metadata.page_table = new_table`, `self.graph_buffers["swa_loc"] = t`, when the
    value is not a view of a captured buffer (`self.cuda_graph_swa_out_cache_loc[:n]`
    is fine, as is `None`).

    A buffer that a captured graph reads is recognised as SWA003 recognises it, by how it
    is made: a tensor allocated outside the replay path by graph code (the attribute or
    the allocating method named for the graph, such as `cuda_graph_*` or
    `init_cuda_graph_state`, or a class that captures, replays or populates), a tensor
    field of such a class, an entry of a dict so allocated, a field of another object
    that graph code allocates (a registry's `slot.buffer = torch.zeros(...)`), or a field
    that a method of the same class binds to a view of one (`metadata.swa_out_cache_loc =
    self.cuda_graph_swa_out_cache_loc[:n]`). Any such buffer counts, SWA or not: the
    contract is the graph's. So does an SWA location or table field (`swa_out_cache_loc`,
    `swa_page_table`) of an object the backend keeps (`self.forward_metadata`, a metadata
    taken out of a per-batch-size dict): that is what the captured kernels read. A value
    that holds no tensor (a number, a host-side list: `int(n)`, `x.tolist()`) rebinds no
    buffer.

    A replay path is a function named for it (`init_forward_metadata_replay_cuda_graph`,
    `init_forward_metadata_out_graph`, `replay_prepare`, `populate_from_forward_batch`,
    `fill_from`, `load_batch`, `*refill*`) or one that fills a captured buffer in place
    and is not named for setting up (`__init__`, `init_*`, `*capture*`, `*alloc*`,
    `create`, `build`, `setup`, `register`) or, so named, tests whether it runs at capture
    (`_init_full_cg_metadata(self, forward_batch, in_capture)`): its code outside the
    capture branch runs at every replay. Rebinding there is allowed under a test that
    says the code runs at capture (`if in_capture:`, `if self.is_capturing():`) or
    allocates lazily (`if self.buf is None:`, `if not hasattr(self, "buf"):`).

    Two more shapes are read off the values (the semantic core):

    - a *copy* of a buffer the graph reads handed on as the batch's locations instead of
      the buffer itself: `slot_mapping = blk_table.slot_mapping.gpu[:n].clone()`,
      `metadata.swa_out_cache_loc = self.cuda_graph_swa_out_cache_loc[:n].clone()` (a
      persistent buffer is an object's `gpu` buffer or a field named for the graph);
    - captured metadata *replaced* on a replay path by a copy of it
      (`self.forward_metadata = dataclasses.replace(metadata, swa_page_table=t)`,
      `copy.copy(metadata)`): the graph keeps reading the captured object's tensors;
    - metadata kept for the kernels built on a replay path with an SWA location computed
      there (`ForwardMetadata(swa_page_table=translated)`), not a view of a persistent
      buffer (a helper that refills one and returns its view is that view). Reported
      where the value is last bound.

    ## Why is this bad?
    A captured graph replays its kernels on the addresses it captured (invariant I10). A
    buffer rebound after capture is a new tensor the graph never sees: the replay keeps
    reading the old one, which now holds whatever was last written there — for SWA write
    locations, a previous batch's slots, so the replayed tokens store their K/V into other
    requests' SWA KV; for page tables, another batch's pages. Nothing fails: eager runs
    read the new tensor and are right, only graph replays go wrong. The fix is to fill the
    captured buffer in place: `self.buf[:n].copy_(t)` (and reset the tail, SWA003).

    ## Fix safety
    No autofix: turning a rebinding into an in-place fill needs the live count and the
    tail's sentinel, which only the author knows.
    """

    code = "SWA010"
    name = "captured-buffer-rebound"
    summary = "A buffer a captured CUDA graph reads is rebound on a replay path"
    invariant = "I10"
    origin = "CUDA-graph contract (a graph replays on the addresses it captured)"

    VALID = [
        # a helper refills the captured buffer and returns its view
        Valid(
            """
class Backend:
    def _refill_swa_loc(self, forward_batch):
        n = forward_batch.out_cache_loc.shape[0]
        self.cuda_graph_swa_out_cache_loc[n:].zero_()
        self.cuda_graph_swa_out_cache_loc[:n].copy_(
            self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
        )
        return self.cuda_graph_swa_out_cache_loc[:n]

    def init_forward_metadata_replay_cuda_graph(self, forward_batch):
        self.forward_metadata = ForwardMetadata(
            swa_out_cache_loc=self._refill_swa_loc(forward_batch),
        )
"""
        ),
        # The view of the persistent buffer itself handed on; a copy for the host.
        Valid(
            """
def slot_mapping_for(self, num_tokens_padded, num_tokens_unpadded):
    slot_mapping = self.block_table.slot_mapping.gpu[:num_tokens_padded]
    slot_mapping[num_tokens_unpadded:num_tokens_padded].fill_(-1)
    self.host_slots = slot_mapping.clone().cpu()
    return slot_mapping
""",
            files={"vllm/v1/attention/backends/utils.py": _VLLM_UTILS},
        ),
        # The 0.5.13+ backend shape: the captured buffer refilled in place, a metadata
        # field bound to a view of it.
        Valid(
            """
import torch


class TritonAttnBackend:
    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = torch.zeros(max_num_tokens, dtype=torch.int64)

    def init_forward_metadata_capture_cuda_graph(self, num_tokens, metadata):
        metadata.swa_out_cache_loc = self.cuda_graph_swa_out_cache_loc[:num_tokens]

    def init_forward_metadata_replay_cuda_graph(self, forward_batch, metadata):
        n = forward_batch.out_cache_loc.shape[0]
        self.cuda_graph_swa_out_cache_loc[n:].zero_()
        self.cuda_graph_swa_out_cache_loc[:n].copy_(
            self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
        )
        metadata.swa_out_cache_loc = self.cuda_graph_swa_out_cache_loc[:n]
"""
        ),
        # Rebinding at capture (guarded) and lazy allocation are setup, not replay.
        Valid(
            """
import torch


class Backend:
    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        if self.graph_swa_page_table is None:
            self.graph_swa_page_table = torch.zeros(8, 64, dtype=torch.int32)
        if not hasattr(self, "graph_cu_seqlens"):  # vLLM 0.33's turboquant backend
            self.graph_cu_seqlens = torch.zeros(2, dtype=torch.int32)
        if in_capture:
            self.graph_swa_page_table = torch.zeros(8, 64, dtype=torch.int32)
        else:
            self.graph_swa_page_table[: forward_batch.batch_size].copy_(forward_batch.pages)
"""
        ),
        # Not a captured buffer: the eager path's metadata holds fresh tensors.
        Valid(
            """
import torch


class Backend:
    def __init__(self):
        self.forward_metadata = None

    def init_forward_metadata(self, forward_batch):
        metadata = Metadata()
        metadata.swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(
            forward_batch.out_cache_loc
        )
        self.forward_metadata = metadata
"""
        ),
        # A buffer of a class that is not graph code may be rebound anywhere.
        Valid(
            """
import torch


class SWAKVPool:
    def __init__(self, size):
        self.swa_loc_buf = torch.zeros(size, dtype=torch.int32)

    def refresh(self, locs):
        self.swa_loc_buf = locs.to(torch.int32)
"""
        ),
        # Fields of the metadata that are no tensors (a length, a host list) are rebound
        # every replay; only tensors are captured.
        Valid(
            """
from dataclasses import dataclass
from typing import List, Optional

import torch


@dataclass
class DualChunkMetadata:
    seq_lens_tensor: Optional[torch.Tensor] = None
    seq_lens: Optional[List[int]] = None
    max_seq_len: int = 0


class DualChunkBackend:
    def __init__(self):
        self.forward_metadata: DualChunkMetadata = None

    def init_cuda_graph_state(self, max_bs):
        self.decode_metadata = {"seq_lens_tensor": torch.zeros(max_bs, dtype=torch.int32)}

    def init_forward_metadata_replay_cuda_graph(self, bs, seq_lens):
        metadata = self.decode_metadata[bs]
        metadata.seq_lens_tensor.copy_(seq_lens[:bs])
        metadata.seq_lens = seq_lens[:bs].tolist()
        self.forward_metadata.max_seq_len = int(seq_lens.max())
"""
        ),
        # A graph runner's per-step method that allocates a fresh tensor for another
        # object's field each step: the field is per-step state, never allocated once
        # before capture, so rebinding it elsewhere is no rebound graph buffer.
        Valid(
            """
import torch


class ModelRunner:
    def capture_model(self):
        self.graphs = {}

    def receive_prev_tokens(self, num_reqs):
        recv = torch.empty((num_reqs, 1), dtype=torch.int32)
        self.input_batch.prev_tokens = recv

    def fill_from_sampler(self, next_token_ids):
        self.input_batch.prev_tokens = next_token_ids.unsqueeze(1)
"""
        ),
        # A batch object that is no graph code builds its own fields in a factory
        # (``ret.extend_seq_lens = torch.tensor(...)``) and rebinds them when it pads
        # itself: those fields are the batch's, allocated per batch, not a graph's
        # buffers, even where a method of it resets one of them.
        Valid(
            """
import torch


class ForwardBatch:
    @classmethod
    def init_new(cls, batch):
        ret = cls()
        ret.num_token_non_padded = torch.tensor(len(batch.reqs), dtype=torch.int32)
        ret.extend_seq_lens = torch.tensor(batch.extend_lens, dtype=torch.int32)
        return ret

    def prepare_mlp_sync_batch(self, num_tokens):
        # an idle rank runs the prefill CUDA graph's shape: one masked dummy request
        self.num_token_non_padded.fill_(0)
        self.extend_seq_lens = torch.full_like(self.seq_lens, 1)
"""
        ),
    ]
    INVALID = [
        # replay builds the kept metadata around a freshly translated SWA table
        Invalid(
            """
class Backend:
    def init_forward_metadata_replay_cuda_graph(self, bs, req_pool_indices, seq_lens):
        page_table = self.req_to_token[req_pool_indices[:bs], : self.max_pages]
        swa_page_table = self.token_to_kv_pool.translate_loc_from_full_to_swa(page_table)
        self.forward_metadata = ForwardMetadata(
            page_table=self.cuda_graph_page_table,
            swa_page_table=swa_page_table,
        )
""",
            line=5,
        ),
        # a setup-named method that also runs at replay grows the buffer it captured
        Invalid(
            """
import torch

class Backend:
    def _init_full_cg_metadata(self, forward_batch, in_capture):
        n = forward_batch.out_cache_loc.shape[0]
        if in_capture:
            self.cg_swa_out_cache_loc = torch.zeros((n,), dtype=torch.int64)
        if n > self.cg_swa_out_cache_loc.shape[0]:
            self.cg_swa_out_cache_loc = torch.zeros((n,), dtype=torch.int64)
        self.cg_swa_out_cache_loc[:n].copy_(forward_batch.out_cache_loc_swa)
        self.cg_swa_out_cache_loc[n:].zero_()
""",
            line=10,
        ),
        # vLLM: a clone of the persistent slot mapping handed to attention instead of
        # the buffer the full CUDA graph captured.
        Invalid(
            """
def slot_mapping_for(self, num_tokens_padded, num_tokens_unpadded):
    slot_mapping = self.block_table.slot_mapping.gpu[:num_tokens_padded].clone()
    slot_mapping[num_tokens_unpadded:num_tokens_padded].fill_(-1)
    return slot_mapping
""",
            line=3,
            files={"vllm/v1/attention/backends/utils.py": _VLLM_UTILS},
        ),
        # The captured metadata replaced by a copy with a new page table on replay.
        Invalid(
            """
import dataclasses


class FlashAttentionBackend:
    def init_forward_metadata_replay_cuda_graph(self, bs, forward_batch):
        metadata = self.decode_cuda_graph_metadata[bs]
        table = self.pool.translate_loc_from_full_to_swa(metadata.page_table)
        self.forward_metadata = dataclasses.replace(metadata, swa_page_table=table)
""",
            line=9,
        ),
        # The same through a local, published later: reported where the copy is made.
        Invalid(
            """
from dataclasses import replace


class TRTLLMBackend:
    def init_forward_metadata_replay_cuda_graph(self, bs, forward_batch):
        captured = self.decode_cuda_graph_metadata[bs]
        metadata = replace(captured, swa_page_table=self._alloc_swa_page_table(bs))
        metadata.swa_page_table.copy_(self.translate(captured.page_table))
        self.forward_metadata = metadata
""",
            line=8,
        ),
        # The backend's graph buffer rebound to the translation in the replay path.
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
        if in_capture:
            self.cuda_graph_swa_out_cache_loc.zero_()
        else:
            swa_loc = self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
            self.cuda_graph_swa_out_cache_loc = swa_loc
""",
            line=18,
        ),
        # A field of the captured metadata (bound to a view at capture) rebound on replay;
        # the metadata comes out of a per-batch-size dict.
        Invalid(
            """
import torch


class FlashAttentionBackend:
    def init_cuda_graph_state(self, max_bs, max_pages):
        self.decode_cuda_graph_metadata = {
            "swa_page_table": torch.zeros(max_bs, max_pages, dtype=torch.int32),
        }

    def init_forward_metadata_capture_cuda_graph(self, bs):
        metadata = Metadata()
        metadata.swa_page_table = self.decode_cuda_graph_metadata["swa_page_table"][:bs]
        self.decode_cuda_graph_metadata[bs] = metadata

    def init_forward_metadata_replay_cuda_graph(self, bs, req_pool_indices):
        metadata = self.decode_cuda_graph_metadata[bs]
        pages = self.req_to_token[req_pool_indices[:bs]]
        metadata.swa_page_table = self.pool.translate_loc_from_full_to_swa(pages)
""",
            line=19,
        ),
        # An entry of a runner's dict of graph inputs replaced in its populate step.
        Invalid(
            """
import torch


class DraftExtendRunner:
    def __init__(self, max_num_tokens):
        self.graph_inputs = {}
        self.graph_inputs["swa_out_cache_loc"] = torch.zeros(max_num_tokens, dtype=torch.int32)
        self.graph_inputs["positions"] = torch.zeros(max_num_tokens, dtype=torch.int64)

    def populate(self, forward_batch):
        n = forward_batch.positions.shape[0]
        self.graph_inputs["positions"][:n].copy_(forward_batch.positions)
        self.graph_inputs["swa_out_cache_loc"] = forward_batch.out_cache_loc_swa
""",
            line=14,
        ),
        # A dataclass of graph inputs (it populates) whose field is rebound through a typed
        # holder, in a helper that fills another field in place.
        Invalid(
            """
from dataclasses import dataclass

import torch


@dataclass
class DecodeInputBuffers:
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: torch.Tensor

    def populate_from_forward_batch(self, forward_batch, raw_num_tokens):
        self.out_cache_loc[:raw_num_tokens].copy_(forward_batch.out_cache_loc)


class CudaGraphRunner:
    def __init__(self, buffers: DecodeInputBuffers):
        self.buffers = buffers

    def _copy_locations(self, forward_batch, raw_num_tokens):
        self.buffers.out_cache_loc[:raw_num_tokens].copy_(forward_batch.out_cache_loc)
        self.buffers.out_cache_loc_swa = forward_batch.out_cache_loc_swa
""",
            line=22,
        ),
        # An SWA field of the object the backend's kernels read given a fresh translation
        # on the replay path.
        Invalid(
            """
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class ForwardMetadata:
    swa_out_cache_loc: Optional[torch.Tensor] = None


class AiterAttnBackend:
    def __init__(self):
        self.forward_metadata: ForwardMetadata = None

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        self.forward_metadata.swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(
            forward_batch.out_cache_loc
        )
""",
            line=18,
        ),
        # A registry of slots (dataclasses holding the graph's buffers) whose fill step
        # adopts the batch's tensor instead of copying it in.
        Invalid(
            """
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class GraphSlot:
    name: str
    buffer: Optional[torch.Tensor] = None


class CudaGraphBufferRegistry:
    def __init__(self):
        self._slots = {}

    def register_slot(self, slot, shape):
        buffer = torch.zeros(shape, dtype=torch.int32)
        slot.buffer = buffer
        self._slots[slot.name] = slot

    def fill_from(self, forward_batch, raw_num_tokens):
        for slot in self._slots.values():
            src = getattr(forward_batch, slot.name)
            if slot.name.endswith("_swa"):
                slot.buffer = src
            else:
                slot.buffer[:raw_num_tokens].copy_(src)
""",
            line=27,
        ),
    ]

    # A finding sits in a function whose name, or whose class, holds a graph word, in a
    # file of tensor code.
    region_safe = True

    # -- copies of what the graph reads (the semantic core) -------------------------------

    def check(self, unit: FileUnit) -> None:
        for function in unit.functions():
            replay = is_replay_name(function.facts.name)
            for event in function.facts.events:
                value = event.value
                if value is None or event.kind not in (BIND, RETURN, FILL):
                    continue
                if event.kind == FILL and not isinstance(event.region, Const):
                    continue  # copied into a buffer: filled in place
                copied = _copy_of_persistent(value)
                named = event.kind == RETURN or (unit.model.location_role(_name(event)) is not None)
                if copied is not None and named:
                    self.report_span(
                        event.span,
                        f"a copy of `{copied}`, a buffer the captured graph reads, is "
                        "handed on as the batch's locations: the replay keeps reading the "
                        "buffer it captured, not the copy, so whatever is written into the "
                        "copy never reaches it; hand on the buffer's view itself (I10)",
                    )
                elif (
                    replay
                    and event.kind == BIND
                    and _kept(event.target, function.self_param)
                    and _replaced(value)
                ):
                    # at the copy where it is made apart from where it is kept
                    made = next(
                        (
                            e
                            for _, copy in alternatives(value)
                            if (e := decider(function, copy)) is not None
                        ),
                        None,
                    )
                    kept = f" (kept at line {event.span.line})"
                    moved = made is not None and made.span.line != event.span.line
                    self.report_span(
                        made.span if moved and made is not None else event.span,
                        f"`{event.text}` is replaced on a replay path by a copy of captured "
                        f"metadata{kept if moved else ''}: the captured graph keeps reading "
                        "the tensors of the object it captured, so what the copy changes "
                        "never reaches the replay; fill the captured object's tensors in "
                        "place (I10)",
                    )
                elif replay and event.kind == BIND and _kept(event.target, function.self_param):
                    self._fresh_fields(unit, function, event)

    def _fresh_fields(self, unit: FileUnit, function: Function, event: Event) -> None:
        """Metadata kept for the captured kernels, built on a replay path with a freshly
        computed SWA location as a field (``ForwardMetadata(swa_page_table=translated)``):
        the kernels replay on the buffer they captured, which nothing refills."""
        for _, built in alternatives(event.value):
            if not isinstance(built, Call):
                continue
            for keyword, value in built.kwargs:
                if unit.model.swa_role(keyword) is None:
                    continue
                fresh = next(
                    (v for _, v in alternatives(value) if _fresh_location(v, unit, function)),
                    None,
                )
                if fresh is None:
                    continue
                # where the kept value is last bound to it: the line to change
                bound = [
                    e.span
                    for e in function.facts.events
                    if e.kind == BIND
                    and isinstance(e.target, Local)
                    and e.span.line < event.span.line
                    and any(v == fresh for _, v in alternatives(e.value or fresh))
                ]
                self.report_span(
                    bound[-1] if bound else event.span,
                    f"`{keyword}=` of the metadata kept in `{event.text}` on a replay path is "
                    f"a tensor computed here (`{render(fresh, 50)}`), not the buffer the "
                    "captured graph reads: the replay keeps reading what that buffer held; "
                    "copy into the captured buffer and hand on its view (I10)",
                )
                return

    @classmethod
    def triggers(cls, config: Config) -> frozenset[Trigger] | None:
        """Graph words (``graph``, ``capture``, ``replay``, ``populate``, ``refill``,
        ``fill_from``, ``load_batch``, ``cg``) in a file that names ``torch``, a
        ``tensor`` or ``cuda``.

        A finding is a rebinding in a replay path: a function whose name holds one of
        ``replay``, ``populate``, ``refill``, ``fill_from``, ``load_batch`` or ``out_graph``,
        or one whose class block holds a graph word (checked). The buffer rebound is
        captured: the block of the class allocating it holds its graph evidence (an
        attribute or method named with a graph word, or a method that captures, replays
        or populates), and a field bound to a view of it holds the same class's. Every
        block a finding reads holds a graph word, and the rule reads no file without
        tensor text (the engine runs it only where its triggers hold): a CUDA graph's
        buffers are tensors.
        """
        engines = [word(name) for model in all_models(config) for name in model.locations]
        return frozenset({all_of(_GRAPH_WORDS, TENSOR_TEXT), *engines})

    @classmethod
    def collect_facts(cls, context: FileContext) -> FileFacts | None:
        return file_buffer_facts(context)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        ctx = self.context
        found = buffers_of(ctx, node)
        rebindings = [r for r in found.rebindings if not r.setup_guarded]
        if not rebindings:
            return
        owners = BufferOwners(ctx, self.code)
        if not self._replay_path(node, found, owners):
            return
        for rebinding in rebindings:
            target = rebinding.target
            if not (
                owners.holds_captured(target, node)
                or (
                    self._kept_object(target, found)
                    and swa_buffer_role(target.attr, ctx.names) is not None
                )
            ):
                continue
            if holds_no_tensor(rebinding.value) or owners.is_captured_view(
                rebinding.value, node, found.local_values
            ):
                continue
            shown = ctx.module.code_for_node(rebinding.expr)
            self.report(
                rebinding.node,
                f"`{shown}` is read by a captured CUDA graph, which replays on the tensor "
                "it held at capture; rebinding it here leaves the graph reading the old "
                "tensor and its stale contents: fill it in place "
                f"(`{shown}[:n].copy_(...)`) (I10)",
            )

    @staticmethod
    def _kept_object(target: BufferName, found: FunctionBuffers) -> bool:
        """Whether ``target``'s owner is an object the backend keeps (``self.forward_metadata``,
        ``metadata = self.graph_metadata[bs]``), not one this function builds."""
        owner = target.owner
        if isinstance(owner, cst.Name):
            value = found.local_values.get(owner.value)
            return value is not None and not isinstance(value, cst.Call)
        return isinstance(owner, cst.Attribute)

    def _replay_path(
        self, node: cst.FunctionDef, found: FunctionBuffers, owners: BufferOwners
    ) -> bool:
        """Named for a replay, or filling a captured buffer in place in graph code (a
        setup's name too, where the function tests whether it runs at capture: its code
        outside the capture branch runs at every replay)."""
        name = node.name.value
        if is_replay_name(name):
            return True
        if is_setup_name(name) and not found.tests_capture:
            return False
        writes = [f.buffer for f in found.fills] + [r.buffer for r in found.resets]
        if not any(owners.is_captured(buffer, node) for buffer in writes):
            return False
        ctx = self.context
        scope = ctx.enclosing(node, cst.ClassDef) or node
        return ctx.memo(
            ("swa010.graph_code", id(scope)),
            lambda: compiled(_GRAPH_WORDS).matches(ctx.module.code_for_node(scope).encode()),
        )


_GRAPH_WORDS: frozenset[Trigger] = frozenset({*GRAPH_TEXT, word(CG_WORD)})


_COPIES = frozenset({"clone", "detach_clone"})


def _name(event: Event) -> str:
    if event.kind == FILL and isinstance(event.region, Const):
        return str(event.region.value)
    return (event.text or "").rsplit(".", 1)[-1]


def _copy_of_persistent(term: Term) -> str | None:
    """The buffer ``term`` is a copy of (``buf[:n].clone()``), where that buffer is a
    persistent one: an object's ``gpu`` buffer or a field named for the graph."""
    for _, value in alternatives(term):
        if isinstance(value, Call) and isinstance(value.func, Attr) and value.func.name in _COPIES:
            base = value.func.base
            while isinstance(base, Index):
                base = base.base
            if isinstance(base, Attr) and (
                base.name == "gpu" or CG_WORD in words(base.name) or "graph" in base.name
            ):
                return render(base)
    return None


def _fresh_location(term: Term, unit: FileUnit, function: Function) -> bool:
    """A location computed by a call here (a translation, a gather), not a view of a
    field that persists across replays (a helper returning one counts as that view)."""
    root = rows_root(term)
    if not isinstance(root, Call) or _replaced(root):
        return False
    ctx = Ctx(function)
    if not any(f.space in (FULL, SWA) for f in unit.values.space(root, ctx)):
        return False
    returned = unit.values.returned(root, ctx)
    return not returned or any(
        not isinstance(view, Attr | Param | Const)
        for term, _ in returned
        for view in _written_roots(term)
    )


def _written_roots(term: Term, depth: int = 0) -> list[Term]:
    """The tensors ``term`` may be a view of, through what was written into them in
    place and the paths that choose them."""
    out: list[Term] = []
    for _, value in alternatives(term):
        root = tensor_root(value)
        if isinstance(root, Phi) and depth < 4:
            out += _written_roots(root, depth + 1)
        else:
            out.append(root)
    return out


def _replaced(term: Term) -> bool:
    """A copy of an object: ``dataclasses.replace(x, ...)``, ``copy.copy(x)``."""
    return any(
        isinstance(value, Call)
        and isinstance(value.func, Global)
        and value.func.name in ("dataclasses.replace", "copy.copy", "copy.deepcopy", "replace")
        for _, value in alternatives(term)
    )


def _kept(target: Term | None, receiver: str | None) -> bool:
    """A field of the object itself (``self.forward_metadata``): what a replay hands the
    captured kernels outlives the call, unlike a local copy."""
    while isinstance(target, Attr):
        target = target.base
        if isinstance(target, Param) and target.name == receiver:
            return True
    return False
