"""Device-side padding flags read at safe points, so ``fast`` never synchronises.

A check that needs tensor contents (does this padded tail hold anything but the
sentinel, slot 0?) puts the tails on the device where the host reads them later, two
ways, neither allocating nor reading:

- staged: one populate's padded tails (all its location buffers) are copied into a
  slot of a preallocated staging ring by a single ``torch.cat(..., out=slot)``, whatever
  the number of buffers: one device op per populate. The ring remembers which
  buffer's tail lies where in each slot (a :data:`Layout`);
- accumulated: a tail is ORed into its buffer's segment of an accumulator, one in-place
  op per buffer: for tails the ring cannot take (a dtype other than int32/int64, a
  non-contiguous buffer, a full ring whose last copy is still in flight).

At a safe point (the end of a forward outside capture) what was staged or accumulated
is copied to pinned host memory asynchronously (the accumulator is then zeroed; the ring
is simply reused), and an event is recorded; the copy is read at a later safe point
once the event has completed, so the hot path never waits for the device. ``drain``
(report time) is the one place that waits. A non-zero element means a tail held a
non-sentinel entry after a populate since the previous copy.

Safe points poll only every ``POLL_EVERY``-th time, and only when something was
staged, accumulated or is in flight: a copy and an event per decode step would cost more
host time than the checks themselves, and a violation found a few steps late is still
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
# Staging ring: slots per device, and int32 elements per slot at first (widened, outside
# any copy in flight, when a populate's tails need more).
RING_SLOTS = 64
_INITIAL_SLOT_WIDTH = 32
# Safe points per poll of the accumulators.
POLL_EVERY = 32
# Accumulator and ring views kept per device, by (segment, raw, padded) and by (slot,
# length); each cache restarts when it holds half as many.
MAX_FLAG_VIEWS = 1024
# Tails OR-ed in as they are; any other dtype goes in as "non-zero" first.
INTEGRAL = frozenset((torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8))
# Tails the ring takes, as int32 (an int64 tail as twice as many int32 halves: non-zero
# exactly when the tail is).
STAGED = frozenset((torch.int32, torch.int64))

# Where one populate's tails lie in a ring slot: (segment, first, last) per buffer.
Layout = tuple[tuple[int, int, int], ...]


@functools.cache
def _cuda_available() -> bool:
    return torch.cuda.is_available()


def is_capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (never true without CUDA)."""
    return _cuda_available() and torch.cuda.is_current_stream_capturing()


def staged_form(tail: torch.Tensor) -> torch.Tensor | None:
    """``tail`` as the int32 elements the ring takes (a view, no copy), or ``None`` if the
    ring cannot take it (another dtype, or not contiguous)."""
    if tail.dtype not in STAGED or not tail.is_contiguous():
        return None
    return tail if tail.dtype is torch.int32 else tail.view(torch.int32)


@dataclass
class FlagSource:
    """What a segment watches: a buffer of a graph runner, and the populate that fills it."""

    label: str
    site: str


