"""swacheck under real pre-commit: the README's snippet, the repository as a hook source
(``.pre-commit-hooks.yaml``), and the same findings per file for ``--files`` as for
``--all-files`` (issue 17: a partial file list must not lose cross-file findings)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
FINDING = re.compile(r"^(?P<path>\S+\.py):(?P<row>\d+):(?P<col>\d+): (?P<code>SWA\d+)", re.M)
PRE_COMMIT = [sys.executable, "-m", "pre_commit"]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _readme_snippet() -> str:
    """The YAML block after ``<!-- pre-commit-config -->`` in README.md, verbatim."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    after = text.split("<!-- pre-commit-config -->\n", 1)[1]
    match = re.match(r"```yaml\n(.*?)```\n", after, re.S)
    assert match, "README.md has no YAML block after <!-- pre-commit-config -->"
    return match.group(1)


def _pre_commit(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # This interpreter's folder first: the `swacheck` a `language: system` hook runs.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PATH": path}
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    return subprocess.run(
        [*PRE_COMMIT, "run", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _findings(output: str) -> list[tuple[str, int, int, str]]:
    return sorted(
        (m["path"], int(m["row"]), int(m["col"]), m["code"]) for m in FINDING.finditer(output)
    )


@pytest.fixture
def tools() -> None:
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    if subprocess.run([*PRE_COMMIT, "--version"], capture_output=True).returncode != 0:
        pytest.skip("pre-commit not installed")


@pytest.fixture
def project(tmp_path: Path, tools: None) -> Path:
    """The examples as a git repository using the README's pre-commit snippet."""
    root = tmp_path / "project"
    shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    (root / ".pre-commit-config.yaml").write_text(_readme_snippet())
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "examples")
    return root


def test_the_same_edit_gives_the_same_findings_through_files_and_all_files(
    project: Path, tmp_path: Path
) -> None:
    # The edit: two new lines at the top of each file, so every finding moves down.
    edited = ["model_runner.py", "cuda_graph_runner.py"]
    for name in edited:
        path = project / name
        path.write_text("# Edited.\n# Twice.\n" + path.read_text())
    _git(project, "add", "-A")
    home = tmp_path / "pc-home"

    partial = _pre_commit(project, home, "--files", *edited)
    whole = _pre_commit(project, home, "--all-files")
    assert partial.returncode == whole.returncode == 1, partial.stdout + whole.stdout
    in_edited = [f for f in _findings(whole.stdout) if f[0] in edited]
    assert _findings(partial.stdout) == in_edited
    codes = {f[3] for f in in_edited}
    # The cross-file findings, which a project-less audit of the two files loses.
    assert {"SWA004", "SWA005"} <= codes
    assert ("model_runner.py", 15, 20, "SWA005") in in_edited  # line 13 before the edit
    # And all the other files' findings came only with --all-files.
    assert {f[0] for f in _findings(whole.stdout)} > set(edited)


def test_the_readme_snippet_passes_a_clean_tree_and_skips_excluded_files(
    project: Path, tmp_path: Path
) -> None:
    for path in project.glob("*.py"):
        path.unlink()
    (project / "clean.py").write_text("swa_loc = torch.zeros(4, dtype=torch.int32)\n")
    vendored = project / "third_party" / "bufs.py"
    vendored.parent.mkdir()
    vendored.write_text("out_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n")
    (project / "pyproject.toml").write_text("[tool.swacheck]\nextend-exclude = ['third_party']\n")
    _git(project, "add", "-A")
    home = tmp_path / "pc-home"
    proc = _pre_commit(project, home, "--all-files")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "swacheck" in proc.stdout and "Passed" in proc.stdout


@pytest.mark.slow
def test_the_repository_is_a_hook_source(tmp_path: Path, tools: None) -> None:
    """``.pre-commit-hooks.yaml``: pre-commit installs swacheck from a revision of this
    repository into an environment of its own."""
    source = tmp_path / "hook-source"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__", ".*_cache", "build"),
    )
    _git(source, "init", "-q")
    _git(source, "add", "-A")
    _git(source, "commit", "-qm", "snapshot")
    rev = _git(source, "rev-parse", "HEAD").strip()

    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {source}\n  rev: {rev}\n  hooks:\n  - id: swacheck\n"
    )
    bufs = project / "bufs.py"
    bufs.write_text("import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n")
    (project / "clean.py").write_text("x = 1\n")
    _git(project, "add", "-A")
    home = tmp_path / "pc-home"
    run = _pre_commit(project, home, "--all-files")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "bufs.py:2:" in run.stdout and "SWA002" in run.stdout

    bufs.write_text("import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int32)\n")
    _git(project, "add", "-A")
    ok = _pre_commit(project, home, "--all-files")
    assert ok.returncode == 0, ok.stdout + ok.stderr
