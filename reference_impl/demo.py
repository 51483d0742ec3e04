"""``swacheck demo``: serve the tiny hybrid-SWA model and check every step against the oracle.

Runs the workload (requests of different lengths, chunked prefill, two-batch
overlap, padded decode buckets, eviction) through the paged path, recomputes
each request densely, and reports the largest logit difference. With
``--json`` the last stdout line is one JSON object. Exit status: 0 when the run
matches the oracle and the sanitizer (if on) saw nothing, 1 otherwise, 2 on
usage errors or when the sanitizer is unavailable.

``--tp N`` serves the model tensor-parallel over N ranks, each with its own pools,
graph runner and sanitizer; rank 0 prints the sanitizer report merged over the ranks
and the result. Under torchrun the demo joins the launched group; otherwise it
launches itself through torchrun (gloo on cpu, NCCL with a GPU per rank on cuda).

Also runnable as ``python -m swacheck.reference_impl.demo``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from swacheck.reference_impl.bugs import BUG_NAMES, BUGS

if TYPE_CHECKING:
    from swacheck.reference_impl.model import ModelConfig
    from swacheck.reference_impl.model_runner import ModelRunner
    from swacheck.reference_impl.tp import TensorParallel
    from swacheck.runtime import Sanitizer

_DTYPES = ("float32", "bfloat16", "float16")


def _parser(cuda_available: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="swacheck demo",
        description=__doc__.split("\n\n")[0],
        epilog="The reference implementation is correct: without --inject-bug the run matches "
        "the oracle and the sanitizer sees nothing. Bugs for --inject-bug NAME:\n"
        + "\n".join(f"  {name:<32} {what}" for name, what in BUGS.items())
        + "\nExample: swacheck demo --device cpu --sanitize full --inject-bug padding-not-zeroed",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if cuda_available else "cpu")
    p.add_argument(
        "--graph",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="decode through the graph runner (real CUDA graphs on cuda; eager replay on cpu)",
    )
    p.add_argument("--sanitize", choices=("off", "fast", "full"), default="off")
    p.add_argument(
        "--inject-bug",
        choices=BUG_NAMES,
        default=None,
        metavar="NAME",
        help="re-create a historical SGLang bug (names below)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=24,
        help="decode steps to run (default 24); the prefill forwards between them are not counted",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=_DTYPES, default="float32")
    p.add_argument(
        "--swa-loc",
        choices=("auto", "precomputed", "translate"),
        default="auto",
        help="decode SWA locations: precomputed out_cache_loc_swa (#24138) or translated in "
        "set_kv_buffer (#25824); auto picks translate for capture-without-invalidation",
    )
    p.add_argument(
        "--tp",
        type=int,
        default=None,
        metavar="N",
        help="tensor-parallel degree (default: the torchrun group's size, else 1)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no per-step lines")
    return p


def watch_runner(san: Sanitizer, runner: ModelRunner) -> None:
    """Watch the runner's pool, backend, graph runner and the runner itself."""
    san.watch_pool(runner.token_to_kv_pool)
    san.watch_backend(runner.attn_backend)
    if runner.graph_runner is not None:
        san.watch_graph_runner(runner.graph_runner)
    san.watch_model_runner(runner)


def attach_sanitizer(level: str, runner: ModelRunner) -> Sanitizer | None:
    """A ``log`` sanitizer watching the runner (:func:`watch_runner`); ``None`` if unavailable."""
    try:
        from swacheck.runtime import Sanitizer
    except ImportError as exc:
        print(f"swacheck demo: --sanitize {level} needs swacheck.runtime: {exc}", file=sys.stderr)
        return None
    try:
        san = Sanitizer(level=level, action="log")
        watch_runner(san, runner)
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
    tp: TensorParallel | None = None,
    config: ModelConfig | None = None,
) -> ModelRunner:
    """The demo's model runner (graphs not yet captured, so a sanitizer can watch capture);
    with ``tp``, this rank's shard of a tensor-parallel run; ``config``: another model
    shape (default: the demo's)."""
    import torch

    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernels are defined
    from swacheck.reference_impl.model import ModelConfig
    from swacheck.reference_impl.model_runner import ModelRunner

    return ModelRunner(
        config or ModelConfig(),
        device,
        getattr(torch, dtype),
        seed=seed,
        graph=graph,
        precompute_swa_loc=resolve_swa_loc(swa_loc, inject_bug) == "precomputed",
        inject_bug=inject_bug,
        tp=tp,
    )


