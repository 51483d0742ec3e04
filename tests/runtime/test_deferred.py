"""Device-side padding flags: one OR per populate, read only at every ``POLL_EVERY``-th
safe point or when drained, each finding attributed to the buffer it came from."""

from __future__ import annotations

import torch

from swacheck.runtime.deferred import POLL_EVERY, DeferredFlags


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
