"""A toy hybrid-SWA engine slice, written independently of ``swacheck.reference_impl``.

It has SGLang's duck-typed surface (pool with ``full_to_swa_index_mapping`` and a
memoised ``translate_loc_from_full_to_swa``, a graph runner with
``capture``/``run_once``/``populate_from_forward_batch``/``replay``, a backend with
``init_forward_metadata``/``update_sliding_window_buffer``, a model runner whose
``forward`` invalidates then dispatches) on real CPU tensors, and a ``bug`` switch per
seed bug, so the sanitizer's checks are exercised without the reference implementation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch

if not torch.cuda.is_available():  # the reference implementation's kernels: interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")

HEADS, DIM = 2, 4


class ToyPool:
    def __init__(self, size: int = 32, size_swa: int = 16, swa_layers: int = 2, bug: str = ""):
        self.bug = bug
        self.size, self.size_swa = size, size_swa
        mapping = torch.zeros(size + 2, dtype=torch.int64)
        mapping[-1] = -1
        self.full_to_swa_index_mapping = mapping
        self.swa_k_buffer = [torch.zeros(size_swa + 1, HEADS, DIM) for _ in range(swa_layers)]
        self._free_full = list(range(1, size + 1))
        self._free_swa = list(range(1, size_swa + 1))
        self._cached_loc_key: tuple[int, int] | None = None
        self._cached_swa_loc: torch.Tensor | None = None

    def invalidate_loc_cache(self) -> None:
        self._cached_loc_key = None
        self._cached_swa_loc = None

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        if self.bug == "storage-pointer-key":
            key = (kv_indices.untyped_storage().data_ptr(), kv_indices.numel())
        else:
            key = (kv_indices.data_ptr(), kv_indices.numel())
        if key != self._cached_loc_key:
            dtype = torch.int64 if self.bug == "swa-loc-int64" else torch.int32
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices].to(dtype)
            self._cached_loc_key = key
        return self._cached_swa_loc

    def set_kv_buffer(self, layer: int, loc: torch.Tensor, k: torch.Tensor) -> None:
        self.swa_k_buffer[layer][self.translate_loc_from_full_to_swa(loc)] = k

    def alloc(self, n: int) -> torch.Tensor:
        full = torch.tensor([self._free_full.pop(0) for _ in range(n)], dtype=torch.int64)
        swa = torch.tensor([self._free_swa.pop(0) for _ in range(n)], dtype=torch.int64)
        self.full_to_swa_index_mapping[full] = swa
        if self.bug != "missing-invalidation":
            self.invalidate_loc_cache()
        return full

    def free(self, full: torch.Tensor) -> None:
        swa = self.full_to_swa_index_mapping[full]
        self._free_swa += [s for s in swa.tolist() if s > 0]
        self._free_full += full.tolist()
        self.full_to_swa_index_mapping[full] = 0
        if self.bug != "missing-invalidation":
            self.invalidate_loc_cache()


@dataclass
class ToyBatch:
    out_cache_loc: torch.Tensor
    seq_lens: list[int] = field(default_factory=list)


class ToyBackend:
    def __init__(self, pool: ToyPool, bug: str = ""):
        self.pool, self.bug = pool, bug
        self.window_kv_indices = torch.zeros(64, dtype=torch.int64)
        self.swa_window_kv_indices = torch.zeros(64, dtype=torch.int32)

    def init_forward_metadata(self, forward_batch: ToyBatch) -> None:
        self.update_sliding_window_buffer(forward_batch)

    def update_sliding_window_buffer(self, forward_batch: ToyBatch) -> None:
        """Translate freshly computed window indices (here: the batch's locations, copied)."""
        n = forward_batch.out_cache_loc.numel()
        self.window_kv_indices[:n] = forward_batch.out_cache_loc
        flush = self.bug != "fresh-translation-without-flush"
        if flush:
            self.pool.invalidate_loc_cache()
        translated = self.pool.translate_loc_from_full_to_swa(self.window_kv_indices[:n])
        self.swa_window_kv_indices[:n] = translated
        if flush:
            self.pool.invalidate_loc_cache()


class ToyGraphRunner:
    """Decode-only graph runner; on CPU ``replay`` re-runs the body over the static buffers."""

    def __init__(self, pool: ToyPool, buckets: tuple[int, ...] = (2, 4), bug: str = ""):
        self.pool, self.buckets, self.bug = pool, buckets, bug
        max_bs = max(buckets)
        swa_dtype = torch.int64 if bug == "swa-loc-int64" else torch.int32
        self.out_cache_loc = torch.zeros(max_bs, dtype=torch.int64)
        self.out_cache_loc_swa = torch.zeros(max_bs, dtype=swa_dtype)
        self.bs = 0
        self.raw_bs = 0
        self.captured: dict[int, int] = {}

    def capture(self) -> None:
        for bs in self.buckets:
            self.bs = bs
            for _ in range(2):  # warm-up, then the captured run
                self.run_once(bs)
            self.captured[bs] = bs

    def run_once(self, bs: int) -> None:
        if self.bug != "capture-without-invalidation":
            self.pool.invalidate_loc_cache()
        k = torch.ones(bs, HEADS, DIM)
        for layer in range(len(self.pool.swa_k_buffer)):
            self.pool.set_kv_buffer(layer, self.out_cache_loc[:bs], k)

    def populate_from_forward_batch(self, forward_batch: ToyBatch, raw_bs: int, bs: int) -> None:
        self.raw_bs, self.bs = raw_bs, bs
        if bs != raw_bs:
            self.out_cache_loc.zero_()
            if self.bug != "padding-not-zeroed":
                self.out_cache_loc_swa.zero_()
        self.out_cache_loc[:raw_bs].copy_(forward_batch.out_cache_loc)
        swa = self.pool.full_to_swa_index_mapping[forward_batch.out_cache_loc]
        self.out_cache_loc_swa[:raw_bs].copy_(swa)

    def replay(self, forward_batch: ToyBatch) -> None:
        raw_bs = forward_batch.out_cache_loc.numel()
        bs = min(b for b in self.buckets if b >= raw_bs)
        self.populate_from_forward_batch(forward_batch, raw_bs, bs)
        # What a captured graph does: write through the static SWA-loc buffer.
        k = torch.randn(bs, HEADS, DIM)
        for layer in range(len(self.pool.swa_k_buffer)):
            self.pool.swa_k_buffer[layer][self.out_cache_loc_swa[:bs].long()] = k


class ToyModelRunner:
    def __init__(self, pool: ToyPool, backend: ToyBackend, graph_runner: ToyGraphRunner, bug=""):
        self.token_to_kv_pool, self.backend, self.graph_runner = pool, backend, graph_runner
        self.bug = bug

    def forward(self, forward_batch: ToyBatch, use_graph: bool = False) -> None:
        if self.bug != "invalidate-after-dispatch":
            self.token_to_kv_pool.invalidate_loc_cache()
        if use_graph:
            self.graph_runner.replay(forward_batch)
            return
        if self.bug == "invalidate-after-dispatch":
            self.token_to_kv_pool.invalidate_loc_cache()
        self.backend.init_forward_metadata(forward_batch)
        k = torch.randn(forward_batch.out_cache_loc.numel(), HEADS, DIM)
        for layer in range(len(self.token_to_kv_pool.swa_k_buffer)):
            self.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k)


def build(bug: str = "") -> SimpleNamespace:
    pool = ToyPool(bug=bug)
    backend = ToyBackend(pool, bug=bug)
    graph_runner = ToyGraphRunner(pool, bug=bug)
    model_runner = ToyModelRunner(pool, backend, graph_runner, bug=bug)
    return SimpleNamespace(
        pool=pool, backend=backend, graph_runner=graph_runner, model_runner=model_runner
    )


@pytest.fixture
def toy() -> SimpleNamespace:
    """The toy engine's classes and a builder (``toy.build(bug)``)."""
    return SimpleNamespace(
        build=build,
        Pool=ToyPool,
        Batch=ToyBatch,
        Backend=ToyBackend,
        GraphRunner=ToyGraphRunner,
        ModelRunner=ToyModelRunner,
    )
