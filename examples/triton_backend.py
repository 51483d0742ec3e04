"""Sliding-window metadata with the bug fixed by SGLang PR #26152 (no flush around translation)."""

import torch


def update_sliding_window_buffer(
    window_kv_indptr,
    req_to_token,
    sliding_window_size,
    seq_lens,
    req_pool_indices,
    bs,
    token_to_kv_pool=None,
    window_kv_indices=None,
):
    window_kv_lens = torch.minimum(seq_lens, torch.tensor(sliding_window_size))
    window_kv_indptr[1 : bs + 1] = torch.cumsum(window_kv_lens, dim=0)
    if hasattr(token_to_kv_pool, "translate_loc_from_full_to_swa"):
        kv_last_index = window_kv_indptr[-1]
        # BUG: window_kv_indices is freshly computed; translating it without
        # invalidate_loc_cache() before and after warns and leaves a cache entry behind
        window_kv_indices[:kv_last_index] = token_to_kv_pool.translate_loc_from_full_to_swa(
            window_kv_indices[:kv_last_index]
        )
    return window_kv_indptr, window_kv_indices, window_kv_lens
