"""Helpers for running the real ``swacheck`` command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

# The lines these tests read are ``concise``'s (``path:line:col: CODE``); the default
# format, ``full``, and every other one are tested in test_cli_formats.py.
CONCISE = {"SWACHECK_OUTPUT_FORMAT": "concise"}


class Swacheck:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(
        self, *args: str, check_rc: int | None = None, python: Sequence[str] = ()
    ) -> subprocess.CompletedProcess[str]:
        """Run ``swacheck *args``; ``python`` holds interpreter options (``-X importtime``)."""
        proc = subprocess.run(
            [sys.executable, *python, "-m", "swacheck", *args],
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **CONCISE},
        )
        if check_rc is not None:
            assert proc.returncode == check_rc, (proc.returncode, proc.stdout, proc.stderr)
        return proc


@pytest.fixture
def swacheck(tmp_path: Path) -> Swacheck:
    """``swacheck`` run in the test's temporary folder."""
    return Swacheck(tmp_path)


@pytest.fixture
def swacheck_at() -> type[Swacheck]:
    """``swacheck_at(folder)``: the command run in another folder."""
    return Swacheck
