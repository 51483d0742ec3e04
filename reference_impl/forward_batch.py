"""The per-forward batch description passed from the model runner to every component.

Per-batch state (``out_cache_loc_swa``, attention metadata) travels here, never
in long-lived attributes of the pool or the backend (I8).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any

from swacheck.reference_impl.tensor_types import AnyLoc, PerRequest, PerRequest32, TokenIds


class ForwardMode(enum.Enum):
    EXTEND = "extend"  # prefill, possibly with a cached prefix (chunked prefill)
    DECODE = "decode"  # one new token per request


@dataclass
class ForwardBatch:
    forward_mode: ForwardMode
    batch_size: int
    input_ids: TokenIds
    req_pool_indices: PerRequest
    seq_lens: PerRequest32  # KV length per request after this forward
    seq_lens_cpu: list[int]
    positions: TokenIds
    out_cache_loc: TokenIds  # full-pool slots of the new tokens
    # SWA-pool slots of the new tokens when precomputed (#23552/#24138); None: translate (#25824).
    out_cache_loc_swa: AnyLoc | None = None
    extend_prefix_lens_cpu: list[int] | None = None
    extend_seq_lens_cpu: list[int] | None = None
    attn_metadata: Any = None  # set by the attention backend's init_forward_metadata*
    # Two-batch overlap: micro-batches run layer-interleaved within this one forward.
    tbo_children: list[ForwardBatch] = field(default_factory=list)

    def split_for_two_batch_overlap(self) -> None:
        """Split an extend batch by requests into two micro-batches (views, not copies).

        The children's ``out_cache_loc`` are two slices of this batch's tensor, so
        they share one storage at different offsets: the case the (data_ptr, numel)
        cache key exists for.
        """
        assert self.forward_mode is ForwardMode.EXTEND and self.batch_size >= 2
        assert self.extend_seq_lens_cpu is not None and self.extend_prefix_lens_cpu is not None
        half = self.batch_size // 2
        cut = sum(self.extend_seq_lens_cpu[:half])
        self.tbo_children = [
            self._child(slice(0, half), slice(0, cut)),
            self._child(slice(half, self.batch_size), slice(cut, self.input_ids.numel())),
        ]

    def _child(self, reqs: slice, tokens: slice) -> ForwardBatch:
        assert self.extend_seq_lens_cpu is not None and self.extend_prefix_lens_cpu is not None
        return replace(
            self,
            batch_size=reqs.stop - reqs.start,
            input_ids=self.input_ids[tokens],
            req_pool_indices=self.req_pool_indices[reqs],
            seq_lens=self.seq_lens[reqs],
            seq_lens_cpu=self.seq_lens_cpu[reqs],
            positions=self.positions[tokens],
            out_cache_loc=self.out_cache_loc[tokens],
            out_cache_loc_swa=None
            if self.out_cache_loc_swa is None
            else self.out_cache_loc_swa[tokens],
            extend_prefix_lens_cpu=self.extend_prefix_lens_cpu[reqs],
            extend_seq_lens_cpu=self.extend_seq_lens_cpu[reqs],
            attn_metadata=None,
            tbo_children=[],
        )
