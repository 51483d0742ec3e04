"""Tensor-parallel runs on two ranks: the sharded model serves the workload exactly as the
single-process dense oracle says, every ``inject_bug`` switch is caught on every rank with
one merged report, and a raise on one rank ends the whole run instead of hanging it.

The ranks are real processes launched by torchrun: gloo on CPU, NCCL with CUDA graphs
when there is a GPU per rank.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from swacheck.reference_impl.bugs import BUG_NAMES
from swacheck.runtime import (
    CAPTURE_CACHE_POLLUTION,
    FORWARD_WITHOUT_INVALIDATION,
    PADDING_NOT_ZEROED,
    STALE_TRANSLATION,
    SWA_LOC_DTYPE,
    UNFLUSHED_FRESH_TRANSLATION,
    UNINVALIDATED_MAPPING_WRITE,
    SanitizerReport,
)
from swacheck.runtime.distributed import run_session, torchrun

SCENARIOS = str(Path(__file__).with_name("scenarios.py"))
GPUS = torch.cuda.device_count() >= 2
TIMEOUT_S = 150  # per launch; a hang fails the test instead of the session

KIND_OF_BUG = {
    "padding-not-zeroed": PADDING_NOT_ZEROED,
    "swa-loc-int64": SWA_LOC_DTYPE,
    "missing-invalidation": UNINVALIDATED_MAPPING_WRITE,
    "storage-pointer-key": STALE_TRANSLATION,
    "capture-without-invalidation": CAPTURE_CACHE_POLLUTION,
    "invalidate-after-dispatch": FORWARD_WITHOUT_INVALIDATION,
    "fresh-translation-without-flush": UNFLUSHED_FRESH_TRANSLATION,
}


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_demo_tp_matches_the_dense_oracle() -> None:
    """``swacheck demo --tp 2`` outside torchrun launches its two ranks itself; the sharded
    model (heads and MLP split, two all-reduces per layer, each rank with its own pools and
    graph runner) matches the dense oracle through padded decode steps, both ranks sample
    the same tokens, and rank 0 alone prints the merged (clean) sanitizer report."""
    demo = [sys.executable, "-m", "swacheck", "demo", "--tp", "2", "--steps", "9"]
    device = "cuda" if GPUS else "cpu"
    proc = run_session(
        [*demo, "--device", device, "--sanitize", "fast", "--json"],
        capture=True,
        timeout_s=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["tp"] == 2 and result["ranks_agree"] is True
    assert result["steps"] == 9 and result["padded_steps"] >= 1
    assert result["max_abs_diff"] <= result["tolerance"] and not result["diverged"], result
    assert result["cuda_graphs"] is GPUS
    assert not any(result["violations"].values())
    assert result["violations_per_rank"] == {"0": {}, "1": {}}
    assert proc.stdout.count("swa-sanitizer (fast, 2 ranks)") == 1


@pytest.fixture(scope="module")
def bug_reports() -> dict[str, SanitizerReport]:
    """Every switch on both ranks (``fast``, ``log``), in one launch; one report line each."""
    proc = torchrun([SCENARIOS, "bugs"], 2, capture=True, timeout_s=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = json_lines(proc.stdout)
    assert sorted(line["bug"] for line in lines) == sorted(BUG_NAMES)  # one report per run
    reports = {line["bug"]: SanitizerReport.from_dict(line["report"]) for line in lines}
    for bug, report in reports.items():  # shown by -rA (the GPU run's log)
        print("bug", bug, "per rank:", report.per_rank)
    return reports


@pytest.mark.parametrize("bug", BUG_NAMES)
def test_bug_switch_caught_on_every_rank(bug: str, bug_reports: dict[str, SanitizerReport]) -> None:
    report, kind = bug_reports[bug], KIND_OF_BUG[bug]
    assert report.world_size == 2 and not report.errors
    assert all(report.per_rank[rank].get(kind, 0) >= 1 for rank in (0, 1)), report.to_text()
    assert report.counts[kind] == sum(report.per_rank[rank][kind] for rank in (0, 1))
    assert {v.rank for v in report.violations if v.kind == kind} == {0, 1}
    assert report.watched == {"pool": 2, "backend": 2, "graph-runner": 2, "model-runner": 2}


def test_raise_on_one_rank_ends_the_run() -> None:
    """Rank 1 raises (its bug) while rank 0 is inside a collective waiting for it: rank 1
    publishes its report and leaves the group, rank 0 is released (gloo) and prints the
    merged report, and the whole run exits non-zero well before any collective timeout.
    Under NCCL a blocked rank cannot be released; torchrun ends it when rank 1 exits."""
    start = time.monotonic()
    proc = torchrun([SCENARIOS, "raise-on-rank-1"], 2, capture=True, timeout_s=TIMEOUT_S)
    assert proc.returncode != 0
    # Far below the 5-minute collective timeout that would otherwise end the wait.
    assert time.monotonic() - start < 90
    assert "[rank 1] aborting the process group: ForwardWithoutInvalidationError" in proc.stderr
    if GPUS:
        return
    [line] = json_lines(proc.stdout)
    report = SanitizerReport.from_dict(line["report"])
    assert report.per_rank == {0: {}, 1: {FORWARD_WITHOUT_INVALIDATION: 1}}
    assert report.errors[1].startswith("ForwardWithoutInvalidationError")
    assert "on rank 1" in report.errors[1]
    assert "RuntimeError" in report.errors[0]  # released by its peer leaving the group
    [violation] = report.violations
    assert violation.rank == 1 and "model_runner.py" in violation.site
