"""CUDA-graph replay vs eager: time per decode forward of the tiny hybrid-SWA model.

For each batch size (<= 8) the same requests are decoded by two model runners with the
same weights, one replaying CUDA graphs and one eager; each forward goes through
``ModelRunner.forward`` (invalidation, metadata, populate/replay or eager model).
Goal: replay >= 3x faster than eager.

    python benchmarks/bench_graph_replay.py            # needs a CUDA device

The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from swacheck.reference_impl.model import ModelConfig
from swacheck.reference_impl.model_runner import ModelRunner
from swacheck.reference_impl.workload import RequestSpec


def _runner(config: ModelConfig, graph: bool, dtype: torch.dtype) -> ModelRunner:
    runner = ModelRunner(
        config,
        "cuda",
        dtype,
        max_running_requests=8,
        max_context_len=512,
        full_pool_size=4096,
        swa_pool_size=1024,
        graph=graph,
        capture_bs=(1, 2, 4, 8),
    )
    runner.capture_graphs()
    return runner


def _ms_per_forward(runner: ModelRunner, bs: int, prompt_len: int, iters: int) -> float:
    for rid in range(bs):
        prompt = tuple((rid * 7 + i) % runner.config.vocab_size for i in range(prompt_len))
        runner.add_request(RequestSpec(rid, prompt, 10**6, 0))
    while any(r.prefilled < len(r.spec.prompt) for r in runner.running) or runner.waiting:
        runner.step()
    for _ in range(3):  # a few real decode steps first
        runner.step()
    fb = runner.prepare_decode_batch(list(runner.running))
    for _ in range(5):
        runner.forward(fb)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        runner.forward(fb)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - start) * 1e3 / iters
    for r in list(runner.running):  # free everything for the next batch size
        row = runner.req_to_token_pool.req_to_token[r.req_pool_idx, : r.seq_len + 1]
        runner.token_to_kv_pool.free(row.long())
        runner.req_to_token_pool.free(r.req_pool_idx)
    runner.running.clear()
    return ms


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_graph_replay: needs a CUDA device", file=sys.stderr)
        return 2
    if max(args.batch_sizes) > 8:
        print("bench_graph_replay: batch sizes must be <= 8", file=sys.stderr)
        return 2
    config = ModelConfig(num_layers=args.layers)
    dtype = getattr(torch, args.dtype)
    graph, eager = _runner(config, True, dtype), _runner(config, False, dtype)
    rows = []
    for bs in args.batch_sizes:
        g = _ms_per_forward(graph, bs, args.prompt_len, args.iters)
        e = _ms_per_forward(eager, bs, args.prompt_len, args.iters)
        rows.append({"batch": bs, "graph_ms": round(g, 4), "eager_ms": round(e, 4)})
        rows[-1]["speedup"] = round(e / g, 2)
        print(rows[-1], flush=True)
    worst = min(r["speedup"] for r in rows)
    result = {
        "benchmark": "graph_replay_vs_eager",
        "device": torch.cuda.get_device_name(),
        "layers": args.layers,
        "dtype": args.dtype,
        "per_batch": rows,
        "min_speedup": worst,
        "goal": 3.0,
        "meets_goal": worst >= 3.0,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
