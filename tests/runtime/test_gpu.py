"""On the device, with real CUDA graphs: ``fast`` changes no output bit, adds no device
synchronisation, allocates nothing during capture, and still catches the bugs."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from swacheck.runtime import (
    PADDING_NOT_ZEROED,
    STALE_TRANSLATION,
    SWA_KV_CORRUPTION,
    CaptureCachePollutionError,
    Sanitizer,
    StaleTranslationError,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def build(inject_bug: str | None = None, **kwargs: Any) -> Any:
    from swacheck.reference_impl.demo import build_runner

    return build_runner("cuda", inject_bug=inject_bug, **kwargs)


def watch(runner: Any, level: str, action: str = "log") -> Sanitizer:
    san = Sanitizer(level=level, action=action)
    san.watch_pool(runner.token_to_kv_pool)
    san.watch_backend(runner.attn_backend)
    san.watch_graph_runner(runner.graph_runner)
    san.watch_model_runner(runner)
    return san


def serve_logits(runner: Any, steps: int) -> list[torch.Tensor]:
    """Capture, then the demo's workload: every step's logits."""
    from swacheck.reference_impl.workload import make_workload

    runner.capture_graphs()
    assert runner.graph_runner.graphs, "expected real CUDA graphs"
    for spec in make_workload(0, runner.config.vocab_size):
        runner.add_request(spec)
    out = []
    while runner.has_work() and len(out) < steps:
        step = runner.step()
        if step is not None:
            out.append(step.logits.clone())
    return out


def test_fast_leaves_outputs_bitwise_identical() -> None:
    plain = serve_logits(build(), 60)
    runner = build()
    san = watch(runner, "fast")
    sanitized = serve_logits(runner, 60)
    report = san.report()
    san.close()
    assert report.ok, report.to_text()
    assert report.checks[PADDING_NOT_ZEROED] > 0  # the graph path was really checked
    assert len(plain) == len(sanitized)
    for a, b in zip(plain, sanitized, strict=True):
        assert torch.equal(a, b)


def count_syncs(runner: Any, steps: int) -> int:
    """Synchronising CUDA calls made while serving ``steps`` steps after capture."""
    from swacheck.reference_impl.workload import make_workload

    runner.capture_graphs()
    for spec in make_workload(0, runner.config.vocab_size):
        runner.add_request(spec)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(steps):
                runner.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def test_fast_adds_no_synchronisation() -> None:
    """The engine synchronises on its own (sampling); ``fast`` must not add one call."""
    baseline = count_syncs(build(), 40)
    runner = build()
    san = watch(runner, "fast")
    sanitized = count_syncs(runner, 40)
    san.close()
    assert baseline > 0  # the counter works
    assert sanitized <= baseline


def capture_allocations(runner: Any) -> int:
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    runner.capture_graphs()
    torch.cuda.synchronize()
    return torch.cuda.memory_stats()["allocation.all.allocated"] - before


def test_fast_capture_allocates_nothing() -> None:
    """``fast`` never touches the device during warm-ups or capture."""
    baseline = capture_allocations(build(swa_loc="translate"))
    runner = build(swa_loc="translate")
    san = watch(runner, "fast")
    assert capture_allocations(runner) == baseline
    assert san.report().ok
    san.close()


def test_full_capture_succeeds() -> None:
    """``full`` reads the device on warm-up hits, never while the stream is capturing (a
    synchronisation there would fail the capture)."""
    runner = build(swa_loc="translate")
    san = watch(runner, "full")
    runner.capture_graphs()
    assert runner.graph_runner.graphs
    report = san.report()
    san.close()
    assert report.ok and report.checks[STALE_TRANSLATION] > 0


@pytest.mark.parametrize(
    ("level", "kinds"),
    [("fast", {PADDING_NOT_ZEROED}), ("full", {PADDING_NOT_ZEROED, SWA_KV_CORRUPTION})],
)
def test_padding_caught_with_real_graphs(level: str, kinds: set[str]) -> None:
    runner = build("padding-not-zeroed")
    san = watch(runner, level)
    serve_logits(runner, 30)
    report = san.report()
    san.close()
    assert kinds <= {k for k, n in report.counts.items() if n}, report.to_text()


@pytest.mark.parametrize(
    ("bug", "error"),
    [
        ("capture-without-invalidation", CaptureCachePollutionError),
        ("storage-pointer-key", StaleTranslationError),
    ],
)
def test_raise_stops_before_the_damage(bug: str, error: type[Exception]) -> None:
    """These bugs make kernels index out of bounds on a GPU; ``raise`` stops them first."""
    runner = build(bug)
    with watch(runner, "fast", action="raise"), pytest.raises(error):
        serve_logits(runner, 30)
