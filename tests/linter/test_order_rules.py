"""The order rules (SWA001/004/005/007) together: prefilter soundness and scope."""

from __future__ import annotations

from pathlib import Path

import pytest

from swacheck.config import config_from_table
from swacheck.engine.audit import AuditOptions, audit_sources
from swacheck.rules import rule_by_code

ORDER = [rule_by_code(code) for code in ("SWA001", "SWA004", "SWA005", "SWA007")]
# A memoising translate: the translation cache the order rules are about.
MEMO = (
    "    def translate_loc_from_full_to_swa(self, loc):\n"
    "        if self._key is None:\n"
    "            self._key = self.full_to_swa_index_mapping[loc]\n"
    "        return self._key\n"
)
EXAMPLES = [
    pytest.param(rule, example, id=f"{rule.code}-{i}")
    for rule in ORDER
    if rule is not None
    for i, example in enumerate([*rule.VALID, *rule.INVALID])
]


def _findings(example, rules, root: Path, prefilter: bool):  # type: ignore[no-untyped-def]
    config = config_from_table(dict(example.config))
    files = {"example.py": example.code, **example.files}
    result = audit_sources(
        files,
        AuditOptions(rules=rules, config=config, jobs=1, prefilter=prefilter),
        root=root,
    )
    assert not result.errors, result.errors
    return sorted((f.path, f.start.row, f.code, f.message) for f in result.findings)


