"""``full``'s consequence check: which SWA KV slots did a forward actually write?

Triton kernels and graph replays write KV without touching any version counter, so
the only reliable witness is the memory itself: snapshot the SWA K/V buffers before
the forward, diff them after, and require every written slot to be one of the batch's
real SWA slots or the sentinel (like SGLang's kv_canary). A written slot outside that
set is another request's KV being overwritten.

Only extra writes are violations: a real slot rewritten with identical bytes (same
token at the same position after a slot was recycled) would look unwritten.

A forward writes the same slots in every SWA layer (one location tensor serves them
all), so a few buffers show where it wrote. Each forward snapshots two buffers per pool:
the last one (the deepest layer's V, in SGLang's and the reference pool's order) and the
next one in turn. The last is there because a padded token recomputes a stale token at
its old position: its first layer's K and V come out byte for byte as the live token's
were (same embedding, same rotary position), while the deeper layers, which attend over
another context, do not. The rotating one catches a write that goes astray in one layer
only, within one round of the buffers (twice the SWA layers, in forwards).
Snapshotting every layer would read the whole SWA pool twice a forward: on a model of
realistic size (16 SWA layers, 100 k slots) that is 6.7 GB, longer than the forward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from .locations import attributes

SENTINEL_SLOT = 0


class SnapshotPool(Protocol):
    """What the check needs of a watched pool: its label, the object, its mapping, and
    (optionally) a function returning its SWA K/V buffers."""

    label: str
    pool: object
    kv_buffers: Callable[[], Sequence[torch.Tensor]] | None

    def mapping(self) -> torch.Tensor: ...


# Attribute words that name SWA K/V storage on a pool or its SWA sub-pool.
_SWA_WORD = "swa"
_BUFFER_WORD = "buffer"


def find_swa_kv_buffers(pool: object) -> list[torch.Tensor]:
    """SWA K/V buffers by name: ``swa_*buffer*`` attributes of the pool, or ``*buffer*``
    attributes of an ``swa*`` sub-object (SGLang's ``swa_kv_pool.k_buffer``)."""
    found: list[torch.Tensor] = []
    for _, name, value in attributes(pool):
        lowered = name.lower()
        if _SWA_WORD not in lowered or "mapping" in lowered:
            continue
        if _BUFFER_WORD in lowered:
            found += _tensors(value)
        elif not isinstance(value, (torch.Tensor, list, tuple)):
            for _, inner, inner_value in attributes(value):
                if _BUFFER_WORD in inner.lower():
                    found += _tensors(inner_value)
    return found


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _changed_slots(now: torch.Tensor, then: torch.Tensor) -> torch.Tensor:
    """Per slot (dim 0), whether its bytes differ (on the device); compares bits so NaNs in
    unused slots are equal, eight bytes at a time where the rows allow."""
    rows = now.shape[0]
    width = now.numel() // max(rows, 1)
    if not (now.is_contiguous() and then.is_contiguous()):
        return (now != then).reshape(rows, width).any(dim=1)
    width *= now.element_size()
    now, then = now.view(torch.uint8).view(rows, width), then.view(torch.uint8).view(rows, width)
    if width and width % 8 == 0:
        now, then = now.view(torch.int64), then.view(torch.int64)
    return (now != then).any(dim=1)


@dataclass
class _PoolSnapshot:
    label: str
    buffers: list[torch.Tensor]
    before: list[torch.Tensor]
    allowed: torch.Tensor  # per slot: one of the batch's real slots, or the sentinel


class KVWriteCheck:
    """One forward's snapshot of every watched pool's SWA KV, and the slots it may write.
    Everything stays on the device until one read per pool at the end of the forward."""

    SENTINEL_SLOT = SENTINEL_SLOT

    def __init__(self, parts: list[_PoolSnapshot]) -> None:
        self.parts = parts

    @classmethod
    def begin(
        cls, pools: Sequence[SnapshotPool], locs: list[torch.Tensor], turn: int
    ) -> KVWriteCheck | None:
        """Snapshot ``pools`` before a forward writing the batch locations ``locs``: the
        last of each pool's SWA K/V buffers and the ``turn``-th (see the module docstring)."""
        if not locs:
            return None
        parts = []
        for pool in pools:
            found = pool.kv_buffers() if pool.kv_buffers else find_swa_kv_buffers(pool.pool)
            if not found:
                continue
            buffers = [found[-1]]
            if turn % len(found) != len(found) - 1:
                buffers.append(found[turn % len(found)])
            rows = max(b.shape[0] for b in buffers)
            real = pool.mapping()[locs[0].reshape(-1).long()]
            allowed = torch.zeros(rows, dtype=torch.bool, device=real.device)
            # Unmapped (-1) or out-of-range slots allow nothing: point them at the sentinel.
            allowed[torch.where((real >= 0) & (real < rows), real, SENTINEL_SLOT)] = True
            allowed[SENTINEL_SLOT] = True
            parts.append(_PoolSnapshot(pool.label, buffers, [b.clone() for b in buffers], allowed))
        return cls(parts) if parts else None

    def finish(self) -> list[tuple[str, list[int], torch.Tensor]]:
        """Per pool snapshotted: its label, the slots written outside the allowed set, and
        the allowed set (a mask over slots, for a report's picture)."""
        found = []
        for part in self.parts:
            written = torch.zeros_like(part.allowed)
            for now, then in zip(part.buffers, part.before, strict=True):
                written[: now.shape[0]] |= _changed_slots(now, then)
            extra = (written & ~part.allowed).nonzero().reshape(-1).tolist()
            found.append((part.label, extra, part.allowed))
        return found
