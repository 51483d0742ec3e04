"""Building a release's real pool, allocator and graph-runner input buffers on the CPU, and
driving them as the engine does. Only the release's own classes are built; what is
passed to them (a layer, a forward batch) carries the fields they read.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import torch

from swacheck.config import Config

SIZE, SIZE_SWA = 64, 32
HEADS, HEAD_DIM = 2, 8
SWA_LAYERS, FULL_LAYERS = (0, 2), (1, 3)

# Every release runs with the default configuration: the dtype contract is ``auto``,
# each role's convention inferred from the release itself (int32 to 0.5.12; from 0.5.13
# int64 write indices, the translation's dtype), so no release line lists exceptions.
DEFAULT = Config()


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def pool_and_allocator(release: Any) -> tuple[Any, Any]:
    """The release's ``SWAKVPool`` and ``SWATokenToKVPoolAllocator`` (page size 1)."""
    (pool_cls,) = release.load("sglang.srt.mem_cache.swa_memory_pool", "SWAKVPool")
    allocator_cls = allocator_class(release)
    kwargs: dict[str, Any] = dict(
        size=SIZE,
        size_swa=SIZE_SWA,
        page_size=1,
        dtype=torch.float16,
        head_num=HEADS,
        head_dim=HEAD_DIM,
        swa_attention_layer_ids=list(SWA_LAYERS),
        full_attention_layer_ids=list(FULL_LAYERS),
        device="cpu",
    )
    if "enable_kvcache_transpose" in inspect.signature(pool_cls).parameters:
        kwargs["enable_kvcache_transpose"] = False
    pool = pool_cls(**kwargs)
    allocator = allocator_cls(
        size=SIZE,
        size_swa=SIZE_SWA,
        page_size=1,
        dtype=torch.float16,
        device="cpu",
        kvcache=pool,
        need_sort=False,
    )
    return pool, allocator


def allocator_class(release: Any) -> type:
    try:
        (cls,) = release.load("sglang.srt.mem_cache.allocator.swa", "SWATokenToKVPoolAllocator")
    except ImportError:  # before 0.5.13 it lived next to the pool
        (cls,) = release.load("sglang.srt.mem_cache.swa_memory_pool", "SWATokenToKVPoolAllocator")
    return cls


def layer(layer_id: int) -> SimpleNamespace:
    """What ``set_kv_buffer`` reads of a ``RadixAttention`` layer."""
    return SimpleNamespace(layer_id=layer_id, is_cross_attention=False)


def write_kv(release: Any, pool: Any, layer_id: int, locs: torch.Tensor) -> None:
    """One layer's KV write, as the release's attention backends do it: a full-space
    location up to 0.5.12 (the pool translates); from 0.5.13 on the backend translates
    once per forward and passes the SWA location along, as ``swa_loc`` (0.5.13) or in a
    ``KVWriteLoc`` (0.5.14+)."""
    cache = torch.randn(locs.numel(), HEADS, HEAD_DIM, dtype=torch.float16)
    params = inspect.signature(pool.set_kv_buffer).parameters
    if "swa_loc" in params:
        swa = pool.translate_loc_from_full_to_swa(locs) if layer_id in SWA_LAYERS else None
        pool.set_kv_buffer(layer(layer_id), locs, cache, cache, swa_loc=swa)
        return
    if "loc_info" not in params:
        pool.set_kv_buffer(layer(layer_id), locs, cache, cache)
        return
    (write_loc,) = release.load("sglang.srt.mem_cache.memory_pool", "KVWriteLoc")
    swa = pool.translate_loc_from_full_to_swa(locs) if layer_id in SWA_LAYERS else None
    pool.set_kv_buffer(layer(layer_id), write_loc(locs, swa_loc=swa), cache, cache)


def write_kv_as_given(release: Any, pool: Any, layer_id: int, locs: torch.Tensor, swa: Any) -> None:
    """One layer's KV write whose SWA location is ``swa``, handed over the way the
    release's callers hand it: the per-batch ``set_swa_loc`` (to 0.5.12: the model runner
    sets the batch's ``out_cache_loc_swa`` on the pool before the forward), ``swa_loc=``
    (0.5.13) or a ``KVWriteLoc`` (0.5.14+). How a bug gets there differs by era; what the
    SWA sub-pool's write receives is the same."""
    cache = torch.randn(locs.numel(), HEADS, HEAD_DIM, dtype=torch.float16)
    params = inspect.signature(pool.set_kv_buffer).parameters
    if "swa_loc" in params:
        pool.set_kv_buffer(layer(layer_id), locs, cache, cache, swa_loc=swa)
    elif "loc_info" in params:
        (write_loc,) = release.load("sglang.srt.mem_cache.memory_pool", "KVWriteLoc")
        pool.set_kv_buffer(layer(layer_id), write_loc(locs, swa_loc=swa), cache, cache)
    else:
        pool.set_swa_loc(swa)
        try:
            pool.set_kv_buffer(layer(layer_id), locs, cache, cache)
        finally:
            pool.set_swa_loc(None)


