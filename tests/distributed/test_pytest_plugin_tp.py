"""The pytest plugin on a two-rank tensor-parallel test, run for real through ``pytester``:
the ``swa_sanitize_ranks`` fixture launches the ranks under torchrun, a clean run passes
with both ranks' reports merged, a bug on both ranks fails the test with its kind and one
merged report naming each rank, and the session summary counts both ranks' violations."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

WORKERS = """
from swacheck.reference_impl.demo import build_runner, serve, watch_runner
from swacheck.reference_impl.model import ModelConfig
from swacheck.reference_impl.tp import TensorParallel
from swacheck.runtime.distributed import rank_device


def _serve(sanitizer, bug, steps):
    tp = TensorParallel.from_group()
    config = ModelConfig(num_layers=2)
    runner = build_runner(str(rank_device()), graph=False, inject_bug=bug, tp=tp, config=config)
    watch_runner(sanitizer, runner)
    serve(runner, steps)


def clean(sanitizer):
    _serve(sanitizer, None, 1)


def two_micro_batches_collide(sanitizer):
    _serve(sanitizer, "storage-pointer-key", 1)
"""

TESTS = """
import tp_workers


def test_clean_two_ranks(swa_sanitize_ranks):
    report = swa_sanitize_ranks(tp_workers.clean)
    assert report.world_size == 2 and report.ok
    assert sorted(report.per_rank) == [0, 1] and report.total_checks > 0
    assert report.watched["pool"] == 2


def test_storage_pointer_key_two_ranks(swa_sanitize_ranks):
    swa_sanitize_ranks("tp_workers:two_micro_batches_collide")
"""


def test_two_rank_tests_under_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(tp_workers=WORKERS, test_tp_ranks=TESTS)
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*StaleTranslationError: stale-translation on rank 0: *",
            "*swa-sanitizer, 2 ranks*",
            "swa-sanitizer (fast, 2 ranks): * checks, 2 violations (stale-translation: 2)",
            "*rank 0: stale-translation: 1; ended by StaleTranslationError*",
            "*rank 1: stale-translation: 1; ended by StaleTranslationError*",
            "*stale-translation on rank 1: *",
            "*swa-sanitizer (fast): 2 tests sanitized, * checks, 2 violations "
            "(stale-translation: 2)",
        ]
    )
    assert result.stdout.str().count("swa-sanitizer (fast, 2 ranks)") == 1
