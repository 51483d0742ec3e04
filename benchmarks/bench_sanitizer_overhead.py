"""Runtime-sanitizer overhead per decode step: eager and CUDA-graph decode, unsanitized vs
``fast`` vs ``full``.

For each decode mode one model runner per level (same weights, same requests) is built;
the sanitizer (if any) watches pool, backend, graph runner and model runner from before
capture, as ``swacheck demo --sanitize`` does. After prefill and warm-up the runners
take turns, one real scheduler decode step each (allocation, eviction, translation,
populate/replay or eager forward, sampling), rotating who goes first, so drift on a
shared machine hits every level alike; medians over ``--steps`` steps per level, and
the median of each round's difference to the unsanitized step (``added_ms``), which
cancels what drift is left.

On CPU (``--device cpu``) the attention kernels default to PyTorch stand-ins
(``--kernels torch``): the Triton interpreter takes ~0.6 s a step, which would bury the
sanitizer's host cost, whereas with the stand-ins a step is a few ms of host work like
the GPU's host-bound step. The graph mode on CPU replays ``run_once`` eagerly over the
static buffers (the "graph-eager" path); a third CPU mode, ``graph-host``, leaves that
body out (``run_once`` hands back a static output), which is what a CUDA-graph replay
costs the host. One intra-op thread on CPU, and steps timed in process CPU time there
(wall time on a GPU).

Every level's last logits must equal the unsanitized run's bit for bit, and in fp32 the
unsanitized run is compared with the dense oracle (which vouches for the stand-ins); both
are in the JSON.

    python benchmarks/bench_sanitizer_overhead.py              # on a CUDA device
    python benchmarks/bench_sanitizer_overhead.py --device cpu # host-overhead proxy
    python benchmarks/bench_sanitizer_overhead.py --device cpu --count-calls --steps 100

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
from typing import Any

import torch

# "fast-no-contracts": ``fast`` without the typeguard contracts, to show what they cost.
LEVELS = ("off", "fast", "full", "fast-no-contracts")
MODES = ("eager", "graph")
# CPU only: graph decode with the captured body left out, as a CUDA-graph replay leaves it
# to the device: the host side of a replay step, where the GPU goal is hardest to meet.
HOST_MODE = "graph-host"


# A model of realistic size on the same code path: 32 layers alternating SWA/full, hidden
# 4096, 32 query and 8 KV heads of 128, window 4096 (about 7 B weights in bf16), serving 32
# requests with contexts of 2-4 k tokens. The host-bound worst case is the tiny model.
REALISTIC = {
    "config": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "num_layers": 32,
        "num_heads": 32,
        "num_kv_heads": 8,
        "head_dim": 128,
        "intermediate_size": 14336,
        "sliding_window": 4096,
    },
    "batch": 32,
    "prompt_lens": (2048, 4096),
}


class Workload:
    """The model and request mix every contender of one run serves (same weights)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from swacheck.reference_impl.model import ModelConfig, TinyHybridModel

        self.realistic = args.workload == "realistic"
        self.dtype = getattr(torch, args.dtype)
        if self.realistic:
            self.config = ModelConfig(**REALISTIC["config"])
            low, high = REALISTIC["prompt_lens"]
            batch = REALISTIC["batch"]
            self.prompt_lens = [low + (high - low) * i // (batch - 1) for i in range(batch)]
            # One copy of the weights, drawn on the device, shared by every contender.
            default = torch.get_default_dtype()
            torch.set_default_dtype(self.dtype)
            try:
                self.model = TinyHybridModel(self.config, init_device=args.device)
            finally:
                torch.set_default_dtype(default)
        else:
            self.config = ModelConfig(num_layers=args.layers)
            self.prompt_lens = [args.prompt_len] * args.batch
            self.model = None
        self.capture_bs = tuple(b for b in (1, 2, 4, 8, 16, 32) if b < len(self.prompt_lens))
        self.capture_bs += (next(b for b in (1, 2, 4, 8, 16, 32, 64) if b >= self.batch),)
        # Room for every prompt and every decoded token, with a margin.
        self.max_len = max(self.prompt_lens) + args.warmup + args.steps + 16
        self.pool_tokens = sum(self.prompt_lens) + self.batch * (args.warmup + args.steps + 16)

    @property
    def batch(self) -> int:
        return len(self.prompt_lens)

    def runner(self, device: str, graph: bool) -> Any:
        from swacheck.reference_impl.model_runner import ModelRunner

        if not self.realistic:
            return ModelRunner(
                self.config,
                device,
                self.dtype,
                max_running_requests=8,
                max_context_len=1024,
                full_pool_size=8192,
                swa_pool_size=1024,
                graph=graph,
                capture_bs=(1, 2, 4, 8),
            )
        return ModelRunner(
            self.config,
            device,
            self.dtype,
            model=self.model,
            max_running_requests=self.batch,
            max_context_len=self.max_len,
            full_pool_size=self.pool_tokens,
            swa_pool_size=self.pool_tokens,  # the window covers every context
            chunked_prefill_size=8192,
            graph=graph,
            capture_bs=self.capture_bs,
        )


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


# -- PyTorch stand-ins for the decode kernels (CPU host-overhead proxy) -------------------


def torch_create_kv_indices(
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    kv_start_idx: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
) -> None:
    """``create_kv_indices`` in PyTorch (reads the total length: synchronises)."""
    bs = req_pool_indices.numel()
    first, total = int(kv_indptr[0]), int(kv_indptr[bs])
    lens = kv_indptr[1 : bs + 1] - kv_indptr[:bs]
    rows = torch.repeat_interleave(
        torch.arange(bs, device=lens.device), lens, output_size=total - first
    )
    offsets = torch.arange(first, total, device=lens.device) - kv_indptr[rows] + kv_start_idx[rows]
    kv_indices[first:total] = req_to_token[req_pool_indices[rows].long(), offsets.long()]


def torch_decode_attention_fwd(
    q: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    o: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
    num_kv_splits: int = 1,
) -> None:
    """``decode_attention_fwd`` in PyTorch: each request over its listed slots."""
    bs, q_heads, _ = q.shape
    group = q_heads // k_buffer.shape[1]
    lens = kv_indptr[1 : bs + 1] - kv_indptr[:bs]
    span = torch.arange(int(lens.max()), device=q.device)
    valid = span[None, :] < lens[:, None]
    where = (kv_indptr[:bs, None] + span).clamp(max=kv_indices.numel() - 1)
    slots = torch.where(valid, kv_indices[where], 0).long()
    k = k_buffer[slots].float().repeat_interleave(group, dim=2)  # [bs, len, heads, dim]
    v = v_buffer[slots].float().repeat_interleave(group, dim=2)
    scores = torch.einsum("bhd,blhd->bhl", q.float(), k) * sm_scale
    probs = scores.masked_fill(~valid[:, None, :], float("-inf")).softmax(-1)
    o.copy_(torch.einsum("bhl,blhd->bhd", probs, v).to(o.dtype))


def torch_extend_attention_fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    prefix_start: torch.Tensor,
    prefix_lens: torch.Tensor,
    max_extend_len: int,
    sm_scale: float,
    sliding_window: int | None,
) -> None:
    """``extend_attention_fwd`` in PyTorch: each request's new tokens over its cached
    prefix (from the pool) and themselves, causally, within the window if any."""
    group = q.shape[1] // k.shape[1]
    for b in range(qo_indptr.numel() - 1):
        q0, q1 = int(qo_indptr[b]), int(qo_indptr[b + 1])
        k0, k1 = int(kv_indptr[b]), int(kv_indptr[b + 1])
        slots = kv_indices[k0:k1].long()
        keys = torch.cat((k_buffer[slots], k[q0:q1])).float().repeat_interleave(group, dim=1)
        values = torch.cat((v_buffer[slots], v[q0:q1])).float().repeat_interleave(group, dim=1)
        first_new = int(prefix_lens[b])
        key_pos = torch.cat(
            (
                int(prefix_start[b]) + torch.arange(k1 - k0, device=q.device),
                first_new + torch.arange(q1 - q0, device=q.device),
            )
        )
        dist = (first_new + torch.arange(q1 - q0, device=q.device))[:, None] - key_pos[None, :]
        keep = dist >= 0
        if sliding_window is not None:
            keep &= dist <= sliding_window
        scores = torch.einsum("qhd,khd->hqk", q[q0:q1].float(), keys) * sm_scale
        probs = scores.masked_fill(~keep, float("-inf")).softmax(-1)
        o[q0:q1] = torch.einsum("hqk,khd->qhd", probs, values).to(o.dtype)


