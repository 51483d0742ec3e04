"""Triton kernels over a paged KV cache (page size 1): index building, decode, extend.

Kernels only; the attention backend decides what to pass. Location arguments are
int32 slot numbers into a pool whose slot 0 is the padding sentinel. Importing
this module imports triton: set ``TRITON_INTERPRET=1`` before that to run on CPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from swacheck.reference_impl.tensor_types import (
    IndPtr,
    KVBuffer,
    KVHeads,
    PerRequest32,
    QHeads,
    ReqToToken,
    SlotList,
)


def _dot_precision(dtype: torch.dtype) -> str:
    # fp32 must not silently drop to tf32, or the oracle comparison loses three digits.
    return "ieee" if dtype == torch.float32 else "tf32"


@triton.jit
def _create_kv_indices_kernel(
    req_to_token,
    req_pool_indices,
    kv_start_idx,
    kv_indptr,
    kv_indices,
    stride_req: tl.constexpr,
    BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    req = tl.load(req_pool_indices + b).to(tl.int64)
    start = tl.load(kv_start_idx + b).to(tl.int64)
    out_start = tl.load(kv_indptr + b).to(tl.int64)
    length = tl.load(kv_indptr + b + 1).to(tl.int64) - out_start
    for off in range(0, length, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        mask = offs < length
        loc = tl.load(req_to_token + req * stride_req + start + offs, mask=mask)
        tl.store(kv_indices + out_start + offs, loc, mask=mask)


def create_kv_indices(
    req_to_token: ReqToToken,
    req_pool_indices: Tensor,
    kv_start_idx: PerRequest32,
    kv_indptr: IndPtr,
    kv_indices: SlotList,
) -> None:
    """``kv_indices[indptr[b]:indptr[b+1]] = req_to_token[req[b], start[b]:...]`` (no host sync)."""
    bs = req_pool_indices.numel()
    _create_kv_indices_kernel[(bs,)](
        req_to_token,
        req_pool_indices,
        kv_start_idx,
        kv_indptr,
        kv_indices,
        req_to_token.stride(0),
        BLOCK=128,
    )


@triton.jit
def _decode_stage1_kernel(
    Q,
    K_Buffer,
    V_Buffer,
    kv_indptr,
    kv_indices,
    Mid_O,
    Mid_Lse,
    Out,
    sm_scale,
    stride_qb,
    stride_qh,
    stride_ob,
    stride_oh,
    stride_buf_s,
    stride_buf_h,
    stride_mid_b,
    stride_mid_h,
    stride_mid_s,
    KV_GROUP: tl.constexpr,
    NUM_KV_SPLITS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr,
):
    # Integer arithmetic in int64 throughout (also spares the interpreter's overflow checks).
    b = tl.program_id(0).to(tl.int64)
    kv_head = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2).to(tl.int64)
    offs_g = tl.arange(0, BLOCK_H)
    mask_g = offs_g < KV_GROUP
    heads = kv_head * KV_GROUP + offs_g
    offs_d = tl.arange(0, HEAD_DIM)

    kv_start = tl.load(kv_indptr + b).to(tl.int64)
    kv_len = tl.load(kv_indptr + b + 1).to(tl.int64) - kv_start
    split_len = (kv_len + NUM_KV_SPLITS - 1) // NUM_KV_SPLITS
    lo = split * split_len
    hi = tl.minimum(lo + split_len, kv_len)

    if hi > lo:
        q = tl.load(
            Q + b * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
            mask=mask_g[:, None],
            other=0.0,
        )
        m_i = tl.full([BLOCK_H], -1e30, dtype=tl.float32)
        l_i = tl.full([BLOCK_H], 0.0, dtype=tl.float32)
        acc = tl.full([BLOCK_H, HEAD_DIM], 0.0, dtype=tl.float32)
        for start_n in range(lo, hi, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            mask_n = offs_n < hi
            loc = tl.load(kv_indices + kv_start + offs_n, mask=mask_n, other=0).to(tl.int64)
            kv_off = loc[:, None] * stride_buf_s + kv_head * stride_buf_h + offs_d[None, :]
            k = tl.load(K_Buffer + kv_off, mask=mask_n[:, None], other=0.0)
            v = tl.load(V_Buffer + kv_off, mask=mask_n[:, None], other=0.0)
            qk = tl.dot(q, tl.trans(k), input_precision=PRECISION) * sm_scale
            qk = tl.where(mask_n[None, :], qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(qk - m_new[:, None])
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
            l_i = l_i * alpha + tl.sum(p, 1)
            m_i = m_new
        if NUM_KV_SPLITS == 1:  # nothing to merge: write the output directly
            out = b * stride_ob + heads * stride_oh
            tl.store(
                Out + out[:, None] + offs_d[None, :],
                (acc / l_i[:, None]).to(Out.dtype.element_ty),
                mask=mask_g[:, None],
            )
        else:
            mid = b * stride_mid_b + heads * stride_mid_h + split * stride_mid_s
            tl.store(
                Mid_O + mid[:, None] * HEAD_DIM + offs_d[None, :],
                acc / l_i[:, None],
                mask=mask_g[:, None],
            )
            tl.store(Mid_Lse + mid, m_i + tl.log(l_i), mask=mask_g)


@triton.jit
def _decode_stage2_kernel(
    Mid_O,
    Mid_Lse,
    Out,
    kv_indptr,
    stride_mid_b,
    stride_mid_h,
    stride_mid_s,
    stride_ob,
    stride_oh,
    NUM_KV_SPLITS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_len = tl.load(kv_indptr + b + 1).to(tl.int64) - tl.load(kv_indptr + b)
    split_len = (kv_len + NUM_KV_SPLITS - 1) // NUM_KV_SPLITS
    m_i = -1e30
    l_i = 0.0
    acc = tl.full([HEAD_DIM], 0.0, dtype=tl.float32)
    for split in range(0, NUM_KV_SPLITS):
        lo = split * split_len
        hi = tl.minimum(lo + split_len, kv_len)
        if hi > lo:
            mid = b * stride_mid_b + h * stride_mid_h + split * stride_mid_s
            o_split = tl.load(Mid_O + mid * HEAD_DIM + offs_d)
            lse = tl.load(Mid_Lse + mid)
            m_new = tl.maximum(lse, m_i)
            alpha = tl.exp(m_i - m_new)
            w = tl.exp(lse - m_new)
            acc = acc * alpha + w * o_split
            l_i = l_i * alpha + w
            m_i = m_new
    tl.store(Out + b * stride_ob + h * stride_oh + offs_d, (acc / l_i).to(Out.dtype.element_ty))


def decode_attention_fwd(
    q: QHeads,
    k_buffer: KVBuffer,
    v_buffer: KVBuffer,
    o: QHeads,
    kv_indptr: IndPtr,
    kv_indices: SlotList,
    sm_scale: float,
    num_kv_splits: int = 4,
    block_n: int = 32,
    num_warps: int = 4,
    num_stages: int = 2,
) -> None:
    """One query token per request over the slots ``kv_indices[indptr[b]:indptr[b+1]]``.

    Split-KV (flash-decoding): stage 1 reduces each split, stage 2 merges them.
    No masking: the caller's index list is the window (causality is implied).
    """
    assert k_buffer.stride() == v_buffer.stride()
    bs, q_heads, head_dim = q.shape
    kv_heads = k_buffer.shape[1]
    group = q_heads // kv_heads
    mid_o = torch.empty(
        (bs, q_heads, num_kv_splits, head_dim), dtype=torch.float32, device=q.device
    )
    mid_lse = torch.empty((bs, q_heads, num_kv_splits), dtype=torch.float32, device=q.device)
    _decode_stage1_kernel[(bs, kv_heads, num_kv_splits)](
        q,
        k_buffer,
        v_buffer,
        kv_indptr,
        kv_indices,
        mid_o,
        mid_lse,
        o,
        sm_scale,
        q.stride(0),
        q.stride(1),
        o.stride(0),
        o.stride(1),
        k_buffer.stride(0),
        k_buffer.stride(1),
        mid_lse.stride(0),
        mid_lse.stride(1),
        mid_lse.stride(2),
        KV_GROUP=group,
        NUM_KV_SPLITS=num_kv_splits,
        HEAD_DIM=head_dim,
        BLOCK_H=max(16, triton.next_power_of_2(group)),
        BLOCK_N=block_n,
        PRECISION=_dot_precision(q.dtype),
        num_warps=num_warps,
        num_stages=num_stages,
    )
    if num_kv_splits == 1:
        return
    _decode_stage2_kernel[(bs, q_heads)](
        mid_o,
        mid_lse,
        o,
        kv_indptr,
        mid_lse.stride(0),
        mid_lse.stride(1),
        mid_lse.stride(2),
        o.stride(0),
        o.stride(1),
        NUM_KV_SPLITS=num_kv_splits,
        HEAD_DIM=head_dim,
    )


@triton.jit
def _extend_kernel(
    Q,
    K,
    V,
    Out,
    K_Buffer,
    V_Buffer,
    qo_indptr,
    kv_indptr,
    kv_indices,
    prefix_start,
    prefix_lens,
    sm_scale,
    sliding_window,
    stride_qt,
    stride_qh,
    stride_kt,
    stride_kh,
    stride_ot,
    stride_oh,
    stride_buf_s,
    stride_buf_h,
    KV_GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    IS_SWA: tl.constexpr,
    PRECISION: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    blk = tl.program_id(2).to(tl.int64)
    kv_head = head // KV_GROUP
    q_start = tl.load(qo_indptr + b).to(tl.int64)
    q_len = tl.load(qo_indptr + b + 1).to(tl.int64) - q_start
    if blk * BLOCK_M < q_len:
        kv_start = tl.load(kv_indptr + b).to(tl.int64)
        kv_len = tl.load(kv_indptr + b + 1).to(tl.int64) - kv_start
        pos0 = tl.load(prefix_start + b).to(tl.int64)  # position of the first prefix entry
        q_pos0 = tl.load(prefix_lens + b).to(tl.int64)  # position of the first new token
        offs_d = tl.arange(0, HEAD_DIM)
        offs_m = blk * BLOCK_M + tl.arange(0, BLOCK_M)
        mask_m = offs_m < q_len
        q = tl.load(
            Q + (q_start + offs_m)[:, None] * stride_qt + head * stride_qh + offs_d[None, :],
            mask=mask_m[:, None],
            other=0.0,
        )
        q_pos = q_pos0 + offs_m
        m_i = tl.full([BLOCK_M], -1e30, dtype=tl.float32)
        l_i = tl.full([BLOCK_M], 0.0, dtype=tl.float32)
        acc = tl.full([BLOCK_M, HEAD_DIM], 0.0, dtype=tl.float32)

        # Cached prefix, read from the pool through slot indices.
        for start_n in range(0, kv_len, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            mask_n = offs_n < kv_len
            loc = tl.load(kv_indices + kv_start + offs_n, mask=mask_n, other=0).to(tl.int64)
            kv_off = loc[:, None] * stride_buf_s + kv_head * stride_buf_h + offs_d[None, :]
            k = tl.load(K_Buffer + kv_off, mask=mask_n[:, None], other=0.0)
            v = tl.load(V_Buffer + kv_off, mask=mask_n[:, None], other=0.0)
            qk = tl.dot(q, tl.trans(k), input_precision=PRECISION) * sm_scale
            keep = mask_n[None, :]  # rows past q_len stay finite; their stores are masked
            if IS_SWA:
                keep = keep & ((q_pos[:, None] - (pos0 + offs_n)[None, :]) <= sliding_window)
            qk = tl.where(keep, qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(qk - m_new[:, None])
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
            l_i = l_i * alpha + tl.sum(p, 1)
            m_i = m_new

        # New tokens, read from the extend tensors, causally masked.
        end_n = tl.minimum((blk + 1) * BLOCK_M, q_len)
        for start_n in range(0, end_n, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            mask_n = offs_n < end_n
            kv_off = (q_start + offs_n)[:, None] * stride_kt + kv_head * stride_kh + offs_d[None, :]
            k = tl.load(K + kv_off, mask=mask_n[:, None], other=0.0)
            v = tl.load(V + kv_off, mask=mask_n[:, None], other=0.0)
            qk = tl.dot(q, tl.trans(k), input_precision=PRECISION) * sm_scale
            keep = mask_n[None, :] & (offs_m[:, None] >= offs_n[None, :])
            if IS_SWA:
                keep = keep & ((offs_m[:, None] - offs_n[None, :]) <= sliding_window)
            qk = tl.where(keep, qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(qk - m_new[:, None])
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
            l_i = l_i * alpha + tl.sum(p, 1)
            m_i = m_new

        # Rows past q_len may have no visible key (l_i == 0); keep them finite.
        tl.store(
            Out + (q_start + offs_m)[:, None] * stride_ot + head * stride_oh + offs_d[None, :],
            (acc / tl.maximum(l_i, 1e-30)[:, None]).to(Out.dtype.element_ty),
            mask=mask_m[:, None],
        )


def extend_attention_fwd(
    q: QHeads,
    k: KVHeads,
    v: KVHeads,
    o: QHeads,
    k_buffer: KVBuffer,
    v_buffer: KVBuffer,
    qo_indptr: IndPtr,
    kv_indptr: IndPtr,
    kv_indices: SlotList,
    prefix_start: PerRequest32,
    prefix_lens: PerRequest32,
    max_extend_len: int,
    sm_scale: float,
    sliding_window: int | None,
) -> None:
    """Prefill new tokens against a cached prefix (from the pool) and themselves (causal).

    Prefix entry ``n`` of request ``b`` sits at position ``prefix_start[b] + n``;
    new token ``i`` at ``prefix_lens[b] + i``. With ``sliding_window`` a query at
    ``p`` sees keys at ``j`` with ``p - j <= sliding_window``.
    """
    assert k.stride() == v.stride() and k_buffer.stride() == v_buffer.stride()
    bs = qo_indptr.numel() - 1
    q_heads, head_dim = q.shape[1], q.shape[2]
    block_m = 16
    grid = (bs, q_heads, triton.cdiv(max(max_extend_len, 1), block_m))
    _extend_kernel[grid](
        q,
        k,
        v,
        o,
        k_buffer,
        v_buffer,
        qo_indptr,
        kv_indptr,
        kv_indices,
        prefix_start,
        prefix_lens,
        sm_scale,
        -1 if sliding_window is None else sliding_window,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        o.stride(0),
        o.stride(1),
        k_buffer.stride(0),
        k_buffer.stride(1),
        KV_GROUP=q_heads // k.shape[1],
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=16,
        IS_SWA=sliding_window is not None,
        PRECISION=_dot_precision(q.dtype),
    )
