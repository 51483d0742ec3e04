"""SWA003 beyond its documented examples: padding spellings, owners, fixes, prefilter."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from swacheck.analysis.padding import is_location_name, padding_polarity
from swacheck.config import Config
from swacheck.engine.audit import AuditOptions, audit_sources
from swacheck.rules.swa003_swa_padded_tail_not_reset import SwaPaddedTailNotReset

RULE = SwaPaddedTailNotReset


# Somewhere in the tree fills the SWA buffers with real slots (a never-filled buffer
# holds only zeros and is not reported).
FILL = """
def populate(buffers, forward_batch, n):
    buffers.out_cache_loc_swa[:n].copy_(forward_batch.out_cache_loc_swa)
    buffers.swa_out_cache_loc[:n].copy_(forward_batch.out_cache_loc_swa)
"""


def _audit(files: dict[str, str], root: Path, **options: bool):
    files = {"fill.py": FILL, **files}
    result = audit_sources(
        files, AuditOptions(rules=[RULE], config=Config(), jobs=1, **options), root=root
    )
    assert not result.errors, result.errors
    return result


def _rows(files: dict[str, str], root: Path, path: str = "example.py") -> list[int]:
    return [f.start.row for f in _audit(files, root).findings if f.path == path]


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ("bs != raw_bs", "body"),
        ("raw_bs != bs", "body"),
        ("raw_bs < bs", "body"),
        ("bs > raw_bs", "body"),
        ("num_tokens != self.raw_num_tokens", "body"),
        ("static_num_tokens < raw_num_tokens", None),  # raw larger: not a padding test
        ("raw_bs > bs", None),
        ("bs == raw_bs", "orelse"),
        ("raw_bs >= bs", "orelse"),
        ("not (bs == raw_bs)", "body"),
        ("bs != raw_bs and use_graph", "body"),
        ("bs != raw_bs or use_graph", None),
        ("bs == raw_bs or eager", "orelse"),
        ("raw_bs > 0", None),
        ("raw_bs != 0", None),
        ("raw != bs", None),  # the word alone is not a size
        ("draw_bs != bs", None),
        ("raw_bs in graphs", None),
        ("static_num_tokens != num_tokens", "body"),
        ("num_tokens < self.static_num_tokens", "body"),
        ("padded_bs > bs", "body"),
        ("static_num_tokens == num_tokens", "orelse"),
        ("static_num_tokens != 0", None),
        ("static_bs != padded_bs", None),
        ("real_bs != bs", "body"),
    ],
)
def test_padding_polarity(test: str, expected: str | None) -> None:
    assert padding_polarity(cst.parse_expression(test)) == expected


def test_padding_flag() -> None:
    flags = {"padded": cst.parse_expression("bs != raw_bs")}
    assert padding_polarity(cst.parse_expression("padded"), flags) == "body"
    assert padding_polarity(cst.parse_expression("not padded"), flags) == "orelse"
    assert padding_polarity(cst.parse_expression("other"), flags) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("out_cache_loc", True),
        ("out_cache_loc_swa", True),
        ("swa_loc", True),
        ("loc", True),
        ("block_table", False),
        ("lock", False),
        ("allocator", False),
        ("seq_lens", False),
    ],
)
def test_location_names(name: str, expected: bool) -> None:
    assert is_location_name(name) is expected


RUNNER = """
class Runner:
    def __init__(self, n, swa):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32) if swa else None
        self.swa_out_cache_loc = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.out_cache_loc.zero_()
