"""Where the sanitizer's ``fast`` overhead per decode step goes: one contender per
variant, stepping in rotation like ``bench_sanitizer_overhead.py``, each variant a
``fast`` sanitizer with one group of wrappers stepped aside (or one part switched off).
A variant's saving against ``fast`` is what that group costs; expect ±15 µs of noise.

Removing a group can change what the others do (a removed translate wrapper fills no
cache entry for the checks after it), so the savings need not add up to the total.

    python benchmarks/ablate_sanitizer.py                # CUDA graph decode on a GPU
    python benchmarks/ablate_sanitizer.py --device cpu   # eager body over the static buffers

The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
import bench_sanitizer_overhead as bench

# Wrapped methods by group, as the reference implementation names them.
GROUPS = {
    "translate": {"translate_loc_from_full_to_swa"},
    "mutators": {
        "alloc",
        "free",
        "free_swa",
        "set_full_to_swa_mapping",
        "clear",
        "register_mapping",
        "update_sliding_window_buffer",
    },
    "populate": {"populate_from_forward_batch"},
    "scopes": {
        "forward",
        "replay",
        "init_forward_metadata",
        "init_forward_metadata_replay_cuda_graph",
    },
}
# Parts switched off inside wrappers that stay: the device flags' ``torch.cat`` per
# populate (and so every poll), and the scan of the batch at the start of a forward.
PARTS = ("device-flags", "batch-scan")
# Every wrapper (but the invalidations', which ``fast`` steps aside while nothing is
# cached) replaced by a bare pass-through wrapper checking nothing, no device flags: the
# floor of hooking these methods per call at all.
BARE = "bare-wrappers"


def without_device_flags(san: Any) -> None:
    watch = san.graph_watches[0]
    plan = watch._plan

    def plan_without_flags(*args: Any) -> Any:
        made = plan(*args)
        made.staged, made.loose = [], []
        return made

    watch._plan = plan_without_flags


def contender(args: argparse.Namespace, variant: str) -> bench.Contender:
    c = bench.Contender(args, "graph", "off" if variant == "off" else "fast")
    removed = variant.removeprefix("-")
    if removed in GROUPS:
        for undo in c.san.patcher._undo:
            wrapped = getattr(undo, "__self__", None)
            if wrapped is not None and wrapped.name in GROUPS[removed]:
                wrapped.step_aside()
    elif removed == "device-flags":
        without_device_flags(c.san)
    elif removed == "batch-scan":
        c.san.names.scan_batch = lambda obj: ([], [])
    elif variant == BARE:
        hooked: dict[tuple[int, str], dict[str, Any]] = {}
        for undo in reversed(c.san.patcher._undo):  # last wrapper first: stacks unwind
            wrapped = getattr(undo, "__self__", None)
            if wrapped is not None:
                wrapped.retire()
                hooked[(id(wrapped.namespace), wrapped.name)] = wrapped.namespace
        skipped = set(c.san.config.invalidate_methods)  # stepped aside most of the time
        for (_, name), namespace in hooked.items():
            if name not in skipped:
                namespace[name] = bare(getattr(owner_of(namespace), name))
    return c


def owner_of(namespace: dict[str, Any]) -> object:
    """The object whose ``__dict__`` is ``namespace``."""
    return next(r for r in gc.get_referrers(namespace) if getattr(r, "__dict__", None) is namespace)


def bare(original: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    return wrapper


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--steps", type=int, default=600)
    args = p.parse_args(argv)
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        bench.use_torch_kernels()
    elif not torch.cuda.is_available():
        print("ablate_sanitizer: needs a CUDA device (or --device cpu)", file=sys.stderr)
        return 2
    setup = argparse.Namespace(
        device=args.device,
        batch=6,
        prompt_len=32,
        warmup=10,
        layers=4,
        dtype="bfloat16" if args.device == "cuda" else "float32",
    )
    variants = ["off", "fast", *(f"-{g}" for g in GROUPS), *(f"-{p}" for p in PARTS), BARE]
    contenders = [(v, contender(setup, v)) for v in variants]
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    times: dict[str, list[float]] = {v: [] for v in variants}
    for i in range(args.steps):
        shift = i % len(contenders)
        for variant, c in contenders[shift:] + contenders[:shift]:
            sync()
            start = time.perf_counter()
            c.runner.step()
            sync()
            times[variant].append((time.perf_counter() - start) * 1e6)
    added = {
        v: round(statistics.median(a - b for a, b in zip(t, times["off"], strict=True)), 1)
        for v, t in times.items()
    }
    for v in variants:
        print(f"{v:14s} median {statistics.median(times[v]):8.1f} us  added {added[v]:6.1f} us")
    print(json.dumps({"benchmark": "sanitizer_ablation", "device": args.device, "added_us": added}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
