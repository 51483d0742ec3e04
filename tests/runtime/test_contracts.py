"""Type contracts: jaxtyping annotations on watched methods, checked by typeguard."""

from __future__ import annotations

import pytest
import torch
from jaxtyping import Float32, Int, Int32, Int64
from torch import Tensor
from typeguard import TypeCheckError

from swacheck.runtime import SWA_LOC_DTYPE, Sanitizer, StaleTranslationError, SWALocDtypeError

# A named dimension; a module constant keeps ruff from parsing "n" as a forward reference.
N = "n"


class AnnotatedPool:
    def __init__(self) -> None:
        self.full_to_swa_index_mapping = torch.tensor([0, 1, 2, 3, -1])
        self.k = torch.zeros(4)

    def translate_loc_from_full_to_swa(self, kv_indices: Int[Tensor, N]) -> Int32[Tensor, N]:
        return self.full_to_swa_index_mapping[kv_indices].to(torch.int32)

    def set_kv_buffer(
        self,
        loc: Int64[Tensor, N],
        cache_k: Float32[Tensor, N],
        out_cache_loc_swa: Int32[Tensor, N] | None = None,
    ) -> None:
        swa = out_cache_loc_swa if out_cache_loc_swa is not None else loc
        self.k[swa] = cache_k

    def mark_window(self, swa_window_loc: Int32[Tensor, N]) -> None:
        """An SWA-location argument that only the contract knows about."""
        self.k[swa_window_loc] = -1.0


def test_swa_location_contract_is_a_dtype_violation() -> None:
    pool = AnnotatedPool()
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        pool.mark_window(torch.tensor([1, 2], dtype=torch.int32))
        assert san.report().ok
        pool.mark_window(torch.tensor([1, 2]))
        report = san.report()
    assert report.counts[SWA_LOC_DTYPE] == 1
    assert "contract: AnnotatedPool.mark_window: argument 'swa_window_loc'" in str(
        report.violations[0]
    )


def test_one_report_per_offending_tensor() -> None:
    """set_kv_buffer's SWA argument is checked by name and by its contract: one report."""
    pool = AnnotatedPool()
    with Sanitizer(level="fast") as san:
        san.watch(pool)
        loc = torch.tensor([1, 2])
        pool.set_kv_buffer(loc, torch.ones(2), torch.tensor([1, 2], dtype=torch.int32))
        with pytest.raises(SWALocDtypeError, match="out_cache_loc_swa"):
            pool.set_kv_buffer(loc, torch.ones(2), torch.tensor([1, 2]))
        assert san.report().counts[SWA_LOC_DTYPE] == 1


def test_other_contracts_raise_typeguard_errors() -> None:
    pool = AnnotatedPool()
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        with pytest.raises(TypeCheckError, match="argument 'cache_k'"):
            pool.set_kv_buffer(torch.tensor([1, 2]), torch.ones(2, dtype=torch.float64))
        # Named dimensions must agree across arguments.
        with pytest.raises(TypeCheckError, match="cache_k"):
            pool.set_kv_buffer(torch.tensor([1, 2]), torch.ones(3))
        assert san.report().counts[SWA_LOC_DTYPE] == 0


def test_contracts_off_and_after_close() -> None:
    """Without contracts the bad call reaches torch, which fails in its own way."""
    bad = (torch.tensor([1, 2]), torch.ones(2, dtype=torch.float64))
    pool = AnnotatedPool()
    with Sanitizer(level="fast", contracts=False) as san:
        san.watch(pool)
        with pytest.raises(RuntimeError, match="dtypes match"):
            pool.set_kv_buffer(*bad)
    with Sanitizer(level="fast") as san:
        san.watch(pool)
    with pytest.raises(RuntimeError, match="dtypes match"):
        pool.set_kv_buffer(*bad)


def test_violations_inside_contracts_carry_no_jaxtyping_note() -> None:
    class CachingPool(AnnotatedPool):
        cached: torch.Tensor | None = None

        def translate_loc_from_full_to_swa(self, kv_indices: Int[Tensor, N]) -> Int32[Tensor, N]:
            if self.cached is None:
                self.cached = super().translate_loc_from_full_to_swa(kv_indices)
            return self.cached

    pool = CachingPool()
    key = torch.tensor([1, 2])
    with Sanitizer(level="fast") as san:
        san.watch(pool)
        pool.translate_loc_from_full_to_swa(key)
        key.add_(1)
        with pytest.raises(StaleTranslationError) as info:
            pool.translate_loc_from_full_to_swa(key)
    assert not any("jaxtyping" in note for note in getattr(info.value, "__notes__", []))