# The attention backend's kernel entry points and their PyTorch stand-ins.
TORCH_KERNELS = {
    "create_kv_indices": torch_create_kv_indices,
    "decode_attention_fwd": torch_decode_attention_fwd,
    "extend_attention_fwd": torch_extend_attention_fwd,
}


def use_torch_kernels() -> None:
    """Point the attention backend at the PyTorch stand-ins (for the rest of the process)."""
    from swacheck.reference_impl import attention_backend

    for name, kernel in TORCH_KERNELS.items():
        setattr(attention_backend, name, kernel)


def skip_captured_body(runner: Any) -> None:
    """Make the graph runner's ``run_once`` (the captured body) hand back a static output
    without computing: what a real replay costs the host, minus the launch."""
    graph_runner = runner.graph_runner
    out = torch.zeros(graph_runner.max_bs, runner.config.vocab_size, device=runner.device)
    graph_runner.run_once = lambda bs: out[:bs]


# -- one runner per level --------------------------------------------------------------


class Contender:
    """A model runner decoding ``batch`` requests, watched at ``level`` (or not)."""

    def __init__(self, args: argparse.Namespace, workload: Workload, mode: str, level: str) -> None:
        from swacheck.reference_impl.workload import RequestSpec
        from swacheck.runtime import Sanitizer

        self.level = level
        self.runner = workload.runner(args.device, mode != "eager")
        if mode == HOST_MODE:
            skip_captured_body(self.runner)
        self.san: Sanitizer | None = None
        if level != "off":
            self.san = Sanitizer(
                level=level.removesuffix("-no-contracts"),
                action="log",
                contracts=not level.endswith("-no-contracts"),
            )
            self.san.watch_pool(self.runner.token_to_kv_pool)
            self.san.watch_backend(self.runner.attn_backend)
            if self.runner.graph_runner is not None:
                self.san.watch_graph_runner(self.runner.graph_runner)
            self.san.watch_model_runner(self.runner)
        self.runner.capture_graphs()
        vocab = self.runner.config.vocab_size
        for rid, length in enumerate(workload.prompt_lens):
            prompt = tuple((rid * 7 + i) % vocab for i in range(length))
            self.runner.add_request(RequestSpec(rid, prompt, 10**6, 0))
        while self.runner.waiting or any(
            r.prefilled < len(r.spec.prompt) for r in self.runner.running
        ):
            self.runner.step()
        for _ in range(args.warmup):
            self.runner.step()
        self.times: list[float] = []
        self.last: Any = None

    def step(self, device: str) -> None:
        from swacheck.reference_impl.forward_batch import ForwardMode

        # Wall time on a GPU (waiting for it is part of a step); on CPU this process's CPU
        # time, which other jobs on a shared machine disturb far less.
        clock = time.perf_counter if device == "cuda" else time.process_time
        _sync(device)
        start = clock()
        out = self.runner.step()
        _sync(device)
        self.times.append((clock() - start) * 1e3)
        assert out is not None and out.mode is ForwardMode.DECODE
        self.last = out

    def oracle_diff(self) -> float:
        """Largest logit difference of the last step against the dense oracle."""
        from swacheck.reference_impl.oracle import DenseOracle

        oracle = DenseOracle(self.runner.model)
        return max(
            float((oracle.logits(ctx)[-1] - self.last.logits[i]).abs().max())
            for i, ctx in enumerate(self.last.contexts)
        )

    def result(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "median_ms": round(statistics.median(self.times), 4),
            "mean_ms": round(statistics.fmean(self.times), 4),
        }
        if self.san is not None:
            report = self.san.report()
            self.san.close()
            result["checks"] = report.total_checks
            result["violations"] = report.total_violations
        return result


