"""Device-side padding flags: tails staged in a ring (or ORed into an accumulator) per
populate, read only at every ``POLL_EVERY``-th safe point or when drained, each finding
attributed to the buffer it came from."""

from __future__ import annotations

import torch

from swacheck.runtime.deferred import (
    POLL_EVERY,
    RING_SLOTS,
    DeferredFlags,
    DeviceFlags,
    staged_form,
)


def test_findings_wait_for_a_poll_and_name_their_buffer() -> None:
    flags = DeferredFlags()
    swa = torch.tensor([5, 6, 7, 0], dtype=torch.int32)
    full = torch.tensor([9, 8, 0, 0])
    flag, segment = flags.slot("Runner.out_cache_loc_swa", swa, lambda: "here:1")
    flag.accumulate(segment, 2, 4, swa[2:4])  # 7: off the sentinel
    flag, segment = flags.slot("Runner.out_cache_loc", full, lambda: "there:2")
    flag.accumulate(segment, 2, 4, full[2:4])
    found = [flags.poll() for _ in range(POLL_EVERY)]
    assert found[:-1] == [[]] * (POLL_EVERY - 1)
    assert [(s.label, s.site) for s in found[-1]] == [("Runner.out_cache_loc_swa", "here:1")]
    assert flags.drain() == []  # read once, then started over


def test_clean_tails_and_float_tails() -> None:
    flags = DeferredFlags()
    clean = torch.zeros(8, dtype=torch.int64)
    weights = torch.tensor([0.0, 0.0, 0.5])
    flag, segment = flags.slot("a.loc", clean, lambda: "s")
    for raw in range(8):
        flag.accumulate(segment, raw, 8, clean[raw:8])
    assert flags.drain() == []
    flag, segment = flags.slot("b.loc", weights, lambda: "s")
    flag.accumulate(segment, 1, 3, weights[1:3])
    assert [s.label for s in flags.drain()] == ["b.loc"]


def test_growing_keeps_what_was_found() -> None:
    """New buffers beyond the first allotment grow the accumulator without losing a finding."""
    flags = DeferredFlags()
    first = torch.tensor([0, 0, 3])
    flag, segment = flags.slot("first.loc", first, lambda: "s")
    flag.accumulate(segment, 1, 3, first[1:3])
    for i in range(40):  # 40 buffers of 8: past the initial allotment
        buffer = torch.zeros(8, dtype=torch.int64)
        flags.slot(f"b{i}.loc", buffer, lambda: "s")
    bigger = torch.zeros(100, dtype=torch.int64)
    bigger[99] = 1
    flag, segment = flags.slot("first.loc", bigger, lambda: "s")  # outgrew its segment
    flag.accumulate(segment, 90, 100, bigger[90:100])
    assert sorted(s.label for s in flags.drain()) == ["first.loc", "first.loc"]
    assert flags.slots() == 42


def _stage(flag: DeviceFlags, tails: list[tuple[int, torch.Tensor]]) -> bool:
    """What the populate hot path does: one ``torch.cat`` of the tails' int32 forms into
    the next ring slot (``False`` when the ring cannot take them)."""
    forms = [staged_form(tail) for _, tail in tails]
    assert all(form is not None for form in forms)
    layout, first = [], 0
    for (segment, _), form in zip(tails, forms, strict=True):
        layout.append((segment, first, first + form.numel()))
        first += form.numel()
    out = flag.stage(tuple(layout), first)
    if out is None:
        return False
    torch.cat(forms, out=out)
    return True


def test_staged_tails_name_their_buffer() -> None:
    """int64 tails go in as int32 halves: non-zero exactly when the tail is."""
    flags = DeferredFlags()
    swa = torch.tensor([5, 6, 0, 0], dtype=torch.int32)
    full = torch.tensor([9, 8, 0, 1 << 40])  # only the high half is non-zero
    flag, swa_segment = flags.slot("Runner.out_cache_loc_swa", swa, lambda: "here:1")
    _, full_segment = flags.slot("Runner.out_cache_loc", full, lambda: "there:2")
    assert _stage(flag, [(swa_segment, swa[2:4]), (full_segment, full[2:4])])
    found = [flags.poll() for _ in range(POLL_EVERY)]
    assert found[:-1] == [[]] * (POLL_EVERY - 1)
    assert [s.label for s in found[-1]] == ["Runner.out_cache_loc"]
    assert flags.drain() == []


def test_a_full_ring_is_emptied_without_losing_a_finding() -> None:
    flags = DeferredFlags()
    buffer = torch.zeros(8, dtype=torch.int32)
    flag, segment = flags.slot("r.loc", buffer, lambda: "s")
    dirty = buffer.clone()
    dirty[7] = 3
    assert _stage(flag, [(segment, dirty[6:8])])  # the one dirty populate, first
    for _ in range(3 * RING_SLOTS):  # clean populates, far past the ring's slots
        assert _stage(flag, [(segment, buffer[6:8])])
    assert [s.label for s in flags.drain()] == ["r.loc"]


def test_a_wider_populate_widens_the_ring() -> None:
    flags = DeferredFlags()
    small = torch.zeros(4, dtype=torch.int32)
    flag, small_segment = flags.slot("small.loc", small, lambda: "s")
    small[3] = 1
    assert _stage(flag, [(small_segment, small[2:4])])
    wide = torch.zeros(4 * flag.width, dtype=torch.int64)
    wide[-1] = 2
    _, wide_segment = flags.slot("wide.loc", wide, lambda: "s")
    assert _stage(flag, [(wide_segment, wide[1:])])  # 2 * (4w - 1) int32 elements
    assert sorted(s.label for s in flags.drain()) == ["small.loc", "wide.loc"]


def test_tails_the_ring_cannot_take() -> None:
    """Other dtypes and non-contiguous tails are accumulated instead (``staged_form``)."""
    assert staged_form(torch.zeros(4, dtype=torch.int16)) is None
    assert staged_form(torch.zeros(4, 2, dtype=torch.int32)[:, 0]) is None
    assert staged_form(torch.zeros(4, dtype=torch.int64)).dtype is torch.int32
