"""A small SGLang-like project, written for these tests (no engine code is copied).

A hybrid-SWA token pool that memoises its full->SWA translation, a CUDA-graph runner,
a forward dispatcher and an attention backend, with one bug of each kind the rules
know; a file the configuration excludes and one whose SWA002 is ignored per file.
:func:`make_project` writes it under a folder, as a git repository.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

PYPROJECT = """\
[project]
name = "minisglang"
version = "0.0.1"

[tool.swacheck]
extend-exclude = ["generated"]

[tool.swacheck.per-file-ignores]
"legacy/*.py" = ["SWA002"]
"""

POOL = '''\
"""Token pool of the hybrid SWA cache: full slots are translated to SWA slots."""

import torch


class HybridSWATokenPool:
    def __init__(self, size: int, swa_size: int, device: str = "cpu"):
        self.size = size
        self.swa_size = swa_size
        self.full_to_swa_index_mapping = torch.zeros(size + 1, dtype=torch.int64, device=device)
        self._memo_key = None
        self._memo_swa_loc = None

    def invalidate_loc_cache(self) -> None:
        self._memo_key = None
        self._memo_swa_loc = None

    def translate_loc_from_full_to_swa(self, full_loc: torch.Tensor) -> torch.Tensor:
        key = (full_loc.untyped_storage().data_ptr(), full_loc.numel())
        if key != self._memo_key:
            self._memo_swa_loc = self.full_to_swa_index_mapping[full_loc]
            self._memo_key = key
        return self._memo_swa_loc

    def assign(self, full_loc: torch.Tensor, swa_loc: torch.Tensor) -> None:
        self.full_to_swa_index_mapping[full_loc] = swa_loc.to(torch.int64)
        self.invalidate_loc_cache()

    def release(self, full_loc: torch.Tensor) -> None:
        self.full_to_swa_index_mapping[full_loc] = 0
'''

GRAPH_RUNNER = '''\
"""CUDA-graph buffers and capture for decode batches."""

import torch


class GraphBuffers:
    def __init__(self, n: int):
        self.out_cache_loc = torch.zeros((n,), dtype=torch.int64)
        self.named = {"🦙 llama": None, "out_cache_loc_swa": torch.zeros((n,), dtype=torch.int64)}
        self.out_cache_loc_swa = torch.zeros((n,), dtype=torch.int32)

    def fill(self, batch, raw_bs: int, bs: int) -> None:
        if bs != raw_bs:
            self.out_cache_loc.zero_()
        self.out_cache_loc[:raw_bs].copy_(batch.out_cache_loc)
        self.out_cache_loc_swa[:raw_bs].copy_(batch.out_cache_loc_swa)


class GraphRunner:
    def __init__(self, model_runner, buffers: GraphBuffers):
        self.model_runner = model_runner
        self.is_hybrid_swa = model_runner.is_hybrid_swa
        self.buffers = buffers
        self.graphs = {}

    def reset(self) -> None:
        self.model_runner.token_to_kv_pool.invalidate_loc_cache()
        self.graphs.clear()

    def capture(self, bs: int, forward):
        graph = torch.cuda.CUDAGraph()

        def run_once():
            return forward(self.buffers.out_cache_loc[:bs])

        run_once()
        with torch.cuda.graph(graph):
            out = run_once()
        self.graphs[bs] = (graph, out)
'''

MODEL_RUNNER = '''\
"""Forward dispatch: graph replay or eager."""


class ModelRunner:
    def __init__(self, pool, graph_runner):
        self.token_to_kv_pool = pool
        self.graph_runner = graph_runner

    def forward(self, batch, can_replay: bool):
        if can_replay:
            return self.graph_runner.replay(batch)
        self.token_to_kv_pool.invalidate_loc_cache()
        self.attn_backend.init_forward_metadata(batch)
        return self.model.forward(batch)
'''

EXCLUDED = """\
import torch

out_cache_loc_swa = torch.zeros((8,), dtype=torch.int64)
"""

LEGACY = """\
import torch


def legacy_buffers(n: int):
    out_cache_loc_swa = torch.zeros((n,), dtype=torch.int64)
    return out_cache_loc_swa
"""

FILES = {
    "pyproject.toml": PYPROJECT,
    "minisglang/__init__.py": "",
    "minisglang/mem_cache/__init__.py": "",
    "minisglang/mem_cache/pool.py": POOL,
    "minisglang/runner/__init__.py": "",
    "minisglang/runner/graph_runner.py": GRAPH_RUNNER,
    "minisglang/runner/model_runner.py": MODEL_RUNNER,
    "generated/buffers.py": EXCLUDED,
    "legacy/old_buffers.py": LEGACY,
}


def make_project(root: Path) -> Path:
    """Write the project under ``root`` (a git repository); return ``root``."""
    for relative, text in FILES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root
