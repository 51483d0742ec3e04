"""Puts the LSP kit (lspkit.py, also used by benchmarks/bench_lsp.py) and the
SGLang-like project on the path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
