"""An SWA allocator whose `clear()` loses the mapping's sentinel row (I11)."""

import torch


class SWATokenToKVPoolAllocator:
    def __init__(self, size: int, page_size: int, device: str = "cpu"):
        # The trailing -1 row: a last_loc of -1 (no prefix) must translate to -1.
        self.full_to_swa_index_mapping = torch.cat(
            [
                torch.zeros(size + page_size, dtype=torch.int64, device=device),
                torch.tensor([-1], dtype=torch.int64, device=device),
            ]
        )
        self.clear()

    def clear(self) -> None:
        # BUG: zeroes the trailing -1 row too; such a request's SWA last_loc becomes slot 0
        self.full_to_swa_index_mapping.fill_(0)
