"""Model runner: owns model, pools, backend and graph runner; schedules requests
(admission, chunked prefill, decode, sliding-window eviction, freeing) and
dispatches every forward (``forward``, SGLang's ``_forward_raw``).

Under tensor parallelism (``tp``) each rank runs its own model runner over its shard:
its pools hold only its KV heads; scheduling is identical on every rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from swacheck.reference_impl.attention_backend import TritonAttnBackend
from swacheck.reference_impl.bugs import validate_bug
from swacheck.reference_impl.forward_batch import ForwardBatch, ForwardMode
from swacheck.reference_impl.graph_runner import CudaGraphRunner
from swacheck.reference_impl.model import ModelConfig, TinyHybridModel
from swacheck.reference_impl.pool import ReqToTokenPool, SWAKVPool
from swacheck.reference_impl.tensor_types import Logits
from swacheck.reference_impl.tp import TensorParallel
from swacheck.reference_impl.workload import RequestSpec


@dataclass
class Req:
    spec: RequestSpec
    req_pool_idx: int
    prefilled: int = 0  # prompt tokens with KV so far
    output_ids: list[int] = field(default_factory=list)
    swa_evicted: int = 0  # tokens [0, swa_evicted) no longer hold an SWA slot

    @property
    def seq_len(self) -> int:
        """Tokens with KV: the prompt so far, then every output but the newest."""
        return self.prefilled + max(len(self.output_ids) - 1, 0)

    @property
    def finished(self) -> bool:
        return len(self.output_ids) >= self.spec.max_new_tokens


# What a request's context was at a step, without copying it: (prompt, prompt tokens
# consumed, outputs fed after them). Copying every context every step would cost as much
# host time as a large model's decode step leaves for everything else.
ContextParts = tuple[tuple[int, ...], int, tuple[int, ...]]


@dataclass
class StepOutput:
    mode: ForwardMode
    rids: list[int]
    context_parts: list[ContextParts]
    logits: Logits
    bucket: int | None  # graph batch size used (None: eager)

    @property
    def contexts(self) -> list[list[int]]:
        """Per request: the tokens whose last logits are ``logits[i]``."""
        return [[*prompt[:n], *outputs] for prompt, n, outputs in self.context_parts]


class ModelRunner:
    def __init__(
        self,
        config: ModelConfig,
        device: torch.device | str,
        dtype: torch.dtype = torch.float32,
        *,
        seed: int = 0,
        max_running_requests: int = 4,
        max_context_len: int = 128,
        full_pool_size: int = 512,
        swa_pool_size: int = 160,
        chunked_prefill_size: int = 16,
        graph: bool = True,
        capture_bs: Sequence[int] = (1, 2, 4),
        precompute_swa_loc: bool = True,
        num_kv_splits: int | None = None,
        inject_bug: str | None = None,
        tp: TensorParallel | None = None,
        model: TinyHybridModel | None = None,
    ) -> None:
        """``model``: serve these weights (e.g. one large model shared by several runners)
        instead of drawing a model from ``seed``."""
        self.config = config
        self.device = torch.device(device)
        self.inject_bug = validate_bug(inject_bug)
        self.is_hybrid_swa = True
        # True: decode batches carry out_cache_loc_swa (#23552/#24138);
        # False: set_kv_buffer translates out_cache_loc itself (#25824).
        self.precompute_swa_loc = precompute_swa_loc
        self.chunked_prefill_size = chunked_prefill_size
        self.max_running_requests = max_running_requests
        if model is not None and model.config != config:
            raise ValueError("model was built for another ModelConfig")
        self.model = (model or TinyHybridModel(config, seed, tp)).to(self.device, dtype)
        self.tp = self.model.tp
        layer = self.model.layers[0]  # this rank's heads
        self.req_to_token_pool = ReqToTokenPool(max_running_requests, max_context_len, self.device)
        self.token_to_kv_pool = SWAKVPool(
            full_pool_size,
            swa_pool_size,
            config.swa_layer_ids,
            config.num_layers,
            layer.num_kv_heads,
            config.head_dim,
            dtype,
            self.device,
            inject_bug=inject_bug,
        )
        if num_kv_splits is None:  # the interpreter pays per program: no split on CPU
            num_kv_splits = 4 if self.device.type == "cuda" else 1
        self.attn_backend = TritonAttnBackend(
            self.token_to_kv_pool,
            self.req_to_token_pool.req_to_token,
            layer.num_heads,
            config.head_dim,
            config.sliding_window,
            num_kv_splits,
            inject_bug=inject_bug,
        )
        self.graph_runner = (
            CudaGraphRunner(self, capture_bs, use_cuda_graph=self.device.type == "cuda")
            if graph
            else None
        )
        self.waiting: list[RequestSpec] = []
        self.running: list[Req] = []
        self.finished: list[Req] = []
        self.step_count = 0

    # -- forward dispatch --------------------------------------------------------------

    def capture_graphs(self) -> None:
        if self.graph_runner is not None:
            self.graph_runner.capture()

    def forward(self, forward_batch: ForwardBatch) -> Logits:
        """Invalidate the translation cache, then replay a graph or run eagerly (I6)."""
        can_run_graph = self.graph_runner is not None and self.graph_runner.can_run(forward_batch)
        if self.inject_bug != "invalidate-after-dispatch":
            self.token_to_kv_pool.invalidate_loc_cache()
        if can_run_graph:
            assert self.graph_runner is not None
            return self.graph_runner.replay(forward_batch)
        if self.inject_bug == "invalidate-after-dispatch":
            self.token_to_kv_pool.invalidate_loc_cache()
        self.attn_backend.init_forward_metadata(forward_batch)
        return self.model.forward(forward_batch, self.attn_backend)

    # -- scheduling ----------------------------------------------------------------------

    def add_request(self, spec: RequestSpec) -> None:
        self.waiting.append(spec)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def step(self) -> StepOutput | None:
        """One scheduler step: prefill if any admitted request needs it, else decode."""
        self._admit()
        self.step_count += 1
        pending = [r for r in self.running if r.prefilled < len(r.spec.prompt)]
        if pending:
            return self._run_prefill(pending)
        if self.running:
            return self._run_decode(list(self.running))
        return None

    def _admit(self) -> None:
        for spec in [s for s in self.waiting if s.arrival_step <= self.step_count]:
            idx = self.req_to_token_pool.alloc()
            if idx is None:
                return
            self.waiting.remove(spec)
            self.running.append(Req(spec, idx))

    def _alloc(self, n: int) -> Tensor:
        locs = self.token_to_kv_pool.alloc(n)
        if locs is None:
            raise RuntimeError(f"KV pool exhausted allocating {n} tokens")
        return locs

    def _run_prefill(self, reqs: list[Req]) -> StepOutput:
        chunks = [min(self.chunked_prefill_size, len(r.spec.prompt) - r.prefilled) for r in reqs]
        locs = self._alloc(sum(chunks))  # one tensor: micro-batches get views of it
        ids, positions, start = [], [], 0
        for r, n in zip(reqs, chunks, strict=True):
            self.req_to_token_pool.write(r.req_pool_idx, r.prefilled, locs[start : start + n])
            ids.extend(r.spec.prompt[r.prefilled : r.prefilled + n])
            positions.extend(range(r.prefilled, r.prefilled + n))
            start += n
        seq_lens = [r.prefilled + n for r, n in zip(reqs, chunks, strict=True)]
        fb = self._batch(ForwardMode.EXTEND, reqs, ids, positions, seq_lens, locs)
        fb.extend_prefix_lens_cpu = [r.prefilled for r in reqs]
        fb.extend_seq_lens_cpu = chunks
        if len(reqs) >= 2:
            fb.split_for_two_batch_overlap()
        logits = self.forward(fb)
        next_ids = logits.argmax(-1).tolist()  # one device read for the whole batch
        contexts: list[ContextParts] = []
        for i, (r, n) in enumerate(zip(reqs, chunks, strict=True)):
            r.prefilled += n
            contexts.append((r.spec.prompt, r.prefilled, ()))
            if r.prefilled == len(r.spec.prompt):
                r.output_ids.append(next_ids[i])
        return self._finish_step(ForwardMode.EXTEND, reqs, contexts, logits, None)

    def prepare_decode_batch(self, reqs: list[Req]) -> ForwardBatch:
        """Allocate one slot per request and describe the decode forward."""
        locs = self._alloc(len(reqs))
        for i, r in enumerate(reqs):
            self.req_to_token_pool.write(r.req_pool_idx, r.seq_len, locs[i : i + 1])
        ids = [r.output_ids[-1] for r in reqs]
        positions = [r.seq_len for r in reqs]
        fb = self._batch(ForwardMode.DECODE, reqs, ids, positions, [p + 1 for p in positions], locs)
        if self.precompute_swa_loc:
            fb.out_cache_loc_swa = self.token_to_kv_pool.translate_loc_from_full_to_swa(locs)
        return fb

    def _run_decode(self, reqs: list[Req]) -> StepOutput:
        fb = self.prepare_decode_batch(reqs)
        graph = self.graph_runner is not None and self.graph_runner.can_run(fb)
        bucket = self.graph_runner.bucket(len(reqs)) if graph and self.graph_runner else None
        logits = self.forward(fb)
        # Decode feeds every output so far: the context is the whole prompt and them.
        contexts = [(r.spec.prompt, r.prefilled, tuple(r.output_ids)) for r in reqs]
        for r, token in zip(reqs, logits.argmax(-1).tolist(), strict=True):
            r.output_ids.append(token)
        return self._finish_step(ForwardMode.DECODE, reqs, contexts, logits, bucket)

    def _batch(
        self,
        mode: ForwardMode,
        reqs: list[Req],
        ids: list[int],
        positions: list[int],
        seq_lens: list[int],
        locs: Tensor,
    ) -> ForwardBatch:
        dev = self.device
        return ForwardBatch(
            forward_mode=mode,
            batch_size=len(reqs),
            input_ids=torch.tensor(ids, dtype=torch.int64, device=dev),
            req_pool_indices=torch.tensor(
                [r.req_pool_idx for r in reqs], dtype=torch.int64, device=dev
            ),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=dev),
            seq_lens_cpu=seq_lens,
            positions=torch.tensor(positions, dtype=torch.int64, device=dev),
            out_cache_loc=locs,
        )

    def _finish_step(
        self,
        mode: ForwardMode,
        reqs: list[Req],
        contexts: list[ContextParts],
        logits: Tensor,
        bucket: int | None,
    ) -> StepOutput:
        """Free finished requests; evict SWA slots of tokens that left every future window."""
        req_to_token = self.req_to_token_pool.req_to_token
        window = self.config.sliding_window
        for r in reqs:
            row = req_to_token[r.req_pool_idx]
            if r.finished:
                self.token_to_kv_pool.free(row[: r.seq_len].to(torch.int64))
                self.req_to_token_pool.free(r.req_pool_idx)
                self.running.remove(r)
                self.finished.append(r)
                continue
            # The next query sits at position seq_len and sees keys >= seq_len - window.
            keep_from = max(r.seq_len - window, 0)
            if keep_from > r.swa_evicted:
                self.token_to_kv_pool.free_swa(row[r.swa_evicted : keep_from].to(torch.int64))
                r.swa_evicted = keep_from
        return StepOutput(mode, [r.spec.rid for r in reqs], contexts, logits, bucket)
