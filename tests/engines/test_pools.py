"""Every release's real ``SWAKVPool`` and ``SWATokenToKVPoolAllocator`` under an
alloc/translate/write/free churn: recognised as a pool without a translation cache and
an allocator that delegates translate to it, and never flagged."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch
from conftest import RELEASES
from sglang_objects import DEFAULT, SWA_LAYERS, churn, pool_and_allocator, version_tuple
from sglang_shim import Release

from swacheck.config import Config
from swacheck.runtime import (
    SWA_LOC_DTYPE,
    SWA_LOC_MISTRANSLATED,
    UNINVALIDATED_MAPPING_WRITE,
    Sanitizer,
)
from swacheck.runtime.bytecode import class_functions, self_access


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


def _lines_run(call: Callable[[], Any], filename: str) -> set[int]:
    """The lines of ``filename`` that ``call()`` runs: the test's own ground truth, from
    a tracer (the sanitizer traces nothing)."""
    ran: set[int] = set()

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != filename:
            return None
        if event == "line":
            ran.add(frame.f_lineno)
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(previous)
    return ran


def _mapping_write_lines(method: Any) -> set[int]:
    """Every line the bytecode says ``method`` and the methods of its object it calls
    write the mapping on, whether or not it can run (no flag consulted)."""
    functions = dict(class_functions(type(method.__self__)))
    lines: set[int] = set()
    pending, seen = [method.__func__], set()
    while pending:
        function = pending.pop()
        if function not in seen:
            seen.add(function)
            access = self_access(function)
            lines.update(access.any_writes.get("full_to_swa_index_mapping", ()))
            pending += [functions[name] for name in access.loads if name in functions]
    return lines


@pytest.mark.parametrize(
    ("sglang", "method"), [("0.5.12", "alloc"), ("0.5.23", "free")], indirect=["sglang"]
)
def test_uninvalidated_mapping_write_names_the_line_that_ran(sglang: Release, method: str) -> None:
    """I1 names the mapping write that ran, not the platform alternative beside it: these
    methods write the mapping on an NPU line (under ``if _is_npu:``) and on the line that
    runs here (0.5.12's ``alloc``: its else branch; 0.5.23's ``free``: ``index_fill_`` in
    ``clear_full_to_swa_mapping``). The releases keep no translation cache, so the pool is
    declared memoising, as a cache-era pool is: its translation stays live until an
    invalidation, which these allocators never call. The line named is checked against
    the lines a tracer saw run."""
    pool, allocator = pool_and_allocator(sglang)
    filename = inspect.getsourcefile(type(allocator))
    candidates = _mapping_write_lines(getattr(allocator, method))
    with Sanitizer(level="fast", action="log", config=DEFAULT) as san:
        san.watch(pool, cache="memoising")
        san.watch(allocator)
        locs = allocator.alloc(4)
        pool.translate_loc_from_full_to_swa(locs)  # a live cached translation
        argument = locs if method == "free" else 2
        ran = _lines_run(lambda: getattr(allocator, method)(argument), filename)
        report = san.report()
    (violation,) = report.violations
    assert violation.kind == UNINVALIDATED_MAPPING_WRITE
    (executed,) = candidates & ran
    alternatives = candidates - ran
    assert alternatives, "no write beside the one that ran: the test would prove nothing"
    assert violation.site.startswith(f"{filename}:{executed} in "), violation.site
    assert f"which writes it at {violation.site}" in violation.message
    for line in alternatives:
        assert f"{filename}:{line} in " not in violation.message