def replay_ms(runner: Any, bucket: int) -> float:
    """Device time of one replay of ``bucket``'s graph (the forward without the host)."""
    graph = runner.graph_runner.graphs[bucket]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(20):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def count_calls(args: argparse.Namespace, workload: Workload, mode: str) -> dict[str, Any]:
    """Python and C calls a decode step, unsanitized and ``fast``, and the sanitizer's own
    by entry point (the outermost sanitizer frame): a deterministic measure of its host
    work, for a machine too loaded to time microseconds (``sys.setprofile``)."""
    import collections

    import swacheck.runtime

    runtime_dir = os.path.dirname(os.path.abspath(swacheck.runtime.__file__))
    ours: dict[str, bool] = {}

    def is_ours(filename: str) -> bool:
        found = ours.get(filename)
        if found is None:  # the sanitizer's modules, and the wrappers it compiles there
            found = ours[filename] = os.path.dirname(os.path.abspath(filename)) == runtime_dir
        return found

    figures: dict[str, Any] = {}
    for level in ("off", "fast"):
        contender = Contender(args, workload, mode, level)
        total = 0
        by_entry: collections.Counter[str] = collections.Counter()

        def profile(
            frame: Any, event: str, arg: Any, by_entry: collections.Counter[str] = by_entry
        ) -> None:
            nonlocal total
            if event not in ("call", "c_call"):
                return
            total += 1
            if not is_ours(frame.f_code.co_filename):
                return
            entry, outer = frame, frame.f_back
            while outer is not None and is_ours(outer.f_code.co_filename):
                entry, outer = outer, outer.f_back
            by_entry[entry.f_code.co_name.replace("_sw_wrapper", "mutator")] += 1

        sys.setprofile(profile)
        try:
            for _ in range(args.steps):
                contender.runner.step()
        finally:
            sys.setprofile(None)
        figures[f"{level}_calls_per_step"] = round(total / args.steps, 1)
        if level == "fast":
            figures["sanitizer_calls_per_step"] = round(sum(by_entry.values()) / args.steps, 1)
            figures["by_entry"] = {k: round(v / args.steps, 1) for k, v in by_entry.most_common()}
    return figures


