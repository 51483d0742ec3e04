"""Tensor parallelism for the reference model: which shard of the heads and the MLP a rank
owns, and the all-reduce that puts the shards back together.

Megatron-style: the QKV and gate/up projections are split by output (each rank owns
``num_heads / N`` query heads, ``num_kv_heads / N`` KV heads and ``intermediate_size / N``
MLP columns), the output and down projections by input, so each layer needs one
all-reduce after attention and one after the MLP. Embedding, norms and LM head are
replicated: every rank computes the same logits and samples the same tokens. Each rank
owns its KV pools (its KV heads only), allocator and graph runner; the schedule is
deterministic, so the ranks' allocators agree without talking.

The collectives are torch.distributed's (NCCL on GPUs, gloo on CPU); with a degree of 1
nothing here touches torch.distributed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch.distributed as dist
from torch import Tensor


@dataclass(frozen=True)
class TensorParallel:
    """This rank's place in a tensor-parallel group (``size == 1``: no parallelism)."""

    rank: int = 0
    size: int = 1
    group: dist.ProcessGroup | None = None  # None: the default group

    @classmethod
    def from_group(cls, group: dist.ProcessGroup | None = None) -> TensorParallel:
        """The degree and rank of an initialised process group (the default one unless given)."""
        return cls(dist.get_rank(group), dist.get_world_size(group), group)

    def split(self, n: int, what: str) -> int:
        """This rank's share of ``n`` heads or columns; they must divide evenly."""
        if n % self.size:
            raise ValueError(
                f"{what}={n} is not divisible by the tensor-parallel degree {self.size}"
            )
        return n // self.size

    def shard(self, weight: Tensor, dim: int) -> Tensor:
        """This rank's contiguous block of ``weight`` along ``dim``."""
        return weight.chunk(self.size, dim)[self.rank].clone()

    def all_reduce(self, x: Tensor) -> Tensor:
        """Sum the ranks' partial results in place (identity without parallelism)."""
        if self.size > 1:
            dist.all_reduce(x, group=self.group)
        return x

    def all_equal(self, value: object) -> bool:
        """Whether every rank holds an equal ``value`` (picklable): that the ranks agree."""
        if self.size == 1:
            return True
        values: list[object] = [None] * self.size
        dist.all_gather_object(values, value, group=self.group)
        return all(v == values[0] for v in values)


def launched_by_torchrun() -> bool:
    """Whether this process is a rank that torchrun (or another ``env://`` launcher) started."""
    return all(name in os.environ for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR"))
