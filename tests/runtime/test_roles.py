"""Roles and cache models, on small classes shaped like the engines' (the real SGLang
classes are tests/engines/): an allocator that hands translate to its pool, graph
runners of both shapes and their input buffers, the three cache models, declared roles,
classes watched before their ``__init__``, and objects that play no role."""

from __future__ import annotations

import warnings

import pytest
import torch

from swacheck.config import Config
from swacheck.runtime import (
    CAPTURE_CACHE_POLLUTION,
    PADDING_NOT_ZEROED,
    STALE_TRANSLATION,
    UNINVALIDATED_MAPPING_WRITE,
    Sanitizer,
    StaleTranslationError,
    UninvalidatedMappingWriteError,
)
from swacheck.runtime.roles import detect_cache_model, detect_role, role_of_class
from swacheck.runtime.sanitizer import UnclassifiedWarning

CONFIG = Config()


class FreshPool:
    """SGLang's pools of every release: translate gathers afresh, nothing is kept."""

    def __init__(self) -> None:
        self.full_to_swa_index_mapping: torch.Tensor | None = None

    def register_mapping(self, mapping: torch.Tensor) -> None:
        self.full_to_swa_index_mapping = mapping

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        return self.full_to_swa_index_mapping[kv_indices]


class DelegatingAllocator:
    """SGLang's SWATokenToKVPoolAllocator: owns the mapping, translates through the pool."""

    def __init__(self, pool: FreshPool, size: int = 64) -> None:
        self.full_to_swa_index_mapping = torch.zeros(size + 1, dtype=torch.int64)
        self.full_to_swa_index_mapping[-1] = -1
        self._kvcache = pool
        self._next = 1
        pool.register_mapping(self.full_to_swa_index_mapping)

    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
        return self._kvcache.translate_loc_from_full_to_swa(kv_indices)

    def alloc(self, n: int) -> torch.Tensor:
        full = torch.arange(self._next, self._next + n)
        self.full_to_swa_index_mapping[full] = full
        self._next += n
        return full

    def free(self, full: torch.Tensor) -> None:
        self.full_to_swa_index_mapping[full] = 0


class AttributeCachingPool(FreshPool):
    """DeepSeek-V4's pool: the first layer's translation kept in ``cached_loc``."""

    def __init__(self) -> None:
        super().__init__()
        self.cached_loc: torch.Tensor | None = None
        self.written: list[torch.Tensor] = []

    def write_layer(self, layer_id: int, raw_loc: torch.Tensor) -> None:
        if layer_id == 0 or self.cached_loc is None:
            self.cached_loc = self.translate_loc_from_full_to_swa(raw_loc)
        self.written.append(self.cached_loc)


def test_an_allocator_that_delegates_translate_is_an_allocator() -> None:
    pool = FreshPool()
    allocator = DelegatingAllocator(pool)
    assert detect_role(allocator, CONFIG).value == "allocator"
    assert detect_role(pool, CONFIG).value == "pool"


@pytest.mark.parametrize("level", ["fast", "full"])
def test_a_pool_without_a_cache_gets_no_cache_checks(level: str) -> None:
    """The false positives of issue 16: every allocator call an uninvalidated write, every
    forward one without invalidation, because every pool was taken to cache."""
    pool = FreshPool()
    allocator = DelegatingAllocator(pool)
    with Sanitizer(level=level) as san:
        san.watch(pool)
        san.watch(allocator)
        for _ in range(6):
            locs = allocator.alloc(3)
            allocator.translate_loc_from_full_to_swa(locs)
            pool.translate_loc_from_full_to_swa(locs)
            allocator.free(locs)
        report = san.report()
    assert report.ok, report.to_text()
    assert report.cache_models == {"FreshPool": "no cache"}
    assert UNINVALIDATED_MAPPING_WRITE not in report.checks
    assert STALE_TRANSLATION not in report.checks


