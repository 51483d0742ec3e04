"""Every release's real ``SWAKVPool`` and ``SWATokenToKVPoolAllocator`` under an
alloc/translate/write/free churn: recognised as a pool without a translation cache and
an allocator that delegates translate to it, and never flagged."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from conftest import RELEASES
from sglang_objects import DEFAULT, SWA_LAYERS, churn, pool_and_allocator, version_tuple
from sglang_shim import Release

from swacheck.config import Config
from swacheck.runtime import SWA_LOC_DTYPE, SWA_LOC_MISTRANSLATED, Sanitizer


@pytest.mark.parametrize("level", ["fast", "full"])
@pytest.mark.parametrize("sglang", RELEASES, indirect=True)
def test_churn_on_pool_and_allocator_is_clean(sglang: Release, level: str, figures: Any) -> None:
    pool, allocator = pool_and_allocator(sglang)
    with Sanitizer(level=level, action="raise", config=DEFAULT) as san:
        assert san.watch(pool).value == "pool"
        assert san.watch(allocator).value == "allocator"
        writes = churn(sglang, pool, allocator)
        report = san.report()
    figures("pool+allocator churn", report)
    assert report.ok, report.to_text()
    assert report.watched == {"pool": 1, "allocator": 1}
    assert report.cache_models == {"SWAKVPool": "no cache"}
    # Every SWA layer's write reached the SWA sub-pool, where its location was checked,
    # and its SWA location was compared with the translation of its full one (I9).
    assert report.checks[SWA_LOC_DTYPE] >= writes * len(SWA_LAYERS) // 4
    assert report.checks[SWA_LOC_MISTRANSLATED] > 0
    assert "uninvalidated-mapping-write" not in report.checks


@pytest.mark.parametrize("sglang", ["0.5.23"], indirect=True)
def test_int64_swa_locations_reach_the_subpool_on_the_newest_line(sglang: Release) -> None:
    """From 0.5.13 on the attention backend translates once per forward to int64 and the
    SWA sub-pool's write consumes it as such: under the int32 contract (the default, as
    the seed era's I3) every such location is reported where the pool is handed it, in
    the ``KVWriteLoc`` holder (each tensor once); the default, ``auto``, takes the
    release's own convention (the translation's int64) and reports nothing."""
    assert version_tuple(sglang.version) >= (0, 5, 13)
    pool, allocator = pool_and_allocator(sglang)
    int32 = Config(runtime_swa_loc_dtypes="int32")
    with Sanitizer(level="fast", action="log", config=int32) as san:
        san.watch(pool)
        san.watch(allocator)
        churn(sglang, pool, allocator, steps=4)
        report = san.report()
    assert report.counts[SWA_LOC_DTYPE] > 0
    assert all("loc_info=KVWriteLoc.swa_loc" in v.message for v in report.violations)
    assert all("torch.int64" in v.message for v in report.violations)


@pytest.mark.parametrize("sglang", ["0.5.11", "0.5.23"], indirect=True)
def test_pool_declared_by_the_plugin_syntax_and_allocator_recognised(sglang: Release) -> None:
    """The allocator holds the pool and shares its mapping: an allocator, not a second
    pool, whichever is constructed first."""
    from swacheck.runtime.roles import detect_role, held_pool

    pool, allocator = pool_and_allocator(sglang)
    config = DEFAULT
    assert held_pool(allocator, config) is pool
    assert detect_role(allocator, config).value == "allocator"
    assert detect_role(pool, config).value == "pool"
    assert allocator.full_to_swa_index_mapping is pool.full_to_swa_index_mapping
    assert allocator.full_to_swa_index_mapping.dtype == torch.int64