@pytest.mark.parametrize(("rule", "example"), EXAMPLES)
def test_prefilter_is_sound(rule, example, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rules = [r for r in ORDER if r is not None]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # unrelated files the prefilter may skip must not change anything
    example_files = dict(example.files)
    example_files["unrelated.py"] = "class Runner:\n    def forward(self):\n        return 1\n"
    patched = type(example)(example.code, example.config, example_files)
    with_filter = _findings(patched, rules, tmp_path / "a", prefilter=True)
    without = _findings(patched, rules, tmp_path / "b", prefilter=False)
    assert with_filter == without


def test_inactive_without_invalidation_method(tmp_path: Path) -> None:
    rules = [r for r in ORDER if r is not None]
    source = "class P:\n    def free(self, i):\n        self.full_to_swa_index_mapping[i] = 0\n"
    result = audit_sources(
        {"p.py": source}, AuditOptions(rules=rules, config=config_from_table({})), root=tmp_path
    )
    assert result.findings == []
    assert set(result.inactive) == {"SWA001", "SWA004", "SWA005", "SWA007"}


def test_inactive_without_a_translation_cache(tmp_path: Path) -> None:
    # An invalidation method is defined, but nothing caches a translation: the pool
    # translates with a plain gather and its attribute is refilled at every forward's
    # first layer (a refresh on the caller's schedule, not a cache).
    rules = [r for r in ORDER if r is not None]
    source = (
        "class Pool:\n"
        "    def invalidate_loc_cache(self):\n"
        "        self.cached_loc = None\n"
        "    def translate_loc_from_full_to_swa(self, loc):\n"
        "        return self.full_to_swa_index_mapping[loc]\n"
        "    def write(self, layer_id, loc):\n"
        "        if layer_id == self.start_layer or self.cached_loc is None:\n"
        "            self.cached_loc = self.translate_loc_from_full_to_swa(loc)\n"
        "        return self.cached_loc\n"
        "    def free(self, i):\n"
        "        self.full_to_swa_index_mapping[i] = 0\n"
    )
    options = AuditOptions(rules=rules, config=config_from_table({}))
    result = audit_sources({"p.py": source}, options, root=tmp_path / "a")
    assert result.findings == []
    assert set(result.inactive) == {"SWA001", "SWA004", "SWA005", "SWA007"}
    assert "no translation cache" in result.inactive["SWA001"]
    assert "no memoising translate_loc_from_full_to_swa" in result.inactive["SWA007"]
    # Filled only when empty, the same attribute is a cache: SWA001 applies (SWA007
    # still does not: a translation call elsewhere neither fills nor is served from it).
    cached = source.replace("layer_id == self.start_layer or ", "")
    result = audit_sources({"p.py": cached}, options, root=tmp_path / "b")
    assert [(f.code, f.start.row) for f in result.findings] == [("SWA001", 11)]
    assert set(result.inactive) == {"SWA007"}


def test_parallel_audit_matches_serial(tmp_path: Path) -> None:
    rule = rule_by_code("SWA001")
    assert rule is not None
    files = {
        f"m{i}.py": (
            "class P:\n"
            "    def invalidate_loc_cache(self):\n        pass\n"
            f"    def free{i}(self, j):\n        self.full_to_swa_index_mapping[j] = 0\n" + MEMO
        )
        for i in range(30)
    }
    serial = audit_sources(
        files, AuditOptions(rules=[rule], config=config_from_table({}), jobs=1), root=tmp_path / "s"
    )
    parallel = audit_sources(
        files, AuditOptions(rules=[rule], config=config_from_table({}), jobs=2), root=tmp_path / "p"
    )
    assert not parallel.errors
    assert len(serial.findings) == 30
    assert [(f.path, f.start) for f in serial.findings] == [
        (f.path, f.start) for f in parallel.findings
    ]


def _swa001(files: dict[str, str], root: Path) -> list[tuple[str, int]]:
    rule = rule_by_code("SWA001")
    assert rule is not None
    result = audit_sources(
        files, AuditOptions(rules=[rule], config=config_from_table({}), jobs=1), root=root
    )
    assert not result.errors, result.errors
    return sorted((f.path, f.start.row) for f in result.findings)


def test_delegation_chain_is_reported_once_at_the_top(tmp_path: Path) -> None:
    # Two private helpers pass the write up; only the public caller that does not
    # invalidate is reported (not every link of the chain).
    source = (
        "class Pool:\n"
        "    def invalidate_loc_cache(self):\n"
        "        self._key = None\n"
        "\n"
        "    def _write_rows(self, idx):\n"
        "        self.full_to_swa_index_mapping[idx] = 0\n"
        "\n"
        "    def _apply(self, idx):\n"
        "        self._write_rows(idx)\n"
        "\n"
        "    def update(self, idx):\n"
        "        self._apply(idx)\n"
        "\n" + MEMO
    )
    assert _swa001({"pool.py": source}, tmp_path) == [("pool.py", 12)]


def test_start_up_wiring_in_a_private_helper_is_not_passed_up(tmp_path: Path) -> None:
    # The helper builds the pool and shares a mapping with it before anything runs:
    # an initialisation, so neither the helper nor its caller is reported.
    source = (
        "class SWAKVPool:\n"
        "    def invalidate_loc_cache(self):\n"
        "        self._key = None\n"
        "\n" + MEMO + "\n"
        "class Runner:\n"
        "    def _init_pools(self, size, allocator):\n"
        "        if size > 8:\n"
        "            self.kv_pool = SWAKVPool(size)\n"
        "        else:\n"
        "            self.kv_pool = SWAKVPool(8)\n"
        "        self.kv_pool.full_to_swa_index_mapping = allocator.full_to_swa_index_mapping\n"
        "\n"
        "    def init_memory(self, size, allocator):\n"
        "        self._init_pools(size, allocator)\n"
        "\n"
        "    def rewire(self, allocator):\n"
        "        self.kv_pool.full_to_swa_index_mapping = allocator.full_to_swa_index_mapping\n"
    )
    # Only the rewiring of an existing pool is a write to cover.
    assert _swa001({"runner.py": source}, tmp_path) == [("runner.py", 22)]


def test_start_up_wiring_behind_a_mode_guard(tmp_path: Path) -> None:
    # The non-SWA branch (pruned: SWA mode is assumed) builds no pool of a known class;
    # it must not hide that every path that runs in SWA mode built the pool.
    source = (
        "class SWAKVPool:\n"
        "    def invalidate_loc_cache(self):\n"
        "        self._key = None\n"
        "\n" + MEMO + "\n"
        "class Runner:\n"
        "    def _init_pools(self, size, allocator, pool_cls):\n"
        "        if self.is_hybrid_swa:\n"
        "            self.kv_pool = SWAKVPool(size)\n"
        "        else:\n"
        "            self.kv_pool = pool_cls(size)\n"
        "        self.kv_pool.full_to_swa_index_mapping = allocator.full_to_swa_index_mapping\n"
        "\n"
        "    def init_memory(self, size, allocator):\n"
        "        self._init_pools(size, allocator, None)\n"
    )
    assert _swa001({"runner.py": source}, tmp_path) == []


RUNNER_WITHOUT_SWA_WORDS = (
    "import torch\n"
    "from model_runner import ModelRunner\n"
    "\n"
    "class PlainGraphRunner:\n"
    "    def __init__(self, model_runner: ModelRunner):\n"
    "        self.model_runner = model_runner\n"
    "\n"
    "    def _reset(self):\n"
    "        self.model_runner.reset_state()\n"
    "\n"
    "    def capture(self, batch):\n"
    "        def run_once():\n"
    "            self._reset()\n"
    "            return self.model_runner.model.forward(batch)\n"
    "\n"
    "        for _ in range(2):\n"
    "            run_once()\n"
    "        with torch.cuda.graph(self.graph):\n"
    "            run_once()\n"
)
MODEL_RUNNER = (
    "class ModelRunner:\n"
    "    def reset_state(self):\n"
    "        self.token_to_kv_pool.invalidate_loc_cache()\n"
)
POOL = "class SWAKVPool:\n    def invalidate_loc_cache(self):\n        self._key = None\n\n" + MEMO


@pytest.mark.parametrize("prefilter", [True, False])
def test_capture_runner_without_swa_words(tmp_path: Path, prefilter: bool) -> None:
    # The runner names neither SWA nor a configured name: it is SWA code through the
    # model runner it holds, and its own helper (a function of a file the first pass
    # builds no skeletons for) invalidates through that model runner.
    rule = rule_by_code("SWA004")
    assert rule is not None
    options = AuditOptions(rules=[rule], config=config_from_table({}), prefilter=prefilter)
    files = {
        "runner.py": RUNNER_WITHOUT_SWA_WORDS,
        "model_runner.py": MODEL_RUNNER,
        "pool.py": POOL,
    }
    result = audit_sources(files, options, root=tmp_path / "a")
    assert not result.errors and result.findings == []
    files["runner.py"] = RUNNER_WITHOUT_SWA_WORDS.replace("            self._reset()\n", "")
    result = audit_sources(files, options, root=tmp_path / "b")
    assert [(f.path, f.start.row) for f in result.findings] == [("runner.py", 13)]
