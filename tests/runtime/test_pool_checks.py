"""Pool-level checks on real tensors: stale hits (I2), mapping writes (I1), dtypes (I3)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
import torch

from swacheck.runtime import (
    STALE_TRANSLATION,
    SWA_LOC_DTYPE,
    UNINVALIDATED_MAPPING_WRITE,
    Sanitizer,
    StaleTranslationError,
    SWALocDtypeError,
    UninvalidatedMappingWriteError,
)


def mapped_pool(toy: SimpleNamespace, bug: str = "") -> tuple[object, torch.Tensor]:
    pool = toy.Pool(bug=bug)
    locs = pool.alloc(8)
    return pool, locs


def test_hit_on_the_same_tensor_is_fine(toy: SimpleNamespace) -> None:
    pool, locs = mapped_pool(toy)
    with Sanitizer(level="full") as san:
        san.watch(pool)
        first = pool.translate_loc_from_full_to_swa(locs)
        assert pool.translate_loc_from_full_to_swa(locs[:]) is first  # a hit, legitimately
        assert san.report().ok


def test_key_written_in_place_is_stale(toy: SimpleNamespace) -> None:
    pool, locs = mapped_pool(toy)
    with Sanitizer(level="fast") as san:
        san.watch(pool)
        pool.translate_loc_from_full_to_swa(locs)
        locs.copy_(locs.flip(0))  # same pointer, same numel, new contents
        with pytest.raises(StaleTranslationError, match="written in place") as info:
            pool.translate_loc_from_full_to_swa(locs)
    assert info.value.violation.values == tuple(locs.tolist())
    assert "test_pool_checks.py" in info.value.violation.site


def test_other_view_of_one_storage_is_stale(toy: SimpleNamespace) -> None:
    """The storage-pointer-key bug (#25824): two offsets of one buffer collide."""
    pool, locs = mapped_pool(toy, bug="storage-pointer-key")
    with Sanitizer(level="fast") as san:
        san.watch(pool)
        pool.translate_loc_from_full_to_swa(locs[0:4])
        with pytest.raises(StaleTranslationError, match="another view"):
            pool.translate_loc_from_full_to_swa(locs[4:8])


def test_freed_key_reused_address_is_stale(toy: SimpleNamespace) -> None:
    """A key tensor freed and its address handed to another tensor: same (data_ptr, numel),
    other contents. ``frombuffer`` over one buffer makes that deterministic."""
    pool, locs = mapped_pool(toy)
    memory = bytearray(locs[:4].numpy().tobytes())
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        key = torch.frombuffer(memory, dtype=torch.int64)
        pool.translate_loc_from_full_to_swa(key)
        pointer = key.data_ptr()
        del key
        memory[:] = locs[4:8].numpy().tobytes()
        reused = torch.frombuffer(memory, dtype=torch.int64)
        assert reused.data_ptr() == pointer
        pool.translate_loc_from_full_to_swa(reused)
        report = san.report()
    assert report.counts[STALE_TRANSLATION] == 1
    assert "freed" in report.violations[0].message


def test_full_catches_writes_behind_the_version_counter(toy: SimpleNamespace) -> None:
    """A write no version counter sees (as a Triton kernel's): only re-translation catches it."""
    for level, expected in (("fast", 0), ("full", 1)):
        pool, locs = mapped_pool(toy)
        with Sanitizer(level=level, action="log") as san:
            san.watch(pool)
            pool.translate_loc_from_full_to_swa(locs)
            locs.numpy()[:] = locs.numpy()[::-1].copy()  # bypasses _version
            pool.translate_loc_from_full_to_swa(locs)
            assert san.report().counts[STALE_TRANSLATION] == expected, level


def test_mapping_written_by_a_method_without_invalidation(toy: SimpleNamespace) -> None:
    pool, locs = mapped_pool(toy, bug="missing-invalidation")
    with Sanitizer(level="fast") as san:
        san.watch(pool)
        pool.translate_loc_from_full_to_swa(locs)
        with pytest.raises(UninvalidatedMappingWriteError, match=r"during ToyPool\.free"):
            pool.free(locs[:2])


ON_NPU = False  # a platform flag, as SGLang's ``_is_npu``


def test_mapping_write_named_among_the_lines_that_can_run(toy: SimpleNamespace) -> None:
    """The report names the lines that can have written the mapping: a branch a module
    flag rules out is left out; alternatives only the data decides are all named."""

    class BranchingPool(toy.Pool):  # type: ignore[name-defined, misc]
        def free(self, full: torch.Tensor) -> None:
            if ON_NPU:
                self.full_to_swa_index_mapping[full.long()] = 0  # npu
            elif full.numel() > 4:
                self.full_to_swa_index_mapping.index_fill_(0, full, 0)  # many
            else:
                self.full_to_swa_index_mapping[full] = 0  # few

    pool = BranchingPool()
    locs = pool.alloc(8)
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        pool.translate_loc_from_full_to_swa(locs)
        pool.free(locs[:2])
        (violation,) = san.report().violations
    lines, start = inspect.getsourcelines(BranchingPool.free)
    line = {
        text.rsplit("# ", 1)[1].strip(): start + n for n, text in enumerate(lines) if "# " in text
    }
    assert "which writes it at one of 2 lines: " in violation.message
    assert f":{line['many']} in free" in violation.message
    assert f":{line['few']} in free" in violation.message
    assert f":{line['npu']} in free" not in violation.message
    assert violation.site.startswith(__file__)  # the caller: no single line to name


def test_mapping_written_outside_any_method(toy: SimpleNamespace) -> None:
    pool, locs = mapped_pool(toy)
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        pool.translate_loc_from_full_to_swa(locs)
        pool.full_to_swa_index_mapping[locs[0]] = 9  # no invalidation follows
        pool.translate_loc_from_full_to_swa(locs)
        report = san.report()
    assert report.counts[UNINVALIDATED_MAPPING_WRITE] == 1
    assert report.counts[STALE_TRANSLATION] == 1
    assert "outside any watched call" in report.violations[0].message


@pytest.mark.parametrize(
    "swap",
    [
        pytest.param(lambda pool, m: setattr(pool, "full_to_swa_index_mapping", m), id="rebound"),
        pytest.param(lambda pool, m: pool.full_to_swa_index_mapping.set_(m), id="set_"),
        pytest.param(lambda pool, m: setattr(pool.full_to_swa_index_mapping, "data", m), id="data"),
    ],
)
def test_mapping_replaced_by_another_tensor(toy: SimpleNamespace, swap: object) -> None:
    """A new mapping tensor (or storage) under a live entry is a mapping write too, however
    its version counter reads."""
    pool, locs = mapped_pool(toy)
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        pool.translate_loc_from_full_to_swa(locs)
        swap(pool, pool.full_to_swa_index_mapping.clone())  # type: ignore[operator]
        pool.translate_loc_from_full_to_swa(locs)  # no invalidation came in between
        report = san.report()
    assert report.counts[UNINVALIDATED_MAPPING_WRITE] == 1, report.violations


def test_write_then_invalidate_is_fine(toy: SimpleNamespace) -> None:
    pool, locs = mapped_pool(toy)
    with Sanitizer(level="full") as san:
        san.watch(pool)
        pool.translate_loc_from_full_to_swa(locs)
        pool.full_to_swa_index_mapping[locs[0]] = 9
        pool.invalidate_loc_cache()
        assert pool.translate_loc_from_full_to_swa(locs)[0].item() == 9
        pool.free(locs[:2])
        pool.alloc(2)
        assert san.report().ok


def test_hit_served_after_invalidation(toy: SimpleNamespace) -> None:
    class ForgetfulPool(toy.Pool):
        def invalidate_loc_cache(self) -> None:
            pass  # the base-class no-op, on a pool that does cache

    pool = ForgetfulPool()
    locs = pool.alloc(4)
    with Sanitizer(level="fast") as san:
        san.watch(pool)
        pool.translate_loc_from_full_to_swa(locs)
        pool.invalidate_loc_cache()
        with pytest.raises(StaleTranslationError, match="invalidated since"):
            pool.translate_loc_from_full_to_swa(locs)


def test_invalidation_is_watched_only_while_an_entry_is_live(toy: SimpleNamespace) -> None:
    """With nothing cached there is nothing to invalidate, so the wrapper is out of the way
    (the pool's own method is called directly); a miss puts it back, and every
    invalidation still ends the live entry (a hit after it is stale)."""
    pool, locs = mapped_pool(toy)
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        assert "invalidate_loc_cache" in vars(pool)
        pool.translate_loc_from_full_to_swa(locs)
        kept = pool.invalidate_loc_cache  # a bound reference taken while it was live
        pool.invalidate_loc_cache()
        assert "invalidate_loc_cache" not in vars(pool)
        pool.invalidate_loc_cache()  # the pool's own method: nothing to record
        pool.translate_loc_from_full_to_swa(locs)  # a miss: live again
        assert vars(pool)["invalidate_loc_cache"] is kept
        pool.free(locs[:1])  # invalidates inside an allocator call
        assert "invalidate_loc_cache" not in vars(pool)
        assert san.report().ok
        translate = pool.translate_loc_from_full_to_swa  # kept past the sanitizer's end
    translate(locs[1:])  # a miss through the old wrapper: its invalidation stays off
    assert "invalidate_loc_cache" not in vars(pool)


def test_translation_dtype_only_where_configured(toy: SimpleNamespace) -> None:
    """A translation's own dtype is not a consumer: engines that translate to int64 and
    cast where the index is used are correct, so it is checked only on request."""
    from swacheck.config import Config

    pool, locs = mapped_pool(toy, bug="swa-loc-int64")
    with Sanitizer(level="fast") as san:
        san.watch(pool)
        assert pool.translate_loc_from_full_to_swa(locs).dtype == torch.int64
        assert san.report().ok
    int32 = Config(check_translate_dtype=True, runtime_swa_loc_dtypes="int32")
    with Sanitizer(level="fast", config=int32) as san:
        san.watch(pool)
        pool.invalidate_loc_cache()
        with pytest.raises(SWALocDtypeError, match=r"torch\.int64, expected torch\.int32"):
            pool.translate_loc_from_full_to_swa(locs)


def test_swa_location_argument_dtype() -> None:
    class PoolTakingSWALocs:
        def __init__(self) -> None:
            self.full_to_swa_index_mapping = torch.tensor([0, 1, 2, -1])
            self.written: list[torch.Tensor] = []

        def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
            return self.full_to_swa_index_mapping[kv_indices].to(torch.int32)

        def set_kv_buffer(self, layer_id: int, loc: torch.Tensor, out_cache_loc_swa=None):
            self.written.append(out_cache_loc_swa)

    pool = PoolTakingSWALocs()
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        pool.set_kv_buffer(0, torch.tensor([1]), torch.tensor([1], dtype=torch.int32))
        pool.set_kv_buffer(0, torch.tensor([1]), out_cache_loc_swa=torch.tensor([1]))
        report = san.report()
    assert report.counts[SWA_LOC_DTYPE] == 1
    assert "out_cache_loc_swa" in report.violations[0].message


def test_configured_names(toy: SimpleNamespace) -> None:
    """A pool with other names is recognised through the linter's configuration."""
    from swacheck.config import Config

    class OtherNames:
        def __init__(self) -> None:
            self.slot_table = torch.tensor([0, 3, 4, -1])
            self._hit: torch.Tensor | None = None

        def to_window(self, idx: torch.Tensor) -> torch.Tensor:
            if self._hit is None:
                self._hit = self.slot_table[idx].to(torch.int32)
            return self._hit

        def drop(self) -> None:
            self._hit = None

    config = Config(
        mapping_attributes=("slot_table",),
        translate_methods=("to_window",),
        invalidate_methods=("drop",),
    )
    pool = OtherNames()
    with Sanitizer(level="fast", action="log", config=config) as san:
        assert san.watch(pool).value == "pool"
        key = torch.tensor([1, 2])
        pool.to_window(key)
        key.add_(0)
        pool.to_window(key)
        pool.drop()
        pool.to_window(key)
        assert san.report().counts[STALE_TRANSLATION] == 1


def test_inference_tensors_have_no_version(toy: SimpleNamespace) -> None:
    """Inference-mode keys keep no version counter: the check must not crash, and the
    storage identity still holds."""
    pool = toy.Pool()
    with torch.inference_mode():
        locs = pool.alloc(4)
        with Sanitizer(level="full") as san:
            san.watch(pool)
            pool.translate_loc_from_full_to_swa(locs)
            pool.translate_loc_from_full_to_swa(locs)
            assert san.report().ok
