"""Progress of a long audit: the engine's ``(done, total)`` hook, the command's line on a
terminal (a real pseudo-terminal: the command decides by ``isatty``), and the one line
saying that a long indexing is under way, for stderr captured by pre-commit or CI."""

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
from swacheck.report import progress
from swacheck.report.progress import IndexingNote, ProgressLine

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
    indexed: list[int] = []
    workspace = Workspace.for_paths([project], Config(), catalogue(Config()), cache=False)
    result = workspace.audit(
        [project],
        progress=lambda done, total: seen.append((done, total)),
        indexing=indexed.append,
    )
    assert result.findings
    # Six candidate files: facts for each (told first, as the files to index), then a
    # check of each.
    assert indexed == [6]
    assert seen[0] == (0, 12) and seen[-1] == (12, 12)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    # Nothing to parse, nothing told: a warm call is silent.
    seen.clear()
    indexed.clear()
    workspace.audit(
        [project],
        progress=lambda done, total: seen.append((done, total)),
        indexing=indexed.append,
    )
    assert seen == [] and indexed == []


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


# -- the indexing note ------------------------------------------------------------------

INT64_SWA = "import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n"


def _note(files: int, workers: int, load: float, cores: int = 2) -> str:
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(progress.os, "getloadavg", lambda: (load, load, load))
        patch.setattr(progress.os, "cpu_count", lambda: cores)
        IndexingNote(out, workers, cached=True)(files)
    return out.getvalue()


def test_the_note_is_for_long_work_only() -> None:
    # 0.085 CPU s a file: 100 files on 2 idle workers is 4.3 s, not worth a line.
    assert _note(100, 2, load=0.0) == ""
    assert _note(200, 2, load=0.0) == (
        "swacheck: indexing the project (200 files), roughly 10 s on 2 workers "
        "(once: later runs read only the files that changed)\n"
    )
    assert "roughly 10 s on 1 worker (" in _note(100, 1, load=0.0)
    # A machine busy with other work (load 18 on 2 cores) takes longer, and says why.
    assert _note(300, 2, load=18.0).startswith(
        "swacheck: indexing the project (300 files), roughly 2 min on 2 workers of a busy machine"
    )


@pytest.fixture
def many(tmp_path: Path) -> Path:
    """A repository of 70 files with an SWA finding each: indexing it one file at a time
    (``--jobs 1``) is estimated well over the note's threshold, however fast it goes."""
    (tmp_path / ".git").mkdir()
    for number in range(70):
        (tmp_path / f"bufs_{number}.py").write_text(INT64_SWA)
    return tmp_path


def _audit(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "swacheck", "audit", "--jobs", "1", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_first_call_says_it_indexes_once_up_front(many: Path) -> None:
    # As a pre-commit call: one file given, the project read for its context.
    first = _audit(many, "bufs_0.py")
    assert first.returncode == 1, first.stderr
    assert first.stderr.startswith("swacheck: indexing the project (70 files), roughly ")
    assert first.stderr.count("indexing") == 1
    assert "(once: later runs read only the files that changed)" in first.stderr
    # Nothing left to index: nothing said, on another file or the whole tree (whose
    # findings are still to be found, but from the facts at hand).
    assert "indexing" not in _audit(many, "bufs_1.py").stderr
    assert "indexing" not in _audit(many, ".").stderr


@pytest.mark.parametrize("args", [("-q",), ("-s",), ("-", "--stdin-filename", "bufs_0.py")])
def test_no_note_when_quiet_or_for_an_editor(many: Path, args: tuple[str, ...]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "swacheck", "audit", "--jobs", "1", *args],
        cwd=many,
        input=INT64_SWA,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "indexing" not in proc.stderr


def test_without_the_cache_the_note_says_every_run(many: Path) -> None:
    proc = _audit(many, "--no-cache", "bufs_0.py")
    assert "(on every run with --no-cache)" in proc.stderr.splitlines()[0]


def test_no_note_where_little_needs_indexing(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "bufs.py").write_text(INT64_SWA)
    proc = _audit(tmp_path, "bufs.py")
    assert proc.returncode == 1 and "indexing" not in proc.stderr
