"""Merging per-rank reports, in one process: what each rank's sanitizer saw stays
attributable to that rank, the merged report survives the JSON that carries it between
processes, and a violation records the rank of the process group it happened in."""

from __future__ import annotations

import json

import torch
import torch.distributed as dist

from swacheck.reference_impl.pool import SWAKVPool
from swacheck.runtime import STALE_TRANSLATION, Sanitizer, SanitizerReport
from swacheck.runtime.distributed import merge_reports


def pool_report(inject_bug: str | None) -> SanitizerReport:
    """Two equal-sized views of one location tensor translated in turn (TBO micro-batches)."""
    pool = SWAKVPool(32, 16, (0,), 2, 1, 4, torch.float32, "cpu", inject_bug=inject_bug)
    with Sanitizer(level="fast", action="log") as san:
        san.watch_pool(pool)
        locs = pool.alloc(8)
        assert locs is not None
        pool.translate_loc_from_full_to_swa(locs[:4])
        pool.translate_loc_from_full_to_swa(locs[4:])
        return san.report()


def test_merged_report_keeps_each_rank() -> None:
    clean, buggy = pool_report(None), pool_report("storage-pointer-key")
    error = "StaleTranslationError: [swa-sanitizer] stale-translation (I2) ..."
    merged = merge_reports({0: clean, 1: buggy}, world_size=3, errors={1: error})
    assert merged.counts[STALE_TRANSLATION] == 1 and merged.total_violations == 1
    assert merged.total_checks == clean.total_checks + buggy.total_checks
    assert merged.watched == {"pool": 2}
    assert merged.per_rank == {0: {}, 1: {STALE_TRANSLATION: 1}}
    lines = merged.to_text().splitlines()
    assert lines[0].startswith("swa-sanitizer (fast, 3 ranks): ")
    assert "  rank 0: clean" in lines
    assert f"  rank 1: stale-translation: 1; ended by {error}" in lines
    assert any(line.startswith("  rank 2: no report") for line in lines)
    assert SanitizerReport.from_dict(json.loads(merged.to_json())).to_dict() == merged.to_dict()


def test_violation_records_the_rank() -> None:
    assert pool_report("storage-pointer-key").violations[0].rank is None  # no group
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        [violation] = pool_report("storage-pointer-key").violations
    finally:
        dist.destroy_process_group()
    assert violation.rank == 0 and str(violation).startswith("stale-translation on rank 0: ")
    assert violation.to_dict()["rank"] == 0
