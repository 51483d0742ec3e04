"""Every rule's documented examples are tests: each INVALID flagged at its line, each VALID clean.

Examples run through the real engine (discovery, prefilter, two passes, noqa, fixes) on
files written to a temporary folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swacheck.config import config_from_table
from swacheck.engine.audit import AuditOptions, audit_sources
from swacheck.rule import Example, Invalid, Rule
from swacheck.rules import all_rules

CASES = [
    pytest.param(rule, example, id=f"{rule.code}-{kind}-{i}")
    for rule in all_rules()
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i, example in enumerate(examples)
]


def _audit(rule: type[Rule], example: Example, root: Path, **options: bool):
    config = config_from_table(dict(example.config))
    files = {"example.py": example.code, **example.files}
    return audit_sources(
        files, AuditOptions(rules=[rule], config=config, jobs=1, **options), root=root
    )


def test_every_rule_documents_examples() -> None:
    for rule in all_rules():
        assert rule.VALID and rule.INVALID, f"{rule.code} needs VALID and INVALID examples"
        assert rule.__doc__ and "## What it does" in rule.__doc__, rule.code
        assert "## Why is this bad?" in rule.__doc__, rule.code


@pytest.mark.parametrize(("rule", "example"), CASES)
def test_example(rule: type[Rule], example: Example, tmp_path: Path) -> None:
    result = _audit(rule, example, tmp_path)
    assert not result.errors, result.errors
    mine = [f for f in result.findings if f.path == "example.py" and f.code == rule.code]
    if not isinstance(example, Invalid):
        assert mine == [], f"false positive: {[(f.start.row, f.message) for f in mine]}"
        return
    rows = [f.start.row for f in mine]
    assert example.line in rows, f"expected a finding on line {example.line}, got {rows}"
    if example.fixed is not None:
        fixed_root = tmp_path / "fixed"
        fixed_root.mkdir()
        after = _audit(rule, example, fixed_root, fix=True, unsafe_fixes=True)
        assert not after.errors, after.errors
        assert (fixed_root / "example.py").read_text() == example.fixed
        again = _audit(rule, Invalid(example.fixed, example.config, example.files), fixed_root)
        assert not [f for f in again.findings if f.fix and f.path == "example.py"]
