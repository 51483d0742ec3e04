"""Decode-kernel bandwidth: the Triton split-KV decode kernel's effective bandwidth on the
window's K/V bytes, against the device's measured device-to-device copy bandwidth.

Default shape: batch 64, window 4096 tokens per request, 8 KV heads x 128 (32 query
heads), bf16, page size 1 with the slots scattered over the pool. Sweeps a few launch
configurations and reports the best. Goal: >= 60 % of copy bandwidth.

    python benchmarks/bench_decode_kernel.py            # needs a CUDA device

The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

import torch

from swacheck.reference_impl.triton_kernels import decode_attention_fwd


def _time_ms(fn, iters: int) -> float:
    """Median milliseconds per call, CUDA events around each call."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def _copy_gbps(nbytes: int, iters: int) -> float:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * nbytes / _time_ms(lambda: dst.copy_(src), iters) / 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--window", type=int, default=4096)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--q-heads", type=int, default=32)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--contiguous", action="store_true", help="sequential slots, not scattered")
    p.add_argument("--splits", type=int, nargs="+", default=[4, 8, 16])
    p.add_argument("--block-n", type=int, nargs="+", default=[32, 64])
    p.add_argument("--num-warps", type=int, nargs="+", default=[4, 8])
    p.add_argument("--num-stages", type=int, nargs="+", default=[2, 3])
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_decode_kernel: needs a CUDA device", file=sys.stderr)
        return 2
    dev, dtype = "cuda", getattr(torch, args.dtype)
    bs, win, hkv, hq, d = args.batch, args.window, args.kv_heads, args.q_heads, args.head_dim
    slots = bs * win + 1  # slot 0 is the sentinel
    gen = torch.Generator(device=dev).manual_seed(0)
    k_buf = torch.randn(slots, hkv, d, device=dev, dtype=dtype, generator=gen)
    v_buf = torch.randn(slots, hkv, d, device=dev, dtype=dtype, generator=gen)
    order = (
        torch.arange(1, slots, device=dev)
        if args.contiguous
        else torch.randperm(slots - 1, device=dev, generator=gen) + 1
    )
    kv_indices = order.to(torch.int32)
    kv_indptr = torch.arange(0, (bs + 1) * win, win, dtype=torch.int32, device=dev)
    q = torch.randn(bs, hq, d, device=dev, dtype=dtype, generator=gen)
    out = torch.empty_like(q)
    scale = d**-0.5
    kv_bytes = 2 * bs * win * hkv * d * k_buf.element_size()

    # Correctness on two requests before timing anything.
    decode_attention_fwd(q, k_buf, v_buf, out, kv_indptr, kv_indices, scale, 8, 64)
    for b in (0, bs - 1):
        idx = kv_indices[kv_indptr[b] : kv_indptr[b + 1]].long()
        k = k_buf[idx].float().repeat_interleave(hq // hkv, 1)
        v = v_buf[idx].float().repeat_interleave(hq // hkv, 1)
        probs = (torch.einsum("hd,nhd->hn", q[b].float(), k) * scale).softmax(-1)
        ref = torch.einsum("hn,nhd->hd", probs, v)
        torch.testing.assert_close(out[b].float(), ref, atol=2e-2, rtol=2e-2)

    copy_gbps = _copy_gbps(kv_bytes, args.iters)

    sweep = []
    configs = itertools.product(args.splits, args.block_n, args.num_warps, args.num_stages)
    for splits, block_n, warps, stages in configs:
        ms = _time_ms(
            lambda s=splits, n=block_n, w=warps, st=stages: decode_attention_fwd(
                q, k_buf, v_buf, out, kv_indptr, kv_indices, scale, s, n, w, st
            ),
            args.iters,
        )
        gbps = kv_bytes / ms / 1e6
        cfg = {"num_kv_splits": splits, "block_n": block_n, "num_warps": warps}
        sweep.append({**cfg, "num_stages": stages, "ms": round(ms, 4), "GBps": round(gbps, 1)})
        print(f"{sweep[-1]}", flush=True)
    best = max(sweep, key=lambda r: r["GBps"])
    fraction = best["GBps"] / copy_gbps
    result = {
        "benchmark": "decode_kernel_bandwidth",
        "device": torch.cuda.get_device_name(),
        "batch": bs,
        "window": win,
        "kv_heads": hkv,
        "q_heads": hq,
        "head_dim": d,
        "dtype": args.dtype,
        "scattered_slots": not args.contiguous,
        "kv_bytes": kv_bytes,
        "copy_GBps": round(copy_gbps, 1),
        "kernel_GBps": best["GBps"],
        "kernel_ms": best["ms"],
        "fraction_of_copy": round(fraction, 3),
        "goal": 0.6,
        "meets_goal": fraction >= 0.6,
        "best_config": best,
        "sweep": sweep,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
