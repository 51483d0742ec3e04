"""DeepSeek-V4's pool keeps the SWA translation of the first layer in an attribute and
reuses it for the later layers (``self.cached_loc = self.translate_loc_from_full_to_swa(
raw_loc)``, 0.5.12 and 0.5.12.post1). The sanitizer recognises that attribute cache on
the real class and checks every read of it against the mapping it was made from:

- 0.5.12: ``register_mapping`` replaced the mapping and left ``cached_loc``; the next
  layer's read served the old mapping's slots (the bug #25889 fixed): stale;
- 0.5.12.post1: ``register_mapping`` resets ``cached_loc``: clean; a mapping written in
  place with no reset before a later layer reads the cache is still stale.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch
from sglang_objects import allocator_class
from sglang_shim import Release

from swacheck.runtime import STALE_TRANSLATION, SWA_LOC_DTYPE, Sanitizer, StaleTranslationError

LAYERS = 3
DIM = 8


def dsv4_pool(release: Release, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, list[Any]]:
    """The release's ``DeepSeekV4TokenToKVPool`` (uncompressed layers, page size 1) and
    its ``SWATokenToKVPoolAllocator``. The SWA sub-pool's fused store is a JIT CUDA
    kernel: on the CPU it records the SWA locations it is given instead."""
    module = importlib.import_module("sglang.srt.mem_cache.deepseek_v4_memory_pool")
    monkeypatch.setattr(module, "get_global_server_args", lambda: None, raising=False)
    (pool_cls,) = release.load(module.__name__, "DeepSeekV4TokenToKVPool")
    pool = pool_cls(
        max_num_reqs=4,
        swa_size=32,
        c4_size=32,
        c128_size=1,
        c4_state_pool_size=4,
        c128_state_pool_size=4,
        page_size=1,
        swa_page_size=1,
        dtype=torch.float8_e4m3fn,
        state_dtype=torch.float32,
        qk_nope_head_dim=448,
        qk_rope_head_dim=64,
        indexer_head_dim=128,
        layer_num=LAYERS,
        device="cpu",
        enable_memory_saver=False,
        compression_ratios=[0] * LAYERS,
    )
    written: list[Any] = []
    pool.swa_kv_pool.set_key_buffer_fused = lambda layer_id, loc, cache_k: written.append(loc)
    allocator = allocator_class(release)(
        size=64,
        size_swa=32,
        page_size=1,
        dtype=torch.float8_e4m3fn,
        device="cpu",
        kvcache=pool,
        need_sort=False,
    )
    assert pool._should_cache_swa, "SGLANG_OPT_CACHE_SWA_TRANSLATION is on by default"
    return pool, allocator, written


def forward(pool: Any, locs: torch.Tensor, layers: range = range(LAYERS)) -> None:
    """Each layer writes its new tokens' SWA KV, as the attention backend does."""
    cache = torch.zeros(locs.numel(), DIM)
    for layer_id in layers:
        pool.set_swa_key_buffer_radix_fused(layer_id, locs, cache)


@pytest.mark.parametrize("level", ["fast", "full"])
@pytest.mark.parametrize("sglang", ["0.5.12", "0.5.12.post1"], indirect=True)
def test_mapping_replaced_under_the_cached_translation(
    sglang: Release, level: str, monkeypatch: pytest.MonkeyPatch, figures: Any
) -> None:
    pool, allocator, written = dsv4_pool(sglang, monkeypatch)
    with Sanitizer(level=level, action="log") as san:
        san.watch(pool)
        san.watch(allocator)
        locs = allocator.alloc(4)
        forward(pool, locs)  # layer 0 translates and caches, layers 1-2 reuse it
        fresh = pool.full_to_swa_index_mapping.clone()
        fresh[locs] = torch.tensor([9, 10, 11, 12])
        pool.register_mapping(fresh)  # a new mapping: the cached slots are the old ones
        forward(pool, locs, range(1, LAYERS))
        report = san.report()
    figures("DeepSeekV4TokenToKVPool attribute cache", report)
    assert report.cache_models == {"DeepSeekV4TokenToKVPool": "attribute cache (cached_loc)"}
    assert report.watched == {"pool": 1, "allocator": 1}
    assert report.checks[STALE_TRANSLATION] >= 2  # layers 1 and 2 of the first forward
    assert report.checks[SWA_LOC_DTYPE] >= len(written)  # every fused store's SWA location
    if sglang.version == "0.5.12":
        assert report.counts[STALE_TRANSLATION] == 1, report.to_text()
        (violation,) = report.violations
        assert "cached_loc served by set_swa_key_buffer_radix_fused()" in violation.message
        assert "the mapping changed since" in violation.message
        assert written[-1].tolist() != fresh[locs].tolist()  # the old slots were written
    else:
        assert report.ok, report.to_text()
        assert written[-1].tolist() == fresh[locs].tolist()


@pytest.mark.parametrize("level", ["fast", "full"])
@pytest.mark.parametrize("sglang", ["0.5.12.post1"], indirect=True)
def test_mapping_written_in_place_under_the_cached_translation(
    sglang: Release, level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fix resets the cache where the mapping is replaced, not where it is written:
    the allocator moving a token's SWA slot between two layers' reads is served stale."""
    pool, allocator, _ = dsv4_pool(sglang, monkeypatch)
    with Sanitizer(level=level, action="raise") as san:
        san.watch(pool)
        san.watch(allocator)
        locs = allocator.alloc(4)
        forward(pool, locs, range(1))
        allocator.free_swa(locs[:1])  # the first token left the window: mapping written
        with pytest.raises(StaleTranslationError, match=r"written in place since"):
            forward(pool, locs, range(1, LAYERS))


@pytest.mark.parametrize("sglang", ["0.5.12.post1"], indirect=True)
def test_every_forward_refills_the_cache(sglang: Release, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mapping writes between forwards are harmless: each forward's first layer refills
    the cache before any later layer reads it."""
    pool, allocator, _ = dsv4_pool(sglang, monkeypatch)
    with Sanitizer(level="full", action="raise") as san:
        san.watch(pool)
        san.watch(allocator)
        live = []
        for _ in range(12):
            live.append(allocator.alloc(2))
            forward(pool, torch.cat(live))
            if len(live) > 3:
                allocator.free(live.pop(0))
        report = san.report()
    assert report.ok and report.checks[STALE_TRANSLATION] == 12 * (LAYERS - 1)
