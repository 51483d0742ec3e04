"""Progress of a long audit: the engine's ``(done, total)`` hook and the command's line on a
terminal (a real pseudo-terminal: the command decides by ``isatty``)."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from swacheck.catalogue import catalogue
from swacheck.config import Config
from swacheck.engine.workspace import Workspace
from swacheck.report.progress import ProgressLine

POOL = """\
import torch


class SWAPool:
    def __init__(self, n):
        self.out_cache_loc_swa = torch.zeros(n, dtype=torch.int64)

    def set_swa_loc(self, loc):
        self.swa_loc = loc

    def read(self):
        return self.swa_loc
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    for number in range(6):
        (tmp_path / f"pool_{number}.py").write_text(POOL)
    (tmp_path / "plain.py").write_text("x = 1\n")
    return tmp_path


def test_the_hook_counts_every_file_up_to_the_total(project: Path) -> None:
    seen: list[tuple[int, int]] = []
    workspace = Workspace.for_paths([project], Config(), catalogue(Config()), cache=False)
    result = workspace.audit([project], progress=lambda done, total: seen.append((done, total)))
    assert result.findings
    # Six candidate files: facts for each, then a check of each.
    assert seen[0] == (0, 12) and seen[-1] == (12, 12)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    # Nothing to parse, nothing told: a warm call is silent.
    seen.clear()
    workspace.audit([project], progress=lambda done, total: seen.append((done, total)))
    assert seen == []


def test_the_line_is_throttled_and_erased() -> None:
    now = [0.0]
    out = io.StringIO()
    line = ProgressLine(out, clock=lambda: now[0])
    line(0, 100)
    now[0] = 0.05
    line(1, 100)  # too soon after the last: not drawn
    now[0] = 1.25
    line(50, 100)
    line(100, 100)  # the last one always is
    line.close()
    drawn = out.getvalue().split("\r\x1b[2K")
    assert drawn == ["", "swacheck: 0/100 files, 0.0 s", "swacheck: 50/100 files, 1.2 s",
                     "swacheck: 100/100 files, 1.2 s", ""]  # fmt: skip


def _run_on_a_terminal(project: Path, *args: str) -> tuple[str, str]:
    """``swacheck audit`` with stderr on a pseudo-terminal: (stdout, what the terminal got)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "swacheck", "audit", ".", "--no-cache", *args],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
    )
    os.close(follower)
    received = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the command ended and closed its end
            break
        if not chunk:
            break
        received += chunk
    stdout, _ = proc.communicate(timeout=120)
    os.close(leader)
    return stdout, received.decode()


def test_a_terminal_sees_the_progress_line_and_then_the_report(project: Path) -> None:
    stdout, terminal = _run_on_a_terminal(project)
    assert "swacheck: 12/12 files" in terminal
    assert terminal.endswith("\r\x1b[2K")  # erased before the report
    assert "SWA008" in stdout and "swacheck:" not in stdout


@pytest.mark.parametrize("args", [("-q",), ("-s",), ("--output-format", "json")])
def test_no_line_when_quiet_or_for_a_machine(project: Path, args: tuple[str, ...]) -> None:
    _, terminal = _run_on_a_terminal(project, *args)
    assert "files," not in terminal


def test_no_line_when_stderr_is_not_a_terminal(project: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "swacheck", "audit", ".", "--no-cache"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "SWA008" in proc.stdout and "files," not in proc.stderr
