"""Every check on the toy engine (conftest.py): each seed bug caught by its kind, the
clean engine never flagged, both levels, both actions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from swacheck.config import Config
from swacheck.runtime import (
    CAPTURE_CACHE_POLLUTION,
    FORWARD_WITHOUT_INVALIDATION,
    PADDING_NOT_ZEROED,
    SWA_KV_CORRUPTION,
    SWA_LOC_DTYPE,
    UNFLUSHED_FRESH_TRANSLATION,
    UNINVALIDATED_MAPPING_WRITE,
    Sanitizer,
    SanitizerReport,
)


def serve(engine: SimpleNamespace, batch_cls: type, steps: int = 6) -> None:
    """Capture, then alternate batch sizes (so buckets get padded) over eager and graph
    forwards, allocating and freeing as requests come and go."""
    engine.graph_runner.capture()
    live = []
    for step in range(steps):
        locs = engine.pool.alloc(3 if step % 2 else 4)
        live.append(locs)
        batch = batch_cls(locs)
        engine.model_runner.forward(batch, use_graph=False)
        engine.model_runner.forward(batch, use_graph=True)
        if len(live) > 2:
            engine.pool.free(live.pop(0))


SEED_ERA = Config(runtime_swa_loc_dtypes="int32")


def run(toy: SimpleNamespace, bug: str, level: str) -> SanitizerReport:
    engine = toy.build(bug)
    # The toy is of the seed era: every SWA location int32 (nothing to infer it from).
    with Sanitizer(level=level, action="log", config=SEED_ERA) as san:
        san.watch_pool(engine.pool)
        san.watch_backend(engine.backend)
        san.watch_graph_runner(engine.graph_runner)
        san.watch_model_runner(engine.model_runner)
        serve(engine, toy.Batch)
        return san.report()


@pytest.mark.parametrize("level", ["fast", "full"])
def test_clean_engine_has_no_violations(toy: SimpleNamespace, level: str) -> None:
    report = run(toy, "", level)
    assert report.ok, report.to_text()
    assert report.total_checks > 50
    assert report.checks[PADDING_NOT_ZEROED] > 0
    if level == "full":
        assert report.checks[SWA_KV_CORRUPTION] > 0


# bug switch -> the kind that must catch it at each level (None: not visible at that level)
EXPECTED = {
    "padding-not-zeroed": {"fast": PADDING_NOT_ZEROED, "full": PADDING_NOT_ZEROED},
    "swa-loc-int64": {"fast": SWA_LOC_DTYPE, "full": SWA_LOC_DTYPE},
    "missing-invalidation": {
        "fast": UNINVALIDATED_MAPPING_WRITE,
        "full": UNINVALIDATED_MAPPING_WRITE,
    },
    "capture-without-invalidation": {
        "fast": CAPTURE_CACHE_POLLUTION,
        "full": CAPTURE_CACHE_POLLUTION,
    },
    "invalidate-after-dispatch": {
        "fast": FORWARD_WITHOUT_INVALIDATION,
        "full": FORWARD_WITHOUT_INVALIDATION,
    },
    "fresh-translation-without-flush": {
        "fast": UNFLUSHED_FRESH_TRANSLATION,
        "full": UNFLUSHED_FRESH_TRANSLATION,
    },
}


@pytest.mark.parametrize("level", ["fast", "full"])
@pytest.mark.parametrize("bug", sorted(EXPECTED))
def test_bug_caught_by_its_kind(toy: SimpleNamespace, bug: str, level: str) -> None:
    report = run(toy, bug, level)
    kind = EXPECTED[bug][level]
    assert report.counts[kind] > 0, report.to_text()


def test_full_sees_the_padding_damage(toy: SimpleNamespace) -> None:
    """The consequence check: padded tokens wrote into live requests' SWA slots."""
    report = run(toy, "padding-not-zeroed", "full")
    assert report.counts[SWA_KV_CORRUPTION] > 0, report.to_text()
    assert run(toy, "padding-not-zeroed", "fast").counts[SWA_KV_CORRUPTION] == 0


def test_only_the_matching_kinds_fire(toy: SimpleNamespace) -> None:
    """No cross-talk: a dtype bug is not also reported as a cache bug, and so on."""
    for bug, levels in EXPECTED.items():
        report = run(toy, bug, "fast")
        fired = {k for k, n in report.counts.items() if n}
        assert fired == {levels["fast"]}, (bug, report.to_text())


def test_raise_action_stops_at_the_first_violation(toy: SimpleNamespace) -> None:
    engine = toy.build("capture-without-invalidation")
    with Sanitizer(level="fast", action="raise") as san:
        san.watch(engine.pool)
        san.watch(engine.graph_runner)
        with pytest.raises(Exception) as info:
            engine.graph_runner.capture()
    error = info.value
    assert type(error).__name__ == "CaptureCachePollutionError"
    assert error.violation.kind == CAPTURE_CACHE_POLLUTION
    assert "conftest.py" in error.violation.site
    assert "capture-cache-pollution" in str(error)


def test_watch_detects_roles(toy: SimpleNamespace) -> None:
    engine = toy.build()
    with Sanitizer() as san:
        roles = [
            san.watch(o).value
            for o in (engine.pool, engine.backend, engine.graph_runner, engine.model_runner)
        ]
        assert roles == ["pool", "backend", "graph-runner", "model-runner"]
        with pytest.raises(TypeError, match="none of"):
            san.watch(torch.zeros(1))
        assert san.report().watched == {
            "pool": 1,
            "backend": 1,
            "graph-runner": 1,
            "model-runner": 1,
        }
