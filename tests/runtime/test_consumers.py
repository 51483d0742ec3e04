"""SWA locations checked where they are consumed (I3), whatever they are called: a pool's
KV write given a location holder (SGLang's ``KVWriteLoc``), the KV writes of its SWA
sub-pool (``set_kv_buffer(layer, loc, ...)``); and an uninvalidated mapping write
reported at the line that wrote it."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
import torch

from swacheck.config import Config
from swacheck.runtime import SWA_LOC_DTYPE, Sanitizer, UninvalidatedMappingWriteError


@dataclass
class WriteLoc:
    loc: torch.Tensor
    swa_loc: torch.Tensor | None = None


class SubPool:
    def __init__(self) -> None:
        self.k_buffer = torch.zeros(16, 2)

    def set_kv_buffer(self, layer: object, loc: torch.Tensor, cache_k: torch.Tensor) -> None:
        self.k_buffer[loc] = cache_k


class HybridPool:
    """SGLang's SWAKVPool shape: an SWA sub-pool, a KV write that picks the SWA location
    for SWA layers, translate without a cache."""

    def __init__(self) -> None:
        self.full_to_swa_index_mapping = torch.arange(17, dtype=torch.int64)
        self.swa_kv_pool = SubPool()

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        return self.full_to_swa_index_mapping[kv_indices]

    def set_kv_buffer(self, layer_id: int, loc_info: WriteLoc, cache_k: torch.Tensor) -> None:
        if layer_id % 2 == 0:  # an SWA layer
            self.swa_kv_pool.set_kv_buffer(None, loc_info.swa_loc, cache_k)


@pytest.mark.parametrize("level", ["fast", "full"])
def test_swa_location_in_a_holder_and_at_the_subpool(level: str) -> None:
    pool = HybridPool()
    locs = torch.tensor([1, 2, 3])
    cache = torch.ones(3, 2)
    int32 = Config(runtime_swa_loc_dtypes="int32")
    with Sanitizer(level=level, action="log", config=int32) as san:
        san.watch(pool)
        swa = pool.translate_loc_from_full_to_swa(locs)  # int64: fine until consumed
        assert san.report().ok
        pool.set_kv_buffer(0, WriteLoc(locs, swa.to(torch.int32)), cache)
        assert san.report().ok
        pool.set_kv_buffer(0, WriteLoc(locs, swa), cache)  # the int64 one reaches the write
        pool.swa_kv_pool.set_kv_buffer(None, swa[:2], cache[:2])  # another view of it
        report = san.report()
    assert report.counts[SWA_LOC_DTYPE] == 2, report.to_text()
    assert "HybridPool.set_kv_buffer(loc_info=WriteLoc.swa_loc)" in report.violations[0].message
    assert "HybridPool.swa_kv_pool.set_kv_buffer(loc=...), an SWA location" in (
        report.violations[1].message
    )


def test_runtime_dtypes_per_release_line() -> None:
    """``runtime-swa-loc-dtypes``: a release line that consumes int64 SWA locations."""
    pool = HybridPool()
    locs = torch.tensor([1, 2])
    with Sanitizer(config=Config(runtime_swa_loc_dtypes=("int32", "int64"))) as san:
        san.watch(pool)
        pool.set_kv_buffer(
            0, WriteLoc(locs, pool.translate_loc_from_full_to_swa(locs)), torch.ones(2, 2)
        )
        assert san.report().ok
        with pytest.raises(Exception, match=r"torch\.int16, expected torch\.int32 or torch\.int64"):
            pool.set_kv_buffer(0, WriteLoc(locs, locs.to(torch.int16)), torch.ones(2, 2))


def test_uninvalidated_write_reported_at_the_line_that_wrote(toy: object) -> None:
    """The report names the engine's write, inside the method the test called."""

    class Allocator:
        def __init__(self, pool: object) -> None:
            self.pool = pool

        def release(self, locs: torch.Tensor) -> None:
            self._unmap(locs)

        def _unmap(self, locs: torch.Tensor) -> None:
            self.pool.full_to_swa_index_mapping[locs] = 0  # no invalidation follows

    pool = toy.Pool()  # type: ignore[attr-defined]
    locs = pool.alloc(4)
    allocator = Allocator(pool)
    with Sanitizer(level="fast") as san:
        san.watch(pool)
        san.watch(allocator, "allocator")
        pool.translate_loc_from_full_to_swa(locs)
        with pytest.raises(UninvalidatedMappingWriteError) as caught:
            allocator.release(locs[:1])
    violation = caught.value.violation
    assert re.search(r"test_consumers\.py:\d+ in _unmap", violation.site), violation.site
    assert "self.pool.full_to_swa_index_mapping[locs] = 0" in violation.message
    assert "during " in violation.message and "release()" in violation.message
