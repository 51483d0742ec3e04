"""Decode CUDA-graph runner: static input buffers, capture per batch-size bucket,
padded populate, replay.

Without CUDA (or with ``use_cuda_graph=False``) ``capture`` still runs the
warm-ups, and ``replay`` runs the very ``run_once`` it would have captured,
eagerly, over the same static buffers: the padding logic is the same code on
CPU and GPU.

A capture must not depend on what ran before it in the process, so ``capture``
follows SGLang's practice (``freeze_gc`` around ``CudaGraphRunner.capture``):

- Python's cyclic garbage is collected before capture and everything alive then is
  frozen until the capture ends (``gc_collected_and_frozen``). Old cyclic garbage (an
  earlier runner: its tensors, its captured graphs and their memory pools) collected
  *inside* a capture releases device memory and destroys graphs while the stream
  captures, which invalidates the capture ("operation failed due to a previous error
  during capture"); when that collection came depended on how many objects the process
  had allocated (a cold Triton cache compiles, and allocates, far more).
- The warm-ups run on the stream that captures (``capture_stream``), so every lazily
  initialised per-stream resource (the cuBLAS handle and workspace of that stream,
  Triton's compiled kernels and loaded modules, the allocator's blocks) exists before
  capture begins, and nothing is first touched inside it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor

from swacheck.reference_impl.forward_batch import ForwardBatch, ForwardMode
from swacheck.reference_impl.tensor_types import Logits, PerRequest32, TokenIds

if TYPE_CHECKING:
    from swacheck.reference_impl.attention_backend import TritonAttnBackend
    from swacheck.reference_impl.model import TinyHybridModel
    from swacheck.reference_impl.pool import SWAKVPool

SEQ_LEN_FILL_VALUE = 1  # padded requests attend to one token: the sentinel slot


class RunnerOwner(Protocol):
    """What the graph runner reads of the model runner that owns it (SGLang's runner is
    given its model runner too); a protocol, since model_runner.py imports this module."""

    inject_bug: str | None
    device: torch.device
    precompute_swa_loc: bool
    attn_backend: TritonAttnBackend
    token_to_kv_pool: SWAKVPool
    model: TinyHybridModel


@dataclass
class DecodeInputBuffers:
    input_ids: TokenIds
    req_pool_indices: TokenIds
    seq_lens: PerRequest32
    positions: TokenIds
    out_cache_loc: TokenIds
    out_cache_loc_swa: PerRequest32 | None

    @classmethod
    def create(
        cls,
        max_bs: int,
        device: torch.device,
        precompute_swa_loc: bool,
        swa_loc_dtype: torch.dtype = torch.int32,
    ) -> DecodeInputBuffers:
        def zeros(dtype: torch.dtype) -> Tensor:
            return torch.zeros(max_bs, dtype=dtype, device=device)

        return cls(
            input_ids=zeros(torch.int64),
            req_pool_indices=zeros(torch.int64),
            seq_lens=zeros(torch.int32).fill_(SEQ_LEN_FILL_VALUE),
            positions=zeros(torch.int64),
            out_cache_loc=zeros(torch.int64),
            out_cache_loc_swa=zeros(swa_loc_dtype) if precompute_swa_loc else None,
        )

    def populate_from_forward_batch(
        self,
        forward_batch: ForwardBatch,
        raw_bs: int,
        bs: int,
        zero_swa_tail: bool = True,
    ) -> None:
        """Copy the batch in; when padded (``bs != raw_bs``) the tails become the sentinel (I4)."""
        if bs != raw_bs:
            self.seq_lens.fill_(SEQ_LEN_FILL_VALUE)
            self.req_pool_indices.zero_()  # row 0 of req_to_token: all sentinel
            self.out_cache_loc.zero_()
            if self.out_cache_loc_swa is not None and zero_swa_tail:
                self.out_cache_loc_swa.zero_()
        for f in fields(self):
            dst = getattr(self, f.name)
            src = getattr(forward_batch, f.name)
            if dst is not None and src is not None:
                dst[:raw_bs].copy_(src[:raw_bs])


@contextlib.contextmanager
def gc_collected_and_frozen() -> Iterator[None]:
    """Collect the cyclic garbage, then freeze everything alive until the block ends: a
    collection inside it frees nothing that existed before (SGLang's ``freeze_gc``)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class CudaGraphRunner:
    def __init__(
        self,
        model_runner: RunnerOwner,
        capture_bs: Sequence[int],
        use_cuda_graph: bool,
    ) -> None:
        self.model_runner = model_runner
        self.capture_bs = sorted(capture_bs)
        self.max_bs = self.capture_bs[-1]
        self.use_cuda_graph = use_cuda_graph
        self.inject_bug = model_runner.inject_bug
        swa_dtype = torch.int64 if self.inject_bug == "swa-loc-int64" else torch.int32
        self.buffers = DecodeInputBuffers.create(
            self.max_bs, model_runner.device, model_runner.precompute_swa_loc, swa_dtype
        )
        model_runner.attn_backend.init_cuda_graph_state(self.max_bs)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.output_buffers: dict[int, Tensor] = {}
        self.capture_batches: dict[int, ForwardBatch] = {}  # static views, one per bucket
        self.graph_memory_pool = None
        # Warm-ups and captures run here (see the module docstring).
        self.capture_stream = torch.cuda.Stream() if use_cuda_graph else None

    def can_run(self, forward_batch: ForwardBatch) -> bool:
        return (
            forward_batch.forward_mode is ForwardMode.DECODE
            and forward_batch.batch_size <= self.max_bs
            and bool(self.capture_batches)
        )

    def bucket(self, raw_bs: int) -> int:
        return next(bs for bs in self.capture_bs if bs >= raw_bs)

    def capture(self) -> None:
        """Capture every bucket, largest first (so smaller graphs can share its memory pool),
        with the garbage collected and the survivors frozen (see the module docstring)."""
        if not self.use_cuda_graph:
            for bs in reversed(self.capture_bs):
                self.capture_one_batch_size(bs)
            return
        assert self.capture_stream is not None
        self.capture_stream.wait_stream(torch.cuda.current_stream())
        with gc_collected_and_frozen():
            for bs in reversed(self.capture_bs):
                self.capture_one_batch_size(bs)
        torch.cuda.current_stream().wait_stream(self.capture_stream)

    def capture_one_batch_size(self, bs: int) -> None:
        mr = self.model_runner
        buf = self.buffers
        metadata = mr.attn_backend.init_forward_metadata_capture_cuda_graph(
            bs, buf.req_pool_indices[:bs], buf.seq_lens[:bs]
        )
        self.capture_batches[bs] = ForwardBatch(
            forward_mode=ForwardMode.DECODE,
            batch_size=bs,
            input_ids=buf.input_ids[:bs],
            req_pool_indices=buf.req_pool_indices[:bs],
            seq_lens=buf.seq_lens[:bs],
            seq_lens_cpu=[SEQ_LEN_FILL_VALUE] * bs,
            positions=buf.positions[:bs],
            out_cache_loc=buf.out_cache_loc[:bs],
            out_cache_loc_swa=None if buf.out_cache_loc_swa is None else buf.out_cache_loc_swa[:bs],
            attn_metadata=metadata,
        )
        stream = (
            torch.cuda.stream(self.capture_stream)
            if self.capture_stream is not None
            else contextlib.nullcontext()
        )
        with stream:
            for _ in range(2):  # warm-up (also compiles the Triton kernels)
                self.run_once(bs)
        if self.use_cuda_graph:
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.graph_memory_pool, stream=self.capture_stream):
                out = self.run_once(bs)
            self.graph_memory_pool = graph.pool()
            self.graphs[bs] = graph
            self.output_buffers[bs] = out

    def run_once(self, bs: int) -> Logits:
        """The body that is captured (and, without CUDA graphs, replayed eagerly)."""
        mr = self.model_runner
        # Warm-ups must not leave a cached translation for the capture to bake in (I5).
        if self.inject_bug != "capture-without-invalidation":
            mr.token_to_kv_pool.invalidate_loc_cache()
        return mr.model.forward(self.capture_batches[bs], mr.attn_backend)

    def replay(self, forward_batch: ForwardBatch) -> Logits:
        raw_bs = forward_batch.batch_size
        bs = self.bucket(raw_bs)
        self.buffers.populate_from_forward_batch(
            forward_batch, raw_bs, bs, zero_swa_tail=self.inject_bug != "padding-not-zeroed"
        )
        self.model_runner.attn_backend.init_forward_metadata_replay_cuda_graph(
            bs, self.buffers.req_pool_indices[:bs], self.buffers.seq_lens[:bs]
        )
        if self.use_cuda_graph:
            self.graphs[bs].replay()
            out = self.output_buffers[bs]
        else:
            out = self.run_once(bs)
        return out[:raw_bs].clone()
