"""Sanitizer soak: a long churn of the reference model under the runtime sanitizer.

For each SWA-location design (``precomputed``: decode batches carry
``out_cache_loc_swa``, #24138; ``translate``: ``set_kv_buffer`` translates, #25824) one
model runner with CUDA-graph decode serves an endless stream of requests of random
prompt and output lengths, with the number in flight re-drawn every few steps so
decode batches land in every bucket, padded or not; sliding-window eviction, frees and
chunked prefill (two-batch overlap) run throughout. Then:

1. Clean phase, ``--steps`` decode steps: no violation may be reported, every
   ``--oracle-every`` steps the logits must match the dense oracle, and the sanitizer's
   bookkeeping must not grow: the sizes of its containers (``Sanitizer.bookkeeping``)
   and the Python memory allocated by ``swacheck.runtime`` code (tracemalloc) at the
   end may not exceed their sizes at the middle, except capped caches (contract
   signatures, padded-tail views, names and code objects seen), which may fill up to
   their caps, the traced memory growing by what they took on.
2. Bug phases: each ``inject_bug`` switch whose code path the design reaches is turned
   on at run time (the switches are attributes read on every call; the capture bug
   needs a re-capture), the sanitizer is set to ``raise``, and the run goes on until
   it raises; it must raise the bug's own kind. Requests then come in pairs of equal
   prompt length, which is what the storage-pointer-key bug needs to strike. The
   switch is turned off again, and a few steps in ``log`` mode show whether anything
   is reported after it.

On CPU the attention kernels are PyTorch stand-ins (``--kernels torch``, as in
``bench_sanitizer_overhead.py``); the oracle checks vouch for them.

    python benchmarks/soak_sanitizer.py --device cuda --steps 10000 --level fast
    python benchmarks/soak_sanitizer.py --device cpu --steps 300

The last stdout line is one JSON object; the exit status is 0 when the clean phases
were clean and bounded, matched the oracle, and every bug was caught by its kind.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_sanitizer_overhead import use_torch_kernels

DESIGNS = ("precomputed", "translate")
# The kind each switch must be caught as.
EXPECTED = {
    "padding-not-zeroed": "padding-not-zeroed",
    "swa-loc-int64": "swa-loc-dtype",
    "missing-invalidation": "uninvalidated-mapping-write",
    "storage-pointer-key": "stale-translation",
    "capture-without-invalidation": "capture-cache-pollution",
    "invalidate-after-dispatch": "forward-without-invalidation",
    "fresh-translation-without-flush": "unflushed-fresh-translation",
}
# The switches whose code path each design reaches: the padded SWA-location tail exists
# only when decode batches carry it, translations inside the captured body only when
# ``set_kv_buffer`` translates, and without a precomputed translation before the forward
# no entry is live when the graph path skips its invalidation.
BUGS = {
    "precomputed": (
        "padding-not-zeroed",
        "swa-loc-int64",
        "missing-invalidation",
        "storage-pointer-key",
        "invalidate-after-dispatch",
        "fresh-translation-without-flush",
    ),
    "translate": (
        "swa-loc-int64",
        "missing-invalidation",
        "storage-pointer-key",
        "fresh-translation-without-flush",
        "capture-without-invalidation",
    ),
}

MAX_RUNNING = 8
CAPTURE_BS = (1, 2, 4, 8)
MAX_PROMPT = 48
MAX_NEW = 64
MAX_CONTEXT = 128
# Decode steps between re-draws of how many requests are in flight.
RETARGET_EVERY = 16
# Bytes the runtime's traced memory may move between the middle and the end of the
# clean phase (allocator jitter), plus per entry a capped cache took on in between.
TRACED_SLACK = 16 * 1024
BYTES_PER_CACHED = 1024
# Bookkeeping sizes that may grow until a cap (see ``Sanitizer.bookkeeping``) rather than
# stay put: a code path or bucket size first met late in the run adds its entries.
CAPPED = (
    "contract_signatures",
    "tail_views",
    "flag_views",
    "name_kinds",
    "name_cache",
    "batch_plans",
    "site_codes",
)


class Churn:
    """Keeps the runner supplied with requests of random lengths. With ``pairs`` they come
    two at a time with equal prompt lengths, so that a two-batch-overlap prefill often
    splits into equal halves: the views of one tensor a storage-pointer key confuses."""

    def __init__(self, runner: Any, seed: int) -> None:
        self.runner = runner
        self.rng = random.Random(seed)
        self.next_rid = 0
        self.target = 1
        self.decode_steps = 0
        self.pairs = False

    def step(self) -> Any:
        """One scheduler step after topping up the queue; counts decode steps."""
        from swacheck.reference_impl.forward_batch import ForwardMode
        from swacheck.reference_impl.workload import RequestSpec

        runner, rng = self.runner, self.rng
        if self.decode_steps % RETARGET_EVERY == 0:
            self.target = rng.randint(1, MAX_RUNNING)
        vocab = runner.config.vocab_size
        while len(runner.waiting) + len(runner.running) < self.target:
            length = rng.randint(1, MAX_PROMPT)
            for _ in range(2 if self.pairs else 1):
                prompt = tuple(rng.randrange(vocab) for _ in range(length))
                new = rng.randint(1, MAX_NEW)
                runner.add_request(RequestSpec(self.next_rid, prompt, new, runner.step_count))
                self.next_rid += 1
        out = runner.step()
        runner.finished.clear()  # the harness keeps no history
        if out is not None and out.mode is ForwardMode.DECODE:
            self.decode_steps += 1
        return out


def build_runner(design: str, device: str, dtype: torch.dtype, seed: int) -> Any:
    from swacheck.reference_impl.model import ModelConfig
    from swacheck.reference_impl.model_runner import ModelRunner

    return ModelRunner(
        ModelConfig(),
        device,
        dtype,
        seed=seed,
        max_running_requests=MAX_RUNNING,
        max_context_len=MAX_CONTEXT,
        # Room for every live token, and for the slots an aborted step leaks.
        full_pool_size=2 * MAX_RUNNING * MAX_CONTEXT,
        swa_pool_size=512,
        graph=True,
        capture_bs=CAPTURE_BS,
        precompute_swa_loc=design == "precomputed",
    )


def watch(runner: Any, level: str) -> Any:
    from swacheck.runtime import Sanitizer

    san = Sanitizer(level=level, action="log")
    san.watch_pool(runner.token_to_kv_pool)
    san.watch_backend(runner.attn_backend)
    san.watch_graph_runner(runner.graph_runner)
    san.watch_model_runner(runner)
    return san


def set_bug(runner: Any, bug: str | None) -> None:
    """Turn a switch on or off on every object that reads it."""
    for obj in (runner, runner.token_to_kv_pool, runner.attn_backend, runner.graph_runner):
        obj.inject_bug = bug


def traced_runtime_bytes() -> int:
    """Live Python memory allocated by ``swacheck.runtime`` code."""
    import swacheck.runtime

    gc.collect()
    where = os.path.join(os.path.dirname(os.path.abspath(swacheck.runtime.__file__)), "*")
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, where)])
    return sum(stat.size for stat in snapshot.statistics("filename"))


def oracle_diff(runner: Any, out: Any) -> float:
    from swacheck.reference_impl.oracle import DenseOracle

    oracle = DenseOracle(runner.model)
    return max(
        float((oracle.logits(ctx)[-1] - out.logits[i]).abs().max())
        for i, ctx in enumerate(out.contexts)
    )


def clean_phase(
    runner: Any, san: Any, churn: Churn, steps: int, oracle_every: int
) -> dict[str, Any]:
    """``steps`` decode steps with nothing injected; bookkeeping at a tenth (start), half
    (middle) and the end, traced memory at every tenth."""
    marks = {max(steps // 10, 1): "start", max(steps // 2, 1): "middle", steps: "end"}
    series_every = max(steps // 10, 1)
    sizes: dict[str, dict[str, int]] = {}
    traced: dict[str, int] = {}
    series: list[int] = []
    max_diff = 0.0
    while churn.decode_steps < steps:
        before = churn.decode_steps
        out = churn.step()
        if churn.decode_steps == before:
            continue
        n = churn.decode_steps
        if n % oracle_every == 0:
            max_diff = max(max_diff, oracle_diff(runner, out))
        if n % series_every == 0 or n in marks:
            series.append(traced_runtime_bytes())
        if n in marks:
            sizes[marks[n]] = san.bookkeeping()
            traced[marks[n]] = series[-1]
    report = san.report()
    return {
        "violations": report.total_violations,
        "violations_by_kind": {k: n for k, n in report.counts.items() if n},
        "checks": report.total_checks,
        "bookkeeping": sizes,
        "traced_bytes": {**traced, "series": series},
        "max_abs_diff": max_diff,
    }


def bounded(sizes: dict[str, dict[str, int]], traced: dict[str, Any]) -> list[str]:
    """What grew from the middle to the end of the clean phase beyond its allowance
    (empty when bounded): steady sizes may not grow at all, capped ones not past their
    caps, and traced memory only by what the capped caches took on."""
    from swacheck.runtime.contracts import MAX_SIGNATURES
    from swacheck.runtime.deferred import MAX_FLAG_VIEWS
    from swacheck.runtime.graph_watch import MAX_TAIL_VIEWS
    from swacheck.runtime.locations import MAX_NAMES, MAX_PLANS
    from swacheck.runtime.model import MAX_CODES

    middle, end = sizes["middle"], sizes["end"]
    grew = [k for k, n in end.items() if k not in CAPPED and n > middle.get(k, 0)]
    caps = {
        "contract_signatures": MAX_SIGNATURES * end["contracts"],
        "tail_views": MAX_TAIL_VIEWS * end["graph_watches"],
        "flag_views": MAX_FLAG_VIEWS * end["flag_devices"],
        "name_kinds": MAX_NAMES,
        "name_cache": MAX_NAMES,
        "batch_plans": MAX_PLANS,
        "site_codes": MAX_CODES,
    }
    grew += [k for k, cap in caps.items() if end[k] > cap]
    cached = sum(max(end[k] - middle[k], 0) for k in CAPPED)
    if traced["end"] > traced["middle"] + TRACED_SLACK + BYTES_PER_CACHED * cached:
        grew.append("traced_bytes")
    return grew


def bug_phase(
    runner: Any, san: Any, churn: Churn, bug: str, max_steps: int, recovery: int
) -> dict[str, Any]:
    """Turn ``bug`` on, run until the sanitizer raises (at most ``max_steps`` decode
    steps), turn it off, then ``recovery`` decode steps in ``log`` mode."""
    from swacheck.runtime import SWASanitizerError

    kind = None
    start = churn.decode_steps
    set_bug(runner, bug)
    san.action = "raise"
    churn.pairs = True
    try:
        if bug == "capture-without-invalidation":
            runner.graph_runner.capture()
        while churn.decode_steps - start < max_steps:
            churn.step()
            san.check_deferred()  # ``fast``'s device-side checks, at once
    except SWASanitizerError as exc:
        kind = exc.violation.kind
    finally:
        set_bug(runner, None)
        san.action = "log"
        churn.pairs = False
    taken = churn.decode_steps - start
    before = dict(san.counts)
    if bug == "capture-without-invalidation":
        runner.graph_runner.capture()  # a clean re-capture: the graphs the run goes on with
    target = churn.decode_steps + recovery
    while churn.decode_steps < target:
        churn.step()
    san.check_deferred()
    after = {k: n - before.get(k, 0) for k, n in san.counts.items() if n > before.get(k, 0)}
    return {
        "expected": EXPECTED[bug],
        "raised": kind,
        "caught": kind == EXPECTED[bug],
        "decode_steps_to_catch": taken,
        "violations_after": after,
    }


def soak_design(
    design: str,
    device: str,
    level: str,
    steps: int,
    *,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    oracle_every: int = 50,
    max_bug_steps: int = 1000,
    recovery: int = 16,
) -> dict[str, Any]:
    runner = build_runner(design, device, dtype, seed)
    san = watch(runner, level)
    runner.capture_graphs()
    churn = Churn(runner, seed)
    result = clean_phase(runner, san, churn, steps, oracle_every)
    result["grew"] = bounded(result["bookkeeping"], result["traced_bytes"])
    result["bugs"] = {
        bug: bug_phase(runner, san, churn, bug, max_bug_steps, recovery) for bug in BUGS[design]
    }
    san.close()
    return result


def soak(
    device: str, level: str, steps: int, designs: tuple[str, ...] = DESIGNS, **kwargs: Any
) -> dict[str, Any]:
    """Every design's soak; tracemalloc runs throughout (started here unless it is on)."""
    from swacheck.reference_impl.oracle import tolerance_for

    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    begin = time.perf_counter()
    try:
        per = {d: soak_design(d, device, level, steps, **kwargs) for d in designs}
    finally:
        if started:
            tracemalloc.stop()
    tolerance = tolerance_for(kwargs.get("dtype", torch.float32))
    bugs = {f"{d}/{bug}": r for d in designs for bug, r in per[d]["bugs"].items()}
    result = {
        "benchmark": "sanitizer_soak",
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "level": level,
        "steps": steps,
        "designs": list(designs),
        "violations": sum(per[d]["violations"] for d in designs),
        "violations_by_kind": {d: per[d]["violations_by_kind"] for d in designs},
        "checks": {d: per[d]["checks"] for d in designs},
        "bookkeeping": {d: per[d]["bookkeeping"] for d in designs},
        "traced_runtime_bytes": {d: per[d]["traced_bytes"] for d in designs},
        "grew": {d: per[d]["grew"] for d in designs},
        "bounded": not any(per[d]["grew"] for d in designs),
        "max_abs_diff": max(per[d]["max_abs_diff"] for d in designs),
        "tolerance": tolerance,
        "bugs": bugs,
        "all_bugs_caught": all(r["caught"] for r in bugs.values()),
        "elapsed_s": round(time.perf_counter() - begin, 1),
    }
    result["ok"] = (
        result["violations"] == 0
        and result["bounded"]
        and result["max_abs_diff"] <= tolerance
        and result["all_bugs_caught"]
    )
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--steps", type=int, default=10_000, help="clean decode steps per design")
    p.add_argument("--level", choices=("fast", "full"), default="fast")
    p.add_argument("--kernels", choices=("triton", "torch"), default=None)
    p.add_argument("--designs", default=",".join(DESIGNS), help="comma-separated")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--oracle-every", type=int, default=50)
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("soak_sanitizer: needs a CUDA device (or --device cpu)", file=sys.stderr)
        return 2
    kernels = args.kernels or ("triton" if args.device == "cuda" else "torch")
    if args.device == "cuda" and kernels == "torch":
        print("soak_sanitizer: --kernels torch is for --device cpu", file=sys.stderr)
        return 2
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        torch.set_num_threads(1)
    if kernels == "torch":
        use_torch_kernels()
    designs = tuple(d for d in args.designs.split(",") if d)
    result = soak(
        args.device,
        args.level,
        args.steps,
        designs,
        seed=args.seed,
        oracle_every=args.oracle_every,
    )
    result["kernels"] = kernels
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
