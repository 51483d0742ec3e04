"""The model runner in the recipe (issue 25, item 4): SGLang's real ``ModelRunner.forward``
and ``_forward_raw`` dispatch a decode batch to the CUDA-graph runner's ``replay`` before
anything invalidates the translation cache (#26152). Watched by the role the recipe
declares, that replay is ``forward-without-invalidation`` at the dispatch, named at
``_forward_raw``'s replay line; the fix upstream made (the invalidation moved before
the graph check) is clean.

No release keeps a memoising translation cache: the design lived on SGLang's GitHub
history between 0.5.12 and 0.5.13 (#25824 ... #27091). So two setups:

- **every run** (PyPI only): 0.5.12.post1's ``ModelRunner`` and ``CudaGraphRunner``; their
  graph path is the cache era's (``_forward_raw`` differs only on the eager path, where the
  cache era invalidates and 0.5.12.post1 hands the pool the batch's SWA locations). The
  memoising pool is the reference implementation's (#25824's design), and the batch's
  SWA locations are translated before the forward, as 0.5.12's scheduler does;
- **with the cache era's own files** (``SWACHECK_CACHE_ERA_TREE``: a folder holding
  ``python/sglang/srt/...`` with the cache era's ``swa_memory_pool.py``, its
  ``base_swa_memory_pool.py`` and the model runner's methods, read with the search tool
  from SGLang's history; CI cannot fetch them, so this part skips there): the cache era's
  ``SWAKVPool``, allocator and ``ModelRunner`` methods, over 0.5.12.post1's other modules.
  The cache era's ``alloc_decode`` translates ``last_loc`` after its invalidation, then
  writes the mapping: the translation it leaves live is what the replay dispatches with.

The model runner cannot be constructed here (its ``__init__`` loads a model onto a GPU):
it is built without it, and watched by the role the recipe declares for its class. What
it is handed (the model, the attention backend, the batch) carries the fields it reads.
"""

from __future__ import annotations

import importlib
import linecache
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_objects import DEFAULT, bare_cuda_graph_runner, forward_batch, layer
from sglang_shim import Release

from swacheck.runtime import (
    FORWARD_WITHOUT_INVALIDATION,
    UNINVALIDATED_MAPPING_WRITE,
    Sanitizer,
    SanitizerReport,
)
from swacheck.runtime.class_spec import parse_class_spec
from swacheck.runtime.recipe import recipe_classes, sglang_root

RELEASE = "0.5.12.post1"
CACHE_ERA = os.environ.get("SWACHECK_CACHE_ERA_TREE")
SWA_LAYERS = (0, 2)
# The fix #26152 made: the invalidation moved from the eager path to before the graph
# check, so a replay starts with an empty cache.
RUNNER_FIX = (
    "        # Replay cuda graph if applicable\n        if can_run_graph:",
    "        self.maybe_invalidate_swa_loc_cache()\n\n"
    "        # Replay cuda graph if applicable\n        if can_run_graph:",
)


def model_runner(runner_cls: type, pool: Any, graph_runner: Any, write: Callable[..., None]) -> Any:
    """A ``ModelRunner`` of ``runner_cls`` without its ``__init__``: what ``forward``,
    ``_forward_raw`` and ``forward_extend`` read. The device string only picks which
    graph-mode check applies (CUDA's); nothing runs on a GPU. The model writes every
    layer's KV through the pool (``write``), as attention layers do."""
    output = importlib.import_module("sglang.srt.layers.logits_processor").LogitsProcessorOutput

    class Model:
        def forward(self, input_ids: Any, positions: Any, batch: Any, **kwargs: Any) -> Any:
            for layer_id in range(4):
                write(layer_id, batch.out_cache_loc)
            return output(next_token_logits=torch.zeros(batch.batch_size, 16))

    runner = object.__new__(runner_cls)
    runner.__dict__.update(
        forward_pass_id=0,
        msprobe_debugger=None,
        enable_elastic_ep=False,
        eplb_manager=None,
        server_args=SimpleNamespace(
            disable_overlap_schedule=True, enable_pdmux=False, elastic_ep_backend=None
        ),
        device="cuda",
        graph_runner=graph_runner,
        piecewise_cuda_graph_runner=None,
        hisparse_coordinator=None,
        pp_group=SimpleNamespace(is_last_rank=True),
        is_hybrid_swa=True,
        is_generation=True,
        token_to_kv_pool=pool,
        support_pp=False,
        device_timer=None,
        model=Model(),
        attn_backend=SimpleNamespace(init_forward_metadata=lambda batch: None),
    )
    return runner


