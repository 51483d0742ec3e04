"""Crash-freedom on a large body of real code: this machine's Python standard library.

The whole corpus of engine releases is ``benchmarks/corpus.py``; the standard library
is at hand everywhere and varied enough (every syntax form the running Python
accepts, generated code, test fixtures that do not parse) to run in CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def _compiles(path: Path) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def test_the_standard_library_audits_without_an_internal_error(tmp_path: Path) -> None:
    config = tmp_path / "swacheck.toml"
    # A pyenv or distribution Python may live inside a repository that git-ignores it.
    config.write_text("[tool.swacheck]\nrespect-gitignore = false\n")
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "swacheck", "audit", str(STDLIB)),
            *("--config", str(config), "--no-cache", "--jobs", "0"),
            *("--output-format", "json", "--exit-zero"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    findings = json.loads(proc.stdout)
    # SWA999 only for files the running Python itself rejects.
    unparsable = {f["filename"] for f in findings if f["code"] == "SWA999"}
    assert all(not _compiles(Path(name)) for name in unparsable), unparsable
    assert sum(1 for _ in STDLIB.rglob("*.py")) > 500
