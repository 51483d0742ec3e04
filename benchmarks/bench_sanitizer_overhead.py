"""Runtime-sanitizer overhead per decode step: eager and CUDA-graph decode, unsanitized vs
``fast`` vs ``full``.

For each decode mode and level a fresh model runner (same weights) serves the same
requests; the sanitizer (if any) watches pool, backend, graph runner and model runner
from before capture, as ``swacheck demo --sanitize`` does. After prefill and warm-up,
``--steps`` real scheduler decode steps are timed (allocation, eviction, translation,
populate/replay or eager forward, sampling).

    python benchmarks/bench_sanitizer_overhead.py              # on a CUDA device
    python benchmarks/bench_sanitizer_overhead.py --device cpu --steps 3 --batch 2  # smoke

The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import torch

# "fast-no-contracts": ``fast`` without the typeguard contracts, to show what they cost.
LEVELS = ("off", "fast", "full", "fast-no-contracts")
MODES = ("eager", "graph")


def _runner(device: str, graph: bool, dtype: torch.dtype, layers: int) -> Any:
    from swacheck.reference_impl.model import ModelConfig
    from swacheck.reference_impl.model_runner import ModelRunner

    return ModelRunner(
        ModelConfig(num_layers=layers),
        device,
        dtype,
        max_running_requests=8,
        max_context_len=1024,
        full_pool_size=8192,
        swa_pool_size=1024,
        graph=graph,
        capture_bs=(1, 2, 4, 8),
    )


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure(args: argparse.Namespace, mode: str, level: str) -> dict[str, Any]:
    from swacheck.reference_impl.forward_batch import ForwardMode
    from swacheck.reference_impl.workload import RequestSpec
    from swacheck.runtime import Sanitizer

    runner = _runner(args.device, mode == "graph", getattr(torch, args.dtype), args.layers)
    san = None
    if level != "off":
        san = Sanitizer(
            level=level.removesuffix("-no-contracts"),
            action="log",
            contracts=not level.endswith("-no-contracts"),
        )
        san.watch_pool(runner.token_to_kv_pool)
        san.watch_backend(runner.attn_backend)
        if runner.graph_runner is not None:
            san.watch_graph_runner(runner.graph_runner)
        san.watch_model_runner(runner)
    runner.capture_graphs()
    vocab = runner.config.vocab_size
    for rid in range(args.batch):
        prompt = tuple((rid * 7 + i) % vocab for i in range(args.prompt_len))
        runner.add_request(RequestSpec(rid, prompt, 10**6, 0))
    while runner.waiting or any(r.prefilled < len(r.spec.prompt) for r in runner.running):
        runner.step()
    for _ in range(args.warmup):
        runner.step()
    times = []
    for _ in range(args.steps):
        _sync(args.device)
        start = time.perf_counter()
        out = runner.step()
        _sync(args.device)
        times.append((time.perf_counter() - start) * 1e3)
        assert out is not None and out.mode is ForwardMode.DECODE
    result: dict[str, Any] = {
        "median_ms": round(statistics.median(times), 4),
        "mean_ms": round(statistics.fmean(times), 4),
    }
    if san is not None:
        report = san.report()
        san.close()
        result["checks"] = report.total_checks
        result["violations"] = report.total_violations
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--batch", type=int, default=6, help="requests decoded together (padded to 8)")
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_sanitizer_overhead: needs a CUDA device (or --device cpu)", file=sys.stderr)
        return 2
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    per: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        per[mode] = {}
        for level in LEVELS:
            per[mode][level] = measure(args, mode, level)
            print(mode, level, per[mode][level], file=sys.stderr, flush=True)
    overhead = {
        mode: {
            level: round(per[mode][level]["median_ms"] / per[mode]["off"]["median_ms"] - 1, 4)
            for level in LEVELS[1:]
        }
        for mode in MODES
    }
    result = {
        "benchmark": "sanitizer_overhead_per_decode_step",
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "batch": args.batch,
        "layers": args.layers,
        "dtype": args.dtype,
        "steps": args.steps,
        "ms_per_step": per,
        "overhead_fraction": overhead,
        "violations": sum(per[m][lv].get("violations", 0) for m in MODES for lv in LEVELS),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
