"""The SWA buffers an attention backend fills for a graph replay, on SGLang's real
``TritonAttnBackend`` of every release that translates in the backends (issue 25 §2):
0.5.13 and 0.5.14 (the pool translates: ``token_to_kv_pool.translate_loc_from_full_to_swa``)
and 0.5.23 (a ``KVIndexTranslator`` plans the batch's ids). Its
``init_forward_metadata_out_graph`` runs unmodified on the CPU (its Triton kernels under
the interpreter) over the release's real pool and allocator, built without the backend's
``__init__`` (it reads a model runner and server contexts; the attributes the replay path
reads are set as ``__init__`` would, and ``init_cuda_graph_state`` allocates the buffers
itself).

Unmodified, replays of 4, 3 and 2 requests in the bucket of 4 are clean. Re-injected into
a scratch copy of the release's own module, loaded at test time: the padded tail of the
SWA write-location buffer left as it was (``padding-not-zeroed``), and the full
locations copied in untranslated (``swa-loc-mistranslated``).
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_objects import SWA_LAYERS, pool_and_allocator, version_tuple, write_kv
from sglang_shim import Release

from swacheck.runtime import PADDING_NOT_ZEROED, SWA_LOC_DTYPE, SWA_LOC_MISTRANSLATED, Sanitizer

MODULE = "sglang.srt.layers.attention.triton_backend"
MAX_BS, CONTEXT, WINDOW = 4, 16, 4
LEVELS = ["fast", "full"]

RELEASES = ["0.5.13", "0.5.14", "0.5.23"]

# Re-injected bugs: (what the release's module says, what the scratch copy says instead),
# per release where the text differs.
UNRESET_TAIL = {"*": ("        self.cuda_graph_swa_out_cache_loc[n:].zero_()\n", "")}
UNTRANSLATED = {
    "0.5.23": (
        "            self.cuda_graph_swa_out_cache_loc[:n].copy_(\n"
        "                self.kv_index_translator.write_ids(\n"
        "                    forward_batch, IdSpaceKind.SLIDING_WINDOW\n"
        "                )\n"
        "            )\n",
        "            self.cuda_graph_swa_out_cache_loc[:n].copy_(out_cache_loc)\n",
    ),
    "*": (
        "        self.cuda_graph_swa_out_cache_loc[:n].copy_(\n"
        "            self.token_to_kv_pool.translate_loc_from_full_to_swa(out_cache_loc)\n"
        "        )\n",
        "        self.cuda_graph_swa_out_cache_loc[:n].copy_(out_cache_loc)\n",
    ),
}


def translator_era(release: Release) -> bool:
    """0.5.21+: the backend asks a ``KVIndexTranslator``; before, the pool translates."""
    return version_tuple(release.version) >= (0, 5, 21)


def scratch_module(
    release: Release, tmp_path: Path, bug: dict[str, tuple[str, str]] | None
) -> types.ModuleType:
    """The release's backend module, or a copy of it with ``bug`` (for this release)
    written in, loaded from ``tmp_path`` (so its frames name the scratch file)."""
    module = importlib.import_module(MODULE)
    if bug is None:
        return module
    original, replaced = bug.get(release.version, bug["*"])
    source = Path(module.__file__).read_text(encoding="utf-8")
    assert source.count(original) == 1, "the release's code is not as expected"
    path = tmp_path / "triton_backend.py"
    path.write_text(source.replace(original, replaced), encoding="utf-8")
    scratch = types.ModuleType(f"{MODULE}_scratch")
    scratch.__file__ = str(path)
    scratch.__package__ = MODULE.rpartition(".")[0]
    sys.modules[scratch.__name__] = scratch  # dataclasses look their module up (the shim drops it)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), scratch.__dict__)
    return scratch


def backend_and_pool(
    release: Release, module: types.ModuleType, san: Sanitizer
) -> tuple[Any, Any, Any]:
    """A real ``TritonAttnBackend`` of ``module`` with its graph buffers, watched by
    ``san``, over the release's pool and allocator (watched first: SGLang builds the
    translator from the pool's methods after the pool exists) and, from 0.5.21, its
    ``KVIndexTranslator``; returns the backend, allocator and translator (``None``
    before 0.5.21)."""
    pool, allocator = pool_and_allocator(release)
    san.watch(pool)
    san.watch(allocator)
    req_to_token = torch.zeros(MAX_BS + 1, CONTEXT, dtype=torch.int32)
    translator = None
    if translator_era(release):
        (translator_cls,) = release.load(
            "sglang.srt.mem_cache.kv_index_translator", "KVIndexTranslator"
        )
        translator = translator_cls(
            req_to_token=req_to_token,
            token_to_kv_pool_allocator=allocator,
            token_to_kv_pool=pool,
            page_size=1,
            device="cpu",
        )
    backend = object.__new__(module.TritonAttnBackend)
    backend.__dict__.update(
        dllm_attention=None,
        num_head=2,
        num_kv_head=2,
        max_kv_splits=2,
        v_head_dim=8,
        swa_v_head_dim=None,
        lean_total_programs=1,
        lean_block_m=16,
        max_context_len=CONTEXT,
        is_draft_runner=False,
        skip_prefill=True,
        num_draft_tokens=None,
        sliding_window_size=WINDOW,
        use_sliding_window_kv_pool=True,
        device="cpu",
        static_kv_splits=True,  # as on a device without a core count: no split kernel
        device_core_count=0,
        enable_deterministic=False,
        split_tile_size=None,
        kv_indptr=torch.zeros(MAX_BS + 1, dtype=torch.int32),
        window_kv_indptr=torch.zeros(MAX_BS + 1, dtype=torch.int32),
        dcp_size=1,
        dcp_rank=0,
        kv_index_translator=translator,
        token_to_kv_pool=pool,
        req_to_token=req_to_token,
        page_size=1,
    )
    backend.init_cuda_graph_state(MAX_BS, MAX_BS)
    assert san.watch(backend).value == "backend"
    return backend, allocator, translator


def replays(release: Release, backend: Any, allocator: Any, translator: Any) -> None:
    """A prefill's KV write (eager, as the backend's forward writes it: the first SWA write
    location seen), then decode
    replays of 4, 3 and 2 requests in the bucket of 4, each request with three tokens of
    context, through the runner's replay view (``build_replay_fb_view``'s fields: the
    padded buffers, the live batch's ``out_cache_loc`` and plan)."""
    (mode,) = release.load("sglang.srt.model_executor.forward_batch_info", "ForwardMode")
    # A long prefill whose tokens then left the window: their SWA slots are free again, so
    # the decode tokens' full and SWA slot numbers differ.
    prefill = allocator.alloc(29)
    write_kv(release, backend.token_to_kv_pool, SWA_LAYERS[0], prefill)
    allocator.free_swa(prefill)
    req_to_token = backend.req_to_token
    for raw in (4, 3, 2):
        locs = allocator.alloc(raw)
        rows = torch.arange(1, raw + 1)
        for i, row in enumerate(rows.tolist()):
            req_to_token[row, :3] = int(locs[i])
        req_pool_indices = torch.zeros(MAX_BS, dtype=torch.int64)
        req_pool_indices[:raw] = rows
        seq_lens = torch.ones(MAX_BS, dtype=torch.int32)
        seq_lens[:raw] = 3
        plan = None
        if translator is not None:
            plan = translator.plan(
                req_pool_indices=req_pool_indices,
                seq_lens=seq_lens,
                seq_lens_cpu=seq_lens,
                write_virtual=locs,
            )
        view = SimpleNamespace(
            batch_size=MAX_BS,
            forward_mode=mode.DECODE,
            req_pool_indices=req_pool_indices,
            seq_lens=seq_lens,
            spec_info=None,
            encoder_lens=None,
            positions=torch.zeros(MAX_BS, dtype=torch.int64),
            num_padding=MAX_BS - raw,
            out_cache_loc=locs,
            kv_loc_plan=plan,
            kv_loc_cols=None,
        )
        backend.init_forward_metadata_out_graph(view)
        allocator.free(locs)
        req_to_token[rows] = 0


