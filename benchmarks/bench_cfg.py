"""Cost of the order-rule analysis core (CFG, aliases, events, summaries) vs parsing.

Usage: python benchmarks/bench_cfg.py [FILE ...]

Without arguments, times a generated 3,000-line SGLang-like module (pools, allocators,
graph runners: branches, loops, try/finally, aliases, helper calls). For each file it
reports the median of several runs of:

* parse: ``libcst.parse_module``;
* first pass: CFG + aliases + events + skeletons of every function
  (``skeletons.module_skeletons``, what ``index_module`` adds);
* second pass: every function's :class:`~swacheck.analysis.order.FunctionFlow`
  (effects resolved through method summaries, dataflow solved), with the CFGs of the
  first pass reused as in a serial audit.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from swacheck.analysis import cfg as cfg_module
from swacheck.analysis import skeletons
from swacheck.analysis.cfg import functions_in
from swacheck.analysis.index import ProjectIndex, index_module
from swacheck.analysis.names import Names
from swacheck.analysis.order import function_flow
from swacheck.analysis.scope import ScopeFacts
from swacheck.analysis.skeletons import module_skeletons
from swacheck.config import Config
from swacheck.context import FileContext

BLOCK = """
class SWAKVPool{i}(BaseSWAKVPool):
    def __init__(self, size, device):
        self.full_to_swa_index_mapping = torch.empty(size + 1, dtype=torch.int64)
        self.full_to_swa_index_mapping[-1] = -1
        self._cached_loc_key = None
        self.allocator = Allocator{i}(self)

    def invalidate_loc_cache(self):
        self._cached_swa_loc = None
        self._cached_loc_key = None

    def translate_loc_from_full_to_swa(self, kv_indices):
        key = (kv_indices.data_ptr(), kv_indices.numel())
        if key != self._cached_loc_key:
            if self._cached_loc_key is not None:
                logger.warning("loc tensor changed")
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices].to(torch.int32)
            self._cached_loc_key = key
        return self._cached_swa_loc

    def set_kv_buffer(self, layer, loc, cache_k, cache_v):
        layer_id_pool, is_swa = self.layers_mapping[layer.layer_id]
        if is_swa:
            loc = self.translate_loc_from_full_to_swa(loc)
            self.swa_kv_pool.set_kv_buffer(None, loc, cache_k, cache_v)
        else:
            self.full_kv_pool.set_kv_buffer(None, loc, cache_k, cache_v)

    def _write_rows(self, rows, values):
        table = self.full_to_swa_index_mapping
        table[rows] = values

    def alloc(self, need_size):
        if need_size > self.available_size():
            return None
        full = self.full_attn_allocator.alloc(need_size)
        swa = self.swa_attn_allocator.alloc(need_size)
        if swa is None:
            self.full_attn_allocator.free(full)
            return None
        self._write_rows(full, swa)
        self.invalidate_loc_cache()
        return full

    def free_swa(self, free_index):
        try:
            swa = self.full_to_swa_index_mapping[free_index]
            swa = swa[swa > 0]
            self.swa_attn_allocator.free(swa)
            self.full_to_swa_index_mapping[free_index] = 0
        finally:
            self.invalidate_loc_cache()

    def clear(self):
        for pool in (self.full_attn_allocator, self.swa_attn_allocator):
            pool.clear()
        head = self.full_to_swa_index_mapping[:-1]
        head.fill_(0)
        self.invalidate_loc_cache()


class Runner{i}:
    def capture_one_batch_size(self, bs, forward):
        graph = torch.cuda.CUDAGraph()

        def run_once():
            if self.is_hybrid_swa:
                self.model_runner.token_to_kv_pool.invalidate_loc_cache()
            return forward(self.input_ids[:bs], self.positions[:bs])

        for _ in range(2):
            torch.cuda.synchronize()
            run_once()
        with torch.cuda.graph(graph):
            out = run_once()
        return graph, out

    def _forward_raw(self, forward_batch, can_run_graph):
        if self.is_hybrid_swa:
            self.token_to_kv_pool.invalidate_loc_cache()
        if can_run_graph:
            return self.graph_runner.replay(forward_batch)
        while forward_batch.pending():
            forward_batch = forward_batch.next()
            if forward_batch is None:
                break
        if forward_batch.forward_mode.is_decode():
            return self.forward_decode(forward_batch)
        return self.forward_extend(forward_batch)
"""


def generated(lines: int = 3000) -> str:
    parts = ["import torch\n\n"]
    i = 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(BLOCK.format(i=i))
        i += 1
    return "".join(parts)


def _median(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        cfg_module._CACHE.clear()
        skeletons._ANALYSES.clear()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(path: str, text: str) -> dict[str, float]:
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    # The engine resolves parents for every rule anyway (Rule.METADATA_DEPENDENCIES).
    wrapper.resolve(ParentNodeProvider)
    parse = _median(lambda: cst.parse_module(text))
    first = _median(lambda: module_skeletons(module, positions))

    config = Config()
    facts = index_module(module, path)
    for code in ("SWA001", "SWA004", "SWA005", "SWA007"):
        facts.rule_facts[code] = ScopeFacts(True, True)

    parents = wrapper.resolve(ParentNodeProvider)

    def second() -> None:
        project = ProjectIndex([facts])
        context = FileContext(path, text, wrapper, config, Names(config), project)
        context.__dict__["parents"] = parents
        module_skeletons(module, positions)  # the first pass leaves its CFGs cached
        for function, _ in functions_in(module):
            function_flow(context, function)

    both = _median(second)
    return {
        "lines": text.count("\n"),
        "parse": parse,
        "first_pass": first,
        "both_passes": both,
    }


def main(argv: list[str]) -> None:
    sources = [(p, Path(p).read_text()) for p in argv] or [("generated.py", generated())]
    for path, text in sources:
        r = measure(path, text)
        print(
            f"{path}: {r['lines']} lines | parse {r['parse'] * 1e3:.0f} ms | "
            f"CFG+events+skeletons (first pass) {r['first_pass'] * 1e3:.0f} ms | "
            f"+ flows/summaries/dataflow (both passes) {r['both_passes'] * 1e3:.0f} ms "
            f"= {r['both_passes'] / r['parse']:.2f}x parse"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
