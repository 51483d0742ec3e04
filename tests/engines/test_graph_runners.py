"""Graph runners and their input buffers of every release shape, on the real classes:
0.5.11's padding bug (the SWA location buffer's padded tail never reset, allocated
int64) caught at both levels, alone and through ``CudaGraphRunner.replay``; 0.5.12's fix
clean; speculative decoding's token tails checked; the 0.5.14+ ``DecodeCudaGraphRunner``
(``execute``/``load_batch`` over a ``CudaGraphBufferRegistry``) recognised and clean,
and the same bug re-injected into its registry caught."""

from __future__ import annotations

import importlib
import re
from typing import Any

import pytest
import torch
from sglang_objects import (
    DEFAULT,
    bare_cuda_graph_runner,
    decode_batch,
    decode_input_buffers,
    decode_runner,
    forward_batch,
    populate,
    registry_input_buffers,
    version_tuple,
)
from sglang_shim import Release

from swacheck.config import Config
from swacheck.runtime import (
    PADDING_NOT_ZEROED,
    SWA_LOC_DTYPE,
    PaddingNotZeroedError,
    Sanitizer,
    SanitizerReport,
    SWALocDtypeError,
)

LEVELS = ["fast", "full"]


def padded_populates(buffers: Any, tokens_per_request: int = 1) -> None:
    """A full bucket, then a smaller batch padded into it: a tail left as it was holds
    the first batch's live slots."""
    populate(buffers, raw_bs=4, bs=4, tokens_per_request=tokens_per_request)
    populate(buffers, raw_bs=3, bs=4, tokens_per_request=tokens_per_request)
    populate(buffers, raw_bs=2, bs=4, tokens_per_request=tokens_per_request)


def sanitized(
    level: str, config: Config, drive: Any, *objects: Any, role: str | None = None
) -> SanitizerReport:
    with Sanitizer(level=level, action="log", config=config) as san:
        for obj in objects:
            san.watch(obj, role)
        drive()
        return san.report()


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sglang", ["0.5.11", "0.5.12"], indirect=True)
def test_decode_input_buffers_alone(sglang: Release, level: str, figures: Any) -> None:
    """Recognised as input buffers by their populate method; 0.5.11's bug caught: the
    padded tail of ``out_cache_loc_swa`` and its int64 allocation; 0.5.12 clean."""
    buffers = decode_input_buffers(sglang, max_bs=4)
    report = sanitized(level, DEFAULT, lambda: padded_populates(buffers), buffers)
    figures("DecodeInputBuffers padded populate", report)
    assert report.watched == {"input-buffers": 1}
    assert report.checks[PADDING_NOT_ZEROED] > 0 and report.checks[SWA_LOC_DTYPE] > 0
    if sglang.version == "0.5.11":
        assert report.counts[PADDING_NOT_ZEROED] >= 1, report.to_text()
        assert report.counts[SWA_LOC_DTYPE] == 1, report.to_text()
        padding = next(v for v in report.violations if v.kind == PADDING_NOT_ZEROED)
        # Where the tail should have been reset: the release's own populate.
        assert re.search(r"cuda_graph_runner\.py:\d+ in populate_from_forward_batch", padding.site)
        assert "out_cache_loc_swa" in padding.message
    else:
        assert report.ok, report.to_text()


@pytest.mark.parametrize("sglang", ["0.5.11"], indirect=True)
def test_padding_bug_raises_at_both_levels(sglang: Release) -> None:
    """``raise``: the padded tail at the populate that left it (``full``) or at the next
    safe point that reads the device flags (``fast``, here the explicit check); the int64
    allocation, a property of the buffer rather than of a call, at the safe point after."""
    for level in LEVELS:
        buffers = decode_input_buffers(sglang, max_bs=4)
        with Sanitizer(level=level, action="raise", config=DEFAULT) as san:
            san.watch(buffers)
            populate(buffers, raw_bs=4, bs=4)
            with pytest.raises(PaddingNotZeroedError, match="out_cache_loc_swa"):
                populate(buffers, raw_bs=3, bs=4)
                san.check_deferred()
            with pytest.raises(SWALocDtypeError, match=r"out_cache_loc_swa .* torch\.int64"):
                san.check_deferred()
            san.check_deferred()  # nothing left to raise


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sglang", ["0.5.11", "0.5.12"], indirect=True)
def test_speculative_tails_are_token_counts(sglang: Release, level: str) -> None:
    """Two tokens per request (speculative verify): raw 3 requests padded to 4 leave the
    token tail [6:8]; 0.5.11 leaves the previous batch's slots there, 0.5.12 zeroes it."""
    buffers = decode_input_buffers(sglang, max_bs=4, tokens_per_request=2)
    report = sanitized(level, DEFAULT, lambda: padded_populates(buffers, 2), buffers)
    assert report.checks[PADDING_NOT_ZEROED] > 0
    if sglang.version == "0.5.11":
        assert report.counts[PADDING_NOT_ZEROED] >= 1, report.to_text()
    else:
        assert report.ok, report.to_text()