def measure(
    args: argparse.Namespace, workload: Workload, mode: str, levels: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """Every level's runner, stepping in turn."""
    contenders = [Contender(args, workload, mode, level) for level in levels]
    for i in range(args.steps):
        shift = i % len(contenders)
        for contender in contenders[shift:] + contenders[:shift]:
            contender.step(args.device)
    off = contenders[0]
    per = {c.level: c.result() for c in contenders}
    if mode == "graph" and args.device == "cuda":
        # How the unsanitized step splits: the captured forward on the device, the rest
        # (scheduling, allocation, populate, sampling, launch) on the host.
        bucket = off.runner.graph_runner.bucket(workload.batch)
        per["off"]["device_forward_ms"] = round(replay_ms(off.runner, bucket), 4)
    for c in contenders[1:]:
        # Each round's steps ran back to back: the median of the differences cancels drift.
        added = [t - t_off for t, t_off in zip(c.times, off.times, strict=True)]
        per[c.level]["added_ms"] = round(statistics.median(added), 4)
    if mode == HOST_MODE:
        return per  # no model output to compare
    # Sanitizing must change no output bit; in fp32 the run must also match the oracle
    # (which vouches for the PyTorch stand-in kernels).
    per["off"]["same_logits_at_every_level"] = all(
        torch.equal(c.last.logits, off.last.logits) for c in contenders
    )
    if args.dtype == "float32":
        per["off"]["max_abs_diff_vs_oracle"] = off.oracle_diff()
    return per


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument(
        "--workload",
        choices=("tiny", "realistic"),
        default="tiny",
        help="tiny: the demo's model (the host-bound worst case; --batch, --prompt-len, "
        "--layers apply); realistic: a 7 B-weight hybrid model, 32 requests of 2-4 k tokens "
        "(levels off, fast and full: four copies of its KV pools would not fit)",
    )
    p.add_argument(
        "--kernels",
        choices=("triton", "torch"),
        default=None,
        help="attention kernels: Triton (default on cuda) or PyTorch stand-ins (default on cpu; "
        "they synchronise, so not with CUDA graphs)",
    )
    p.add_argument("--batch", type=int, default=6, help="requests decoded together (padded to 8)")
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--steps", type=int, default=200, help="timed decode steps per level")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument(
        "--dtype",
        default=None,
        choices=("bfloat16", "float16", "float32"),
        help="model dtype (default: bfloat16 on cuda, float32 on cpu, where bf16 matmuls stray "
        "from the oracle)",
    )
    p.add_argument(
        "--count-calls",
        action="store_true",
        help="instead of timing: Python and C calls a step, off and fast, and the sanitizer's "
        "own by entry point (graph mode; graph-host on cpu)",
    )
    args = p.parse_args(argv)
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    kernels = args.kernels or ("triton" if args.device == "cuda" else "torch")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_sanitizer_overhead: needs a CUDA device (or --device cpu)", file=sys.stderr)
        return 2
    if args.device == "cuda" and kernels == "torch":
        print("bench_sanitizer_overhead: --kernels torch is for --device cpu", file=sys.stderr)
        return 2
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        torch.set_num_threads(1)  # tiny ops: threads only add contention on a shared machine
    if kernels == "torch":
        use_torch_kernels()
    if args.workload == "realistic" and args.device != "cuda":
        print("bench_sanitizer_overhead: --workload realistic needs --device cuda", file=sys.stderr)
        return 2
    modes = MODES if args.device == "cuda" else (*MODES, HOST_MODE)
    levels = LEVELS[:3] if args.workload == "realistic" else LEVELS
    workload = Workload(args)
    if args.count_calls:
        mode = "graph" if args.device == "cuda" else HOST_MODE
        print(
            json.dumps(
                {
                    "benchmark": "sanitizer_calls_per_decode_step",
                    "mode": mode,
                    **count_calls(args, workload, mode),
                }
            )
        )
        return 0
    per: dict[str, dict[str, Any]] = {}
    for mode in modes:
        per[mode] = measure(args, workload, mode, levels)
        gc.collect()  # the mode's runners (and their KV pools) before the next mode's
        if args.device == "cuda":
            torch.cuda.empty_cache()
        for level, figures in per[mode].items():
            print(mode, level, figures, file=sys.stderr, flush=True)
    overhead = {
        mode: {
            level: round(per[mode][level]["median_ms"] / per[mode]["off"]["median_ms"] - 1, 4)
            for level in levels[1:]
        }
        for mode in modes
    }
    result = {
        "benchmark": "sanitizer_overhead_per_decode_step",
        "workload": args.workload,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "kernels": kernels,
        "torch": torch.__version__,
        "batch": workload.batch,
        "prompt_lens": [min(workload.prompt_lens), max(workload.prompt_lens)],
        "layers": workload.config.num_layers,
        "hidden": workload.config.hidden_size,
        "dtype": args.dtype,
        "steps": args.steps,
        "ms_per_step": per,
        "overhead_fraction": overhead,
        "added_ms": {m: {lv: per[m][lv]["added_ms"] for lv in levels[1:]} for m in modes},
        "violations": sum(per[m][lv].get("violations", 0) for m in modes for lv in levels),
        "same_logits_at_every_level": all(
            per[m]["off"]["same_logits_at_every_level"] for m in MODES
        ),
        "max_abs_diff_vs_oracle": max(
            (per[m]["off"].get("max_abs_diff_vs_oracle", 0.0) for m in MODES), default=None
        )
        if args.dtype == "float32"
        else None,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
