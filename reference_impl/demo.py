"""``swacheck demo``: serve the tiny hybrid-SWA model and check every step against the oracle.

Runs the workload (requests of different lengths, chunked prefill, two-batch
overlap, padded decode buckets, eviction) through the paged path, recomputes
each request densely, and reports the largest logit difference. With
``--json`` the last stdout line is one JSON object. Exit status: 0 when the run
matches the oracle and the sanitizer (if on) saw nothing, 1 otherwise, 2 on
usage errors or when the sanitizer is unavailable.

Also runnable as ``python -m swacheck.reference_impl.demo``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from swacheck.reference_impl.bugs import BUG_NAMES

if TYPE_CHECKING:
    from swacheck.reference_impl.model_runner import ModelRunner

_DTYPES = ("float32", "bfloat16", "float16")


def _parser(cuda_available: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="swacheck demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if cuda_available else "cpu")
    p.add_argument(
        "--graph",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="decode through the graph runner (real CUDA graphs on cuda; eager replay on cpu)",
    )
    p.add_argument("--sanitize", choices=("off", "fast", "full"), default="off")
    p.add_argument("--inject-bug", choices=BUG_NAMES, default=None, metavar="NAME")
    p.add_argument("--steps", type=int, default=24, help="decode steps to run (default 24)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=_DTYPES, default="float32")
    p.add_argument(
        "--swa-loc",
        choices=("auto", "precomputed", "translate"),
        default="auto",
        help="decode SWA locations: precomputed out_cache_loc_swa (#24138) or translated in "
        "set_kv_buffer (#25824); auto picks translate for capture-without-invalidation",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no per-step lines")
    return p


def attach_sanitizer(level: str, runner: Any) -> Any | None:
    """Wrap the runner's pool, backend, graph runner and itself; ``None`` if unavailable."""
    try:
        from swacheck.runtime import Sanitizer
    except ImportError as exc:
        print(f"swacheck demo: --sanitize {level} needs swacheck.runtime: {exc}", file=sys.stderr)
        return None
    try:
        san = Sanitizer(level=level, action="log")
        san.watch_pool(runner.token_to_kv_pool)
        san.watch_backend(runner.attn_backend)
        if runner.graph_runner is not None:
            san.watch_graph_runner(runner.graph_runner)
        san.watch_model_runner(runner)
    except (AttributeError, TypeError) as exc:
        print(f"swacheck demo: swacheck.runtime lacks the expected API: {exc}", file=sys.stderr)
        return None
    return san


def resolve_swa_loc(swa_loc: str, inject_bug: str | None) -> str:
    """``auto``: the #25824 design (translate in the graph) for the capture bug, else #24138."""
    if swa_loc != "auto":
        return swa_loc
    return "translate" if inject_bug == "capture-without-invalidation" else "precomputed"


def build_runner(
    device: str,
    *,
    dtype: str = "float32",
    seed: int = 0,
    graph: bool = True,
    swa_loc: str = "auto",
    inject_bug: str | None = None,
) -> ModelRunner:
    """The demo's model runner (graphs not yet captured, so a sanitizer can watch capture)."""
    import torch

    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernels are defined
    from swacheck.reference_impl.model import ModelConfig
    from swacheck.reference_impl.model_runner import ModelRunner

    return ModelRunner(
        ModelConfig(),
        device,
        getattr(torch, dtype),
        seed=seed,
        graph=graph,
        precompute_swa_loc=resolve_swa_loc(swa_loc, inject_bug) == "precomputed",
        inject_bug=inject_bug,
    )


def serve(runner: ModelRunner, steps: int, seed: int = 0, quiet: bool = True) -> dict[str, Any]:
    """Capture graphs, serve the workload for ``steps`` decode steps, compare with the oracle."""
    from swacheck.reference_impl.forward_batch import ForwardMode
    from swacheck.reference_impl.oracle import DenseOracle, tolerance_for
    from swacheck.reference_impl.workload import make_workload

    start = time.perf_counter()
    runner.capture_graphs()
    oracle = DenseOracle(runner.model)
    tol = tolerance_for(runner.model.embed.weight.dtype)
    for spec in make_workload(seed, runner.config.vocab_size):
        runner.add_request(spec)
    decode_steps = forwards = padded_steps = 0
    diffs: list[float] = []
    first_bad: int | None = None
    while runner.has_work() and decode_steps < steps:
        out = runner.step()
        if out is None:
            continue
        forwards += 1
        diff = max(
            float((oracle.logits(ctx)[-1] - out.logits[i]).abs().max())
            for i, ctx in enumerate(out.contexts)
        )
        diffs.append(diff)
        if diff > tol and first_bad is None:
            first_bad = runner.step_count
        if out.mode is ForwardMode.DECODE:
            decode_steps += 1
            padded_steps += out.bucket is not None and out.bucket != len(out.rids)
        if not quiet:
            bucket = "" if out.bucket is None else f" bucket={out.bucket}"
            flag = "  DIVERGED" if diff > tol else ""
            print(
                f"step {runner.step_count:3d} {out.mode.value:6s} bs={len(out.rids)}{bucket} "
                f"max|Δlogit|={diff:.2e}{flag}"
            )
    pool = runner.token_to_kv_pool
    return {
        "steps": decode_steps,
        "forward_steps": forwards,
        "padded_steps": padded_steps,
        "max_abs_diff": max(diffs, default=0.0),
        "step_diffs": diffs,
        "tolerance": tol,
        "diverged": first_bad is not None,
        "first_divergent_step": first_bad,
        "cuda_graphs": bool(runner.graph_runner and runner.graph_runner.graphs),
        "loc_cache": {
            "hits": pool.loc_cache_hits,
            "misses": pool.loc_cache_misses,
            "key_changes": pool.loc_key_changes,
        },
        "elapsed_s": round(time.perf_counter() - start, 3),
    }


def main(argv: list[str] | None = None) -> int:
    import torch

    args = _parser(torch.cuda.is_available()).parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("swacheck demo: --device cuda but CUDA is not available", file=sys.stderr)
        return 2
    if args.steps < 1:
        print("swacheck demo: --steps must be positive", file=sys.stderr)
        return 2
    runner = build_runner(
        args.device,
        dtype=args.dtype,
        seed=args.seed,
        graph=args.graph,
        swa_loc=args.swa_loc,
        inject_bug=args.inject_bug,
    )
    san = None
    if args.sanitize != "off":
        san = attach_sanitizer(args.sanitize, runner)
        if san is None:
            return 2
    stats = serve(runner, args.steps, args.seed, quiet=args.quiet)
    violations: dict[str, int] = {}
    if san is not None:
        violations = {str(k): int(v) for k, v in san.report().counts.items()}
        san.close()
    result = {
        **{k: v for k, v in stats.items() if k != "step_diffs"},
        "violations": violations,
        "device": args.device,
        "graph": args.graph,
        "inject_bug": args.inject_bug,
        "sanitize": args.sanitize,
        "swa_loc": resolve_swa_loc(args.swa_loc, args.inject_bug),
        "dtype": args.dtype,
        "seed": args.seed,
    }
    if args.json:
        print(json.dumps(result))
    else:
        verdict = "DIVERGED from" if result["diverged"] else "matches"
        print(
            f"{result['steps']} decode steps ({result['padded_steps']} padded), "
            f"{result['forward_steps']} forwards: {verdict} the dense oracle "
            f"(max |Δlogit| {result['max_abs_diff']:.2e}, tolerance {result['tolerance']:g}); "
            f"violations: {violations or 'none'}"
        )
    return 1 if result["diverged"] or any(violations.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