def batch(release: Release, mode: str, locs: torch.Tensor, swa: torch.Tensor | None) -> Any:
    """A ``ForwardBatch`` of ``locs.numel()`` one-token requests (decode) or of one request
    (extend), with the release's own forward mode."""
    (hidden, modes) = release.load(
        "sglang.srt.model_executor.forward_batch_info", "CaptureHiddenMode", "ForwardMode"
    )
    fields = forward_batch(locs.numel() if mode == "DECODE" else 1)
    fields.__dict__.update(
        out_cache_loc=locs,
        out_cache_loc_swa=swa,
        input_ids=torch.arange(locs.numel()),
        positions=torch.arange(locs.numel()),
        capture_hidden_mode=hidden.NULL,
        forward_mode=getattr(modes, mode),
        spec_info=None,
        input_embeds=None,
        replace_embeds=None,
        global_num_tokens_cpu=None,
        global_num_tokens_gpu=None,
        num_token_non_padded=None,
        prepare_attn_tp_scatter_input=lambda runner: None,
    )
    fields.seq_lens_sum = int(fields.seq_lens.sum())
    return fields


def recipe_roles(release: Release) -> dict[type, str | None]:
    """Each class the release's recipe names (``swacheck sanitize-recipe``), with the role
    it declares."""
    specs = [parse_class_spec(text) for text in recipe_classes(sglang_root(release.root))]
    return {spec.load(): None if spec.role is None else spec.role.value for spec in specs}


def watch_by_recipe(san: Sanitizer, roles: dict[type, str | None], *objects: Any) -> None:
    """Watch each object by the role the recipe declares for its class (or the one it is
    recognised by); objects of classes the recipe does not name by recognition."""
    for obj in objects:
        declared = [role for cls, role in roles.items() if isinstance(obj, cls)]
        san.watch(obj, declared[0] if declared else None)


def replay_site(report: SanitizerReport) -> str:
    """Where every ``forward-without-invalidation`` was reported: ``_forward_raw``'s call of
    the graph runner's replay (one place)."""
    (site,) = {v.site for v in report.violations if v.kind == FORWARD_WITHOUT_INVALIDATION}
    path, rest = site.rsplit(":", 1)
    assert rest.split(" in ")[1] == "_forward_raw", site
    assert "self.graph_runner.replay(" in linecache.getline(path, int(rest.split(" ")[0]))
    return site


@pytest.fixture
def model_runner_class(sglang: Release) -> type:
    (cls,) = sglang.load("sglang.srt.model_executor.model_runner", "ModelRunner")
    return cls


@pytest.mark.parametrize("sglang", [RELEASE], indirect=True)
def test_recipe_watches_the_model_runner(sglang: Release) -> None:
    """The release keeps a translation cache (DeepSeek-V4's ``cached_loc``), so its recipe
    declares the model runner."""
    (cls,) = sglang.load("sglang.srt.model_executor.model_runner", "ModelRunner")
    assert recipe_roles(sglang)[cls] == "model-runner"