def churn(release: Any, pool: Any, allocator: Any, steps: int = 40) -> int:
    """Requests come and go: allocate their tokens, translate, write every layer's KV,
    free the SWA slot of a token that left the window, free finished requests (their
    full slots only, for tokens whose SWA slot is gone, where the allocator says
    ``free_full``). Returns the KV writes made."""
    live: list[tuple[torch.Tensor, int]] = []  # a request's tokens, how many left the window
    writes = 0
    for step in range(steps):
        locs = allocator.alloc(1 + step % 3)
        assert locs is not None, "the pool ran out: the churn frees too little"
        live.append((locs, 0))
        pool.translate_loc_from_full_to_swa(locs)
        for layer_id in (*SWA_LAYERS, *FULL_LAYERS):
            write_kv(release, pool, layer_id, locs)
            writes += 1
        oldest, evicted = live[0]
        if step % 4 == 3 and evicted < oldest.numel():
            allocator.free_swa(oldest[evicted : evicted + 1])  # the token left the window
            live[0] = (oldest, evicted + 1)
        if len(live) > 4:
            finish(allocator, *live.pop(0))
    for request in live:
        finish(allocator, *request)
    return writes


def finish(allocator: Any, locs: torch.Tensor, evicted: int) -> None:
    """Free a finished request's tokens; the first ``evicted`` have no SWA slot left."""
    if evicted and hasattr(allocator, "free_full"):
        allocator.free_full(locs[:evicted])
        allocator.free(locs[evicted:])
    else:
        allocator.free(locs)


def forward_batch(
    raw_bs: int, tokens_per_request: int = 1, base: int = 10, swa_base: int = 20
) -> SimpleNamespace:
    """What ``DecodeInputBuffers.populate_from_forward_batch`` reads of a ``ForwardBatch``."""
    tokens = raw_bs * tokens_per_request
    return SimpleNamespace(
        batch_size=raw_bs,
        input_ids=torch.arange(tokens),
        req_pool_indices=torch.arange(raw_bs),
        seq_lens=torch.full((raw_bs,), 3, dtype=torch.int32),
        seq_lens_cpu=torch.full((raw_bs,), 3, dtype=torch.int32),
        out_cache_loc=torch.arange(base, base + tokens),
        out_cache_loc_swa=torch.arange(swa_base, swa_base + tokens, dtype=torch.int32),
        positions=torch.arange(tokens),
        ngram_embedding_info=None,
        mamba_track_indices=None,
        mamba_track_mask=None,
        encoder_lens=None,
        mrope_positions=None,
        rids_int=None,
        bootstrap_room_ids_int=None,
        num_token_non_padded=torch.tensor([tokens], dtype=torch.int32),
    )


def decode_input_buffers(release: Any, max_bs: int, tokens_per_request: int = 1) -> Any:
    """The release's graph-runner input buffers, hybrid SWA (0.5.11-0.5.13 only)."""
    (cls,) = release.load("sglang.srt.model_executor.cuda_graph_runner", "DecodeInputBuffers")
    return cls.create(
        device="cpu",
        max_bs=max_bs,
        max_num_token=max_bs * tokens_per_request,
        hidden_size=8,
        vocab_size=16,
        dtype=torch.float16,
        dp_size=1,
        pp_size=1,
        is_encoder_decoder=False,
        require_mlp_tp_gather=False,
        seq_len_fill_value=1,
        encoder_len_fill_value=0,
        num_tokens_per_bs=tokens_per_request,
        cache_loc_dtype=torch.int64,
        enable_mamba_track=False,
        is_hybrid_swa=True,
    )


def populate(buffers: Any, raw_bs: int, bs: int, tokens_per_request: int = 1, **batch: Any) -> None:
    """``populate_from_forward_batch`` as ``CudaGraphRunner.replay_prepare`` calls it."""
    buffers.populate_from_forward_batch(
        forward_batch=forward_batch(raw_bs, tokens_per_request, **batch),
        raw_bs=raw_bs,
        raw_num_token=raw_bs * tokens_per_request,
        bs=bs,
        seq_len_fill_value=1,
        require_gathered_buffer=False,
        num_tokens_per_bs=tokens_per_request,
        nsa_enable_prefill_cp=False,
        enable_num_token_non_padded_flag=False,
    )


