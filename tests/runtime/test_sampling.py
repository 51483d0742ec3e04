"""Checks that run on a sample: ``fast``'s strides (``runtime/sampling.py``) are bounded and
reproducible, and a padding bug on a shape already seen is still reported within the
documented latency (``graph_watch``: 15 padded replays of its first stale tail, plus 64
forwards); ``full``'s consequence check reads two SWA buffers a forward and still sees a
write astray in any one layer within a round of them."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch

from swacheck.runtime import PADDING_NOT_ZEROED, SWA_KV_CORRUPTION, Sanitizer
from swacheck.runtime.deferred import POLL_EVERY
from swacheck.runtime.graph_watch import PADDING_SAMPLE_EVERY
from swacheck.runtime.sampling import Sampler


def gaps(sampler: Sampler, events: int) -> list[int]:
    sampled = [i for i in range(events) if sampler.due()]
    return [b - a for a, b in zip([-1, *sampled], sampled, strict=False)]


def test_strides_are_bounded_reproducible_and_average_every() -> None:
    sampler = Sampler(8, seed=3)
    seen = gaps(sampler, 80_000)
    assert max(seen) <= sampler.max_gap == 15
    assert min(seen) >= 1
    assert 7.8 < sum(seen) / len(seen) < 8.2
    assert len(set(seen)) == 15  # every stride from 1 to 15 occurs: no fixed period
    again = gaps(Sampler(8, seed=3), 80_000)
    assert again == seen  # a fixed seed: the same run samples the same events


def test_a_sampler_of_one_samples_every_event() -> None:
    assert gaps(Sampler(1), 50) == [1] * 50


def test_a_sampler_needs_a_positive_rate() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Sampler(0)


def test_padding_bug_on_a_seen_shape_is_reported_within_the_bound(
    toy: SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    """Batches of one request (bucket 2, tail zero: the shape is planned and clean), one
    batch of two (its second slot lands in that tail), then batches of one again, whose
    tail the buggy populate leaves stale on every step. The stale steps are of a shape the
    watch has seen, so only sampled populates stage their tails."""
    engine = toy.build("padding-not-zeroed")
    san = Sanitizer(level="fast", action="log")
    san.watch_pool(engine.pool)
    san.watch_graph_runner(engine.graph_runner)
    san.watch_model_runner(engine.model_runner)
    engine.graph_runner.capture()
    caplog.set_level(logging.WARNING, logger="swacheck.runtime")

    def step(n: int) -> None:
        locs = engine.pool.alloc(n)
        engine.model_runner.forward(toy.Batch(locs), use_graph=True)
        engine.pool.free(locs)

    for _ in range(20):
        step(1)
    step(2)
    first_stale = None
    reported = None
    padded = 200
    for i in range(padded):
        step(1)
        tail = engine.graph_runner.out_cache_loc_swa[1:2]
        if first_stale is None and int(tail.item()) != 0:
            first_stale = i
        if any(PADDING_NOT_ZEROED in r.getMessage() for r in caplog.records):
            reported = i
            break
    report = san.report()
    san.close()
    assert first_stale == 0
    bound = (2 * PADDING_SAMPLE_EVERY - 1) + 2 * POLL_EVERY
    assert reported is not None and reported - first_stale <= bound, report.to_text()
    # Sampling really happened: fewer tails were staged than padded populates ran.
    assert report.checks[PADDING_NOT_ZEROED] < 20 + reported + 1


def test_consequence_check_catches_a_write_astray_in_one_layer_within_a_rotation(
    toy: SimpleNamespace,
) -> None:
    """``full`` snapshots two SWA K/V buffers a forward (the last, and the next in turn):
    a write that goes astray in one layer only is seen within one round of the buffers."""
    pool = toy.Pool(swa_layers=4)
    backend = toy.Backend(pool)
    engine = toy.ModelRunner(pool, backend, toy.GraphRunner(pool))
    stray_slot = pool.size_swa  # an SWA slot no batch of this test is given
    set_kv_buffer = pool.set_kv_buffer

    def set_kv_buffer_astray(layer: int, loc: torch.Tensor, k: torch.Tensor) -> None:
        set_kv_buffer(layer, loc, k)
        if layer == 1:
            pool.swa_k_buffer[layer][stray_slot] = k[0] + 1

    pool.set_kv_buffer = set_kv_buffer_astray
    san = Sanitizer(level="full", action="log")
    san.watch_pool(pool)
    san.watch_model_runner(engine)
    forwards = 0
    while not san.report().counts[SWA_KV_CORRUPTION] and forwards < 10:
        locs = pool.alloc(1)
        engine.forward(toy.Batch(locs))
        pool.free(locs)
        forwards += 1
    san.close()
    assert 1 <= forwards <= len(pool.swa_k_buffer)
