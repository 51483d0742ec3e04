"""SWA010 beyond its documented examples: what is captured, what is a replay path, the prefilter."""

from __future__ import annotations

from pathlib import Path

import pytest

from swacheck.config import Config
from swacheck.engine.audit import AuditOptions, audit_sources
from swacheck.rules.swa010_captured_buffer_rebound import CapturedBufferRebound

RULE = CapturedBufferRebound


def _rows(files: dict[str, str], root: Path, **options: bool) -> list[int]:
    result = audit_sources(
        files, AuditOptions(rules=[RULE], config=Config(), jobs=1, **options), root=root
    )
    assert not result.errors, result.errors
    return [f.start.row for f in result.findings if f.path == "example.py"]


RUNNER = """
import torch


class Runner:
    def __init__(self, n):
        self.cuda_graph_kv_indices = torch.zeros(n, dtype=torch.int32)
        self.plain = torch.zeros(n)

    def {method}(self, forward_batch):
        n = forward_batch.batch_size
{body}
"""


def _runner(method: str, body: str) -> str:
    lines = [f"        {line}" for line in body.strip("\n").split("\n")]
    return RUNNER.format(method=method, body="\n".join(lines))


@pytest.mark.parametrize(
    ("method", "body", "flagged"),
    [
        # any buffer a graph reads, SWA or not, named for the graph
        ("replay_prepare", "self.cuda_graph_kv_indices = forward_batch.kv_indices", True),
        # a class that replays holds graph buffers: whatever it allocates
        ("replay_prepare", "self.plain = forward_batch.kv_indices", True),
        # no tensor: a host list, a number
        ("replay_prepare", "self.cuda_graph_kv_indices = forward_batch.kv_indices.tolist()", False),
        ("replay_prepare", "self.cuda_graph_kv_indices = int(n)", False),
        # views of the captured buffer, None, a lazily allocated one
        ("replay_prepare", "self.cuda_graph_kv_indices = self.cuda_graph_kv_indices[:n]", False),
        ("replay_prepare", "self.cuda_graph_kv_indices = None", False),
        (
            "replay_prepare",
            "if self.cuda_graph_kv_indices is None:\n"
            "    self.cuda_graph_kv_indices = torch.zeros(n)",
            False,
        ),
        # a local bound to a fresh tensor is no view
        (
            "replay_prepare",
            "t = forward_batch.kv_indices.clone()\nself.cuda_graph_kv_indices = t",
            True,
        ),
        # setup, by name, is not a replay path
        ("init_cuda_graph_state", "self.cuda_graph_kv_indices = torch.zeros(n)", False),
        ("capture_one_batch_size", "self.cuda_graph_kv_indices = forward_batch.kv_indices", False),
        # a helper that fills a captured buffer in place runs on the replay path
        (
            "_copy_inputs",
            "self.cuda_graph_kv_indices[:n].copy_(forward_batch.kv_indices)\n"
            "self.cuda_graph_kv_indices = forward_batch.kv_indices",
            True,
        ),
        # a helper that fills nothing captured is not known to be one
        ("_copy_inputs", "self.cuda_graph_kv_indices = forward_batch.kv_indices", False),
    ],
)
def test_replay_paths_and_values(method: str, body: str, flagged: bool, tmp_path: Path) -> None:
    rows = _rows({"example.py": _runner(method, body)}, tmp_path)
    assert bool(rows) is flagged, rows


def test_graph_class_by_its_role_methods(tmp_path: Path) -> None:
    code = """
import torch


class Runner:
    def __init__(self, n):
        self.plain = torch.zeros(n)

    def capture(self):
        pass

    def replay(self, forward_batch):
        self.plain = forward_batch.kv_indices
"""
    assert _rows({"example.py": code}, tmp_path) == [13]


def test_captured_buffer_of_a_base_class_in_another_file(tmp_path: Path) -> None:
    base = """
import torch


class BaseBackend:
    def init_cuda_graph_state(self, max_num_tokens):
        self.swa_loc_buf = torch.zeros(max_num_tokens, dtype=torch.int64)
"""
    sub = """
from base import BaseBackend


class Backend(BaseBackend):
    def init_forward_metadata_replay_cuda_graph(self, forward_batch):
        self.swa_loc_buf = self.pool.translate_loc_from_full_to_swa(forward_batch.out_cache_loc)
"""
    assert _rows({"example.py": sub, "base.py": base}, tmp_path) == [7]


def test_a_field_bound_to_a_view_by_another_class_is_not_captured_here(tmp_path: Path) -> None:
    # `seq_lens` is a graph field of Other only: Backend rebinding a host list is fine.
    code = """
import torch


class Other:
    def init_cuda_graph_state(self, n):
        self.cuda_graph_seq_lens = torch.zeros(n)

    def init_forward_metadata_capture_cuda_graph(self, metadata, bs):
        metadata.seq_lens = self.cuda_graph_seq_lens[:bs]


class Backend:
    def init_cuda_graph_state(self, n):
        self.cuda_graph_lens = torch.zeros(n)

    def init_forward_metadata_replay_cuda_graph(self, bs, seq_lens):
        metadata = self.graph_metadata[bs]
        metadata.seq_lens = seq_lens.tolist()
"""
    assert _rows({"example.py": code}, tmp_path) == []
    # the same in Other is a rebinding of its graph field
    rebinding = code + (
        "\n    def init_forward_metadata_replay_cuda_graph(self, bs, seq_lens):\n"
        "        metadata = self.graph_metadata[bs]\n"
        "        metadata.seq_lens = seq_lens + 1\n"
    )
    rebinding = rebinding.replace("class Backend:", "class Backend(Other):")
    assert _rows({"example.py": rebinding}, tmp_path / "b") == [23]


def test_noqa_suppresses(tmp_path: Path) -> None:
    code = _runner("replay_prepare", "self.cuda_graph_kv_indices = t  # noqa: SWA010")
    assert _rows({"example.py": code}, tmp_path) == []


@pytest.mark.parametrize("example", range(len(RULE.INVALID)))
def test_prefilter_changes_nothing(example: int, tmp_path: Path) -> None:
    case = RULE.INVALID[example]
    files = {"example.py": case.code, **case.files}
    on = _rows(files, tmp_path / "on")
    off = _rows(files, tmp_path / "off", prefilter=False)
    assert on == off and on
