"""SWA003 beyond its documented examples: padding spellings, owners, fixes, prefilter."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from swacheck.analysis.padding import is_location_name, padding_polarity
from swacheck.config import Config
from swacheck.engine.audit import AuditOptions, audit_sources
from swacheck.rules.swa003_padding_branch_misses_swa_buffer import PaddingBranchMissesSwaBuffer

RULE = PaddingBranchMissesSwaBuffer


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
    assert result.findings == []
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
    assert [f.start.row for f in result.findings] == [16]


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
