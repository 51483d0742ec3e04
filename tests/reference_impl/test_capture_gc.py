"""A capture that never breaks, whatever ran before it (issue 25 §6).

``test_swa_loc_int64_breaks_the_contract_silently`` failed on an H200 with "operation
failed due to a previous error during capture": the file's earlier tests leave model
runners behind, reference cycles holding CUDA tensors, captured graphs and their memory
pools, and when the cyclic collector happened to run inside a later capture it freed
them there. The reference runner now collects and freezes before capture (SGLang's
``freeze_gc``) and warms up on the stream it captures on. These tests plant such
garbage and force collections inside the capture: without the fix the capture breaks.
"""

from __future__ import annotations

import gc

import pytest
import torch

from swacheck.reference_impl.demo import build_runner, serve

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def plant_garbage() -> None:
    """An earlier runner with its graphs captured, unreachable but for a reference cycle
    (the runner and its graph runner hold each other), as a finished test leaves it."""
    old = build_runner("cuda")
    old.capture_graphs()
    assert old.graph_runner is not None and old.graph_runner.graphs
    old.self_reference = old


def collecting_inside_capture(runner: object) -> list[int]:
    """Make every run inside a capture start with a full collection: the collection point
    that, in the failing run, came whenever the allocation counts said so."""
    graph_runner = runner.graph_runner  # type: ignore[attr-defined]
    run_once = graph_runner.run_once
    collected: list[int] = []

    def run(bs: int) -> torch.Tensor:
        if torch.cuda.is_current_stream_capturing():
            collected.append(gc.collect())
        return run_once(bs)

    graph_runner.run_once = run
    return collected


def test_capture_survives_a_collection_of_old_graphs() -> None:
    plant_garbage()
    runner = build_runner("cuda")
    collected = collecting_inside_capture(runner)
    stats = serve(runner, steps=3)
    assert len(collected) == len(runner.graph_runner.capture_bs)
    assert stats["cuda_graphs"] and not stats["diverged"], stats


def test_capture_after_a_second_runner_was_dropped() -> None:
    """The failing test's own shape: a second runner built and dropped (a cycle) before the
    first one captures; collections inside the capture find nothing of it."""
    runner = build_runner("cuda", inject_bug="swa-loc-int64")
    assert build_runner("cuda").graph_runner is not None  # dropped at once: garbage
    plant_garbage()
    collecting_inside_capture(runner)
    stats = serve(runner, steps=3)
    assert stats["cuda_graphs"] and not stats["diverged"], stats


def test_capture_leaves_the_collector_as_it_was() -> None:
    runner = build_runner("cuda")
    frozen: list[int] = []
    run_once = runner.graph_runner.run_once
    runner.graph_runner.run_once = lambda bs: (frozen.append(gc.get_freeze_count()), run_once(bs))[
        1
    ]
    before = gc.get_freeze_count()
    runner.capture_graphs()
    assert frozen and min(frozen) > 0  # everything alive was frozen during capture
    assert gc.get_freeze_count() == before and gc.isenabled()