"""


def test_every_missing_buffer_in_one_finding_and_one_fix(tmp_path: Path) -> None:
    result = _audit({"example.py": RUNNER}, tmp_path)
    [finding] = [f for f in result.findings if f.path == "example.py"]
    assert "`self.out_cache_loc_swa`" in finding.message
    assert "`self.swa_out_cache_loc`" in finding.message
    fixed_root = tmp_path / "fixed"
    fixed_root.mkdir()
    _audit({"example.py": RUNNER}, fixed_root, fix=True)
    text = (fixed_root / "example.py").read_text()
    # The optional buffer (conditional allocation) is guarded, the other one is not.
    assert (
        "            self.out_cache_loc.zero_()\n"
        "            if self.out_cache_loc_swa is not None:\n"
        "                self.out_cache_loc_swa.zero_()\n"
        "            self.swa_out_cache_loc.zero_()\n"
    ) in text
    assert _rows({"example.py": text}, tmp_path / "again") == []


def test_branch_guard_style_is_copied(tmp_path: Path) -> None:
    code = """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)
        self.mamba_track_indices = None

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            if self.out_cache_loc is not None:
                self.out_cache_loc.zero_()
            if self.mamba_track_indices is not None:
                self.mamba_track_indices.zero_()
"""
    _audit({"example.py": code}, tmp_path, fix=True)
    text = (tmp_path / "example.py").read_text()
    assert (
        "            if self.out_cache_loc is not None:\n"
        "                self.out_cache_loc.zero_()\n"
        "            if self.out_cache_loc_swa is not None:\n"
        "                self.out_cache_loc_swa.zero_()\n"
        "            if self.mamba_track_indices is not None:\n"
    ) in text


def test_tab_indented_file_gets_tab_fix(tmp_path: Path) -> None:
    code = RUNNER.replace("    ", "\t")
    _audit({"example.py": code}, tmp_path, fix=True)
    text = (tmp_path / "example.py").read_text()
    assert "\t\t\tif self.out_cache_loc_swa is not None:\n\t\t\t\tself.out_cache_loc_swa" in text


def test_elif_only_the_padding_arm(tmp_path: Path) -> None:
    code = """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, raw_bs, bs, mode):
        if mode == "eager":
            self.out_cache_loc.zero_()
        elif bs > raw_bs:
            self.out_cache_loc.zero_()
        else:
            self.out_cache_loc.zero_()
"""
    assert _rows({"example.py": code}, tmp_path) == [10]


def test_nested_padding_branch_inside_a_loop(tmp_path: Path) -> None:
    code = """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, batches):
        for raw_bs, bs in batches:
            if self.enabled:
                if raw_bs < bs:
                    self.out_cache_loc[raw_bs:].zero_()
"""
    assert _rows({"example.py": code}, tmp_path) == [10]


def test_buffers_attribute_typed_by_construction_across_files(tmp_path: Path) -> None:
    buffers = """
from dataclasses import dataclass
from typing import Optional


@dataclass
class DecodeInputBuffers:
    out_cache_loc: torch.Tensor
    out_cache_loc_swa: Optional[torch.Tensor] = None

    @classmethod
    def create(cls, n):
        return cls(out_cache_loc=torch.zeros(n))
"""
    runner = """
from buffers import DecodeInputBuffers


class CudaGraphRunner:
    def __init__(self, n):
        self.buffers = DecodeInputBuffers.create(n)

    def replay_prepare(self, raw_bs, bs):
        buffers = self.buffers
        if bs != raw_bs:
            buffers.out_cache_loc.zero_()
            self.buffers.out_cache_loc.zero_()
"""
    result = _audit({"example.py": runner, "buffers.py": buffers}, tmp_path)
    messages = [(f.start.row, f.message) for f in result.findings if f.path == "example.py"]
    assert [row for row, _ in messages] == [11, 11]
    assert any("`buffers.out_cache_loc_swa`" in m for _, m in messages)
    assert any("`self.buffers.out_cache_loc_swa`" in m for _, m in messages)
    # a dataclass field defaulting to None is optional: the fix is guarded
    _audit({"example.py": runner, "buffers.py": buffers}, tmp_path / "fixed", fix=True)
    text = (tmp_path / "fixed" / "example.py").read_text()
    assert "if buffers.out_cache_loc_swa is not None:" in text
    assert "if self.buffers.out_cache_loc_swa is not None:" in text


def test_helper_in_base_class_in_another_file_covers(tmp_path: Path) -> None:
    base = """