def serve(runner: ModelRunner, steps: int, seed: int = 0, quiet: bool = True) -> dict[str, Any]:
    """Capture graphs, serve the workload for ``steps`` decode steps, compare with the oracle."""
    from swacheck.reference_impl.forward_batch import ForwardMode
    from swacheck.reference_impl.oracle import DenseOracle, tolerance_for
    from swacheck.reference_impl.workload import make_workload

    start = time.perf_counter()
    runner.capture_graphs()
    oracle = DenseOracle(runner.model.unsharded())
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
        step = ""
        if out.mode is ForwardMode.DECODE:
            decode_steps += 1
            padded_steps += out.bucket is not None and out.bucket != len(out.rids)
            step = f" {decode_steps}/{steps}"
        if not quiet:
            bucket = "" if out.bucket is None else f" bucket={out.bucket}"
            flag = "  DIVERGED" if diff > tol else ""
            print(
                f"forward {runner.step_count:3d}: {out.mode.value}{step} bs={len(out.rids)}"
                f"{bucket} max|Δlogit|={diff:.2e}{flag}"
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

    from swacheck.reference_impl.tp import launched_by_torchrun

    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser(torch.cuda.is_available()).parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("swacheck demo: --device cuda but CUDA is not available", file=sys.stderr)
        return 2
    if args.steps < 1 or (args.tp is not None and args.tp < 1):
        print("swacheck demo: --steps and --tp must be positive", file=sys.stderr)
        return 2
    if launched_by_torchrun():
        world_size = int(os.environ["WORLD_SIZE"])
        if args.tp not in (None, world_size):
            print(
                f"swacheck demo: --tp {args.tp} but torchrun started {world_size} ranks",
                file=sys.stderr,
            )
            return 2
        return _serve_rank(args)
    tp = args.tp or 1
    if args.device == "cuda" and torch.cuda.device_count() < tp:
        print(f"swacheck demo: --tp {tp} needs a GPU per rank", file=sys.stderr)
        return 2
    if tp > 1:  # become rank 0 .. tp-1 of a local torchrun launch
        from swacheck.runtime.distributed import torchrun

        return torchrun(["-m", "swacheck.reference_impl.demo", *argv], tp).returncode
    runner = _build(args, args.device)
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
    return _finish(args, stats, violations, print_result=True)


def _build(args: argparse.Namespace, device: str, tp: TensorParallel | None = None) -> ModelRunner:
    return build_runner(
        device,
        dtype=args.dtype,
        seed=args.seed,
        graph=args.graph,
        swa_loc=args.swa_loc,
        inject_bug=args.inject_bug,
        tp=tp,
    )


def _serve_rank(args: argparse.Namespace) -> int:
    """One rank of ``--tp N`` under torchrun: serve this rank's shard under its own
    sanitizer; a failure on any rank ends the run (RankGuard); rank 0 prints."""
    import torch.distributed as dist

    from swacheck.reference_impl.tp import TensorParallel
    from swacheck.runtime.distributed import RankGuard, init_from_env

    device = init_from_env(args.device)
    tp = TensorParallel.from_group()
    runner = _build(args, str(device), tp)
    san = None
    if args.sanitize != "off":
        san = attach_sanitizer(args.sanitize, runner)
        if san is None:
            return 2
    guard = RankGuard(san, lambda merged: print(merged.to_text())) if san else None
    with guard or contextlib.nullcontext():
        stats = serve(runner, args.steps, args.seed, quiet=args.quiet or tp.rank != 0)
        done = runner.finished + runner.running
        agree = tp.all_equal(sorted((r.spec.rid, r.output_ids) for r in done))
    violations: dict[str, int] = {}
    per_rank: dict[int, dict[str, int]] = {}
    if guard is not None and san is not None:
        merged = guard.finish()
        violations, per_rank = dict(merged.counts), merged.per_rank
        san.close()
    if runner.graph_runner is not None:  # captured NCCL work can block the group's teardown
        runner.graph_runner.graphs.clear()
    dist.destroy_process_group()
    extra = {"tp": tp.size, "ranks_agree": agree, "violations_per_rank": per_rank}
    return _finish(args, stats, violations, print_result=tp.rank == 0, **extra) or int(not agree)


def _finish(
    args: argparse.Namespace,
    stats: dict[str, Any],
    violations: dict[str, int],
    print_result: bool,
    **extra: Any,
) -> int:
    """Print the result (JSON or a summary line); the exit status."""
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
        **extra,
    }
    if print_result and args.json:
        print(json.dumps(result))
    elif print_result:
        verdict = "DIVERGED from" if result["diverged"] else "matches"
        found = {kind: n for kind, n in violations.items() if n}
        print(
            f"{result['steps']} decode steps ({result['padded_steps']} padded), "
            f"{result['forward_steps']} forwards: {verdict} the dense oracle "
            f"(max |Δlogit| {result['max_abs_diff']:.2e}, tolerance {result['tolerance']:g}); "
            f"violations: {found or 'none'}"
        )
        if args.inject_bug is None:
            print(
                "No bug injected: the reference is correct. Re-create one with --inject-bug "
                "NAME (names: swacheck demo --help), e.g. --inject-bug padding-not-zeroed."
            )
    return 1 if result["diverged"] or any(violations.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
