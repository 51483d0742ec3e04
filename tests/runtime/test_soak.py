"""The sanitizer soak (``benchmarks/soak_sanitizer.py``) at CPU size: a churn of random
requests through the reference model with padded graph buckets, eviction and chunked
prefill reports nothing, matches the oracle, keeps its bookkeeping flat, and still
catches every bug switch turned on after the clean phase.

The attention kernels are the benchmark's PyTorch stand-ins (the Triton interpreter
would take ~0.6 s a step); the soak's oracle checks vouch for them.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
STEPS = 200


def _load(name: str) -> ModuleType:
    """A benchmark script as a module (registered, so the soak's import finds the bench)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def soak() -> Iterator[ModuleType]:
    saved_path = list(sys.path)
    bench = _load("bench_sanitizer_overhead")
    module = _load("soak_sanitizer")
    sys.path[:] = saved_path  # the soak puts benchmarks/ on the path to find the bench
    from swacheck.reference_impl import attention_backend

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny ops: a second thread only contends (as in the script)
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, kernel in bench.TORCH_KERNELS.items():
                patch.setattr(attention_backend, name, kernel)
            yield module
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def fast_soak(soak: ModuleType) -> dict[str, Any]:
    return soak.soak("cpu", "fast", STEPS)


def test_clean_churn_reports_nothing_and_matches_the_oracle(fast_soak: dict[str, Any]) -> None:
    assert fast_soak["violations"] == 0, fast_soak["violations_by_kind"]
    assert all(n > 10 * STEPS for n in fast_soak["checks"].values())
    assert 0 < fast_soak["max_abs_diff"] <= fast_soak["tolerance"]


def test_bookkeeping_stays_flat(soak: ModuleType, fast_soak: dict[str, Any]) -> None:
    assert fast_soak["bounded"], fast_soak["grew"]
    for design in soak.DESIGNS:
        sizes = fast_soak["bookkeeping"][design]
        steady = {k: n for k, n in sizes["end"].items() if k not in soak.CAPPED}
        assert steady == {k: sizes["middle"][k] for k in steady}
        assert sizes["end"]["wrappers"] > 0 and sizes["end"]["violations_kept"] == 0
        traced = fast_soak["traced_runtime_bytes"][design]
        assert len(traced["series"]) >= 10
        assert traced["end"] - traced["middle"] < soak.TRACED_SLACK


def test_every_bug_switch_is_caught_after_the_clean_phase(
    soak: ModuleType, fast_soak: dict[str, Any]
) -> None:
    """Each switch's own kind is raised, and nothing is reported once it is off again."""
    bugs = fast_soak["bugs"]
    assert set(bugs) == {f"{d}/{bug}" for d in soak.DESIGNS for bug in soak.BUGS[d]}
    assert {bug.split("/")[1] for bug in bugs} == set(soak.EXPECTED)
    for name, result in bugs.items():
        assert result["raised"] == result["expected"], (name, result)
        assert result["violations_after"] == {}, (name, result)
    assert fast_soak["ok"]


def test_growth_is_told_from_a_plateau(soak: ModuleType) -> None:
    """The plateau check itself: a steady size or the traced memory that grows fails it,
    a capped cache filling up within its cap does not."""
    middle = {"contracts": 2, "graph_watches": 1, "flag_devices": 1, "violations_kept": 0}
    middle |= {"contract_signatures": 3, "tail_views": 4, "flag_views": 4, "name_kinds": 5}
    middle |= {"name_cache": 5, "batch_plans": 2, "site_codes": 5}
    traced = {"middle": 100_000, "end": 100_000}
    assert soak.bounded({"middle": middle, "end": dict(middle)}, traced) == []
    filling = {**middle, "contract_signatures": 60, "tail_views": 9}
    allowance = soak.TRACED_SLACK + soak.BYTES_PER_CACHED * (57 + 5)
    assert (
        soak.bounded({"middle": middle, "end": filling}, {**traced, "end": 100_000 + allowance})
        == []
    )
    leaking = {**middle, "violations_kept": 1}
    assert soak.bounded({"middle": middle, "end": leaking}, traced) == ["violations_kept"]
    over = {**middle, "contract_signatures": 1000}
    assert "contract_signatures" in soak.bounded({"middle": middle, "end": over}, traced)
    grown = {**traced, "end": 100_000 + soak.TRACED_SLACK + 1}
    assert soak.bounded({"middle": middle, "end": dict(middle)}, grown) == ["traced_bytes"]


@pytest.mark.slow
def test_full_level_soak(soak: ModuleType) -> None:
    """``full`` (contract memo, consequence check) over a longer churn."""
    result = soak.soak("cpu", "full", 3 * STEPS)
    assert result["ok"], {k: result[k] for k in ("violations_by_kind", "grew", "bugs")}