class BaseRunner:
    def __init__(self, n):
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def _pad_swa(self):
        self.out_cache_loc_swa.fill_(0)
"""
    runner = """
from base import BaseRunner


class Runner(BaseRunner):
    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.out_cache_loc.zero_()
            self._pad_swa()
"""
    assert _rows({"example.py": runner, "base.py": base}, tmp_path) == []
    without_helper = runner.replace("            self._pad_swa()\n", "")
    assert _rows({"example.py": without_helper, "base.py": base}, tmp_path / "b") == [7]


def test_unrelated_base_class_buffer_is_not_owned(tmp_path: Path) -> None:
    code = """
class Other:
    def __init__(self, n):
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)


class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)

    def replay_prepare(self, raw_bs, bs):
        if bs != raw_bs:
            self.out_cache_loc.zero_()
"""
    assert _rows({"example.py": code}, tmp_path) == []


def test_noqa_suppresses(tmp_path: Path) -> None:
    code = RUNNER.replace("if bs != raw_bs:", "if bs != raw_bs:  # noqa: SWA003")
    assert _rows({"example.py": code}, tmp_path) == []


@pytest.mark.parametrize("example", range(len(RULE.INVALID)))
def test_prefilter_changes_nothing(example: int, tmp_path: Path) -> None:
    case = RULE.INVALID[example]
    files = {"example.py": case.code, **case.files}
    on = _audit(files, tmp_path / "on").findings
    off = _audit(files, tmp_path / "off", prefilter=False).findings
    assert [(f.path, f.start, f.message) for f in on] == [(f.path, f.start, f.message) for f in off]


def test_never_filled_buffer_is_not_reported(tmp_path: Path) -> None:
    result = audit_sources(
        {"example.py": RUNNER}, AuditOptions(rules=[RULE], config=Config(), jobs=1), root=tmp_path
    )
    assert result.findings == []


def test_fill_through_a_kernel_launch_in_a_subclass_counts(tmp_path: Path) -> None:
    kernel = (
        "from example import Runner\n\n"
        "class KernelRunner(Runner):\n"
        "    def launch(self, n):\n"
        "        _write_slots[(n,)](self.out_cache_loc_swa, n)\n"
    )
    result = audit_sources(
        {"example.py": RUNNER, "kernel.py": kernel},
        AuditOptions(rules=[RULE], config=Config(), jobs=1),
        root=tmp_path,
    )
    [finding] = result.findings
    assert "`self.out_cache_loc_swa`" in finding.message
    assert "`self.swa_out_cache_loc`" not in finding.message


def test_a_fill_of_another_class_same_named_buffer_does_not_count(tmp_path: Path) -> None:
    code = """
class DecodeBuffers:
    def __init__(self, n):
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def populate(self, forward_batch, n):
        self.out_cache_loc_swa[:n].copy_(forward_batch.out_cache_loc_swa)


class PrefillBuffers:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def populate(self, raw_num_tokens, static_num_tokens):
        if static_num_tokens != raw_num_tokens:
            self.out_cache_loc.zero_()
"""
    result = audit_sources(
        {"example.py": code}, AuditOptions(rules=[RULE], config=Config(), jobs=1), root=tmp_path
    )
    # The branch of PrefillBuffers is silent; DecodeBuffers' own populate (a live-row fill
    # of a buffer a captured graph reads, with no tail reset) is a finding of its own.
    assert [f.start.row for f in result.findings] == [7]
    assert "`self.out_cache_loc_swa[:n]` is filled" in result.findings[0].message
    filled_in_subclass = (
        code
        + """

class SwaPrefillBuffers(PrefillBuffers):
    def populate_swa(self, forward_batch, n):
        dsts = [self.out_cache_loc_swa[:n]]
        return dsts
