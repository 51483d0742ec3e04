"""The syntax of buffers a captured graph reads: names, allocations, fills, resets, rebindings."""

from __future__ import annotations

import libcst as cst
import pytest

from swacheck.analysis.graph_buffers import (
    function_buffers,
    is_allocation,
    is_graph_name,
    is_replay_name,
    is_setup_name,
    is_tail,
    is_whole,
    prefix_bound,
    swa_buffer_role,
)
from swacheck.analysis.names import Names
from swacheck.config import Config


@pytest.mark.parametrize(
    ("name", "graph", "replay", "setup"),
    [
        ("cuda_graph_swa_out_cache_loc", True, False, False),
        ("full_cg_prefill_swa_out_cache_loc", True, False, False),
        ("init_cuda_graph_state", True, False, True),
        ("init_forward_metadata_capture_cuda_graph", True, False, True),
        ("init_forward_metadata_replay_cuda_graph", True, True, False),
        ("init_forward_metadata_out_graph", True, True, False),
        ("populate_from_forward_batch", True, True, False),
        ("fill_from", True, True, False),
        ("load_batch", True, True, False),
        ("replay_prepare", True, True, False),
        ("_refill_swa_loc", False, True, False),
        ("__init__", False, False, True),
        ("_build_cuda_graph_metadata", True, False, True),
        ("init_forward_metadata", False, False, True),
        ("swa_loc_buf", False, False, False),
        ("paragraph", False, False, False),  # ``graph`` only as a word
        ("cgroup_path", False, False, False),
        ("fill_slots_from", False, False, False),
    ],
)
def test_names(name: str, graph: bool, replay: bool, setup: bool) -> None:
    assert is_graph_name(name) is graph
    assert is_replay_name(name) is replay
    assert is_setup_name(name) is setup


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("torch.zeros(n, dtype=torch.int64)", True),
        ("torch.empty((n,), device=d)", True),
        ("x.new_zeros(n)", True),
        ("torch.arange(n).to(device)", True),
        ("torch.zeros(n) if is_swa else None", True),
        ("self._alloc_swa_page_table(max_bs, pages)", True),
        ("allocate_buffer(n)", True),
        ("None", False),
        ("forward_batch.out_cache_loc", False),
        ("self.pool.translate_loc_from_full_to_swa(loc)", False),
        ("loc.to(torch.int32)", False),
    ],
)
def test_allocation(code: str, expected: bool) -> None:
    assert is_allocation(cst.parse_expression(code)) is expected


def test_allocation_through_a_local() -> None:
    local = {"buf": cst.parse_expression("torch.zeros(n)")}
    assert is_allocation(cst.parse_expression("buf"), local)
    assert not is_allocation(cst.parse_expression("other"), local)


@pytest.mark.parametrize(
    ("code", "bound", "tail", "whole"),
    [
        ("buf[:n]", "n", False, False),
        ("buf[0:n]", "n", False, False),
        ("buf[:n, :m]", "n", False, False),
        ("buf[:, :m]", None, False, False),
        ("buf[n:]", None, True, False),
        ("buf[n:m]", None, True, False),
        ("buf[n:, :m]", None, True, False),
        ("buf[:]", None, False, True),
        ("buf", None, False, True),
        ('d["swa_loc"]', None, False, True),
        ('d["swa_loc"][:n]', "n", False, False),
        ("buf[::2]", None, False, False),
        ("buf[i]", None, False, False),
    ],
)
def test_slices(code: str, bound: str | None, tail: bool, whole: bool) -> None:
    expr = cst.parse_expression(code)
    found = prefix_bound(expr)
    assert (cst.Module([]).code_for_node(found) if found is not None else None) == bound
    assert is_tail(expr) is tail
    assert is_whole(expr) is whole


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("swa_out_cache_loc", "write"),
        ("out_cache_loc_swa", "write"),
        ("cuda_graph_swa_out_cache_loc", "write"),
        ("swa_slot_indices", "write"),
        ("swa_kv_indices", "table"),
        ("swa_page_table", "table"),
        ("page_table_swa", "table"),
        ("cuda_graph_swa_block_table", "table"),
        ("out_cache_loc", None),
        ("page_table", None),
        ("full_to_swa_index_mapping", None),
        ("swap_loc", None),
        ("window_kv_indices", None),
    ],
)
def test_roles(name: str, role: str | None) -> None:
    assert swa_buffer_role(name, Names(Config())) == role


def _function(code: str) -> cst.FunctionDef:
    module = cst.parse_module(code)
    func = module.body[0]
    assert isinstance(func, cst.FunctionDef)
    return func


def test_fills_resets_and_rebindings() -> None:
    func = _function(
        """
def replay(self, forward_batch, in_capture):
    n = forward_batch.out_cache_loc.shape[0]
    swa = self.graph_buffers["swa_out_cache_loc"]
    self.cuda_graph_swa_out_cache_loc[n:].zero_()
    self.cuda_graph_swa_out_cache_loc[:n].copy_(x)
    swa[:n] = y
    torch.index_select(m, 0, idx, out=self.tbl[:n])
    dsts = [self.a[:n]]
    dsts.append(self.b[:n])
    self.c[n:m].copy_(pad)
    self.d.fill_(0)
    self.e[:n].fill_(3)
    self.rebound = t
    if in_capture:
        self.at_capture = t
    else:
        self.at_replay = t
    if not in_capture:
        self.not_capture = t
    else:
        self.capture_else = t
    if self.lazy is None:
        self.lazy = torch.zeros(3)
    for _ in range(2):
        pass
    else:
        self.after_loop = t
"""
    )
    found = function_buffers(func)
    fills = {(f.buffer.key, cst.Module([]).code_for_node(f.bound)) for f in found.fills}
    assert fills == {
        ("self.cuda_graph_swa_out_cache_loc", "n"),
        ('self.graph_buffers["swa_out_cache_loc"]', "n"),
        ("self.tbl", "n"),
        ("self.a", "n"),
        ("self.b", "n"),
    }
    resets = {(r.buffer.key, r.extent) for r in found.resets}
    assert resets == {
        ("self.cuda_graph_swa_out_cache_loc", "tail"),
        ("self.c", "tail"),  # the tail written on purpose
        ("self.d", "whole"),
    }
    guarded = {r.target.attr: r.setup_guarded for r in found.rebindings}
    assert guarded == {
        "rebound": False,
        "at_capture": True,
        "at_replay": False,
        "not_capture": False,
        "capture_else": True,
        "lazy": True,
        "after_loop": False,  # a loop's ``else`` is no capture branch
    }


def test_elif_of_a_capture_test_is_not_capture() -> None:
    func = _function(
        """
def prepare(self, is_capturing, mode):
    if is_capturing:
        self.a = t
    elif mode:
        self.b = t
"""
    )
    guarded = {r.target.attr: r.setup_guarded for r in function_buffers(func).rebindings}
    assert guarded == {"a": True, "b": False}


def test_nested_functions_are_their_own() -> None:
    func = _function(
        """
def outer(self, n):
    def inner():
        self.buf[:n].copy_(x)
    self.other[:n].copy_(y)
"""
    )
    assert [f.buffer.attr for f in function_buffers(func).fills] == ["other"]
