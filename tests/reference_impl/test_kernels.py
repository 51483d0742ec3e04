"""Triton kernels against PyTorch references (interpreter on CPU, compiled on GPU)."""

import pytest
import torch

from swacheck.reference_impl.triton_kernels import (
    create_kv_indices,
    decode_attention_fwd,
    extend_attention_fwd,
)

DEV = "cuda" if torch.cuda.is_available() else "cpu"
H, HKV, D = 4, 2, 16


def _attend(q, k, v, q_pos, k_pos, window):
    """Dense reference: q [t, H, D], k/v [s, HKV, D], explicit causal/window mask."""
    k = k.float().repeat_interleave(H // HKV, 1)
    v = v.float().repeat_interleave(H // HKV, 1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) * D**-0.5
    dist = q_pos[:, None] - k_pos[None, :]
    mask = dist >= 0
    if window is not None:
        mask &= dist <= window
    probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return torch.einsum("hqk,khd->qhd", probs, v)


def _csr(lens):
    indptr = torch.zeros(len(lens) + 1, dtype=torch.int32, device=DEV)
    indptr[1:] = torch.tensor(lens, device=DEV).cumsum(0)
    return indptr


@pytest.mark.parametrize("num_kv_splits", [1, 3])
def test_decode_matches_reference(num_kv_splits):
    gen = torch.Generator().manual_seed(0)
    slots, lens = 80, [1, 9, 37]
    kb = torch.randn(slots, HKV, D, generator=gen).to(DEV)
    vb = torch.randn(slots, HKV, D, generator=gen).to(DEV)
    q = torch.randn(len(lens), H, D, generator=gen).to(DEV)
    indices = (torch.randperm(slots - 1, generator=gen)[: sum(lens)] + 1).to(DEV, torch.int32)
    indptr = _csr(lens)
    out = torch.empty_like(q)
    decode_attention_fwd(q, kb, vb, out, indptr, indices, D**-0.5, num_kv_splits, block_n=16)
    for b, n in enumerate(lens):
        idx = indices[indptr[b] : indptr[b + 1]].long()
        pos = torch.arange(n, device=DEV)
        ref = _attend(q[b : b + 1], kb[idx], vb[idx], pos[-1:], pos, None)
        torch.testing.assert_close(out[b : b + 1], ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("window", [None, 3])
def test_extend_with_prefix_matches_reference(window):
    """Chunked prefill: new tokens attend to a cached prefix (via slot indices) and themselves."""
    gen = torch.Generator().manual_seed(1)
    slots, prefix, new = 64, [0, 5, 11], [7, 2, 18]
    kb = torch.randn(slots, HKV, D, generator=gen).to(DEV)
    vb = torch.randn(slots, HKV, D, generator=gen).to(DEV)
    t = sum(new)
    q = torch.randn(t, H, D, generator=gen).to(DEV)
    k = torch.randn(t, HKV, D, generator=gen).to(DEV)
    v = torch.randn(t, HKV, D, generator=gen).to(DEV)
    # SWA layers read only the prefix's window: the last min(p, window + 1) entries.
    starts = [0 if window is None else max(p - window - 1, 0) for p in prefix]
    plens = [p - s for p, s in zip(prefix, starts, strict=True)]
    indices = (torch.randperm(slots - 1, generator=gen)[: sum(plens)] + 1).to(DEV, torch.int32)
    kv_indptr, qo_indptr = _csr(plens), _csr(new)
    out = torch.empty_like(q)
    extend_attention_fwd(
        q,
        k,
        v,
        out,
        kb,
        vb,
        qo_indptr,
        kv_indptr,
        indices,
        torch.tensor(starts, dtype=torch.int32, device=DEV),
        torch.tensor(prefix, dtype=torch.int32, device=DEV),
        max(new),
        D**-0.5,
        window,
    )
    for b in range(len(new)):
        idx = indices[kv_indptr[b] : kv_indptr[b + 1]].long()
        qs = slice(int(qo_indptr[b]), int(qo_indptr[b + 1]))
        k_all = torch.cat((kb[idx], k[qs]))
        v_all = torch.cat((vb[idx], v[qs]))
        k_pos = torch.arange(starts[b], prefix[b] + new[b], device=DEV)
        q_pos = torch.arange(prefix[b], prefix[b] + new[b], device=DEV)
        ref = _attend(q[qs], k_all, v_all, q_pos, k_pos, window)
        torch.testing.assert_close(out[qs], ref, atol=1e-5, rtol=1e-5)


def test_create_kv_indices_gathers_rows():
    req_to_token = torch.arange(5 * 12, dtype=torch.int32, device=DEV).view(5, 12)
    reqs = torch.tensor([3, 1], device=DEV)
    starts = torch.tensor([2, 0], dtype=torch.int32, device=DEV)
    indptr = _csr([4, 3])
    out = torch.full((7,), -7, dtype=torch.int32, device=DEV)
    create_kv_indices(req_to_token, reqs, starts, indptr, out)
    expected = torch.cat((req_to_token[3, 2:6], req_to_token[1, 0:3]))
    assert torch.equal(out, expected)
