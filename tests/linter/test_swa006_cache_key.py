"""SWA006 beyond its documented examples: scope, key shapes, fixes, prefilter."""

from __future__ import annotations

from pathlib import Path

import pytest

from swacheck.config import Config, config_from_table
from swacheck.engine.audit import AuditOptions, audit_sources
from swacheck.rules.swa006_storage_pointer_cache_key import StoragePointerCacheKey

RULE = StoragePointerCacheKey


def _audit(files: dict[str, str], root: Path, config: Config | None = None, **options: bool):
    result = audit_sources(
        files,
        AuditOptions(rules=[RULE], config=config or Config(), jobs=1, **options),
        root=root,
    )
    assert not result.errors, result.errors
    return result


def _rows(files: dict[str, str], root: Path, **kw) -> list[int]:  # type: ignore[no-untyped-def]
    return [f.start.row for f in _audit(files, root, **kw).findings if f.path == "example.py"]


def test_int_parameter_compared_with_cached_key_is_not_a_tensor_key(tmp_path: Path) -> None:
    code = """
class Pool:
    def translate_loc_from_full_to_swa(self, kv_indices, layer_id: int):
        if layer_id == self._cached_layer_key:
            return self._cached_swa_loc
        return self.full_to_swa_index_mapping[kv_indices]
"""
    assert _rows({"example.py": code}, tmp_path) == []


def test_annotated_tensor_compared_by_equality_is_flagged(tmp_path: Path) -> None:
    code = """
class Pool:
    def translate_loc_from_full_to_swa(self, kv_indices: torch.Tensor):
        key = kv_indices
        if key != self._cached_loc_key:
            self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices]
        return self._cached_swa_loc
"""
    assert _rows({"example.py": code}, tmp_path) == [5]


def test_storage_pointer_anywhere_in_a_translate_method(tmp_path: Path) -> None:
    code = """
class Pool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        ptr = kv_indices.untyped_storage().data_ptr()
        return self._memo(ptr, kv_indices)
"""
    assert _rows({"example.py": code}, tmp_path) == [4]


def test_class_without_translation_is_out_of_scope(tmp_path: Path) -> None:
    code = """
class Loader:
    def dedupe(self, tensor):
        key = (tensor.untyped_storage().data_ptr(),)
        if key == self._last_key:
            return
        self._last_key = key
"""
    assert _rows({"example.py": code}, tmp_path) == []


def test_translate_method_inherited_from_another_file(tmp_path: Path) -> None:
    base = """
class BasePool:
    def translate_loc_from_full_to_swa(self, kv_indices):
        raise NotImplementedError
"""
    code = """
from base import BasePool


class Pool(BasePool):
    def _key(self, loc):
        key = (loc.storage().data_ptr(), loc.numel())
        return key
"""
    assert _rows({"example.py": code, "base.py": base}, tmp_path) == [7]


def test_configured_translate_method(tmp_path: Path) -> None:
    code = """
class Pool:
    def to_swa(self, loc):
        key = (loc.untyped_storage().data_ptr(), loc.numel())
        return key
"""
    assert _rows({"example.py": code}, tmp_path) == []
    config = config_from_table({"translate-methods": ["to_swa"]})
    assert _rows({"example.py": code}, tmp_path / "c", config=config) == [4]


def test_one_finding_per_pointer_even_when_reached_twice(tmp_path: Path) -> None:
    code = """
class Pool:
    def translate_loc_from_full_to_swa(self, loc):
        key = (loc.untyped_storage().data_ptr(), loc.numel())
        if key != self._cached_loc_key:
            self._cached_loc_key = key
        return loc
"""
    result = _audit({"example.py": code}, tmp_path)
    assert [f.start.row for f in result.findings] == [4]


def test_storage_key_without_numel_gets_both_findings(tmp_path: Path) -> None:
    code = """
class Pool:
    def translate_loc_from_full_to_swa(self, loc):
        key = loc.untyped_storage().data_ptr()
        if key != self._cached_loc_key:
            self._cached_loc_key = key
        return loc
"""
    result = _audit({"example.py": code}, tmp_path)
    messages = sorted(f.message.split(":")[0] for f in result.findings)
    assert len(messages) == 2
    assert any("numel" in f.message for f in result.findings)
    assert sum(1 for f in result.findings if f.fix) == 1


@pytest.mark.parametrize("example", range(len(RULE.INVALID)))
def test_prefilter_changes_nothing(example: int, tmp_path: Path) -> None:
    case = RULE.INVALID[example]
    files = {"example.py": case.code, **case.files}
    on = _audit(files, tmp_path / "on").findings
    off = _audit(files, tmp_path / "off", prefilter=False).findings
    assert [(f.path, f.start) for f in on] == [(f.path, f.start) for f in off]