@pytest.mark.parametrize("fixed", [False, True], ids=["release", "invalidated-first"])
@pytest.mark.parametrize("sglang", [RELEASE], indirect=True)
def test_graph_replay_without_invalidation_at_the_dispatch(
    sglang: Release, model_runner_class: type, fixed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from swacheck.reference_impl.pool import SWAKVPool

    runner_cls = model_runner_class
    if fixed:

        class FixedModelRunner(model_runner_class):  # type: ignore[misc, valid-type]
            def _forward_raw(self, *args: Any, **kwargs: Any) -> Any:
                self.token_to_kv_pool.invalidate_loc_cache()
                return super()._forward_raw(*args, **kwargs)

        runner_cls = FixedModelRunner
    pool = SWAKVPool(64, 32, SWA_LAYERS, 4, 2, 8, torch.float16, "cpu")
    graphs = bare_cuda_graph_runner(sglang, monkeypatch)

    def write(layer_id: int, locs: torch.Tensor) -> None:
        cache = torch.zeros(locs.numel(), 2, 8, dtype=torch.float16)
        pool.set_kv_buffer(layer_id, locs, cache, cache)

    runner = model_runner(runner_cls, pool, graphs, write)
    with Sanitizer(level="fast", action="log", config=DEFAULT) as san:
        watch_by_recipe(san, recipe_roles(sglang), runner, graphs, pool)
        for _ in range(3):
            locs = pool.alloc(3)
            # 0.5.12's scheduler hands the batch its SWA locations, translated by the pool.
            swa = pool.translate_loc_from_full_to_swa(locs)
            assert runner.forward(batch(sglang, "DECODE", locs, swa)).can_run_graph
        report = san.report()
    assert report.watched == {"model-runner": 1, "graph-runner": 1, "pool": 1}
    assert report.checks[FORWARD_WITHOUT_INVALIDATION] == 3
    if fixed:
        assert report.ok, report.to_text()
    else:
        assert report.counts[FORWARD_WITHOUT_INVALIDATION] == 3, report.to_text()
        assert report.total_violations == 3, report.to_text()
        assert f"{Path(sglang.root)}" in replay_site(report)


def cache_era_model_runner(tree: Path, release: Release, fixed: bool) -> tuple[Any, Any]:
    """The cache era's pool module and ``ModelRunner`` class over ``release``: its
    ``base_swa_memory_pool`` and ``swa_memory_pool`` (whole files) replace the release's,
    and its ``ModelRunner`` methods run in the release's ``model_runner`` module (the
    excerpt keeps only the methods and the imports they use; the module's other names
    are the release's). ``dsa`` was ``nsa`` before the cache era renamed it."""
    srt = tree / "python" / "sglang" / "srt"
    try:
        importlib.import_module("sglang.srt.layers.attention.dsa.utils")
    except ImportError:
        nsa = importlib.import_module("sglang.srt.layers.attention.nsa.utils")
        alias = types.ModuleType("sglang.srt.layers.attention.dsa.utils")
        alias.is_dsa_enable_prefill_cp = nsa.is_nsa_enable_prefill_cp  # type: ignore[attr-defined]
        sys.modules[alias.__name__] = alias
    release_runner = importlib.import_module("sglang.srt.model_executor.model_runner")

    def load(name: str, path: Path, text: str | None = None, base: Any = None) -> Any:
        module = types.ModuleType(name)
        if base is not None:
            module.__dict__.update(vars(base))
        module.__dict__.update(
            __name__=name, __file__=str(path), __package__=name.rpartition(".")[0]
        )
        sys.modules[name] = module
        exec(compile(text or path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
        return module

    load("sglang.srt.mem_cache.base_swa_memory_pool", srt / "mem_cache/base_swa_memory_pool.py")
    pools = load("sglang.srt.mem_cache.swa_memory_pool", srt / "mem_cache/swa_memory_pool.py")
    runner_path = srt / "model_executor/model_runner.py"
    text = runner_path.read_text(encoding="utf-8")
    if fixed:
        assert text.count(RUNNER_FIX[0]) == 1, "the cache era's _forward_raw changed shape"
        text = text.replace(*RUNNER_FIX)
    runner = load(release_runner.__name__, runner_path, text, base=release_runner)
    return pools, runner.ModelRunner


@pytest.mark.skipif(
    CACHE_ERA is None, reason="SWACHECK_CACHE_ERA_TREE names no cache-era tree (GitHub only)"
)
@pytest.mark.parametrize("fixed", [False, True], ids=["cache-era", "invalidated-first"])
@pytest.mark.parametrize("sglang", [RELEASE], indirect=True)
def test_cache_era_model_runner_dispatches_without_invalidation(
    sglang: Release, fixed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache era's own classes, paged (``alloc_extend``/``alloc_decode``): a prefill
    runs eager (invalidated), each decode replays. ``alloc_decode`` leaves its translation
    of ``last_loc`` live (and writes the mapping under it: I1, named at the write that
    runs, not the NPU line beside it); the cache era's ``_forward_raw`` replays with it
    live. With the invalidation moved first, only the allocator's I1 remains."""
    assert CACHE_ERA is not None
    pools, runner_cls = cache_era_model_runner(Path(CACHE_ERA), sglang, fixed)
    size, page = 64, 2
    pool = pools.SWAKVPool(
        size=size,
        size_swa=32,
        page_size=page,
        dtype=torch.float16,
        head_num=2,
        head_dim=8,
        swa_attention_layer_ids=list(SWA_LAYERS),
        full_attention_layer_ids=[1, 3],
        enable_kvcache_transpose=False,
        device="cpu",
    )
    allocator = pools.SWATokenToKVPoolAllocator(
        size=size,
        size_swa=32,
        page_size=page,
        dtype=torch.float16,
        device="cpu",
        kvcache=pool,
        need_sort=False,
    )
    graphs = bare_cuda_graph_runner(sglang, monkeypatch)

    def write(layer_id: int, locs: torch.Tensor) -> None:
        cache = torch.zeros(locs.numel(), 2, 8, dtype=torch.float16)
        pool.set_kv_buffer(layer(layer_id), locs, cache, cache)

    runner = model_runner(runner_cls, pool, graphs, write)
    requests = 3
    with Sanitizer(level="fast", action="log", config=DEFAULT) as san:
        watch_by_recipe(san, recipe_roles(sglang), runner, graphs, pool, allocator)
        prompt = 3
        zeros = torch.zeros(requests, dtype=torch.int64)
        lens = torch.full((requests,), prompt, dtype=torch.int64)
        locs = allocator.alloc_extend(
            zeros, zeros, lens, lens, torch.full((requests,), -1), requests * prompt
        )
        tokens = locs.view(requests, prompt)
        for i in range(requests):
            runner.forward(batch(sglang, "EXTEND", tokens[i], None))
        last = tokens[:, -1]
        for _ in range(3):
            lens = lens + 1
            last = allocator.alloc_decode(lens, lens, last)
            # 0.5.12.post1's graph runner copies the batch's SWA locations into its buffer.
            swa = pool.translate_loc_from_full_to_swa(last)
            assert runner.forward(batch(sglang, "DECODE", last, swa)).can_run_graph
        report = san.report()
    assert report.cache_models == {"SWAKVPool": "memoising translate"}
    assert report.watched == {"model-runner": 1, "graph-runner": 1, "pool": 1, "allocator": 1}
    # alloc_extend and alloc_decode write the mapping under the translation of last_loc
    # they made after invalidating: named at the write that ran (510 and 605 in the
    # cache era's file), not at the NPU branch above it.
    assert report.counts[UNINVALIDATED_MAPPING_WRITE] == 1 + 3  # the prefill, each decode step
    sites = {
        v.site.split(": `")[0] for v in report.violations if v.kind == UNINVALIDATED_MAPPING_WRITE
    }
    pool_file = pools.__file__
    assert {site.rsplit(" in ", 1)[1] for site in sites} == {"alloc_extend", "alloc_decode"}
    for site in sites:
        path, line = site.rsplit(" in ", 1)[0].rsplit(":", 1)
        assert path == pool_file
        text = linecache.getline(path, int(line)).strip()
        assert text == "self.full_to_swa_index_mapping[alloc_full_indices] = alloc_swa_indices"
    replays = 0 if fixed else 3  # every decode step's replay
    assert report.counts[FORWARD_WITHOUT_INVALIDATION] == replays, report.to_text()
    assert report.total_violations == 4 + replays, report.to_text()
    if replays:
        assert str(Path(CACHE_ERA)) in replay_site(report)
