"""swacheck under real pre-commit: the README's snippet, the repository as a hook source
(``.pre-commit-hooks.yaml``), the same findings per file for ``--files`` as for
``--all-files`` (issue 17: a partial file list must not lose cross-file findings), and
gradual adoption in an SGLang-like repository (issue 26): a baseline and ``--add-noqa``
let commits through that touch files with old findings, and stop a new one."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
# A finding as the default format (full) shows it: its code, then ` --> path:row:col`.
FINDING = re.compile(
    r"^(?P<code>SWA\d+) .*\n\s*--> (?P<path>\S+\.py):(?P<row>\d+):(?P<col>\d+)$", re.M
)
SGLANG_LIKE = REPO / "tests" / "lsp" / "sglang_like.py"
PRE_COMMIT = [sys.executable, "-m", "pre_commit"]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _readme_snippet(marker: str = "pre-commit-config") -> str:
    """The YAML block after ``<!-- MARKER -->`` in README.md, verbatim."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    after = text.split(f"<!-- {marker} -->\n", 1)[1]
    match = re.match(r"```yaml\n(.*?)```\n", after, re.S)
    assert match, f"README.md has no YAML block after <!-- {marker} -->"
    return match.group(1)


def _env(home: Path) -> dict[str, str]:
    # This interpreter's folder first: the `swacheck` a `language: system` hook runs.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PATH": path}
    for name in ("PIP_REQUIRE_VIRTUALENV", "SWACHECK_OUTPUT_FORMAT", "NO_COLOR", "FORCE_COLOR"):
        env.pop(name, None)
    return env


def _pre_commit(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PRE_COMMIT, "run", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env=_env(home),
        timeout=600,
    )


def _commit(project: Path, home: Path, message: str) -> subprocess.CompletedProcess[str]:
    """``git commit -a`` through the hook ``pre-commit install`` put in place."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", message],
        cwd=project,
        capture_output=True,
        text=True,
        env=_env(home),
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


def test_the_first_hook_call_says_up_front_that_it_indexes(tmp_path: Path, tools: None) -> None:
    """pre-commit shows a hook's output once the hook ends, so a long first call (the
    project indexed for its context) says what it did and roughly how long it takes,
    first and once; a later call, with nothing to index, does not."""
    root = tmp_path / "many"
    root.mkdir()
    for number in range(70):
        (root / f"bufs_{number}.py").write_text(
            "import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n"
        )
    # One worker: indexing 70 files is estimated long enough on any machine.
    hook = _readme_snippet().replace("--force-exclude", "--force-exclude --jobs 1")
    (root / ".pre-commit-config.yaml").write_text(hook)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "buffers")
    home = tmp_path / "pc-home"

    first = _pre_commit(root, home, "--files", "bufs_0.py")
    assert first.returncode == 1, first.stdout + first.stderr
    shown = first.stdout + first.stderr
    assert shown.count("swacheck: indexing the project (70 files), roughly ") == 1
    assert shown.index("indexing the project") < shown.index("SWA002")
    later = _pre_commit(root, home, "--files", "bufs_1.py")
    assert later.returncode == 1 and "SWA002" in later.stdout
    assert "indexing" not in later.stdout + later.stderr


def _sglang_like(root: Path) -> Path:
    """tests/lsp's SGLang-like project (a pool, graph and model runners with one bug of
    each kind), as a git repository."""
    spec = importlib.util.spec_from_file_location("sglang_like", SGLANG_LIKE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_project(root)


def _swacheck(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "swacheck", "audit", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def legacy(tmp_path: Path, tools: None) -> tuple[Path, Path]:
    """An SGLang-like repository with findings, committed, and a pre-commit home."""
    project = _sglang_like(tmp_path / "minisglang")
    old = _swacheck(project, "--output-format", "json")
    assert old.returncode == 1 and len(json.loads(old.stdout)) >= 4
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "engine with old findings")
    return project, tmp_path / "pc-home"


def _touch_and_add_a_bug(project: Path) -> tuple[Path, str]:
    """Edit a line of the pool (which holds old findings); the text of a new bug."""
    pool = project / "minisglang" / "mem_cache" / "pool.py"
    text = pool.read_text()
    text = text.replace("import torch\n", "import torch\n\n# Pool sizes are in tokens.\n", 1)
    pool.write_text(text)
    bug = "out_cache_loc_swa = torch.zeros(16, dtype=torch.int64)\n"
    return pool, bug


def test_a_baseline_lets_old_findings_through_and_stops_new_ones(
    legacy: tuple[Path, Path],
) -> None:
    project, home = legacy
    written = _swacheck(project, "--baseline", "swacheck-baseline.json", "--write-baseline")
    assert written.returncode == 0, written.stderr
    (project / ".pre-commit-config.yaml").write_text(_readme_snippet("pre-commit-baseline"))
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "adopt swacheck with a baseline")
    installed = subprocess.run(
        [*PRE_COMMIT, "install"], cwd=project, capture_output=True, text=True, env=_env(home)
    )
    assert installed.returncode == 0, installed.stderr

    # Touching a file with old findings (every one moves down two rows) commits.
    pool, bug = _touch_and_add_a_bug(project)
    ok = _commit(project, home, "a comment in the pool")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # A new finding in it does not, and it is the only one shown.
    pool.write_text(pool.read_text() + bug)
    refused = _commit(project, home, "a new int64 SWA buffer")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    shown = _findings(refused.stdout + refused.stderr)
    new_row = len(pool.read_text().splitlines())
    assert shown == [
        ("minisglang/mem_cache/pool.py", new_row, bug.index("torch.int64") + 1, "SWA002")
    ]
    # The old findings the baseline records are not news: nothing is said of them.
    assert "warning:" not in refused.stdout + refused.stderr


def test_add_noqa_lets_old_findings_through_and_stops_new_ones(
    legacy: tuple[Path, Path],
) -> None:
    project, home = legacy
    before = {p: p.read_text() for p in project.rglob("*.py")}
    added = _swacheck(project, "--add-noqa")
    assert added.returncode == 0 and added.stderr.startswith("Added "), added.stderr
    diff = _git(project, "diff", "--unified=0")
    changed = [
        line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]
    assert changed and all(line.startswith(("-", "+")) for line in changed)
    assert all("# noqa: SWA" in line for line in changed if line.startswith("+"))
    assert sum(line.startswith("+") for line in changed) == sum(
        line.startswith("-") for line in changed
    )  # comments appended to rows, no row added or removed
    for path, text in before.items():
        assert len(path.read_text().splitlines()) == len(text.splitlines())
    (project / ".pre-commit-config.yaml").write_text(_readme_snippet())
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "suppress the old findings")
    installed = subprocess.run(
        [*PRE_COMMIT, "install"], cwd=project, capture_output=True, text=True, env=_env(home)
    )
    assert installed.returncode == 0, installed.stderr
    pool, bug = _touch_and_add_a_bug(project)
    ok = _commit(project, home, "a comment in the pool")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    pool.write_text(pool.read_text() + bug)
    refused = _commit(project, home, "a new int64 SWA buffer")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert [f[3] for f in _findings(refused.stdout + refused.stderr)] == ["SWA002"]
