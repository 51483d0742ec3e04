"""A watched runner's capture runs with Python's cyclic garbage collector paused (see
``Checks.enter_capture``: a collection inside a CUDA-graph capture can free device memory
allocated outside it and break the capture), and the collector's state is restored
afterwards, also when the capture raises or the collector was off already."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from swacheck.runtime import Sanitizer


@pytest.fixture
def engine(toy: SimpleNamespace) -> Iterator[tuple[SimpleNamespace, list[bool]]]:
    """The toy engine watched at ``fast``, with the collector's state seen by each run."""
    engine = toy.build()
    seen: list[bool] = []
    run_once = engine.graph_runner.run_once

    def recording_run_once(bs: int) -> None:
        seen.append(gc.isenabled())
        run_once(bs)

    engine.graph_runner.run_once = recording_run_once
    with Sanitizer(level="fast") as san:
        san.watch_pool(engine.pool)
        san.watch_graph_runner(engine.graph_runner)
        yield engine, seen
    gc.enable()


def test_collector_paused_during_capture_and_restored(
    engine: tuple[SimpleNamespace, list[bool]],
) -> None:
    toy_engine, seen = engine
    assert gc.isenabled()
    toy_engine.graph_runner.capture()
    assert seen and not any(seen)
    assert gc.isenabled()


def test_collector_left_off_when_it_was_off(engine: tuple[SimpleNamespace, list[bool]]) -> None:
    toy_engine, seen = engine
    gc.disable()
    toy_engine.graph_runner.capture()
    assert seen and not any(seen)
    assert not gc.isenabled()


def test_collector_restored_when_capture_raises(
    engine: tuple[SimpleNamespace, list[bool]],
) -> None:
    toy_engine, _ = engine

    def failing_run_once(bs: int) -> None:
        raise RuntimeError("capture failed")

    toy_engine.graph_runner.run_once = failing_run_once
    with pytest.raises(RuntimeError, match="capture failed"):
        toy_engine.graph_runner.capture()
    assert gc.isenabled()
