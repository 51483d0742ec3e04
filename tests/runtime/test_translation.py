"""I9 (``swa-loc-mistranslated``) where SWA KV is written, whatever the design: each live
row's SWA location is the translation of its full location under the current mapping,
each padded row the sentinel. Shown on pools of the three shapes the KV write takes
its SWA location in (an argument, a location holder, an attribute set per batch and
read by the SWA sub-pool's write), at both levels, with the first wrong rows reported;
``fast``'s sampling latency bound; the report's text.

The pools are written here, in the shapes of SGLang's (``tests/engines`` runs the same
checks on SGLang's own classes)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
import torch

from swacheck.runtime import (
    SWA_LOC_MISTRANSLATED,
    Sanitizer,
    SWALocMistranslatedError,
)
from swacheck.runtime.deferred import POLL_EVERY
from swacheck.runtime.translation import (
    MAX_STAGED_ROWS,
    TRANSLATION_SAMPLE_EVERY,
    Finding,
    TranslationCheck,
)

LEVELS = ["fast", "full"]


class SubPool:
    def __init__(self) -> None:
        self.k_buffer = torch.zeros(17, 2)

    def set_kv_buffer(self, layer: object, loc: torch.Tensor, cache_k: torch.Tensor) -> None:
        self.k_buffer[loc] = cache_k


class ArgumentPool:
    """0.5.13's shape: the backend translates and hands ``swa_loc`` over."""

    def __init__(self) -> None:
        self.full_to_swa_index_mapping = torch.zeros(34, dtype=torch.int64)
        self.full_to_swa_index_mapping[-1] = -1
        self.swa_kv_pool = SubPool()
        self.next_swa = 1

    def alloc(self, n: int) -> torch.Tensor:
        full = torch.arange(20 - n, 20) if self.next_swa > 8 else torch.arange(1, n + 1) * 2
        swa = torch.arange(self.next_swa, self.next_swa + n)
        self.next_swa += n
        self.full_to_swa_index_mapping[full] = swa
        return full

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        return self.full_to_swa_index_mapping[kv_indices]

    def set_kv_buffer(
        self, layer: int, loc: torch.Tensor, cache_k: torch.Tensor, swa_loc: torch.Tensor
    ) -> None:
        self.swa_kv_pool.set_kv_buffer(None, swa_loc, cache_k)


@dataclass
class WriteLoc:
    loc: torch.Tensor
    swa_loc: torch.Tensor | None = None


class HolderPool(ArgumentPool):
    """0.5.14+'s shape: a ``KVWriteLoc`` holds both locations."""

    def set_kv_buffer(self, layer: int, loc_info: WriteLoc, cache_k: torch.Tensor) -> None:  # type: ignore[override]
        self.swa_kv_pool.set_kv_buffer(None, loc_info.swa_loc, cache_k)


class AttributePool(ArgumentPool):
    """0.5.11's shape: the model runner sets the batch's SWA locations on the pool
    (``set_swa_loc``) and the write reads them back."""

    def __init__(self) -> None:
        super().__init__()
        self.swa_loc: torch.Tensor | None = None

    def set_swa_loc(self, swa_loc: torch.Tensor) -> None:
        self.swa_loc = swa_loc

    def set_kv_buffer(self, layer: int, loc: torch.Tensor, cache_k: torch.Tensor) -> None:  # type: ignore[override]
        swa = self.swa_loc if self.swa_loc is not None else self.translate_loc_from_full_to_swa(loc)
        self.swa_kv_pool.set_kv_buffer(None, swa, cache_k)


def write(pool: ArgumentPool, full: torch.Tensor, swa: torch.Tensor) -> None:
    """One layer's KV write of ``full`` with ``swa`` as its SWA location, in the pool's shape."""
    cache = torch.ones(full.numel(), 2)
    if isinstance(pool, AttributePool):
        pool.set_swa_loc(swa)
        pool.set_kv_buffer(0, full, cache)
    elif isinstance(pool, HolderPool):
        pool.set_kv_buffer(0, WriteLoc(full, swa), cache)
    else:
        pool.set_kv_buffer(0, full, cache, swa_loc=swa)


POOLS = [ArgumentPool, HolderPool, AttributePool]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("pool_cls", POOLS)
def test_correct_translations_are_clean(pool_cls: type[ArgumentPool], level: str) -> None:
    pool = pool_cls()
    with Sanitizer(level=level, action="log") as san:
        san.watch(pool)
        for _ in range(3):
            full = pool.alloc(3)
            write(pool, full, pool.translate_loc_from_full_to_swa(full))
        report = san.report()
    assert report.ok, report.to_text()
    assert report.checks[SWA_LOC_MISTRANSLATED] >= 1


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("pool_cls", POOLS)
def test_untranslated_location_is_mistranslated(pool_cls: type[ArgumentPool], level: str) -> None:
    """``swa_out_cache_loc = out_cache_loc``: the full locations passed as SWA ones."""
    pool = pool_cls()
    with Sanitizer(level=level, action="log") as san:
        san.watch(pool)
        full = pool.alloc(3)
        write(pool, full, full)
        report = san.report()
    assert report.counts[SWA_LOC_MISTRANSLATED] == 1, report.to_text()
    (violation,) = report.violations
    expected = pool.full_to_swa_index_mapping[full].tolist()
    assert violation.rows == tuple(
        (i, f, e, f) for i, (f, e) in enumerate(zip(full.tolist(), expected, strict=True))
    )
    assert "3 live rows of 3 not the translation" in violation.message
    assert f"{pool_cls.__name__}.set_kv_buffer" in violation.message
    assert "test_translation.py" in violation.site  # the engine frame that wrote


