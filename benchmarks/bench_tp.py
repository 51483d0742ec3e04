"""Sanitizer overhead per decode step under tensor parallelism: an unsanitized TP run and a
``fast`` one side by side, eager and CUDA-graph decode.

    torchrun --standalone --nproc-per-node 2 benchmarks/bench_tp.py            # 2 GPUs, NCCL
    torchrun --standalone --nproc-per-node 2 benchmarks/bench_tp.py --device cpu \\
        --steps 3 --batch 2 --warmup 1 --dtype float32                          # smoke, gloo

Each rank builds, per decode mode, two model runners over its shard (same weights, same
requests): one unsanitized, one watched by a ``fast`` sanitizer from before capture, as
``swacheck demo --sanitize`` does. After prefill and warm-up they take turns, one real
scheduler decode step each, alternating who goes first, so drift hits both alike (the
ranks alternate identically, so their collectives pair up). A TP step is as slow as its
slowest rank: the figures are the largest per-rank median. The two runs' logits must be
identical bit for bit. Rank 0 prints one JSON line.
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
import torch.distributed as dist

LEVELS = ("off", "fast")
MODES = ("eager", "graph")


def _runner(args: argparse.Namespace, device: torch.device, graph: bool) -> Any:
    from swacheck.reference_impl.model import ModelConfig
    from swacheck.reference_impl.model_runner import ModelRunner
    from swacheck.reference_impl.tp import TensorParallel

    return ModelRunner(
        ModelConfig(num_layers=args.layers),
        device,
        getattr(torch, args.dtype),
        max_running_requests=8,
        max_context_len=1024,
        full_pool_size=8192,
        swa_pool_size=1024,
        graph=graph,
        capture_bs=(1, 2, 4, 8),
        tp=TensorParallel.from_group(),
    )


def _step(runner: Any, device: torch.device) -> tuple[float, torch.Tensor]:
    """One timed scheduler decode step: milliseconds and its logits."""
    from swacheck.reference_impl.forward_batch import ForwardMode

    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = runner.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = (time.perf_counter() - start) * 1e3
    assert out is not None and out.mode is ForwardMode.DECODE
    return elapsed, out.logits


def measure(args: argparse.Namespace, device: torch.device, mode: str) -> dict[str, Any]:
    """Both levels of one decode mode, interleaved step by step."""
    from swacheck.reference_impl.demo import watch_runner
    from swacheck.reference_impl.workload import RequestSpec
    from swacheck.runtime import Sanitizer
    from swacheck.runtime.distributed import gather_report

    runners = {level: _runner(args, device, mode == "graph") for level in LEVELS}
    san = Sanitizer(level="fast", action="log")
    watch_runner(san, runners["fast"])
    vocab = runners["off"].config.vocab_size
    for runner in runners.values():
        runner.capture_graphs()
        for rid in range(args.batch):
            prompt = tuple((rid * 7 + i) % vocab for i in range(args.prompt_len))
            runner.add_request(RequestSpec(rid, prompt, 10**6, 0))
        while runner.waiting or any(r.prefilled < len(r.spec.prompt) for r in runner.running):
            runner.step()
        for _ in range(args.warmup):
            runner.step()
    times: dict[str, list[float]] = {level: [] for level in LEVELS}
    identical = True
    for i in range(args.steps):
        order = LEVELS if i % 2 == 0 else LEVELS[::-1]
        logits = {}
        for level in order:
            ms, logits[level] = _step(runners[level], device)
            times[level].append(ms)
        identical &= torch.equal(logits["off"], logits["fast"])
    report = gather_report(san.report())
    san.close()
    medians: list[Any] = [None] * dist.get_world_size()
    mine = {level: statistics.median(times[level]) for level in LEVELS}
    dist.all_gather_object(medians, (mine, identical))
    for runner in runners.values():  # captured NCCL work can block the group's teardown
        if runner.graph_runner is not None:
            runner.graph_runner.graphs.clear()
    per_level = {
        level: {
            "median_ms": round(max(m[level] for m, _ in medians), 4),
            "per_rank_median_ms": [round(m[level], 4) for m, _ in medians],
        }
        for level in LEVELS
    }
    return {
        "ms_per_step": per_level,
        "overhead_fraction": round(
            per_level["fast"]["median_ms"] / per_level["off"]["median_ms"] - 1, 4
        ),
        "outputs_identical": all(same for _, same in medians),
        "checks": report.total_checks,
        "violations": report.total_violations,
    }


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
    if "WORLD_SIZE" not in os.environ:
        print("bench_tp: run it under torchrun (see the module docstring)", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_tp: needs a GPU per rank (or --device cpu)", file=sys.stderr)
        return 2
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from swacheck.runtime.distributed import init_from_env

    device = init_from_env(args.device)
    per_mode = {mode: measure(args, device, mode) for mode in MODES}
    if dist.get_rank() == 0:
        result = {
            "benchmark": "tp_sanitizer_overhead_per_decode_step",
            "tp": dist.get_world_size(),
            "backend": dist.get_backend(),
            "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
            "torch": torch.__version__,
            "batch": args.batch,
            "layers": args.layers,
            "dtype": args.dtype,
            "steps": args.steps,
            **{key: {m: per_mode[m][key] for m in MODES} for key in per_mode[MODES[0]]},
        }
        print(json.dumps(result))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