"""
    )
    result = audit_sources(
        {"example.py": filled_in_subclass},
        AuditOptions(rules=[RULE], config=Config(), jobs=1),
        root=tmp_path / "sub",
    )
    assert [f.start.row for f in result.findings] == [7, 16, 22]


def test_a_copy_source_is_not_a_fill(tmp_path: Path) -> None:
    sources = (
        "def populate(buffers, forward_batch, n):\n"
        "    srcs = [forward_batch.out_cache_loc_swa[:n]]\n"
        "    srcs.append(forward_batch.swa_out_cache_loc[:n])\n"
        "    torch._foreach_copy_([buffers.out_cache_loc[:n]], srcs)\n"
    )
    result = audit_sources(
        {"example.py": RUNNER, "populate.py": sources},
        AuditOptions(rules=[RULE], config=Config(), jobs=1),
        root=tmp_path,
    )
    assert result.findings == []


# -- live-row fills of buffers a captured graph reads ------------------------------------

BACKEND = """
import torch


class Backend:
    def init_cuda_graph_state(self, max_bs, max_num_tokens, max_pages):
        self.cuda_graph_swa_out_cache_loc = torch.zeros(max_num_tokens, dtype=torch.int64)
        self.cuda_graph_swa_page_table = torch.zeros(max_bs, max_pages, dtype=torch.int32)

    def init_forward_metadata_replay_cuda_graph(self, bs, raw_bs, forward_batch, pages):
        n = forward_batch.out_cache_loc.shape[0]
{body}
"""


def _backend(body: str) -> str:
    """The backend with ``body`` in its replay method (``BUF`` for its SWA write buffer)."""
    body = body.replace("BUF", "self.cuda_graph_swa_out_cache_loc")
    lines = [f"        {line}" if line else "" for line in body.strip("\n").split("\n")]
    return BACKEND.format(body="\n".join(lines))


@pytest.mark.parametrize(
    ("body", "flagged"),
    [
        # reset before, after, on both arms of a branch: every path is covered
        ("buf = BUF\nbuf[n:].zero_()\nbuf[:n].copy_(x)", False),
        ("BUF[:n].copy_(x)\nBUF[n:] = 0", False),
        ("if bs > 4:\n    BUF[n:].zero_()\nelse:\n    BUF.fill_(0)\nBUF[:n].copy_(x)", False),
        # a reset on one arm only, or under a loop that may not run: a path without it
        ("if bs > 4:\n    BUF[n:].zero_()\nBUF[:n].copy_(x)", True),
        ("for _ in range(bs):\n    BUF[n:].zero_()\nBUF[:n].copy_(x)", True),
        # a reset of the head (the capture path's zeros) is no tail reset
        ("BUF[:n].zero_()\nBUF[:n].copy_(x)", True),
        # a fill to the padded size has no tail; a table filled to `bs` neither
        ("BUF[:padded_num_tokens].copy_(x)", False),
        ("self.cuda_graph_swa_page_table[:bs, : pages.shape[1]].copy_(pages)", False),
        ("self.cuda_graph_swa_page_table[:, : pages.shape[1]].copy_(pages)", False),
        # a table filled for the raw requests only
        ("self.cuda_graph_swa_page_table[:raw_bs].copy_(pages)", True),
        ("live = raw_bs\nself.cuda_graph_swa_page_table[:live].copy_(pages)", True),
        # a call handed the tail, or the buffer with the live count
        ("zero_tail(BUF[n:])\nBUF[:n].copy_(x)", False),
        ("reset(BUF, n)\nBUF[:n].copy_(x)", False),
        # a kernel launch handed the buffer fills it; it is no reset; nor is a call
        # handed the buffer without the live count
        ("kernel[(1,)](BUF, n)\nBUF[:n].copy_(x)", True),
        ("log(BUF)\nBUF[:n].copy_(x)", True),
        # a raise on the path without a reset replays nothing
        ("if bs > 4:\n    raise ValueError(bs)\nBUF[n:].zero_()\nBUF[:n].copy_(x)", False),
    ],
)
def test_fill_needs_a_reset_on_every_path(body: str, flagged: bool, tmp_path: Path) -> None:
    rows = _rows({"example.py": _backend(body)}, tmp_path)
    assert bool(rows) is flagged, rows


def test_one_finding_per_buffer_and_function(tmp_path: Path) -> None:
    body = "BUF[:n].copy_(x)\nBUF[:n] = y"
    assert _rows({"example.py": _backend(body)}, tmp_path) == [12]


def test_reset_by_a_method_of_a_base_class_in_another_file(tmp_path: Path) -> None:
    base = """