@pytest.mark.parametrize("level", LEVELS)
def test_stale_translation_after_the_mapping_moved(level: str) -> None:
    """A translation kept from before a mapping change, used for a later write."""
    pool = HolderPool()
    with Sanitizer(level=level, action="log") as san:
        san.watch(pool)
        full = pool.alloc(2)
        kept = pool.translate_loc_from_full_to_swa(full)
        pool.full_to_swa_index_mapping[full[1:]] = 9  # the second token moved
        write(pool, full, kept)
        report = san.report()
    (violation,) = report.violations
    assert violation.kind == SWA_LOC_MISTRANSLATED
    assert violation.rows == ((1, int(full[1]), 9, int(kept[1])),)


def test_raise_names_the_kind_first_and_the_rows() -> None:
    pool = ArgumentPool()
    with Sanitizer(level="full") as san:
        san.watch(pool)
        full = pool.alloc(2)
        with pytest.raises(SWALocMistranslatedError) as caught:
            write(pool, full, full)
    text = str(caught.value)
    first, *rest = text.splitlines()
    assert first.startswith("swa-loc-mistranslated: ArgumentPool.set_kv_buffer: ")
    assert rest[0].strip().startswith("first wrong rows")
    assert rest[1].strip() == f"row 0: {int(full[0])} -> 1, actual {int(full[0])}"
    assert sum("test_translation.py" in line for line in text.splitlines()) == 1
    assert type(caught.value).__module__ == "swacheck.runtime"


def test_the_same_pair_is_checked_once_a_forward() -> None:
    """Every layer of a forward hands over the same pair: compared once."""
    pool = ArgumentPool()
    with Sanitizer(level="full", action="log") as san:
        san.watch(pool)
        full = pool.alloc(3)
        swa = pool.translate_loc_from_full_to_swa(full)
        for _ in range(4):
            write(pool, full, swa)
        assert san.report().checks[SWA_LOC_MISTRANSLATED] == 1
        swa.add_(0)  # written in place: checked again
        write(pool, full, swa)
        assert san.report().checks[SWA_LOC_MISTRANSLATED] == 2


def test_fast_stages_a_window_of_a_large_write() -> None:
    """``fast`` stages at most ``MAX_STAGED_ROWS`` rows of a write; a systematic
    mistranslation lies in any window."""
    n = 3 * MAX_STAGED_ROWS
    pool = ArgumentPool()
    pool.full_to_swa_index_mapping = torch.arange(n + 1) % 5
    pool.swa_kv_pool.k_buffer = torch.zeros(n, 2)
    full = torch.arange(n)
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        write(pool, full, full)  # untranslated
        report = san.report()
    (violation,) = report.violations
    assert f"of {MAX_STAGED_ROWS} not the translation" in violation.message


def test_fast_reports_a_recurring_mistranslation_within_the_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Writes at one place are sampled (the first, then one in ``TRANSLATION_SAMPLE_EVERY``
    at random strides); the staged rows are read at every ``POLL_EVERY``-th end of a
    forward. A mistranslation on every write from some forward on is reported within
    ``2 * TRANSLATION_SAMPLE_EVERY - 1`` writes plus two reads of the ring."""

    class Runner:
        def __init__(self, pool: ArgumentPool) -> None:
            self.token_to_kv_pool = pool

        def forward(self, full: torch.Tensor, swa: torch.Tensor) -> None:
            write(self.token_to_kv_pool, full, swa)

    pool = ArgumentPool()
    runner = Runner(pool)
    caplog.set_level(logging.WARNING, logger="swacheck.runtime")
    san = Sanitizer(level="fast", action="log")
    san.watch(pool)
    san.watch(runner, "model-runner")
    full = pool.alloc(2)
    good = pool.translate_loc_from_full_to_swa(full)
    for _ in range(40):
        runner.forward(full, good.clone())
    first_bad, reported = 0, None
    for i in range(400):
        runner.forward(full, full.clone())
        if any(SWA_LOC_MISTRANSLATED in r.getMessage() for r in caplog.records):
            reported = i
            break
    report = san.report()
    san.close()
    bound = (2 * TRANSLATION_SAMPLE_EVERY - 1) + 2 * POLL_EVERY
    assert reported is not None and reported - first_bad <= bound, report.to_text()
    assert report.checks[SWA_LOC_MISTRANSLATED] < 40 + reported + 1  # sampled


@pytest.mark.parametrize("level", LEVELS)
def test_check_rows_checks_a_buffers_live_rows_only(level: str) -> None:
    """A replay's buffers (a graph runner's after populate, a backend's after its replay
    metadata) are checked on their first ``rows`` rows, the live ones: the padded tail is
    I4's. The first call at a place is always checked (``fast`` too); the same buffers,
    unwritten, are not checked again."""
    found: list[Finding] = []
    check = TranslationCheck(level == "full", lambda finding, _: found.append(finding))
    mapping = torch.arange(16, dtype=torch.int64) + 100
    full = torch.tensor([3, 5, 7, 0, 0], dtype=torch.int32)  # a bucket of 5, 3 live
    swa = mapping[full.long()]
    swa[1] = 1  # a wrong live row
    swa[3:] = 9  # a tail that is not the sentinel: not I9's here
    check.check_rows("runner.out_cache_loc_swa", mapping, full, swa, 3, scope_id=1)
    check.check_rows("runner.out_cache_loc_swa", mapping, full, swa, 3, scope_id=1)
    found += check.drain()
    assert check.count == 1
    (finding,) = found
    assert (finding.rows, finding.live_wrong, finding.padded_wrong) == (3, 1, 0)
    assert finding.first == ((1, 5, 105, 1),)
