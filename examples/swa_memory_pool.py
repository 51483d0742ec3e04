"""A hybrid-SWA KV pool with the bugs of SGLang PRs #25824 and #24138 (for swacheck's examples)."""

import torch


class SWAKVPool:
    def __init__(self, size: int, size_swa: int, device: str = "cpu"):
        self.size = size
        self.size_swa = size_swa
        # The full->SWA table may be int64; the trailing row maps -1 to -1.
        self.full_to_swa_index_mapping = torch.empty(size + 1, dtype=torch.int64, device=device)
        self.full_to_swa_index_mapping[-1] = -1
        self.swa_loc = None
        self._cached_loc_key = None
        self._cached_swa_loc = None

    def invalidate_loc_cache(self) -> None:
        self._cached_loc_key = None
        self._cached_swa_loc = None

    def set_swa_loc(self, swa_loc: torch.Tensor) -> None:
        # per-batch state stored on the long-lived pool and never cleared (#24138 review)
        self.swa_loc = swa_loc

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        # BUG: views at different offsets of one storage share this key (#25824)
        key = (kv_indices.untyped_storage().data_ptr(), kv_indices.numel())
        if key != self._cached_loc_key:
            # BUG: the gather stays int64
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices]
            self._cached_loc_key = key
        return self._cached_swa_loc

    def set_full_to_swa_mapping(self, full_loc: torch.Tensor, swa_loc: torch.Tensor) -> None:
        self.full_to_swa_index_mapping[full_loc] = swa_loc.to(torch.int64)
        self.invalidate_loc_cache()

    def free_swa(self, free_index: torch.Tensor) -> None:
        # BUG: the mapping changes but the memoised translation survives
        self.full_to_swa_index_mapping[free_index] = 0

    def set_kv_buffer(self, layer_id: int, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        if self.swa_loc is not None:
            loc = self.swa_loc
        else:
            loc = self.translate_loc_from_full_to_swa(loc)
        return loc
