"""SWA003 and SWA010 on SGLang's real source: the shipped bug and its fix, the current
backends clean, and the bugs re-injected into copies of them caught.

The wheels are downloaded at test time (``sglang_wheels``); nothing is imported, the files
are read as the linter reads them. The re-injected bugs are textual edits of a temporary
copy: the padded-tail reset of a backend's replay path deleted (the padding fix's AIME
regression in the 0.5.13+ design), and a captured buffer rebound instead of refilled.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sglang_wheels import PyPIUnreachable, extracted

from swacheck.config import Config
from swacheck.engine.audit import AuditOptions, audit_paths
from swacheck.rules.swa003_swa_padded_tail_not_reset import SwaPaddedTailNotReset
from swacheck.rules.swa010_captured_buffer_rebound import CapturedBufferRebound

RULES = [SwaPaddedTailNotReset, CapturedBufferRebound]
ATTENTION = "srt/layers/attention"


def _package(version: str) -> Path:
    try:
        return extracted(version) / "sglang"
    except PyPIUnreachable as exc:
        pytest.skip(f"PyPI cannot be reached, so sglang=={version} cannot be read: {exc}")


def _findings(folder: Path) -> list[tuple[str, str, int]]:
    result = audit_paths([folder], AuditOptions(rules=RULES, config=Config(), jobs=1))
    assert not result.errors, result.errors
    return sorted((f.code, Path(f.path).name, f.start.row) for f in result.findings)


@pytest.mark.parametrize(("version", "expected"), [("0.5.11", [289]), ("0.5.12", [])])
def test_the_shipped_padding_bug_and_its_fix(version: str, expected: list[int]) -> None:
    runner = _package(version) / "srt/model_executor"
    found = _findings(runner)
    assert found == [("SWA003", "cuda_graph_runner.py", row) for row in expected]


def _copy(version: str, tmp_path: Path, *names: str) -> Path:
    source = _package(version) / ATTENTION
    target = tmp_path / version
    target.mkdir()
    for name in names:
        shutil.copy(source / name, target / name)
    return target


BACKENDS = ("trtllm_mha_backend.py", "flashattention_backend.py", "triton_backend.py")


def test_current_backends_are_clean(tmp_path: Path) -> None:
    assert _findings(_copy("0.5.23", tmp_path, *BACKENDS)) == []


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, f"{path.name} no longer holds {old!r}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_a_deleted_tail_reset_is_caught_in_every_backend(tmp_path: Path) -> None:
    folder = _copy("0.5.23", tmp_path, *BACKENDS)
    for name in BACKENDS:
        _edit(folder / name, "self.cuda_graph_swa_out_cache_loc[n:].zero_()\n", "pass\n")
    found = _findings(folder)
    assert {name for code, name, _ in found if code == "SWA003"} == set(BACKENDS)
    assert all(code == "SWA003" for code, _, _ in found)


def test_a_rebound_graph_buffer_is_caught(tmp_path: Path) -> None:
    folder = _copy("0.5.23", tmp_path, "trtllm_mha_backend.py")
    # the write locations handed over as a fresh tensor instead of copied in place
    _edit(
        folder / "trtllm_mha_backend.py",
        "self.cuda_graph_swa_out_cache_loc[:n].copy_(",
        "self.cuda_graph_swa_out_cache_loc = (",
    )
    found = _findings(folder)
    assert found and {code for code, _, _ in found} == {"SWA010"}
