"""The order rules' scope and SWA008 on SGLang's real source, from the release wheels.

The files are the releases' own (downloaded at test time, never committed); a bug is
re-injected into a copy of the text where a test says so. The order rules must stay
silent on 0.5.12.post1, whose only invalidation method resets DeepSeek-V4's
``cached_loc``, an attribute refilled at every forward's first layer (no cache); the
same file with the refill on the cache's own state only keeps its entries between
forwards, and then the allocator's mapping writes are seen by it. SWA008 finds the
#24138 side channel when the model runner stores the batch's SWA locations on the pool
by direct assignment instead of through ``set_swa_loc``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sglang_wheels import PyPIUnreachable, extracted

from swacheck.config import Config
from swacheck.engine.audit import AuditOptions, audit_sources
from swacheck.rules import rule_by_code

ORDER = [rule_by_code(code) for code in ("SWA001", "SWA004", "SWA005", "SWA007")]
DSV4 = "srt/mem_cache/deepseek_v4_memory_pool.py"
SWA_POOL = "srt/mem_cache/swa_memory_pool.py"
BASE_POOL = "srt/mem_cache/base_swa_memory_pool.py"
RUNNER = "srt/model_executor/model_runner.py"
REFRESH = "if layer_id == self.start_layer or self.cached_loc is None:"


def _release(version: str) -> Path:
    try:
        return extracted(version) / "sglang"
    except PyPIUnreachable as exc:
        pytest.skip(f"PyPI cannot be reached, so sglang=={version} cannot be audited: {exc}")


def _audit(files: dict[str, str], rules: list, root: Path):  # type: ignore[no-untyped-def]
    result = audit_sources(files, AuditOptions(rules=rules, config=Config(), jobs=1), root=root)
    assert not result.errors, result.errors
    return result


def test_a_refresh_on_the_callers_schedule_is_no_cache(tmp_path: Path) -> None:
    package = _release("0.5.12.post1")
    files = {path: (package / path).read_text() for path in (DSV4, SWA_POOL, BASE_POOL)}
    assert files[DSV4].count(REFRESH) == 2
    result = _audit(files, [r for r in ORDER if r is not None], tmp_path / "as-released")
    assert result.findings == []
    assert "no translation cache" in result.inactive["SWA001"]

    # Refilled only when empty, the attribute keeps a translation across forwards: a
    # cache, which the allocator's mapping writes (its table is registered with the
    # pool) leave stale where they do not invalidate.
    kept = dict(files)
    kept[DSV4] = files[DSV4].replace(REFRESH, "if self.cached_loc is None:")
    result = _audit(kept, [r for r in ORDER if r is not None], tmp_path / "kept")
    writes = {
        (f.path, f.start.row) for f in result.findings if f.code == "SWA001" and f.path == SWA_POOL
    }
    lines = files[SWA_POOL].splitlines()
    assert writes and all("full_to_swa_index_mapping" in lines[row - 1] for _, row in writes)


def test_direct_assignment_of_the_batch_locations_to_the_pool(tmp_path: Path) -> None:
    package = _release("0.5.11")
    pool = (package / SWA_POOL).read_text()
    runner = (package / RUNNER).read_text()
    call = "self.token_to_kv_pool.set_swa_loc(forward_batch.out_cache_loc_swa)"
    assert runner.count(call) == 1
    rules = [rule_by_code("SWA008")]
    # As released: the setter is the finding (the #24138 review's concern).
    released = _audit({SWA_POOL: pool, RUNNER: runner}, rules, tmp_path / "released")
    assert [(f.path, f.code) for f in released.findings] == [(SWA_POOL, "SWA008")]
    # The setter gone, the runner stores the batch's locations on the pool itself.
    setter = "    def set_swa_loc(self, loc: torch.Tensor):\n        self.swa_loc = loc\n"
    assert pool.count(setter) == 1
    direct = runner.replace(call, "self.token_to_kv_pool.swa_loc = forward_batch.out_cache_loc_swa")
    files = {SWA_POOL: pool.replace(setter, ""), RUNNER: direct}
    result = _audit(files, rules, tmp_path / "direct")
    [finding] = result.findings
    row = direct.splitlines()[finding.start.row - 1]
    assert finding.path == RUNNER and "self.token_to_kv_pool.swa_loc =" in row
    assert any(SWA_POOL in note for note in finding.notes)
