"""A tiny hybrid-SWA decoder: SWA and full attention layers alternate, with GQA, RoPE,
RMSNorm and a gated MLP; random weights from a seed.

Attention is delegated: the paged path passes the Triton backend, the oracle
(``oracle.py``) recomputes it densely; everything else is shared code. With a
tensor-parallel degree above 1 (``tp.py``) the same weights are drawn, then each rank
keeps its shard of the heads and the MLP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn

from swacheck.reference_impl.forward_batch import ForwardBatch, ForwardMode
from swacheck.reference_impl.tensor_types import Logits, TokenIds
from swacheck.reference_impl.tp import TensorParallel


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 128
    hidden_size: int = 64
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 128
    sliding_window: int = 8  # a query at p sees keys at j >= p - sliding_window (SGLang's)
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6

    @property
    def swa_layer_ids(self) -> tuple[int, ...]:
        """Even layers use the sliding window, odd ones full attention."""
        return tuple(range(0, self.num_layers, 2))


class AttentionBackend(Protocol):
    def forward(
        self, q: Tensor, k: Tensor, v: Tensor, layer_id: int, forward_batch: ForwardBatch
    ) -> Tensor: ...


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * self.weight.float()).to(x.dtype)


def apply_rope(x: Tensor, positions: TokenIds, theta: float) -> Tensor:
    """Rotate-half RoPE, computed in fp32."""
    d = x.shape[-1]
    inv_freq = theta ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    angles = positions.float()[:, None] * inv_freq[None, :]
    cos = torch.cat((angles.cos(), angles.cos()), -1)[:, None, :]
    sin = torch.cat((angles.sin(), angles.sin()), -1)[:, None, :]
    x32 = x.float()
    rotated = torch.cat((-x32[..., d // 2 :], x32[..., : d // 2]), -1)
    return (x32 * cos + rotated * sin).to(x.dtype)


def _linear(weight: Tensor) -> nn.Linear:
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    layer.weight = nn.Parameter(weight)
    return layer


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer_id: int) -> None:
        super().__init__()
        c = config
        self.config = c
        self.layer_id = layer_id
        self.is_swa = layer_id in c.swa_layer_ids
        self.tp = TensorParallel()
        self.num_heads = c.num_heads  # this rank's heads (all of them until ``shard``)
        self.num_kv_heads = c.num_kv_heads
        self.input_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.qkv_proj = nn.Linear(
            c.hidden_size, (c.num_heads + 2 * c.num_kv_heads) * c.head_dim, bias=False
        )
        self.o_proj = nn.Linear(c.num_heads * c.head_dim, c.hidden_size, bias=False)
        self.post_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.gate_up_proj = nn.Linear(c.hidden_size, 2 * c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def shard(self, tp: TensorParallel) -> None:
        """Keep this rank's heads and MLP columns: QKV and gate/up split by output, the
        output and down projections by input (their partial sums meet in ``finish``)."""
        c, d = self.config, self.config.head_dim
        self.tp = tp
        self.num_heads = tp.split(c.num_heads, "num_heads")
        self.num_kv_heads = tp.split(c.num_kv_heads, "num_kv_heads")
        q, k, v = self.qkv_proj.weight.data.split(
            [c.num_heads * d, c.num_kv_heads * d, c.num_kv_heads * d]
        )
        self.qkv_proj = _linear(torch.cat([tp.shard(w, 0) for w in (q, k, v)]))
        self.o_proj = _linear(tp.shard(self.o_proj.weight.data, 1))
        gate, up = self.gate_up_proj.weight.data.chunk(2)
        self.gate_up_proj = _linear(torch.cat([tp.shard(gate, 0), tp.shard(up, 0)]))
        self.down_proj = _linear(tp.shard(self.down_proj.weight.data, 1))

    def qkv(self, hidden: Tensor, positions: TokenIds) -> tuple[Tensor, Tensor, Tensor]:
        """Normed input → RoPE'd q ``[t, heads, d]`` and k, v ``[t, kv_heads, d]``."""
        c, d = self.config, self.config.head_dim
        qkv = self.qkv_proj(self.input_norm(hidden))
        q, k, v = qkv.split([self.num_heads * d, self.num_kv_heads * d, self.num_kv_heads * d], -1)
        q = apply_rope(q.view(-1, self.num_heads, d), positions, c.rope_theta)
        k = apply_rope(k.view(-1, self.num_kv_heads, d), positions, c.rope_theta)
        return (
            q.contiguous(),
            k.contiguous(),
            v.reshape(-1, self.num_kv_heads, d).contiguous(),
        )

    def finish(self, hidden: Tensor, attn_out: Tensor) -> Tensor:
        """Residual around attention, then the gated MLP with its residual (each projection
        back to the hidden size summed over the tensor-parallel ranks)."""
        hidden = hidden + self.tp.all_reduce(self.o_proj(attn_out.flatten(1)))
        gate, up = self.gate_up_proj(self.post_norm(hidden)).chunk(2, -1)
        return hidden + self.tp.all_reduce(self.down_proj(nn.functional.silu(gate) * up))

    def forward(self, hidden: Tensor, fb: ForwardBatch, backend: AttentionBackend) -> Tensor:
        q, k, v = self.qkv(hidden, fb.positions)
        return self.finish(hidden, backend.forward(q, k, v, self.layer_id, fb))


