"""KV memory for a hybrid SWA model: full pool, SWA pool, full→SWA mapping, req→token table.

Conventions (SGLang's):

- Slot 0 of each pool is the padding sentinel. Padded CUDA-graph tokens write
  there, so it never holds a live token; allocators never hand it out.
- ``full_to_swa_index_mapping`` is int64 with one entry per full-pool row plus
  one: entry ``i`` is the SWA slot of full slot ``i`` (0 when the token has no
  SWA slot, i.e. it left the window), and the trailing entry is ``-1`` so that
  translating ``-1`` yields ``-1``.
- Full-space locations are int64 (``out_cache_loc``); SWA-space locations are
  int32 everywhere (I3); ``req_to_token`` is int32.
- ``set_kv_buffer`` takes a layer id (not a layer object):
  ``set_kv_buffer(layer_id, loc, cache_k, cache_v, out_cache_loc_swa=None)``.

The pool is also the allocator (``alloc``/``free``/``free_swa``/``clear``), so
every mapping mutation point and the translation cache live on one object, the
one the sanitizer wraps.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import Tensor

from swacheck.reference_impl.bugs import validate_bug
from swacheck.reference_impl.tensor_types import (
    AnyLoc,
    FullLoc,
    IndexMapping,
    KVBuffer,
    KVHeads,
    ReqToToken,
    SwaLoc,
)

logger = logging.getLogger(__name__)


class ReqToTokenPool:
    """Request→token table: ``req_to_token[r, p]`` is the full slot of token ``p`` of request ``r``.

    Row 0 is reserved for padded CUDA-graph slots and stays all-sentinel.
    """

    def __init__(self, size: int, max_context_len: int, device: torch.device | str) -> None:
        self.size = size
        self.max_context_len = max_context_len
        self.req_to_token: ReqToToken = torch.zeros(
            (size + 1, max_context_len), dtype=torch.int32, device=device
        )
        self._free: list[int] = list(range(1, size + 1))

    def available_size(self) -> int:
        return len(self._free)

    def alloc(self) -> int | None:
        """Return a free request row, or ``None`` when the table is full."""
        return self._free.pop(0) if self._free else None

    def free(self, req_pool_idx: int) -> None:
        self.req_to_token[req_pool_idx].zero_()
        self._free.append(req_pool_idx)

    def write(self, req_pool_idx: int, start: int, locs: FullLoc) -> None:
        """Record the full slots of tokens ``start .. start + n - 1`` of one request."""
        self.req_to_token[req_pool_idx, start : start + locs.numel()] = locs.to(torch.int32)


class SWAKVPool:
    """Per-layer K/V buffers of a full pool and a (smaller) SWA pool, with the slot allocator.

    ``translate_loc_from_full_to_swa`` memoises one translation per forward,
    keyed on ``(data_ptr(), numel())`` (I2); every mapping mutation invalidates
    it (I1).
    """

    def __init__(
        self,
        size: int,
        size_swa: int,
        swa_layer_ids: Sequence[int],
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device | str,
        inject_bug: str | None = None,
    ) -> None:
        self.size = size
        self.size_swa = size_swa
        self.device = torch.device(device)
        self.dtype = dtype
        self.inject_bug = validate_bug(inject_bug)
        swa = set(swa_layer_ids)
        self.layers_mapping: dict[int, tuple[int, bool]] = {}
        counts = [0, 0]  # full layers, SWA layers
        for layer_id in range(num_layers):
            is_swa = layer_id in swa
            self.layers_mapping[layer_id] = (counts[is_swa], is_swa)
            counts[is_swa] += 1

        def buffers(rows: int, n: int) -> list[Tensor]:
            shape = (rows, num_kv_heads, head_dim)
            return [torch.zeros(shape, dtype=dtype, device=self.device) for _ in range(n)]

        self.full_k_buffer = buffers(size + 1, counts[0])
        self.full_v_buffer = buffers(size + 1, counts[0])
        self.swa_k_buffer = buffers(size_swa + 1, counts[1])
        self.swa_v_buffer = buffers(size_swa + 1, counts[1])

        self._cached_loc_key: tuple[int, int] | None = None
        self._cached_swa_loc: Tensor | None = None
        # Translation statistics; ``loc_key_changes`` counts misses that replaced a live
        # entry without an invalidation in between (the condition SGLang warns about).
        self.loc_cache_hits = 0
        self.loc_cache_misses = 0
        self.loc_key_changes = 0

        self._free_full: FullLoc = torch.arange(1, size + 1, dtype=torch.int64, device=self.device)
        self._free_swa: SwaLoc = torch.arange(
            1, size_swa + 1, dtype=torch.int32, device=self.device
        )
        mapping = torch.zeros(size + 2, dtype=torch.int64, device=self.device)
        mapping[-1] = -1
        self.full_to_swa_index_mapping: IndexMapping
        self.register_mapping(mapping)

    # -- translation cache -------------------------------------------------------------

    def invalidate_loc_cache(self) -> None:
        """Forget the memoised translation; the next lookup gathers afresh."""
        self._cached_loc_key = None
        self._cached_swa_loc = None

    def translate_loc_from_full_to_swa(self, kv_indices: AnyLoc) -> SwaLoc:
        """Full-pool slots → SWA-pool slots (int32), memoised for the current key.

        The key is ``(data_ptr(), numel())``: ``data_ptr()`` includes the view's
        offset, so two slices of one buffer do not collide.
        """
        if self.inject_bug == "storage-pointer-key":
            key = (kv_indices.untyped_storage().data_ptr(), kv_indices.numel())
        else:
            key = (kv_indices.data_ptr(), kv_indices.numel())
        if key == self._cached_loc_key:
            self.loc_cache_hits += 1
            return self._cached_swa_loc
        self.loc_cache_misses += 1
        if self._cached_loc_key is not None:
            self.loc_key_changes += 1
            logger.debug("translate_loc_from_full_to_swa: key changed without invalidation")
        out_dtype = torch.int64 if self.inject_bug == "swa-loc-int64" else torch.int32
        self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices].to(out_dtype)
        self._cached_loc_key = key
        return self._cached_swa_loc

    # -- KV buffers ----------------------------------------------------------------------

    def get_key_buffer(self, layer_id: int) -> KVBuffer:
        idx, is_swa = self.layers_mapping[layer_id]
        return (self.swa_k_buffer if is_swa else self.full_k_buffer)[idx]

    def get_value_buffer(self, layer_id: int) -> KVBuffer:
        idx, is_swa = self.layers_mapping[layer_id]
        return (self.swa_v_buffer if is_swa else self.full_v_buffer)[idx]

    def set_kv_buffer(
        self,
        layer_id: int,
        loc: FullLoc,
        cache_k: KVHeads,
        cache_v: KVHeads,
        out_cache_loc_swa: SwaLoc | None = None,
    ) -> None:
        """Write one layer's new K/V; SWA layers go through SWA-space locations.

        A precomputed ``out_cache_loc_swa`` (the batch's, #24138) wins over the
        memoised translation of ``loc`` (#25824).
        """
        idx, is_swa = self.layers_mapping[layer_id]
        if is_swa:
            swa_loc = (
                out_cache_loc_swa
                if out_cache_loc_swa is not None
                else self.translate_loc_from_full_to_swa(loc)
            )
            self.swa_k_buffer[idx][swa_loc] = cache_k
            self.swa_v_buffer[idx][swa_loc] = cache_v
        else:
            self.full_k_buffer[idx][loc] = cache_k
            self.full_v_buffer[idx][loc] = cache_v

    # -- allocator: every mapping mutation invalidates (I1) ------------------------------

    def available_size(self) -> int:
        return self._free_full.numel()

    def swa_available_size(self) -> int:
        return self._free_swa.numel()

    def alloc(self, n: int) -> FullLoc | None:
        """Give ``n`` tokens a full and an SWA slot each; ``None`` if either pool is short."""
        if n > self._free_full.numel() or n > self._free_swa.numel():
            return None
        full, self._free_full = self._free_full[:n], self._free_full[n:]
        swa, self._free_swa = self._free_swa[:n], self._free_swa[n:]
        self.set_full_to_swa_mapping(full, swa)
        self.invalidate_loc_cache()
        return full

    def set_full_to_swa_mapping(self, full_locs: FullLoc, swa_locs: SwaLoc) -> None:
        """Map ``full_locs`` to ``swa_locs`` (in place: captured graphs hold the tensor)."""
        self.full_to_swa_index_mapping[full_locs] = swa_locs.to(torch.int64)
        self.invalidate_loc_cache()

    def free(self, full_locs: FullLoc) -> None:
        """Free finished tokens: their full slots and any SWA slots they still hold."""
        if full_locs.numel() == 0:
            return
        self._release_swa(full_locs)
        self._free_full = torch.cat((self._free_full, full_locs.to(torch.int64)))
        self.invalidate_loc_cache()

    def free_swa(self, full_locs: FullLoc) -> None:
        """Free the SWA slots of tokens that left the window; their full slots stay."""
        if full_locs.numel() == 0:
            return
        self._release_swa(full_locs)
        if self.inject_bug != "missing-invalidation":
            self.invalidate_loc_cache()

    def _release_swa(self, full_locs: Tensor) -> None:
        swa = self.full_to_swa_index_mapping[full_locs]
        self._free_swa = torch.cat((self._free_swa, swa[swa > 0].to(torch.int32)))
        self.full_to_swa_index_mapping[full_locs] = 0

    def clear(self) -> None:
        """Return every slot to the free lists and unmap every token."""
        self._free_full = torch.arange(1, self.size + 1, dtype=torch.int64, device=self.device)
        self._free_swa = torch.arange(1, self.size_swa + 1, dtype=torch.int32, device=self.device)
        self.full_to_swa_index_mapping[:-1] = 0
        self.invalidate_loc_cache()

    def register_mapping(self, mapping: IndexMapping) -> None:
        """Install ``mapping`` as the full→SWA table (shape ``[size + 2]``, last entry ``-1``)."""
        if mapping.dtype != torch.int64 or mapping.shape != (self.size + 2,):
            raise ValueError(
                f"mapping must be int64 of shape ({self.size + 2},), "
                f"got {mapping.dtype} {tuple(mapping.shape)}"
            )
        self.full_to_swa_index_mapping = mapping
        self.invalidate_loc_cache()
