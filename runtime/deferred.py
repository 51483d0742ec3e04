"""Device-side violation counters read at safe points, so ``fast`` never synchronises.

A check that needs tensor contents (is this padded tail all zeros?) enqueues its
answer into a preallocated counter on the tensor's device with in-place ops. At a
safe point (end of a forward outside capture) the counters are copied to pinned host
memory asynchronously and an event is recorded; the copy is read at a later safe
point once the event has completed, so the hot path never waits for the device.
``drain`` (report time) is the one place that waits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

# Distinct places a counter can be kept for (buffer names of graph runners); grows by doubling.
_INITIAL_SLOTS = 16


def is_capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (never true without CUDA)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


@dataclass
class FlagSource:
    """What a counter slot watches: a buffer of a graph runner, and where it was filled."""

    label: str
    site: str


class DeviceCounters:
    """Per-device counters: ``add(slot, cond)`` enqueues ``counts[slot] += cond``."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.counts = torch.zeros(_INITIAL_SLOTS, dtype=torch.int64, device=device)
        self._host = self._host_mirror(_INITIAL_SLOTS)
        self._event: torch.cuda.Event | None = None
        self._seen = [0] * _INITIAL_SLOTS

    def ensure(self, slots: int) -> None:
        """Grow to hold ``slots`` counters (allocates: never call while capturing)."""
        if slots <= self.counts.numel():
            return
        size = max(slots, 2 * self.counts.numel())
        grown = torch.zeros(size, dtype=torch.int64, device=self.device)
        grown[: self.counts.numel()].copy_(self.counts)
        self.counts = grown
        self._host = self._host_mirror(size)
        self._event = None
        self._seen += [0] * (size - len(self._seen))

    def _host_mirror(self, size: int) -> torch.Tensor:
        """Pinned on CUDA: a non-blocking copy into pageable memory would synchronise."""
        return torch.zeros(size, dtype=torch.int64, pin_memory=self.device.type == "cuda")

    def add(self, slot: int, cond: torch.Tensor) -> None:
        self.counts[slot : slot + 1].add_(cond)

    def poll(self) -> list[tuple[int, int]]:
        """New counts whose copy has landed, as ``(slot, increase)``; never waits."""
        if self.device.type != "cuda":
            return self._read(self.counts)
        found: list[tuple[int, int]] = []
        if self._event is not None and self._event.query():
            found = self._read(self._host)
            self._event = None
        if self._event is None:
            self._host.copy_(self.counts, non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        return found

    def drain(self) -> list[tuple[int, int]]:
        """Every new count, waiting for the device (report time only)."""
        self._event = None
        return self._read(self.counts.cpu())

    def _read(self, counts: torch.Tensor) -> list[tuple[int, int]]:
        values = counts.tolist()
        found = [(i, v - self._seen[i]) for i, v in enumerate(values) if v > self._seen[i]]
        for i, _ in found:
            self._seen[i] = values[i]
        return found


class DeferredFlags:
    """Named counters on any number of devices, each slot remembering what it watches."""

    def __init__(self) -> None:
        self._counters: dict[torch.device, DeviceCounters] = {}
        self._slots: dict[tuple[torch.device, str], int] = {}
        self._sources: dict[tuple[torch.device, int], FlagSource] = {}

    def add(self, label: str, site: str, cond: torch.Tensor) -> None:
        """Count ``cond`` (a 0-d bool tensor) against ``label``; allocates only on first use."""
        device = cond.device
        counters = self._counters.get(device)
        if counters is None:
            counters = self._counters[device] = DeviceCounters(device)
        slot = self._slots.get((device, label))
        if slot is None:
            slot = self._slots[(device, label)] = sum(d == device for d, _ in self._slots)
            counters.ensure(slot + 1)
            self._sources[(device, slot)] = FlagSource(label, site)
        counters.add(slot, cond)

    def poll(self) -> list[tuple[FlagSource, int]]:
        return self._collect(lambda c: c.poll())

    def drain(self) -> list[tuple[FlagSource, int]]:
        return self._collect(lambda c: c.drain())

    def _collect(
        self, read: Callable[[DeviceCounters], list[tuple[int, int]]]
    ) -> list[tuple[FlagSource, int]]:
        found = []
        for device, counters in self._counters.items():
            found += [(self._sources[(device, slot)], n) for slot, n in read(counters)]
        return found
