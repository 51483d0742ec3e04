"""On the device, with real CUDA graphs: ``fast`` changes no output bit, adds no device
synchronisation, allocates nothing during capture, and still catches the bugs."""

from __future__ import annotations

import os
import traceback
import warnings
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from swacheck.runtime import (
    PADDING_NOT_ZEROED,
    STALE_TRANSLATION,
    SWA_KV_CORRUPTION,
    CaptureCachePollutionError,
    Sanitizer,
    StaleTranslationError,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def build(inject_bug: str | None = None, **kwargs: Any) -> Any:
    from swacheck.reference_impl.demo import build_runner

    return build_runner("cuda", inject_bug=inject_bug, **kwargs)


def watch(runner: Any, level: str, action: str = "log") -> Sanitizer:
    san = Sanitizer(level=level, action=action)
    san.watch_pool(runner.token_to_kv_pool)
    san.watch_backend(runner.attn_backend)
    san.watch_graph_runner(runner.graph_runner)
    san.watch_model_runner(runner)
    return san


def serve_logits(runner: Any, steps: int) -> list[torch.Tensor]:
    """Capture, then the demo's workload: every step's logits."""
    from swacheck.reference_impl.workload import make_workload

    runner.capture_graphs()
    assert runner.graph_runner.graphs, "expected real CUDA graphs"
    for spec in make_workload(0, runner.config.vocab_size):
        runner.add_request(spec)
    out = []
    while runner.has_work() and len(out) < steps:
        step = runner.step()
        if step is not None:
            out.append(step.logits.clone())
    return out


def test_fast_leaves_outputs_bitwise_identical() -> None:
    plain = serve_logits(build(), 60)
    runner = build()
    san = watch(runner, "fast")
    sanitized = serve_logits(runner, 60)
    report = san.report()
    san.close()
    assert report.ok, report.to_text()
    assert report.checks[PADDING_NOT_ZEROED] > 0  # the graph path was really checked
    assert len(plain) == len(sanitized)
    for a, b in zip(plain, sanitized, strict=True):
        assert torch.equal(a, b)


def count_syncs(runner: Any, steps: int) -> int:
    """Synchronising CUDA calls made while serving ``steps`` steps after capture."""
    from swacheck.reference_impl.workload import make_workload

    runner.capture_graphs()
    for spec in make_workload(0, runner.config.vocab_size):
        runner.add_request(spec)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(steps):
                runner.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def test_fast_adds_no_synchronisation() -> None:
    """The engine synchronises on its own (sampling); ``fast`` must not add one call."""
    baseline = count_syncs(build(), 40)
    runner = build()
    san = watch(runner, "fast")
    sanitized = count_syncs(runner, 40)
    san.close()
    assert baseline > 0  # the counter works
    assert sanitized <= baseline


class CaptureRecorder(TorchDispatchMode):
    """Every aten op dispatched while the current stream captures, and whether any of
    them was dispatched from the sanitizer's code."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.from_sanitizer: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if torch.cuda.is_current_stream_capturing():
            self.ops.append(str(func))
            stack = traceback.extract_stack()
            if called_by_sanitizer([f.filename for f in reversed(stack)]):
                self.from_sanitizer.append(f"{func} from {stack[-2].name}")
        return func(*args, **(kwargs or {}))


def called_by_sanitizer(filenames: list[str]) -> bool:
    """Whether the innermost frame outside torch and this file (``filenames``: innermost
    first) is the sanitizer's: engine code it wraps runs below its wrappers' frames."""
    import swacheck.runtime

    sanitizer = os.path.dirname(swacheck.runtime.__file__)
    torch_dir = os.path.dirname(torch.__file__)
    for name in filenames:
        if name.startswith(torch_dir) or name == __file__:
            continue
        return name.startswith(sanitizer)
    return False


def capture_ops(level: str | None) -> CaptureRecorder:
    runner = build(swa_loc="translate")
    san = watch(runner, level) if level else None
    recorder = CaptureRecorder()
    with recorder:
        runner.capture_graphs()
    if san is not None:
        assert san.report().ok
        san.close()
    return recorder


def test_fast_capture_launches_nothing_of_its_own() -> None:
    """``fast`` dispatches no op while a graph captures: the captured ops are the very
    sequence an unsanitized capture records (exact, whatever ran before in the process)."""
    plain = capture_ops(None)
    sanitized = capture_ops("fast")
    assert plain.ops, "the recorder saw no captured op"
    assert sanitized.from_sanitizer == []
    assert sanitized.ops == plain.ops


def test_fast_capture_allocates_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """No allocation made while a graph captures comes from the sanitizer: CUDA's
    allocation history with Python stacks, recorded from just before each
    ``torch.cuda.graph`` block to just after it (the warm-ups before it are not capture)."""
    snapshots: list[dict[str, Any]] = []
    enter, leave = torch.cuda.graph.__enter__, torch.cuda.graph.__exit__

    def recording_enter(self: torch.cuda.graph) -> None:
        torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
        enter(self)

    def recording_exit(self: torch.cuda.graph, *exc: object) -> None:
        leave(self, *exc)
        snapshots.append(torch.cuda.memory._snapshot())
        torch.cuda.memory._record_memory_history(enabled=None)

    monkeypatch.setattr(torch.cuda.graph, "__enter__", recording_enter)
    monkeypatch.setattr(torch.cuda.graph, "__exit__", recording_exit)
    runner = build(swa_loc="translate")
    san = watch(runner, "fast")
    runner.capture_graphs()
    san.close()
    events = [
        e
        for snapshot in snapshots
        for trace in snapshot["device_traces"]
        for e in trace
        if e["action"] == "alloc"
    ]
    assert len(snapshots) == len(runner.graph_runner.graphs)
    assert events, "the allocation history recorded nothing"
    # Snapshot frames are innermost first.
    ours = [e for e in events if called_by_sanitizer([f["filename"] for f in e["frames"]])]
    assert ours == []


def test_capture_survives_old_cyclic_garbage() -> None:
    """The root cause of a capture that broke depending on what ran before: cyclic garbage
    holding CUDA tensors and captured graphs, collected inside a sanitized capture, freed
    device memory while the stream captured. The sanitizer pauses the collector there."""
    import gc

    def garbage() -> None:
        old = build(swa_loc="translate")
        old.capture_graphs()  # its graphs, pools and weights, kept alive by a cycle
        old.self_reference = old
        watch(old, "fast").close()

    garbage()
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)  # a collection at (almost) every allocation
    try:
        runner = build(swa_loc="translate")
        san = watch(runner, "fast")
        seen: list[bool] = []
        run_once = runner.graph_runner.run_once
        runner.graph_runner.run_once = lambda bs: (seen.append(gc.isenabled()), run_once(bs))[1]
        runner.capture_graphs()
    finally:
        gc.set_threshold(*thresholds)
    assert runner.graph_runner.graphs
    assert seen and not any(seen), "the collector ran during capture"
    assert gc.isenabled()
    report = san.report()
    san.close()
    assert report.ok, report.to_text()


def test_full_capture_succeeds() -> None:
    """``full`` reads the device on warm-up hits, never while the stream is capturing (a
    synchronisation there would fail the capture)."""
    runner = build(swa_loc="translate")
    san = watch(runner, "full")
    runner.capture_graphs()
    assert runner.graph_runner.graphs
    report = san.report()
    san.close()
    assert report.ok and report.checks[STALE_TRANSLATION] > 0


@pytest.mark.parametrize(
    ("level", "kinds"),
    [("fast", {PADDING_NOT_ZEROED}), ("full", {PADDING_NOT_ZEROED, SWA_KV_CORRUPTION})],
)
def test_padding_caught_with_real_graphs(level: str, kinds: set[str]) -> None:
    runner = build("padding-not-zeroed")
    san = watch(runner, level)
    serve_logits(runner, 30)
    report = san.report()
    san.close()
    assert kinds <= {k for k, n in report.counts.items() if n}, report.to_text()


@pytest.mark.parametrize(
    ("bug", "error"),
    [
        ("capture-without-invalidation", CaptureCachePollutionError),
        ("storage-pointer-key", StaleTranslationError),
    ],
)
def test_raise_stops_before_the_damage(bug: str, error: type[Exception]) -> None:
    """These bugs make kernels index out of bounds on a GPU; ``raise`` stops them first."""
    runner = build(bug)
    with watch(runner, "fast", action="raise"), pytest.raises(error):
        serve_logits(runner, 30)
