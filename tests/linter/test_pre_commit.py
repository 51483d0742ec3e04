"""The repository works as a pre-commit hook source (``.pre-commit-hooks.yaml``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.slow
def test_pre_commit_runs_the_hook(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    pre_commit = [sys.executable, "-m", "pre_commit"]
    if subprocess.run([*pre_commit, "--version"], capture_output=True).returncode != 0:
        pytest.skip("pre-commit not installed")
    # A snapshot of this repo as the hook source (pre-commit needs a committed revision).
    source = tmp_path / "hook-source"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", ".*_cache", "build"),
    )
    _git(source, "init", "-q")
    _git(source, "add", "-A")
    _git(source, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshot")
    rev = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, check=True
    ).stdout.strip()

    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {source}\n  rev: {rev}\n  hooks:\n  - id: swacheck\n"
    )
    (project / "bufs.py").write_text(
        "import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n"
    )
    (project / "clean.py").write_text("x = 1\n")
    _git(project, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pc-home")}
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    run = subprocess.run(
        [*pre_commit, "run", "--all-files"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "bufs.py:2:" in run.stdout and "SWA002" in run.stdout

    (project / "bufs.py").write_text(
        "import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int32)\n"
    )
    _git(project, "add", "-A")
    ok = subprocess.run(
        [*pre_commit, "run", "--all-files"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
