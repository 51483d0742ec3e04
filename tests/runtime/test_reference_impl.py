"""End to end on the reference implementation (CPU: Triton interpreter, eager replay over
the graph runner's static buffers): every ``inject_bug`` switch is caught by its kind in
``full`` and, where the host can see it, in ``fast``; the clean engine is never flagged,
and sanitizing changes no output bit."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch

from swacheck.runtime import (
    CAPTURE_CACHE_POLLUTION,
    ERROR_BY_KIND,
    FORWARD_WITHOUT_INVALIDATION,
    PADDING_NOT_ZEROED,
    STALE_TRANSLATION,
    SWA_KV_CORRUPTION,
    SWA_LOC_DTYPE,
    UNFLUSHED_FRESH_TRANSLATION,
    UNINVALIDATED_MAPPING_WRITE,
    ForwardWithoutInvalidationError,
    Sanitizer,
    SanitizerReport,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def build(inject_bug: str | None = None, **kwargs: Any) -> Any:
    from swacheck.reference_impl.demo import build_runner

    return build_runner(DEVICE, inject_bug=inject_bug, **kwargs)


def watch(runner: Any, level: str, action: str = "log") -> Sanitizer:
    """What ``swacheck demo --sanitize`` does."""
    san = Sanitizer(level=level, action=action)
    san.watch_pool(runner.token_to_kv_pool)
    san.watch_backend(runner.attn_backend)
    san.watch_graph_runner(runner.graph_runner)
    san.watch_model_runner(runner)
    return san


@functools.cache
def sanitized_run(inject_bug: str | None, level: str, steps: int) -> SanitizerReport:
    from swacheck.reference_impl.demo import serve

    runner = build(inject_bug)
    san = watch(runner, level)
    serve(runner, steps)
    report = san.report()
    san.close()
    return report


# switch -> (decode steps that reach its trigger in the demo workload, kind at fast, at full)
CAUGHT = {
    "storage-pointer-key": (1, STALE_TRANSLATION, STALE_TRANSLATION),
    "swa-loc-int64": (1, SWA_LOC_DTYPE, SWA_LOC_DTYPE),
    "invalidate-after-dispatch": (1, FORWARD_WITHOUT_INVALIDATION, FORWARD_WITHOUT_INVALIDATION),
    "missing-invalidation": (3, UNINVALIDATED_MAPPING_WRITE, UNINVALIDATED_MAPPING_WRITE),
    "capture-without-invalidation": (1, CAPTURE_CACHE_POLLUTION, CAPTURE_CACHE_POLLUTION),
    "fresh-translation-without-flush": (
        1,
        UNFLUSHED_FRESH_TRANSLATION,
        UNFLUSHED_FRESH_TRANSLATION,
    ),
    "padding-not-zeroed": (9, PADDING_NOT_ZEROED, PADDING_NOT_ZEROED),
}


@pytest.mark.parametrize("level", ["fast", "full"])
@pytest.mark.parametrize("bug", sorted(CAUGHT))
def test_every_bug_switch_is_caught_by_its_kind(bug: str, level: str) -> None:
    """The first violation raised is the matching kind, before the bug does more damage
    (on a GPU some of them index out of bounds)."""
    from swacheck.reference_impl.demo import serve

    steps, fast_kind, full_kind = CAUGHT[bug]
    kind = fast_kind if level == "fast" else full_kind
    runner = build(bug)
    with watch(runner, level, action="raise") as san, pytest.raises(ERROR_BY_KIND[kind]):
        serve(runner, steps)
        san.check_deferred()  # fast's device-side checks may land after the last step


def test_full_sees_the_damage_of_unzeroed_padding() -> None:
    """The consequence check: the padded token overwrote a live request's SWA KV."""
    report = sanitized_run("padding-not-zeroed", "full", 9)
    assert report.counts[SWA_KV_CORRUPTION] > 0, report.to_text()
    assert report.counts[PADDING_NOT_ZEROED] > 0


@pytest.mark.parametrize("level", ["fast", "full"])
def test_clean_demo_has_no_violations(level: str) -> None:
    report = sanitized_run(None, level, 24)
    assert report.ok, report.to_text()
    assert report.checks[PADDING_NOT_ZEROED] > 0
    assert report.checks[STALE_TRANSLATION] > 0
    if level == "full":
        assert report.checks[SWA_KV_CORRUPTION] > 0


@pytest.mark.slow
@pytest.mark.parametrize("swa_loc", ["precomputed", "translate"])
def test_clean_demo_long_run_with_churn(swa_loc: str) -> None:
    """The whole workload to completion: admissions, chunked prefill, micro-batches,
    padded buckets, eviction and frees, in both SWA-location designs."""
    from swacheck.reference_impl.demo import serve

    runner = build(swa_loc=swa_loc)
    san = watch(runner, "full")
    stats = serve(runner, 10_000)
    report = san.report()
    san.close()
    assert not runner.has_work() and stats["steps"] > 30
    assert report.ok, report.to_text()


def logits_of(runner: Any, steps: int) -> list[torch.Tensor]:
    from swacheck.reference_impl.workload import make_workload

    runner.capture_graphs()
    for spec in make_workload(0, runner.config.vocab_size):
        runner.add_request(spec)
    out = []
    while runner.has_work() and len(out) < steps:
        step = runner.step()
        if step is not None:
            out.append(step.logits.clone())
    return out


@pytest.mark.parametrize("level", ["fast", "full"])
def test_outputs_bitwise_identical(level: str) -> None:
    plain = logits_of(build(), 12)
    runner = build()
    san = watch(runner, level)
    sanitized = logits_of(runner, 12)
    san.close()
    assert len(plain) == len(sanitized) == 12
    assert all(torch.equal(a, b) for a, b in zip(plain, sanitized, strict=True))


def test_raise_names_the_dispatch_site() -> None:
    from swacheck.reference_impl.demo import serve

    runner = build("invalidate-after-dispatch")
    with (
        watch(runner, "fast", action="raise"),
        pytest.raises(ForwardWithoutInvalidationError) as info,
    ):
        serve(runner, 1)
    violation = info.value.violation
    assert violation.kind == FORWARD_WITHOUT_INVALIDATION
    assert "model_runner.py" in violation.site
    assert "forward-without-invalidation" in str(info.value)


def test_close_restores_the_reference_objects() -> None:
    runner = build()
    objects = (runner.token_to_kv_pool, runner.attn_backend, runner.graph_runner, runner)

    def state() -> list[dict[str, int]]:
        return [{k: id(v) for k, v in vars(o).items()} for o in objects]

    before = state()
    san = watch(runner, "full")
    assert state() != before
    san.close()
    assert state() == before
    assert "forward" not in vars(runner.model)
