"""I9 (``swa-loc-mistranslated``) and the dtype contract by role (I3) on every release's
real ``SWAKVPool`` and allocator, with the default configuration.

The SWA location a KV write uses is taken where the release's pool really hands it to
its SWA sub-pool: 0.5.11-0.5.12 read it from ``self.swa_loc`` (set per batch by the
model runner), 0.5.13 takes ``swa_loc=``, 0.5.14+ a ``KVWriteLoc``. Re-injected, in the
release's own calls: the full locations passed as SWA ones (``swa_out_cache_loc =
out_cache_loc``), and a translation kept across a mapping change (a token that left the
window). The unmodified churn reports nothing (``test_pools``); neither does 0.5.13+'s
int64 with no dtype exception configured, while a role table that says otherwise is
enforced.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch
from sglang_objects import SIZE_SWA, SWA_LAYERS, churn, pool_and_allocator, write_kv_as_given
from sglang_shim import Release

from swacheck.config import Config
from swacheck.runtime import SWA_LOC_DTYPE, SWA_LOC_MISTRANSLATED, Sanitizer

LEVELS = ["fast", "full"]
RELEASES = ("0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.23")


def fresh_batch(release: Release, pool: Any, allocator: Any) -> torch.Tensor:
    """Three tokens' full locations whose SWA slot numbers differ from them (a fresh pool
    hands out slot i of both pools to token i): three earlier tokens left the window,
    others fill the rest of the SWA pool, so the batch gets the SWA slots they freed."""
    early = allocator.alloc(3)
    allocator.free_swa(early)
    assert allocator.alloc(SIZE_SWA - 3) is not None
    locs = allocator.alloc(3)
    assert (pool.full_to_swa_index_mapping[locs] != locs).all()
    return locs


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sglang", RELEASES, indirect=True)
def test_untranslated_swa_location_is_caught(sglang: Release, level: str, figures: Any) -> None:
    pool, allocator = pool_and_allocator(sglang)
    with Sanitizer(level=level, action="log") as san:
        san.watch(pool)
        san.watch(allocator)
        locs = fresh_batch(sglang, pool, allocator)
        pool.translate_loc_from_full_to_swa(locs)  # the batch's translation, made and lost
        # Full slots past the SWA pool's end: the write itself fails on the CPU (on a GPU
        # it writes out of bounds); the check ran before it.
        with contextlib.suppress(IndexError):
            write_kv_as_given(sglang, pool, SWA_LAYERS[0], locs, locs)
        report = san.report()
    figures("KV write with the full locations as SWA ones", report)
    assert report.counts[SWA_LOC_MISTRANSLATED] == 1, report.to_text()
    violation = next(v for v in report.violations if v.kind == SWA_LOC_MISTRANSLATED)
    expected = pool.full_to_swa_index_mapping[locs].tolist()
    assert [row[1:] for row in violation.rows] == [
        (full, want, full) for full, want in zip(locs.tolist(), expected, strict=True)
    ]
    assert "SWAKVPool.set_kv_buffer" in violation.message
    assert "swa_memory_pool.py" in violation.site  # the pool's write to its SWA sub-pool


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sglang", RELEASES, indirect=True)
def test_translation_kept_across_a_mapping_change_is_caught(sglang: Release, level: str) -> None:
    """The first token leaves the window (``free_swa`` unmaps it) after its batch was
    translated; a write with the kept translation still names its old SWA slot."""
    pool, allocator = pool_and_allocator(sglang)
    with Sanitizer(level=level, action="log") as san:
        san.watch(pool)
        san.watch(allocator)
        locs = fresh_batch(sglang, pool, allocator)
        kept = pool.translate_loc_from_full_to_swa(locs)
        allocator.free_swa(locs[:1])
        write_kv_as_given(sglang, pool, SWA_LAYERS[0], locs, kept)
        report = san.report()
    assert report.counts[SWA_LOC_MISTRANSLATED] == 1, report.to_text()
    (violation,) = [v for v in report.violations if v.kind == SWA_LOC_MISTRANSLATED]
    assert violation.rows == ((0, int(locs[0]), 0, int(kept[0])),)


@pytest.mark.parametrize("sglang", ["0.5.11", "0.5.23"], indirect=True)
def test_dtype_by_role_table(sglang: Release) -> None:
    """The contract as a table by role: the release's own convention passes; a write
    index of the other width is reported where the SWA sub-pool receives it."""
    own = "int32" if sglang.version == "0.5.11" else "int64"
    other = "int64" if own == "int32" else "int32"
    for write, clean in ((own, True), (other, False)):
        config = Config(runtime_swa_loc_dtypes={"write": write, "page-table": "int32"})
        pool, allocator = pool_and_allocator(sglang)
        with Sanitizer(level="fast", action="log", config=config) as san:
            san.watch(pool)
            san.watch(allocator)
            churn(sglang, pool, allocator, steps=4)
            report = san.report()
        assert report.ok is clean, report.to_text()
        if not clean:
            assert report.counts[SWA_LOC_DTYPE] >= 1
            assert all(f"expected torch.{write}" in v.message for v in report.violations)
            assert all("for an SWA write index" in v.message for v in report.violations)


@pytest.mark.parametrize("sglang", ["0.5.11", "0.5.13", "0.5.23"], indirect=True)
def test_auto_learns_each_release_convention(sglang: Release) -> None:
    """``auto``: the write role takes the dtype the release's translation produces."""
    pool, allocator = pool_and_allocator(sglang)
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        san.watch(allocator)
        churn(sglang, pool, allocator, steps=4)
        report = san.report()
        learned = san.dtypes.allowed("write")
    assert report.ok, report.to_text()
    translated = pool.translate_loc_from_full_to_swa(torch.tensor([1])).dtype
    assert learned == frozenset((translated,))
    assert translated == (torch.int32 if sglang.version == "0.5.11" else torch.int64)