def test_cache_models_observed_from_the_class(toy: object) -> None:
    memo = detect_cache_model(toy.Pool(), CONFIG)  # type: ignore[attr-defined]
    assert memo.memoising and memo.kind == "memoising translate"
    assert "translate_loc_from_full_to_swa assigns" in memo.how
    assert detect_cache_model(FreshPool(), CONFIG).kind == "no cache"
    attribute = detect_cache_model(AttributeCachingPool(), CONFIG)
    assert attribute.kind == "attribute cache (cached_loc)"

    class KeepsItElsewhere(FreshPool):
        """Translate stores nothing itself, but an invalidation that does something says
        there is a cache behind it."""

        def __init__(self) -> None:
            super().__init__()
            self._memo: dict[int, torch.Tensor] = {}

        def invalidate_loc_cache(self) -> None:
            self._memo.clear()

    class NoOpInvalidation(FreshPool):
        def invalidate_loc_cache(self) -> None:
            """The base class's no-op (#25824's BaseSWAKVPool)."""

    assert detect_cache_model(KeepsItElsewhere(), CONFIG).memoising
    assert detect_cache_model(NoOpInvalidation(), CONFIG).kind == "no cache"


def test_cache_model_declared_in_code_and_configuration(toy: object) -> None:
    pool = toy.Pool()  # type: ignore[attr-defined]
    assert detect_cache_model(pool, CONFIG, "none").kind == "no cache"
    assert detect_cache_model(pool, Config(cache_model="none")).kind == "no cache"
    with Sanitizer(level="fast") as san:
        san.watch(pool, cache="none")
        locs = pool.alloc(2)
        pool.translate_loc_from_full_to_swa(locs)
        assert san.report().cache_models == {"ToyPool": "no cache"}


def test_memoisation_observed_at_run_time() -> None:
    """Translate hands back the very tensor it returned before: it is a cache after all,
    checked as one from then on."""

    class Hidden(FreshPool):
        memo: dict[tuple[int, int], torch.Tensor] = {}  # noqa: RUF012 - a class-level memo

        def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor) -> torch.Tensor:
            key = (kv_indices.data_ptr(), kv_indices.numel())
            if key not in Hidden.memo:
                Hidden.memo[key] = self.full_to_swa_index_mapping[kv_indices]
            return Hidden.memo[key]

    pool = Hidden()
    allocator = DelegatingAllocator(pool)
    locs = allocator.alloc(2)
    with Sanitizer(level="fast") as san:
        san.watch(pool)
        san.watch(allocator)
        assert san.report().cache_models == {Hidden.__qualname__: "no cache"}
        pool.translate_loc_from_full_to_swa(locs)
        pool.translate_loc_from_full_to_swa(locs)  # the same tensor again: observed
        assert san.report().cache_models[Hidden.__qualname__] == "memoising translate"
        pool.translate_loc_from_full_to_swa(locs)  # an entry goes live
        with pytest.raises(UninvalidatedMappingWriteError):
            allocator.free(locs)


def test_attribute_cache_read_after_a_mapping_change_is_stale() -> None:
    pool = AttributeCachingPool()
    allocator = DelegatingAllocator(pool)
    with Sanitizer(level="fast") as san:
        san.watch(pool)
        san.watch(allocator)
        locs = allocator.alloc(3)
        pool.write_layer(0, locs)
        pool.write_layer(1, locs)  # a hit on an unchanged mapping
        assert san.report().ok
        allocator.free(locs[:1])  # the mapping moves under cached_loc
        with pytest.raises(StaleTranslationError, match=r"cached_loc served by write_layer"):
            pool.write_layer(2, locs)


def test_attribute_cache_read_for_another_location_tensor_is_stale() -> None:
    pool = AttributeCachingPool()
    allocator = DelegatingAllocator(pool)
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        first, second = allocator.alloc(3), allocator.alloc(3)
        pool.write_layer(0, first)
        pool.write_layer(1, second)  # reuses first's translation for second's tokens
        report = san.report()
    assert report.counts[STALE_TRANSLATION] == 1
    assert "given another location tensor" in report.violations[0].message


class ExecuteRunner:
    """0.5.14+'s shape: ``capture``/``load_batch``/``execute``, a registry that fills the
    static buffers from each batch (``fill_from``), token counts given directly."""

    class Registry:
        def __init__(self, max_tokens: int) -> None:
            self.out_cache_loc_swa = torch.zeros(max_tokens, dtype=torch.int32)

        def fill_from(self, batch: torch.Tensor, *, raw_num_tokens: int, padded_num_tokens: int):
            self.out_cache_loc_swa[:raw_num_tokens] = batch  # tail kept: the bug

    def __init__(self) -> None:
        self.buffer_registry = ExecuteRunner.Registry(8)

    def capture(self) -> None:
        pass

    def load_batch(self, batch: torch.Tensor, padded: int) -> None:
        self.buffer_registry.fill_from(
            batch, raw_num_tokens=batch.numel(), padded_num_tokens=padded
        )

    def execute(self, batch: torch.Tensor, padded: int) -> None:
        self.load_batch(batch, padded)


