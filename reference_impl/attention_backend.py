"""Triton attention backend over the SWA/full pools (page size 1).

Full layers read every token of a request from the full pool; SWA layers read
only the window, through SWA-space indices that ``update_sliding_window_buffer``
translates from full space. Decode metadata for CUDA graphs lives in buffers
allocated once (``init_cuda_graph_state``) so their addresses stay fixed across
capture and replay.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from swacheck.reference_impl.bugs import validate_bug
from swacheck.reference_impl.forward_batch import ForwardBatch, ForwardMode
from swacheck.reference_impl.pool import SWAKVPool
from swacheck.reference_impl.tensor_types import (
    IndPtr,
    KVHeads,
    PerRequest,
    PerRequest32,
    QHeads,
    ReqToToken,
    SlotList,
)
from swacheck.reference_impl.triton_kernels import (
    create_kv_indices,
    decode_attention_fwd,
    extend_attention_fwd,
)


@dataclass
class DecodeMetadata:
    kv_indptr: IndPtr
    kv_indices: SlotList  # full-pool slots
    window_kv_indptr: IndPtr
    window_kv_indices: SlotList  # SWA-pool slots


@dataclass
class ExtendMetadata:
    qo_indptr: IndPtr
    max_extend_len: int
    kv_indptr: IndPtr  # full layers: the whole cached prefix
    kv_indices: SlotList
    prefix_lens: PerRequest32
    zeros: PerRequest32
    window_kv_indptr: IndPtr  # SWA layers: the prefix's window
    window_kv_indices: SlotList
    window_kv_start_idx: PerRequest32


def _indptr(lens: Tensor) -> IndPtr:
    out = torch.zeros(lens.numel() + 1, dtype=torch.int32, device=lens.device)
    out[1:] = torch.cumsum(lens, 0)
    return out


class TritonAttnBackend:
    """Builds per-batch metadata and runs the Triton decode/extend kernels."""

    def __init__(
        self,
        token_to_kv_pool: SWAKVPool,
        req_to_token: ReqToToken,
        num_heads: int,
        head_dim: int,
        sliding_window_size: int,
        num_kv_splits: int,
        inject_bug: str | None = None,
    ) -> None:
        self.token_to_kv_pool = token_to_kv_pool
        self.req_to_token = req_to_token
        self.num_heads = num_heads
        self.sm_scale = head_dim**-0.5
        self.sliding_window_size = sliding_window_size
        self.num_kv_splits = num_kv_splits
        self.inject_bug = validate_bug(inject_bug)
        self.device = req_to_token.device

    # -- metadata ---------------------------------------------------------------------

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        """Eager path: fresh metadata tensors for this batch (and its micro-batches)."""
        for child in forward_batch.tbo_children:
            self.init_forward_metadata(child)
        if forward_batch.tbo_children:
            return
        fb = forward_batch
        if fb.forward_mode is ForwardMode.DECODE:
            total = sum(fb.seq_lens_cpu)
            window = sum(min(s, self.sliding_window_size + 1) for s in fb.seq_lens_cpu)
            fb.attn_metadata = self._fill_decode_metadata(
                fb.batch_size,
                fb.req_pool_indices,
                fb.seq_lens,
                torch.zeros(fb.batch_size + 1, dtype=torch.int32, device=self.device),
                torch.empty(total, dtype=torch.int32, device=self.device),
                torch.zeros(fb.batch_size + 1, dtype=torch.int32, device=self.device),
                torch.empty(window, dtype=torch.int32, device=self.device),
            )
        else:
            fb.attn_metadata = self._extend_metadata(fb)

    def _fill_decode_metadata(
        self,
        bs: int,
        req_pool_indices: PerRequest,
        seq_lens: PerRequest32,
        kv_indptr: IndPtr,
        kv_indices: SlotList,
        window_kv_indptr: IndPtr,
        window_kv_indices: SlotList,
    ) -> DecodeMetadata:
        kv_indptr[1 : bs + 1] = torch.cumsum(seq_lens, 0)
        kv_indptr = kv_indptr[: bs + 1]
        zeros = torch.zeros(bs, dtype=torch.int32, device=self.device)
        create_kv_indices(self.req_to_token, req_pool_indices, zeros, kv_indptr, kv_indices)
        window_kv_indptr, window_kv_indices, _, _ = self.update_sliding_window_buffer(
            window_kv_indptr,
            self.req_to_token,
            self.sliding_window_size,
            seq_lens,
            req_pool_indices,
            bs,
            token_to_kv_pool=self.token_to_kv_pool,
            window_kv_indices=window_kv_indices,
        )
        return DecodeMetadata(kv_indptr, kv_indices, window_kv_indptr, window_kv_indices)

    def _extend_metadata(self, fb: ForwardBatch) -> ExtendMetadata:
        assert fb.extend_prefix_lens_cpu is not None and fb.extend_seq_lens_cpu is not None
        bs, dev = fb.batch_size, self.device
        prefix_lens = torch.tensor(fb.extend_prefix_lens_cpu, dtype=torch.int32, device=dev)
        extend_lens = torch.tensor(fb.extend_seq_lens_cpu, dtype=torch.int32, device=dev)
        kv_indptr = _indptr(prefix_lens)
        n_prefix = max(sum(fb.extend_prefix_lens_cpu), 1)
        kv_indices = torch.empty(n_prefix, dtype=torch.int32, device=dev)
        zeros = torch.zeros(bs, dtype=torch.int32, device=dev)
        create_kv_indices(self.req_to_token, fb.req_pool_indices, zeros, kv_indptr, kv_indices)
        window = sum(min(p, self.sliding_window_size + 1) for p in fb.extend_prefix_lens_cpu)
        window_kv_indptr, window_kv_indices, _, window_kv_start_idx = (
            self.update_sliding_window_buffer(
                torch.zeros(bs + 1, dtype=torch.int32, device=dev),
                self.req_to_token,
                self.sliding_window_size,
                prefix_lens,
                fb.req_pool_indices,
                bs,
                token_to_kv_pool=self.token_to_kv_pool,
                window_kv_indices=torch.empty(max(window, 1), dtype=torch.int32, device=dev),
            )
        )
        return ExtendMetadata(
            qo_indptr=_indptr(extend_lens),
            max_extend_len=max(fb.extend_seq_lens_cpu),
            kv_indptr=kv_indptr,
            kv_indices=kv_indices,
            prefix_lens=prefix_lens,
            zeros=zeros,
            window_kv_indptr=window_kv_indptr,
            window_kv_indices=window_kv_indices,
            window_kv_start_idx=window_kv_start_idx,
        )

    def update_sliding_window_buffer(
        self,
        window_kv_indptr: IndPtr,
        req_to_token: ReqToToken,
        sliding_window_size: int,
        seq_lens: PerRequest32,
        req_pool_indices: PerRequest,
        bs: int,
        token_to_kv_pool: SWAKVPool | None = None,
        window_kv_indices: SlotList | None = None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Indices of each request's last ``min(seq_len, window + 1)`` tokens, in SWA space.

        ``window_kv_indices`` is freshly computed, not the batch's ``out_cache_loc``,
        so its translation is bracketed by invalidations (#26152, I7): the first
        drops any earlier entry, the second leaves no entry a later lookup could hit.
        """
        assert window_kv_indices is not None
        window_kv_lens = torch.clamp(seq_lens, max=sliding_window_size + 1).to(torch.int32)
        window_kv_indptr[1 : bs + 1] = torch.cumsum(window_kv_lens, 0)
        window_kv_indptr = window_kv_indptr[: bs + 1]
        window_kv_start_idx = (seq_lens - window_kv_lens).to(torch.int32)
        create_kv_indices(
            req_to_token, req_pool_indices, window_kv_start_idx, window_kv_indptr, window_kv_indices
        )
        if token_to_kv_pool is not None:
            kv_last_index = int(window_kv_indptr[-1])  # host sync: never inside a captured graph
            bracket = self.inject_bug != "fresh-translation-without-flush"
            if bracket:
                token_to_kv_pool.invalidate_loc_cache()
            window_kv_indices[:kv_last_index] = token_to_kv_pool.translate_loc_from_full_to_swa(
                window_kv_indices[:kv_last_index]
            )
            if bracket:
                token_to_kv_pool.invalidate_loc_cache()
        return window_kv_indptr, window_kv_indices, window_kv_lens, window_kv_start_idx

    # -- CUDA-graph metadata: fixed-address buffers -----------------------------------

    def init_cuda_graph_state(self, max_bs: int) -> None:
        ctx = self.req_to_token.shape[1]
        dev = self.device
        self.cuda_graph_kv_indptr = torch.zeros(max_bs + 1, dtype=torch.int32, device=dev)
        self.cuda_graph_kv_indices = torch.zeros(max_bs * ctx, dtype=torch.int32, device=dev)
        self.cuda_graph_window_kv_indptr = torch.zeros(max_bs + 1, dtype=torch.int32, device=dev)
        self.cuda_graph_window_kv_indices = torch.zeros(
            max_bs * (self.sliding_window_size + 1), dtype=torch.int32, device=dev
        )

    def init_forward_metadata_capture_cuda_graph(
        self, bs: int, req_pool_indices: PerRequest, seq_lens: PerRequest32
    ) -> DecodeMetadata:
        """Metadata for capturing a decode graph of ``bs``: views of the static buffers."""
        return self._fill_decode_metadata(
            bs,
            req_pool_indices,
            seq_lens,
            self.cuda_graph_kv_indptr,
            self.cuda_graph_kv_indices,
            self.cuda_graph_window_kv_indptr,
            self.cuda_graph_window_kv_indices,
        )

    def init_forward_metadata_replay_cuda_graph(
        self, bs: int, req_pool_indices: PerRequest, seq_lens: PerRequest32
    ) -> None:
        """Rewrite the static buffers in place for this replay."""
        self.init_forward_metadata_capture_cuda_graph(bs, req_pool_indices, seq_lens)

    # -- attention ----------------------------------------------------------------------

    def forward(
        self,
        q: QHeads,
        k: KVHeads,
        v: KVHeads,
        layer_id: int,
        forward_batch: ForwardBatch,
    ) -> QHeads:
        """Store the new K/V, then attend: SWA layers over the window, full layers over all."""
        pool = self.token_to_kv_pool
        pool.set_kv_buffer(
            layer_id,
            forward_batch.out_cache_loc,
            k,
            v,
            out_cache_loc_swa=forward_batch.out_cache_loc_swa,
        )
        is_swa = pool.layers_mapping[layer_id][1]
        k_buf, v_buf = pool.get_key_buffer(layer_id), pool.get_value_buffer(layer_id)
        o = torch.empty_like(q)
        md = forward_batch.attn_metadata
        if forward_batch.forward_mode is ForwardMode.DECODE:
            indptr, indices = (
                (md.window_kv_indptr, md.window_kv_indices)
                if is_swa
                else (md.kv_indptr, md.kv_indices)
            )
            decode_attention_fwd(
                q, k_buf, v_buf, o, indptr, indices, self.sm_scale, self.num_kv_splits
            )
        else:
            extend_attention_fwd(
                q,
                k,
                v,
                o,
                k_buf,
                v_buf,
                md.qo_indptr,
                md.window_kv_indptr if is_swa else md.kv_indptr,
                md.window_kv_indices if is_swa else md.kv_indices,
                md.window_kv_start_idx if is_swa else md.zeros,
                md.prefix_lens,
                md.max_extend_len,
                self.sm_scale,
                self.sliding_window_size if is_swa else None,
            )
        return o
