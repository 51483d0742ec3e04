"""Device-side padding flags read at safe points, so ``fast`` never synchronises.

A check that needs tensor contents (does this padded tail hold anything but the
sentinel, slot 0?) ORs the tail into its own segment of a preallocated accumulator on
the tensor's device: one in-place op per buffer, no allocation, no read. At a safe
point (the end of a forward outside capture) the accumulator is copied to pinned host
memory asynchronously and zeroed, and an event is recorded; the copy is read at a later
safe point once the event has completed, so the hot path never waits for the device.
``drain`` (report time) is the one place that waits. A non-zero segment means the tail
held a non-sentinel entry after at least one populate since the previous copy.

Safe points poll only every ``POLL_EVERY``-th time, and only when something was
accumulated or is in flight: a copy and an event per decode step would cost more host
time than the checks themselves, and a violation found a few steps late is still
reported with the place it came from (``raise`` raises it at that later safe point).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

# Accumulator elements per device at first (one segment per buffer watched); grows by
# doubling, at the first populate of a new buffer.
_INITIAL_SIZE = 64
# Safe points per poll of the accumulators.
POLL_EVERY = 8
# Accumulator views kept per device, by (segment, raw, padded); restarts when full.
MAX_FLAG_VIEWS = 1024
# Tails OR-ed in as they are; any other dtype goes in as "non-zero" first.
_INTEGRAL = frozenset((torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8))


@functools.cache
def _cuda_available() -> bool:
    return torch.cuda.is_available()


def is_capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (never true without CUDA)."""
    return _cuda_available() and torch.cuda.is_current_stream_capturing()


@dataclass
class FlagSource:
    """What a segment watches: a buffer of a graph runner, and where it was first filled."""

    label: str
    site: str


class DeviceFlags:
    """One device's accumulator: ``accumulate(segment, raw, padded, tail)`` enqueues
    ``acc[segment][raw:padded] |= tail``."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.acc = torch.zeros(_INITIAL_SIZE, dtype=torch.int64, device=device)
        self._host = self._host_mirror(_INITIAL_SIZE)
        self.segments: list[tuple[int, int]] = []
        self._used = 0
        self._views: dict[tuple[int, int, int], torch.Tensor] = {}
        self._event: torch.cuda.Event | None = None
        self.pending = False  # a copy to the host mirror is in flight
        self.dirty = False  # accumulated into since the last copy or read
        self._carried: list[int] = []  # found by a copy read early, not yet handed out

    def _host_mirror(self, size: int) -> torch.Tensor:
        """Pinned on CUDA: a non-blocking copy into pageable memory would synchronise."""
        return torch.zeros(size, dtype=torch.int64, pin_memory=self.device.type == "cuda")

    def allot(self, numel: int) -> int:
        """A segment of ``numel`` elements (allocates when growing: never while capturing;
        waits for a copy in flight then, which only a buffer first seen mid-run causes)."""
        start, end = self._used, self._used + numel
        if end > self.acc.numel():
            if self.pending and self._event is not None:
                self._event.synchronize()
                self._carried += self._read(self._host)  # the mirror is about to go
            size = max(end, 2 * self.acc.numel())
            grown = torch.zeros(size, dtype=torch.int64, device=self.device)
            grown[: self._used].copy_(self.acc[: self._used])
            self.acc, self._host, self.pending = grown, self._host_mirror(size), False
            self._views.clear()
        self.segments.append((start, end))
        self._used = end
        return len(self.segments) - 1

    def accumulate(self, segment: int, raw: int, padded: int, tail: torch.Tensor) -> None:
        key = (segment, raw, padded)
        view = self._views.get(key)
        if view is None:
            if len(self._views) >= MAX_FLAG_VIEWS:
                self._views.clear()
            first = self.segments[segment][0]
            view = self._views[key] = self.acc[first + raw : first + padded]
        view.bitwise_or_(tail if tail.dtype in _INTEGRAL else tail.ne(0))
        self.dirty = True

    @property
    def idle(self) -> bool:
        return not self.pending and not self.dirty and not self._carried

    def poll(self) -> list[int]:
        """Segments found non-zero by a copy that has landed; never waits."""
        found, self._carried = self._carried, []
        if self.device.type != "cuda":
            return found + self._take(self.acc) if self.dirty else found
        if self.pending and self._event is not None and self._event.query():
            found += self._read(self._host)
            self.pending = False
        if not self.pending and self.dirty:
            self._host.copy_(self.acc, non_blocking=True)
            self.acc.zero_()
            self._event = self._event or torch.cuda.Event()
            self._event.record()
            self.pending, self.dirty = True, False
        return found

    def drain(self) -> list[int]:
        """Every segment found non-zero, waiting for the device (report time only)."""
        found, self._carried = self._carried, []
        if self.pending and self._event is not None:
            self._event.synchronize()
            found += self._read(self._host)
        self.pending = False
        if self.dirty:
            found += self._take(self.acc.cpu())
        return sorted(set(found))

    def _take(self, values: torch.Tensor) -> list[int]:
        """Read ``values`` (the accumulator or its copy), then start the accumulator over."""
        found = self._read(values)
        self.acc.zero_()
        self.dirty = False
        return found

    def _read(self, values: torch.Tensor) -> list[int]:
        flat = values.tolist()
        return [i for i, (first, last) in enumerate(self.segments) if any(flat[first:last])]


class DeferredFlags:
    """Accumulator segments on any number of devices, each remembering what it watches."""

    def __init__(self) -> None:
        self._devices: dict[torch.device, DeviceFlags] = {}
        self._slots: dict[tuple[torch.device, str], tuple[DeviceFlags, int]] = {}
        self._sources: dict[tuple[torch.device, int], FlagSource] = {}
        self._safe_points = 0

    def slot(
        self, label: str, buffer: torch.Tensor, site: Callable[[], str]
    ) -> tuple[DeviceFlags, int]:
        """The segment for ``label``'s buffer (allotted on first use, and again should the
        buffer outgrow it); ``site`` is asked only then, for where it was first filled."""
        device = buffer.device
        found = self._slots.get((device, label))
        if found is None or segment_size(found) < buffer.numel():
            flags = self._devices.get(device)
            if flags is None:
                flags = self._devices[device] = DeviceFlags(device)
            segment = flags.allot(buffer.numel())
            self._sources[(device, segment)] = FlagSource(label, site())
            found = self._slots[(device, label)] = (flags, segment)
        return found

    def slots(self) -> int:
        """Segments in use (one per buffer watched, per device)."""
        return len(self._sources)

    def views(self) -> int:
        """Accumulator views kept (at most ``MAX_FLAG_VIEWS`` per device)."""
        return sum(len(f._views) for f in self._devices.values())

    def devices(self) -> int:
        """Devices with an accumulator."""
        return len(self._devices)

    def poll(self) -> list[FlagSource]:
        """At a safe point: what landed since the last poll (every ``POLL_EVERY``-th call,
        and only if something was accumulated or is in flight)."""
        self._safe_points += 1
        if self._safe_points % POLL_EVERY or all(f.idle for f in self._devices.values()):
            return []
        return self._collect(lambda f: f.poll())

    def drain(self) -> list[FlagSource]:
        return self._collect(lambda f: f.drain())

    def _collect(self, read: Callable[[DeviceFlags], list[int]]) -> list[FlagSource]:
        return [
            self._sources[(device, segment)]
            for device, flags in self._devices.items()
            for segment in read(flags)
        ]


def segment_size(slot: tuple[DeviceFlags, int]) -> int:
    first, last = slot[0].segments[slot[1]]
    return last - first
