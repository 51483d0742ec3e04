"""CUDA-graph decode buffers with the bugs of SGLang PR #23552 and the padding fix."""

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class DecodeInputBuffers:
    input_ids: torch.Tensor
    seq_lens: torch.Tensor
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: Optional[torch.Tensor]

    @classmethod
    def create(cls, max_bs: int, max_num_token: int, is_hybrid_swa: bool = False):
        out_cache_loc_swa = (
            # BUG: SWA locations are int32 everywhere (I3)
            torch.zeros((max_num_token,), dtype=torch.int64)
            if is_hybrid_swa
            else None
        )
        return cls(
            input_ids=torch.zeros((max_num_token,), dtype=torch.int64),
            seq_lens=torch.zeros((max_bs,), dtype=torch.int32),
            out_cache_loc=torch.zeros((max_num_token,), dtype=torch.int64),
            out_cache_loc_swa=out_cache_loc_swa,
        )

    def populate_from_forward_batch(self, forward_batch, raw_bs: int, bs: int, seq_len_fill_value: int):
        if bs != raw_bs:
            self.seq_lens.fill_(seq_len_fill_value)
            self.out_cache_loc.zero_()
            # BUG: out_cache_loc_swa keeps the last replay's slots; padded tokens write there
        self.seq_lens[:raw_bs].copy_(forward_batch.seq_lens)
        self.out_cache_loc[:raw_bs].copy_(forward_batch.out_cache_loc)
        if self.out_cache_loc_swa is not None:
            self.out_cache_loc_swa[:raw_bs].copy_(forward_batch.out_cache_loc_swa)


class CudaGraphRunner:
    def __init__(self, model_runner, buffers: DecodeInputBuffers):
        self.model_runner = model_runner
        self.is_hybrid_swa = model_runner.is_hybrid_swa
        self.buffers = buffers
        self.graphs = {}

    def capture_one_batch_size(self, bs: int, forward):
        graph = torch.cuda.CUDAGraph()

        def run_once():
            # BUG: a warm-up's cached translation is what capture records (#25824 item 4)
            return forward(self.buffers.input_ids[:bs], self.buffers.out_cache_loc[:bs])

        for _ in range(2):
            run_once()
        with torch.cuda.graph(graph):
            out = run_once()
        self.graphs[bs] = (graph, out)