def sanitized_replays(release: Release, tmp_path: Path, level: str, bug: Any) -> Any:
    module = scratch_module(release, tmp_path, bug)
    with Sanitizer(level=level, action="log") as san:
        backend, allocator, translator = backend_and_pool(release, module, san)
        replays(release, backend, allocator, translator)
        return san.report()


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sglang", RELEASES, indirect=True)
def test_unmodified_backend_is_clean(
    sglang: Release, level: str, tmp_path: Path, figures: Any
) -> None:
    report = sanitized_replays(sglang, tmp_path, level, None)
    figures("TritonAttnBackend replay metadata", report)
    assert report.ok, report.to_text()
    assert report.checks.get(PADDING_NOT_ZEROED, 0) >= 2  # both padded shapes' tails
    assert report.checks.get(SWA_LOC_MISTRANSLATED, 0) >= 1  # the live rows
    assert report.checks.get(SWA_LOC_DTYPE, 0) >= 2  # write locations, window indices


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sglang", RELEASES, indirect=True)
def test_padding_bug_reinjected_into_the_backend(
    sglang: Release, level: str, tmp_path: Path, figures: Any
) -> None:
    report = sanitized_replays(sglang, tmp_path, level, UNRESET_TAIL)
    figures("TritonAttnBackend replay metadata, tail reset removed", report)
    assert report.counts[PADDING_NOT_ZEROED] >= 1, report.to_text()
    violation = next(v for v in report.violations if v.kind == PADDING_NOT_ZEROED)
    assert "TritonAttnBackend.cuda_graph_swa_out_cache_loc" in violation.message
    assert "triton_backend.py" in violation.site and "init_forward_metadata_out_graph" in (
        violation.site
    )


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sglang", RELEASES, indirect=True)
def test_untranslated_write_locations_reinjected_into_the_backend(
    sglang: Release, level: str, tmp_path: Path
) -> None:
    report = sanitized_replays(sglang, tmp_path, level, UNTRANSLATED)
    assert report.counts[SWA_LOC_MISTRANSLATED] >= 1, report.to_text()
    violation = next(v for v in report.violations if v.kind == SWA_LOC_MISTRANSLATED)
    assert "TritonAttnBackend.cuda_graph_swa_out_cache_loc" in violation.message
    assert violation.rows and all(full == actual for _, full, _, actual in violation.rows)