def registry_input_buffers(release: Any, max_bs: int) -> tuple[Any, Any]:
    """0.5.14+: the runner's ``DecodeInputBuffers`` and the ``CudaGraphBufferRegistry``
    that adopts them (``build_decode_registry(source=...)``), as the runner builds them."""
    buffers_module = importlib.import_module("sglang.srt.model_executor.runner_utils.buffers")
    registry_module = importlib.import_module(
        "sglang.srt.model_executor.cuda_graph_buffer_registry"
    )
    (buffers_cls,) = release.load(buffers_module.__name__, "DecodeInputBuffers")
    (build,) = release.load(registry_module.__name__, "build_decode_registry")
    wanted = dict(
        device="cpu",
        max_bs=max_bs,
        max_num_token=max_bs,
        hidden_size=8,
        vocab_size=16,
        next_token_logits_buffer=torch.zeros(max_bs, 16),
        dtype=torch.float16,
        dp_size=1,
        num_dp_ranks=1,
        pp_size=1,
        is_encoder_decoder=False,
        require_mlp_tp_gather=False,
        seq_len_fill_value=1,
        encoder_len_fill_value=0,
        num_tokens_per_bs=1,
        num_tokens_per_req=1,
        cache_loc_dtype=torch.int64,
        enable_mamba_track=False,
    )
    accepted = inspect.signature(buffers_cls.create).parameters
    buffers = buffers_cls.create(**{k: v for k, v in wanted.items() if k in accepted})
    registry = build(
        device="cpu",
        max_bs=max_bs,
        max_num_token=max_bs,
        seq_len_fill_value=1,
        cache_loc_dtype=torch.int64,
        source=buffers,
    )
    return buffers, registry


def decode_runner(release: Any, buffers: Any, registry: Any, capture_bs: tuple[int, ...]) -> Any:
    """0.5.14+: a real ``DecodeCudaGraphRunner`` (its ``load_batch`` and ``execute``) on the
    given buffers, in plain decode. A subclass answers what needs a GPU, a model or a
    process group: no ``__init__`` (which captures graphs), the model's layout context,
    and the attention backend's metadata; the replayed graph returns logits."""
    module = importlib.import_module("sglang.srt.model_executor.runner.decode_cuda_graph_runner")
    (runner_cls,) = release.load(module.__name__, "DecodeCudaGraphRunner")
    (hidden, mode) = release.load(
        "sglang.srt.model_executor.forward_batch_info", "CaptureHiddenMode", "ForwardMode"
    )
    (logits,) = release.load("sglang.srt.layers.logits_processor", "LogitsProcessorOutput")

    class CPUDecodeRunner(runner_cls):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.metadata_calls = 0

        def model_context(self) -> Any:
            return contextlib.nullcontext()

        def _init_replay_attn_metadata(self, forward_batch: Any, **kwargs: Any) -> None:
            self.metadata_calls += 1

    runner = CPUDecodeRunner()
    shared_read_ends = getattr(module, "SharedReadEnds", None)
    runner.__dict__.update(
        buffers=buffers,
        buffer_registry=registry,
        capture_bs=list(capture_bs),
        captured_req_width=1,
        num_tokens_per_bs=1,
        seq_len_fill_value=1,
        ragged_verify_mode=False,
        dllm_uses_input_embeds=False,
        dllm_input_preparation=None,
        is_dllm=False,
        is_encoder_decoder=False,
        require_mlp_tp_gather=False,
        enable_two_batch_overlap=False,
        enable_pdmux=False,
        record_nolora_graph=False,
        attention_graph_variants=None,
        capture_hidden_mode=hidden.NULL,
        capture_forward_mode=mode.DECODE,
        _skips_prefilled_inputs=False,
        _draft_metadata_glue=None,
        _target_metadata_glue=None,
        _early_verify_metadata=None,
        in_graph_metadata_prep_done=None,
        deepep_adapter=SimpleNamespace(replay=lambda: None),
        device_module=SimpleNamespace(Event=lambda: SimpleNamespace(record=lambda: None)),
        attn_backend=SimpleNamespace(
            init_forward_metadata_out_graph=lambda *args, **kwargs: None,
            shared_read_ends=lambda forward_mode: list(shared_read_ends)[-1],
        ),
        backend=SimpleNamespace(
            replay_session=contextlib.nullcontext,
            replay=lambda key, batch: logits(next_token_logits=torch.zeros(max(capture_bs), 16)),
        ),
        model_runner=SimpleNamespace(
            server_args=SimpleNamespace(enable_return_hidden_states=False),
            spec_algorithm=SimpleNamespace(
                is_dflash=lambda: False,
                is_dflash_family=lambda: False,
                is_eagle=lambda: False,
                is_standalone=lambda: False,
            ),
            is_draft_worker=False,
            hisparse_coordinator=None,
            device_timer=None,
        ),
    )
    return runner