def test_graph_runners_of_both_shapes_and_their_input_buffers(toy: object) -> None:
    assert role_of_class(toy.GraphRunner, CONFIG).value == "graph-runner"  # type: ignore[attr-defined]
    assert role_of_class(ExecuteRunner, CONFIG).value == "graph-runner"
    assert role_of_class(ExecuteRunner.Registry, CONFIG).value == "input-buffers"
    assert role_of_class(FreshPool, CONFIG) is None
    runner = ExecuteRunner()
    with Sanitizer(level="full", action="log") as san:
        assert san.watch(runner).value == "graph-runner"
        runner.execute(torch.tensor([5, 6, 7, 8], dtype=torch.int32), 4)
        runner.execute(torch.tensor([5, 6], dtype=torch.int32), 4)
        report = san.report()
    assert report.counts[PADDING_NOT_ZEROED] == 1
    assert "Registry.out_cache_loc_swa" in report.violations[0].message


def test_speculative_tails_are_checked_in_tokens() -> None:
    """Requests times tokens per request: raw 3 requests of 2 tokens padded to 4 leave
    the tail [6:8], which a request count (3 < 4, but 4 < 6) would miss."""

    class Buffers:
        def __init__(self) -> None:
            self.out_cache_loc = torch.zeros(8, dtype=torch.int64)

        def populate_from_forward_batch(
            self, locs: torch.Tensor, raw_bs: int, bs: int, num_tokens_per_bs: int
        ) -> None:
            self.out_cache_loc[: raw_bs * num_tokens_per_bs] = locs

    buffers = Buffers()
    with Sanitizer(level="full", action="log") as san:
        san.watch(buffers)
        buffers.populate_from_forward_batch(torch.arange(1, 9), 4, 4, 2)
        buffers.populate_from_forward_batch(torch.arange(1, 7), 3, 4, 2)
        report = san.report()
    assert report.counts[PADDING_NOT_ZEROED] == 1
    assert "[6:8]" in report.violations[0].message


def test_runner_watched_before_its_init_checks_the_capture_there(toy: object) -> None:
    """SGLang's runners capture in ``__init__``: a class named for watching is wrapped
    before it runs, so a capture run that begins with a live cached translation is seen."""

    class CapturingRunner(toy.GraphRunner):  # type: ignore[attr-defined, name-defined]
        def __init__(self, pool: object) -> None:
            super().__init__(pool, bug="capture-without-invalidation")
            self.capture()

    pool = toy.Pool()  # type: ignore[attr-defined]
    with Sanitizer(level="fast", action="log") as san:
        san.watch(pool)
        san.watch_class(CapturingRunner)
        pool.translate_loc_from_full_to_swa(pool.alloc(2))
        CapturingRunner(pool)
        report = san.report()
    assert report.watched == {"pool": 1, "graph-runner": 1}
    assert report.counts[CAPTURE_CACHE_POLLUTION] >= 1, report.to_text()


def test_an_object_that_plays_no_role_is_left_alone() -> None:
    class Scheduler:
        def __init__(self, n: int) -> None:
            self.n = n

    with Sanitizer(level="fast") as san:
        san.watch_class(Scheduler)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            made = [Scheduler(i) for i in range(3)]
        assert [s.n for s in made] == [0, 1, 2]  # constructed as usual
        report = san.report()
    assert len([w for w in caught if issubclass(w.category, UnclassifiedWarning)]) == 1
    assert report.left_alone == {f"{Scheduler.__module__}.{Scheduler.__qualname__}": 3}
    with pytest.raises(TypeError, match=r"Scheduler plays none of the roles.*role="):
        Sanitizer().watch(Scheduler(0))


def test_declared_role_wins(toy: object) -> None:
    pool = toy.Pool()  # type: ignore[attr-defined]
    with Sanitizer(level="fast") as san:
        assert san.watch(pool, "allocator").value == "allocator"
        assert san.report().watched == {"allocator": 1}