class TinyHybridModel(nn.Module):
    def __init__(
        self,
        config: ModelConfig,
        seed: int = 0,
        tp: TensorParallel | None = None,
        *,
        init_device: torch.device | str | None = None,
    ) -> None:
        """``init_device``: build and draw the weights there (in the default dtype) rather
        than on the CPU: a model of realistic size (billions of weights) in seconds. The
        weights then come from that device's generator, not the CPU's."""
        super().__init__()
        self.config = config
        self.seed = seed
        self.tp = tp or TensorParallel()
        device = torch.device(init_device or "cpu")
        with device:
            self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
            self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_layers))
            self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
            self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        gen = torch.Generator(device).manual_seed(seed)
        with torch.no_grad():
            # Unit-variance activations, so attention is far from uniform and a
            # corrupted KV slot moves the logits visibly.
            for p in self.parameters():
                if p.dim() == 2:
                    scale = 1.0 if p is self.embed.weight else p.shape[-1] ** -0.5
                    p.copy_(torch.randn(p.shape, generator=gen, device=device, dtype=p.dtype))
                    p.mul_(scale)
        if self.tp.size > 1:  # drawn whole, then sharded: the ranks hold the dense model's weights
            for layer in self.layers:
                layer.shard(self.tp)

    def unsharded(self) -> TinyHybridModel:
        """The whole model (same seed, device and dtype): what the dense oracle runs."""
        if self.tp.size == 1:
            return self
        weight = self.embed.weight
        return TinyHybridModel(self.config, self.seed).to(weight.device, weight.dtype)

    def logits(self, hidden: Tensor) -> Logits:
        return self.lm_head(self.norm(hidden)).float()

    @torch.no_grad()
    def forward(self, fb: ForwardBatch, backend: AttentionBackend) -> Logits:
        """Logits of each request's last token; micro-batches (two-batch overlap) interleave
        layer by layer, as SGLang's TBO does."""
        batches = fb.tbo_children or [fb]
        hidden = [self.embed(b.input_ids) for b in batches]
        for layer in self.layers:
            hidden = [layer(h, b, backend) for h, b in zip(hidden, batches, strict=True)]
        last = []
        for h, b in zip(hidden, batches, strict=True):
            if b.forward_mode is ForwardMode.DECODE:
                last.append(h)
            else:
                assert b.extend_seq_lens_cpu is not None
                ends = torch.tensor(b.extend_seq_lens_cpu, device=h.device).cumsum(0) - 1
                last.append(h[ends])
        return self.logits(torch.cat(last))
