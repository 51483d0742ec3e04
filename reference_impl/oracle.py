"""Dense oracle: recompute a request from its whole token sequence with explicit masks.

No pools, no translation, no kernels, no graphs: plain PyTorch attention with a
causal mask, and a window mask on SWA layers. The paged path must match it.
"""

from __future__ import annotations

import torch

from swacheck.reference_impl.model import TinyHybridModel
from swacheck.reference_impl.tensor_types import Logits

# Max |logit difference| accepted per model dtype (logits are O(1)-O(10)).
TOLERANCE: dict[torch.dtype, float] = {
    torch.float32: 2e-3,
    torch.float16: 5e-2,
    torch.bfloat16: 2.5e-1,
}


def tolerance_for(dtype: torch.dtype) -> float:
    return TOLERANCE[dtype]


class DenseOracle:
    def __init__(self, model: TinyHybridModel) -> None:
        self.model = model

    @torch.no_grad()
    def logits(self, tokens: list[int]) -> Logits:
        """Logits at every position of ``tokens`` (fp32)."""
        model, c = self.model, self.model.config
        dev = model.embed.weight.device
        ids = torch.tensor(tokens, dtype=torch.int64, device=dev)
        pos = torch.arange(len(tokens), device=dev)
        dist = pos[:, None] - pos[None, :]  # query position - key position
        causal = dist >= 0
        window = causal & (dist <= c.sliding_window)
        group = c.num_heads // c.num_kv_heads
        hidden = model.embed(ids)
        for layer in model.layers:
            q, k, v = layer.qkv(hidden, pos)
            k = k.float().repeat_interleave(group, dim=1)
            v = v.float().repeat_interleave(group, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q.float(), k) * c.head_dim**-0.5
            mask = window if layer.is_swa else causal
            probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
            out = torch.einsum("hqk,khd->qhd", probs, v).to(hidden.dtype)
            hidden = layer.finish(hidden, out)
        return model.logits(hidden)