def decode_batch(release: Any, raw_bs: int, swa: bool = False) -> SimpleNamespace:
    """A decode forward batch as the 0.5.13+ runner reads it; ``out_cache_loc_swa`` (which
    those releases' batches no longer carry) only where ``swa`` asks for it."""
    (hidden, mode) = release.load(
        "sglang.srt.model_executor.forward_batch_info", "CaptureHiddenMode", "ForwardMode"
    )
    batch = forward_batch(raw_bs)
    if not swa:
        del batch.out_cache_loc_swa
    batch.forward_mode = mode.DECODE
    batch.capture_hidden_mode = hidden.NULL
    batch.spec_info = None
    batch.lora_ids = None
    batch.seq_lens_sum = int(batch.seq_lens.sum())
    batch.input_embeds = None
    batch.needs_forward_metadata_init = lambda: True
    return batch


def runner_input_buffers(release: Any, module: Any) -> dict[str, Any]:
    """The runner's input buffers as its ``__init__`` makes them: ``DecodeInputBuffers``
    (0.5.11-0.5.12.post1), or (0.5.13) a namespace of buffers adopted by a
    ``CudaGraphBufferRegistry``."""
    if not hasattr(module, "build_decode_registry"):
        return {"buffers": decode_input_buffers(release, max_bs=4)}
    buffers = module._allocate_decode_buffers(
        device="cpu",
        max_bs=4,
        max_num_token=4,
        hidden_size=8,
        vocab_size=16,
        dtype=torch.float16,
        dp_size=1,
        pp_size=1,
        is_encoder_decoder=False,
        require_mlp_tp_gather=False,
        seq_len_fill_value=1,
        encoder_len_fill_value=0,
        num_tokens_per_bs=1,
        cache_loc_dtype=torch.int64,
        enable_mamba_track=False,
    )
    registry = module.build_decode_registry(
        device="cpu",
        max_bs=4,
        max_num_token=4,
        seq_len_fill_value=1,
        cache_loc_dtype=torch.int64,
        source=buffers,
    )
    return {"buffers": buffers, "buffer_registry": registry}


def bare_cuda_graph_runner(release: Any, monkeypatch: Any) -> Any:
    """0.5.11-0.5.13: a real ``CudaGraphRunner`` (its ``can_run``, ``replay`` and
    ``replay_prepare``) over real input buffers, built without its ``__init__`` (which
    captures on a GPU), batches up to 4 requests.
    The attention backend and the captured graphs are stand-ins; the expert-parallel
    group ``replay_prepare`` asks about does not exist in a CPU test."""
    module = importlib.import_module("sglang.srt.model_executor.cuda_graph_runner")
    monkeypatch.setattr(module, "enable_num_token_non_padded", lambda *args: False)
    (runner_cls,) = release.load(module.__name__, "CudaGraphRunner")
    (hidden, mode) = release.load(
        "sglang.srt.model_executor.forward_batch_info", "CaptureHiddenMode", "ForwardMode"
    )
    (logits,) = release.load("sglang.srt.layers.logits_processor", "LogitsProcessorOutput")
    runner = object.__new__(runner_cls)
    runner.__dict__.update(
        **runner_input_buffers(release, module),
        capture_bs=[1, 4],
        max_bs=4,
        disable_padding=False,
        require_mlp_sync=False,
        num_tokens_per_bs=1,
        seq_len_fill_value=1,
        require_gathered_buffer=False,
        require_mlp_tp_gather=False,
        nsa_enable_prefill_cp=False,
        enable_two_batch_overlap=False,
        enable_pdmux=False,
        is_encoder_decoder=False,
        is_dllm=False,
        record_nolora_graph=False,
        capture_hidden_mode=hidden.NULL,
        capture_forward_mode=mode.DECODE,
        deepep_adapter=SimpleNamespace(replay=lambda: None),
        attn_backend=SimpleNamespace(
            init_forward_metadata_replay_cuda_graph=lambda *a, **k: None,
            init_forward_metadata_out_graph=lambda *a, **k: None,
        ),
        model_runner=SimpleNamespace(
            server_args=SimpleNamespace(enable_return_hidden_states=False),
            spec_algorithm=SimpleNamespace(
                **{
                    f"is_{name}": lambda: False
                    for name in ("dflash", "eagle", "standalone", "ngram")
                }
            ),
            is_draft_worker=False,
            hisparse_coordinator=None,
            device_timer=None,
        ),
        graphs=defaultdict(lambda: SimpleNamespace(replay=lambda: None)),
        output_buffers=defaultdict(lambda: logits(next_token_logits=torch.zeros(4, 16))),
    )
    return runner