class DeviceFlags:
    """One device's staging ring and accumulator: ``stage(layout, n)`` hands out the ring
    slot one populate's tails are concatenated into; ``accumulate(segment, raw, padded,
    tail)`` enqueues ``acc[segment][raw:padded] |= tail``."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.acc = torch.zeros(_INITIAL_SIZE, dtype=torch.int64, device=device)
        self._host = self._host_mirror(_INITIAL_SIZE, torch.int64)
        self.segments: list[tuple[int, int]] = []
        self._used = 0
        self._views: dict[tuple[int, int, int], torch.Tensor] = {}
        self.width = _INITIAL_SLOT_WIDTH
        self.ring = torch.zeros(RING_SLOTS * self.width, dtype=torch.int32, device=device)
        self._ring_host = self._host_mirror(RING_SLOTS * self.width, torch.int32)
        # The first n elements of ring slot i, by (i, n), and the layouts of the tails staged
        # in slots 0, 1, ... since the last copy: read directly by the populate hot path,
        # which takes the next slot itself in the common case of :meth:`stage`.
        self.slot_views: dict[tuple[int, int], torch.Tensor] = {}
        self.staged: list[Layout] = []
        self._in_flight: list[Layout] = []  # the slots copied to the ring's mirror
        self._acc_in_flight = False  # the accumulator was copied to its mirror too
        self._event: torch.cuda.Event | None = None
        self.pending = False  # a copy to the host mirrors is in flight
        self.dirty = False  # accumulated into since the last copy or read
        self._carried: list[int] = []  # found by a copy read early, not yet handed out

    def _host_mirror(self, size: int, dtype: torch.dtype) -> torch.Tensor:
        """Pinned on CUDA: a non-blocking copy into pageable memory would synchronise."""
        return torch.zeros(size, dtype=dtype, pin_memory=self.device.type == "cuda")

    def allot(self, numel: int) -> int:
        """A segment of ``numel`` elements (allocates when growing: never while capturing;
        waits for a copy in flight then, which only a buffer first seen mid-run causes)."""
        start, end = self._used, self._used + numel
        if end > self.acc.numel():
            self._land()  # the mirror is about to go
            size = max(end, 2 * self.acc.numel())
            grown = torch.zeros(size, dtype=torch.int64, device=self.device)
            grown[: self._used].copy_(self.acc[: self._used])
            self.acc, self._host = grown, self._host_mirror(size, torch.int64)
            self._views.clear()
        self.segments.append((start, end))
        self._used = end
        return len(self.segments) - 1

    def _land(self) -> None:
        """Wait for the copy in flight and keep what it found (growing only)."""
        if self.pending and self._event is not None:
            self._event.synchronize()
            self._carried += self._read_landed()
        self.pending = False

    def view(self, segment: int, raw: int, padded: int) -> torch.Tensor:
        """Elements ``[raw:padded]`` of ``segment`` of the accumulator (valid until it grows)."""
        key = (segment, raw, padded)
        view = self._views.get(key)
        if view is None:
            if len(self._views) >= MAX_FLAG_VIEWS // 2:
                self._views.clear()
            first = self.segments[segment][0]
            view = self._views[key] = self.acc[first + raw : first + padded]
        return view

    def accumulate(self, segment: int, raw: int, padded: int, tail: torch.Tensor) -> None:
        """``acc[segment][raw:padded] |= tail``."""
        view = self.view(segment, raw, padded)
        view.bitwise_or_(tail if tail.dtype in INTEGRAL else tail.ne(0))
        self.dirty = True

    def stage(self, layout: Layout, n: int) -> torch.Tensor | None:
        """The first ``n`` elements of the next free ring slot, for tails laid out as
        ``layout``, or ``None`` when the ring cannot take them without waiting (full, or
        too narrow, while a copy is in flight): accumulate them instead."""
        if n > self.width:
            if not self._widen(n):
                return None
        elif len(self.staged) == RING_SLOTS and not self._make_room():
            return None
        slot = len(self.staged)
        view = self.slot_views.get((slot, n))
        if view is None:
            if len(self.slot_views) >= MAX_FLAG_VIEWS // 2:
                self.slot_views.clear()
            first = slot * self.width
            view = self.slot_views[(slot, n)] = self.ring[first : first + n]
        self.staged.append(layout)
        return view

    def _make_room(self) -> bool:
        """Empty the ring without waiting: ship its slots unless a copy is still in flight
        (one that has landed is read first). Later writes to the slots are ordered after
        the copy on the stream."""
        if self.pending:
            if self._event is None or not self._event.query():
                return False
            self._carried += self._read_landed()
        self._ship()
        return True

    def _widen(self, n: int) -> bool:
        """Slots of at least ``n`` elements (a new ring: only with nothing staged or in
        flight, which may take until a later populate)."""
        if self.staged and not self._make_room():
            return False
        if self.pending:
            if self._event is None or not self._event.query():
                return False
            self._carried += self._read_landed()
        self.width = max(n, 2 * self.width)
        size = RING_SLOTS * self.width
        self.ring = torch.zeros(size, dtype=torch.int32, device=self.device)
        self._ring_host = self._host_mirror(size, torch.int32)
        self.slot_views.clear()
        return True

    @property
    def idle(self) -> bool:
        return not (self.pending or self.dirty or self.staged or self._carried)

    def _ship(self) -> None:
        """Start reading what was staged and accumulated: on CUDA a non-blocking copy to
        the host mirrors and an event (read once it has completed); elsewhere, read now."""
        if self.device.type != "cuda":
            if self.staged:
                self._carried += self._read_ring(self.ring, self.staged)
                self.staged = []
            if self.dirty:
                self._carried += self._take(self.acc)
            return
        if self.staged:
            n = len(self.staged) * self.width
            self._ring_host[:n].copy_(self.ring[:n], non_blocking=True)
            self._in_flight, self.staged = self.staged, []
        self._acc_in_flight = self.dirty
        if self.dirty:
            self._host.copy_(self.acc, non_blocking=True)
            self.acc.zero_()
            self.dirty = False
        self._event = self._event or torch.cuda.Event()
        self._event.record()
        self.pending = True

    def _read_landed(self) -> list[int]:
        """What the copy that has just completed found."""
        found = self._read_ring(self._ring_host, self._in_flight)
        if self._acc_in_flight:
            found += self._read(self._host)
        self._in_flight, self._acc_in_flight, self.pending = [], False, False
        return found

    def poll(self) -> list[int]:
        """Segments found non-zero by a copy that has landed (or, off CUDA, by reading
        now); never waits."""
        if self.pending and self._event is not None and self._event.query():
            self._carried += self._read_landed()
        if not self.pending and (self.staged or self.dirty):
            self._ship()
        found, self._carried = self._carried, []
        return found

    def drain(self) -> list[int]:
        """Every segment found non-zero, waiting for the device (report time only)."""
        if self.pending and self._event is not None:
            self._event.synchronize()
            self._carried += self._read_landed()
        self.pending = False
        found, self._carried = self._carried, []
        if self.staged:
            found += self._read_ring(self.ring.cpu(), self.staged)
            self.staged = []
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
        flat = values.tolist()  # not ``values.any()``: a CPU reduction wakes torch's threads
        if not any(flat):
            return []
        return [i for i, (first, last) in enumerate(self.segments) if any(flat[first:last])]

    def _read_ring(self, values: torch.Tensor, layouts: list[Layout]) -> list[int]:
        """The segments whose tails were non-zero in the first ``len(layouts)`` slots of
        ``values`` (the ring or its mirror)."""
        width = self.width
        flat = values[: len(layouts) * width].tolist()  # see ``_read``
        if not any(flat):
            return []
        found = []
        for slot, layout in enumerate(layouts):
            base = slot * width
            found += [seg for seg, first, last in layout if any(flat[base + first : base + last])]
        return found


class DeferredFlags:
    """Accumulator segments on any number of devices, each remembering what it watches."""

    def __init__(self) -> None:
        self._devices: dict[torch.device, DeviceFlags] = {}
        self._slots: dict[tuple[torch.device, str], tuple[DeviceFlags, int]] = {}
        self._sources: dict[tuple[torch.device, int], FlagSource] = {}
        self.safe_points = 0

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
        """Accumulator and ring views kept (at most ``MAX_FLAG_VIEWS`` per device)."""
        return sum(len(f._views) + len(f.slot_views) for f in self._devices.values())

    def devices(self) -> int:
        """Devices with an accumulator."""
        return len(self._devices)

    def poll(self) -> list[FlagSource]:
        """At the end of a scope: what landed since the last poll (every ``POLL_EVERY``-th
        call, only if something was accumulated or is in flight, and never while the
        stream is capturing, which is asked only then)."""
        self.safe_points += 1
        if self.safe_points % POLL_EVERY or all(f.idle for f in self._devices.values()):
            return []
        if is_capturing():
            self.safe_points -= 1  # poll at the next safe point instead
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