def replays(release: Release, runner: Any) -> None:
    (hidden, mode) = release.load(
        "sglang.srt.model_executor.forward_batch_info", "CaptureHiddenMode", "ForwardMode"
    )
    for raw_bs in (4, 3, 2):
        batch = forward_batch(raw_bs)
        if version_tuple(release.version) >= (0, 5, 13):
            del batch.out_cache_loc_swa  # the batch carries none from 0.5.13 on
        batch.capture_hidden_mode = hidden.NULL
        batch.forward_mode = mode.DECODE
        batch.spec_info = None
        batch.seq_lens_sum = int(batch.seq_lens.sum())
        batch.input_embeds = None
        batch.needs_forward_metadata_init = lambda: True
        runner.replay(batch)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sglang", ["0.5.11", "0.5.12", "0.5.13"], indirect=True)
def test_cuda_graph_runner_replay(
    sglang: Release, level: str, monkeypatch: pytest.MonkeyPatch, figures: Any
) -> None:
    runner = bare_cuda_graph_runner(sglang, monkeypatch)
    report = sanitized(level, DEFAULT, lambda: replays(sglang, runner), runner)
    figures("CudaGraphRunner.replay", report)
    assert report.watched == {"graph-runner": 1}
    assert report.checks[PADDING_NOT_ZEROED] > 0
    if sglang.version == "0.5.11":
        assert report.counts[PADDING_NOT_ZEROED] >= 1 and report.counts[SWA_LOC_DTYPE] == 1
    else:
        assert report.ok, report.to_text()


def quiet_process_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.5.23's buffers ask the expert-parallel group whether they need a counter."""
    module = importlib.import_module("sglang.srt.model_executor.runner_utils.buffers")
    if hasattr(module, "enable_num_token_non_padded"):
        monkeypatch.setattr(module, "enable_num_token_non_padded", lambda *args: False)


def executes(release: Release, runner: Any, swa: bool = False) -> None:
    for raw_bs in (4, 3, 2):
        logits = runner.execute(decode_batch(release, raw_bs, swa)).next_token_logits
        assert logits.shape[0] == raw_bs


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sglang", ["0.5.14", "0.5.23"], indirect=True)
def test_decode_cuda_graph_runner_is_recognised_and_clean(
    sglang: Release, level: str, monkeypatch: pytest.MonkeyPatch, figures: Any
) -> None:
    """``execute`` + ``capture`` make it a graph runner; the buffer registry it holds
    (``fill_from``) is its input buffers; every padded replay resets the location tails."""
    from swacheck.runtime.roles import role_of_class

    quiet_process_groups(monkeypatch)
    buffers, registry = registry_input_buffers(sglang, max_bs=4)
    runner = decode_runner(sglang, buffers, registry, capture_bs=(1, 4))
    assert role_of_class(type(runner).__mro__[1], DEFAULT).value == "graph-runner"
    report = sanitized(level, DEFAULT, lambda: executes(sglang, runner), runner)
    figures("DecodeCudaGraphRunner.execute", report)
    assert report.ok, report.to_text()
    assert report.watched == {"graph-runner": 1}
    assert report.checks[PADDING_NOT_ZEROED] >= 2  # out_cache_loc's tail, two padded replays


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sglang", ["0.5.14", "0.5.23"], indirect=True)
def test_padding_bug_reinjected_into_the_registry(
    sglang: Release, level: str, monkeypatch: pytest.MonkeyPatch, figures: Any
) -> None:
    """0.5.11's bug in the 0.5.14+ shape: an SWA location slot registered in the real
    registry as 0.5.11 allocated it (int64) with a padding policy that keeps the tail."""
    quiet_process_groups(monkeypatch)
    module = importlib.import_module("sglang.srt.model_executor.cuda_graph_buffer_registry")
    (slot_cls, policy) = sglang.load(module.__name__, "GraphSlot", "PaddingPolicy")
    buffers, registry = registry_input_buffers(sglang, max_bs=4)
    registry.register_slot(
        slot_cls(
            "out_cache_loc_swa",
            lambda _bs, max_tokens: (max_tokens,),
            torch.int64,
            axis="tokens",
            padding_policy=policy.FOREACH_COPY,
        )
    )
    runner = decode_runner(sglang, buffers, registry, capture_bs=(1, 4))
    report = sanitized(level, Config(), lambda: executes(sglang, runner, swa=True), runner)
    figures("DecodeCudaGraphRunner.execute, bug re-injected", report)
    assert report.counts[PADDING_NOT_ZEROED] >= 1, report.to_text()
    assert report.counts[SWA_LOC_DTYPE] == 1, report.to_text()
    assert any("out_cache_loc_swa" in v.message for v in report.violations)
    padding = next(v for v in report.violations if v.kind == PADDING_NOT_ZEROED)
    assert re.search(r"cuda_graph_buffer_registry\.py:\d+ in fill_from", padding.site)
