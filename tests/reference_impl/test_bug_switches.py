"""Each inject_bug switch re-creates its seed bug in the real code path; these tests show
the damage each does where it does damage (and the observable symptom where it does not)."""

import subprocess
import sys

import pytest
import torch

from swacheck.reference_impl.demo import build_runner, serve
from swacheck.reference_impl.tensor_types import SwaLoc

DEV = "cuda" if torch.cuda.is_available() else "cpu"
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _observe(obj, name, record):
    """Wrap a bound method on one instance (the way the sanitizer does) to record state."""
    inner = getattr(obj, name)

    def wrapper(*args, **kwargs):
        record("before", args, kwargs)
        out = inner(*args, **kwargs)
        record("after", args, kwargs)
        return out

    setattr(obj, name, wrapper)


def test_padding_not_zeroed_diverges_from_oracle():
    """The padded tail of out_cache_loc_swa keeps a live request's SWA slot; the padded
    token overwrites that token's K/V, and the request's logits leave the oracle."""
    runner = build_runner(DEV, inject_bug="padding-not-zeroed")
    stats = serve(runner, steps=9)
    assert stats["padded_steps"] >= 1
    assert stats["diverged"] and stats["max_abs_diff"] > 10 * stats["tolerance"], stats
    buf = runner.graph_runner.buffers
    assert int(buf.out_cache_loc[3]) == 0  # the full-pool tail was zeroed ...
    assert int(buf.out_cache_loc_swa[3]) != 0  # ... the SWA one was not
    # Exact up to the first step padded after a mid-batch finish (the clean run is exact
    # throughout: test_serving).
    assert stats["first_divergent_step"] == 11


def test_storage_pointer_key_diverges_from_oracle():
    """Two micro-batches' out_cache_loc are equal-sized views of one tensor: under the
    storage-pointer key the second reuses the first's translation and its SWA K/V lands
    in the first's slots."""
    stats = serve(build_runner(DEV, inject_bug="storage-pointer-key"), steps=1)
    assert stats["diverged"] and stats["max_abs_diff"] > 10 * stats["tolerance"], stats


def test_swa_loc_int64_breaks_the_contract_silently():
    """int64 SWA locations: twice the bytes and a violated I3 contract at the graph buffer,
    the translation and set_kv_buffer; PyTorch indexing accepts them, so logits still match
    (the latent kind of bug only a dtype check catches)."""
    runner = build_runner(DEV, inject_bug="swa-loc-int64")
    buf = runner.graph_runner.buffers.out_cache_loc_swa
    assert buf.dtype == torch.int64 and not isinstance(buf, SwaLoc)
    assert buf.nbytes == 2 * build_runner(DEV).graph_runner.buffers.out_cache_loc_swa.nbytes
    seen = []
    pool = runner.token_to_kv_pool
    _observe(
        pool,
        "set_kv_buffer",
        lambda when, a, kw: when == "before" and seen.append(kw.get("out_cache_loc_swa")),
    )
    stats = serve(runner, steps=3)
    swa_locs = [t for t in seen if t is not None]
    assert swa_locs and all(t.dtype == torch.int64 for t in swa_locs)
    assert not stats["diverged"]


def _capture_misses(inject_bug):
    """Translation misses inside each run_once during capture (translate design)."""
    runner = build_runner(DEV, swa_loc="translate", inject_bug=inject_bug)
    pool, gr = runner.token_to_kv_pool, runner.graph_runner
    misses = []
    state = {}

    def record(when, args, kwargs):
        if when == "before":
            state["m"] = pool.loc_cache_misses
        else:
            misses.append(pool.loc_cache_misses - state["m"])

    _observe(gr, "run_once", record)
    runner.capture_graphs()
    return misses


def test_capture_without_invalidation_captures_the_warmup_result():
    """Without the run_once invalidation, the second warm-up and the capture never gather:
    they reuse the first warm-up's translation (on a GPU the graph bakes it in)."""
    assert all(m >= 1 for m in _capture_misses(None))
    buggy = _capture_misses("capture-without-invalidation")
    runs_per_bucket = 3 if DEV == "cuda" else 2  # two warm-ups (+ the capture on a GPU)
    assert buggy == ([1] + [0] * (runs_per_bucket - 1)) * 3  # buckets 4, 2, 1


@gpu
@pytest.mark.gpu
def test_capture_without_invalidation_diverges_with_cuda_graphs():
    """On a GPU the captured graph writes SWA K/V through a stale, graph-external index
    tensor: the run diverges (or dies on a device-side assert when that memory is reused)."""
    demo = [sys.executable, "-m", "swacheck.reference_impl.demo", "--device", "cuda"]
    proc = subprocess.run(
        [*demo, "--inject-bug", "capture-without-invalidation", "--steps", "8", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0, proc.stdout[-2000:]
    # Either the logits leave the oracle (the demo marks the step DIVERGED and, if it
    # gets that far, says so in its JSON line) or the stale index hits freed memory
    # and CUDA raises; seen on an H100: divergence at the first decode, then the error.
    diverged = "DIVERGED" in proc.stdout or '"diverged": true' in proc.stdout
    assert diverged or "CUDA error" in proc.stderr, (proc.stdout[-2000:], proc.stderr[-2000:])


def _cache_key_at(runner, obj, method, when):
    keys = []
    pool = runner.token_to_kv_pool
    _observe(obj, method, lambda w, a, kw: w == when and keys.append(pool._cached_loc_key))
    return keys


def test_invalidate_after_dispatch_leaves_the_cache_live_on_the_graph_path():
    """Only the eager path invalidates: graph replays build metadata on a live cache entry."""
    for bug, stale in ((None, False), ("invalidate-after-dispatch", True)):
        runner = build_runner(DEV, inject_bug=bug)
        backend = runner.attn_backend
        keys = _cache_key_at(runner, backend, "init_forward_metadata_replay_cuda_graph", "before")
        serve(runner, steps=2)
        assert keys and any(k is not None for k in keys) is stale


def test_fresh_translation_without_flush_leaves_an_entry_and_key_changes():
    """Unbracketed window translation: its entry outlives update_sliding_window_buffer, and
    the next lookup (set_kv_buffer's, #25824 design) replaces it mid-forward — the spurious
    warning of #26152 (counted as loc_key_changes)."""
    changes = {}
    for bug in (None, "fresh-translation-without-flush"):
        runner = build_runner(DEV, swa_loc="translate", inject_bug=bug)
        keys = _cache_key_at(runner, runner.attn_backend, "update_sliding_window_buffer", "after")
        changes[bug] = serve(runner, steps=2)["loc_cache"]["key_changes"]
        assert any(k is not None for k in keys) is (bug is not None)
    assert changes["fresh-translation-without-flush"] > changes[None]


def test_missing_invalidation_keeps_a_translation_across_eviction():
    """free_swa skips the invalidation: an entry translated before the eviction survives it
    (the stale lookup it allows is shown in test_pool)."""
    for bug, stale in ((None, False), ("missing-invalidation", True)):
        runner = build_runner(DEV, inject_bug=bug)
        keys = _cache_key_at(runner, runner.token_to_kv_pool, "free_swa", "after")
        serve(runner, steps=2)
        assert keys and any(k is not None for k in keys) is stale


@gpu
@pytest.mark.gpu
def test_padding_not_zeroed_diverges_with_cuda_graphs():
    stats = serve(build_runner("cuda", inject_bug="padding-not-zeroed"), steps=9)
    assert stats["cuda_graphs"] and stats["diverged"]
