"""Puts the shared kit (fuzzkit.py, also used by benchmarks/fuzz_linter.py) on the path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fuzzkit import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``swacheck`` run in the test's temporary folder."""
    return Cli(tmp_path)
