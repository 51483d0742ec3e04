"""Two-rank scenarios for ``test_tp.py``, run as ``torchrun --nproc-per-node 2 scenarios.py NAME``.

- ``bugs``: every ``inject_bug`` switch in turn, on both ranks, under a ``fast``/``log``
  sanitizer per rank.
- ``raise-on-rank-1``: only rank 1 runs a bug, under ``raise``; rank 0 is clean and is left
  waiting in a collective when rank 1 raises. The run must end (non-zero) on its own.

After each run rank 0 prints one line ``{"bug": ..., "report": ...}`` with the report
merged over the ranks (an aborted run's names the error that ended each rank).

Not a test module (pytest does not collect it); on a machine with a GPU per rank it runs
on NCCL with CUDA graphs, elsewhere on gloo with the Triton interpreter.
"""

from __future__ import annotations

import json
import sys

import torch

from swacheck.reference_impl.bugs import BUG_NAMES
from swacheck.reference_impl.demo import build_runner, serve, watch_runner
from swacheck.reference_impl.model import ModelConfig
from swacheck.reference_impl.tp import TensorParallel
from swacheck.runtime import Sanitizer, SanitizerReport
from swacheck.runtime.distributed import RankGuard, init_from_env

# Decode steps that reach each switch's trigger in the demo workload (the capture bug is
# caught while capturing: serving past it would replay a poisoned graph on a GPU).
STEPS: dict[str, int] = {
    "padding-not-zeroed": 9,
    "swa-loc-int64": 1,
    "missing-invalidation": 3,
    "storage-pointer-key": 1,
    "capture-without-invalidation": 0,
    "invalidate-after-dispatch": 1,
    "fresh-translation-without-flush": 1,
}
assert set(STEPS) == set(BUG_NAMES)
# One SWA and one full layer: every trigger is reached, at half the interpreter's cost.
CONFIG = ModelConfig(num_layers=2)


def run(device: str, tp: TensorParallel, bug: str | None, action: str, steps: int) -> None:
    runner = build_runner(device, inject_bug=bug, tp=tp, config=CONFIG)
    san = Sanitizer(level="fast", action=action)
    watch_runner(san, runner)

    def emit(report: SanitizerReport) -> None:
        print(json.dumps({"bug": bug, "report": report.to_dict()}), flush=True)

    guard = RankGuard(san, emit)
    with guard:
        serve(runner, steps)
    guard.finish()
    san.close()
    if runner.graph_runner is not None:
        runner.graph_runner.graphs.clear()


def main(name: str) -> None:
    enough_gpus = torch.cuda.device_count() >= 2
    device = str(init_from_env("cuda" if enough_gpus else "cpu"))
    tp = TensorParallel.from_group()
    if name == "bugs":
        for bug, steps in STEPS.items():
            run(device, tp, bug, "log", steps)
    elif name == "raise-on-rank-1":
        bug = "invalidate-after-dispatch" if tp.rank == 1 else None
        run(device, tp, bug, "raise", 4)
    else:
        raise SystemExit(f"unknown scenario {name!r}")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