import torch


class BaseBackend:
    def init_cuda_graph_state(self, max_num_tokens):
        self.cuda_graph_swa_out_cache_loc = torch.zeros(max_num_tokens, dtype=torch.int64)

    def _reset_swa_tail(self, n):
        self.cuda_graph_swa_out_cache_loc[n:].zero_()

    def _touch_swa_head(self, n):
        self.cuda_graph_swa_out_cache_loc[:n].zero_()
"""
    sub = """
from base import BaseBackend


class Backend(BaseBackend):
    def init_forward_metadata_replay_cuda_graph(self, forward_batch):
        n = forward_batch.out_cache_loc.shape[0]
        self.{helper}(n)
        self.cuda_graph_swa_out_cache_loc[:n].copy_(forward_batch.swa_loc)
"""
    files = {"example.py": sub.format(helper="_reset_swa_tail"), "base.py": base}
    assert _rows(files, tmp_path / "a") == []
    # a helper that writes only the head is no reset
    files = {"example.py": sub.format(helper="_touch_swa_head"), "base.py": base}
    assert _rows(files, tmp_path / "b") == [9]


def test_a_graph_buffer_of_a_class_in_another_file_typed_by_annotation(tmp_path: Path) -> None:
    holder = """
from dataclasses import dataclass

import torch


@dataclass
class GraphInputs:
    swa_out_cache_loc: torch.Tensor

    def load_batch(self, forward_batch):
        pass
"""
    runner = """
from holder import GraphInputs


def refill(inputs: GraphInputs, forward_batch, raw_num_tokens):
    inputs.swa_out_cache_loc[:raw_num_tokens].copy_(forward_batch.out_cache_loc_swa)
"""
    assert _rows({"example.py": runner, "holder.py": holder}, tmp_path) == [6]


def test_fill_fix_keeps_the_guard_and_is_idempotent(tmp_path: Path) -> None:
    body = "if BUF is not None:\n    BUF[:n].copy_(x)"
    code = _backend(body)
    _audit({"example.py": code}, tmp_path, fix=True)
    text = (tmp_path / "example.py").read_text()
    assert (
        "        if self.cuda_graph_swa_out_cache_loc is not None:\n"
        "            self.cuda_graph_swa_out_cache_loc[n:].zero_()\n"
        "            self.cuda_graph_swa_out_cache_loc[:n].copy_(x)\n"
    ) in text
    assert _rows({"example.py": text}, tmp_path / "again") == []


def test_branch_and_fill_are_one_finding(tmp_path: Path) -> None:
    # The padding branch resets the object's other location buffer: the branch reports
    # the SWA buffer once, the fill of it is not a second finding.
    code = """
class Runner:
    def __init__(self, n):
        self.out_cache_loc = torch.zeros(n)
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int32)

    def replay_prepare(self, forward_batch, raw_bs, bs):
        if bs != raw_bs:
            self.out_cache_loc.zero_()
        self.out_cache_loc_swa[:raw_bs].copy_(forward_batch.out_cache_loc_swa)
"""
    result = _audit({"example.py": code}, tmp_path)
    [finding] = [f for f in result.findings if f.path == "example.py"]
    assert finding.start.row == 8 and "padding branch" in finding.message
