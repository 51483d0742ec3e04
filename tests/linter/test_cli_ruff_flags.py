"""ruff's flags that override the configuration (issue 40), spelled and meaning what
ruff's do, through the real ``swacheck`` command on real files: ``--exclude``,
``--extend-exclude``, ``--per-file-ignores`` (and ``--extend-per-file-ignores``),
``--fixable``/``--unfixable``/``--extend-fixable``, ``--show-files``, ``--isolated`` and
``--ignore-noqa``. Where ruff's own behaviour is the question, ruff (in the test extra)
runs on the same tree beside swacheck."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
INT64_SWA = "import torch\nout_cache_loc_swa = torch.zeros(8, dtype=torch.int64)\n"


def run(cwd: Path, *args: str, rc: int | None = None) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NO_COLOR", "FORCE_COLOR", "SWACHECK_OUTPUT_FORMAT")
    }
    proc = subprocess.run(
        [sys.executable, "-m", "swacheck", "audit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**environ, "SWACHECK_OUTPUT_FORMAT": "concise"},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if rc is not None:
        assert proc.returncode == rc, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def found(cwd: Path, *args: str) -> list[dict[str, Any]]:
    """The findings of ``swacheck audit --output-format json *args``."""
    proc = run(cwd, "--output-format", "json", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return list(json.loads(proc.stdout))


def places(cwd: Path, *args: str) -> list[tuple[str, str]]:
    """(file below ``cwd``, code) of each finding."""
    return sorted(
        (Path(f["filename"]).relative_to(cwd.resolve()).as_posix(), f["code"])
        for f in found(cwd, *args)
    )


def ruff(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """ruff itself (the test extra installs it), with no cache of its own."""
    command = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if command is None:
        pytest.skip("ruff not installed")
    return subprocess.run(
        [command, "check", "--no-cache", *args], cwd=cwd, capture_output=True, text=True
    )


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A git repository whose configuration excludes ``gen`` (swacheck's and ruff's keys),
    with one SWA002 finding in each of its files. (ruff reads ``.gitignore`` only in a
    git repository, and its default exclusions no longer hold ``build``: ``dist`` is
    one of both tools'.)"""
    root = write(
        tmp_path / "project",
        {
            "pyproject.toml": (
                '[tool.swacheck]\nextend-exclude = ["gen"]\n[tool.ruff]\nextend-exclude = ["gen"]\n'
            ),
            "pool.py": INT64_SWA,
            "gen/generated.py": INT64_SWA,
            "vendored/third.py": INT64_SWA,
            "dist/built.py": INT64_SWA,
            "ignored/by_git.py": INT64_SWA,
            ".gitignore": "ignored/\n",
        },
    )
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def show_files(cwd: Path, *args: str) -> list[str]:
    proc = run(cwd, "--show-files", *args, rc=0)
    return proc.stdout.splitlines()


def ruffs_files(cwd: Path, *args: str) -> list[str]:
    """ruff's ``--show-files``, its Python files (it lists pyproject.toml too)."""
    proc = ruff(cwd, "--show-files", *args)
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line.endswith(".py")]


class TestFiles:
    def test_show_files_lists_what_ruff_lists(self, tree: Path) -> None:
        listed = show_files(tree)
        assert listed == [str(tree.resolve() / p) for p in ("pool.py", "vendored/third.py")]
        assert listed == ruffs_files(tree)
        # A path given explicitly is listed, excluded or not, unless --force-exclude.
        given = ("pool.py", "gen/generated.py")
        assert show_files(tree, *given) == ruffs_files(tree, *given)
        assert show_files(tree, "--force-exclude", *given) == [str(tree.resolve() / "pool.py")]
        assert ruffs_files(tree, "--force-exclude", *given) == [str(tree.resolve() / "pool.py")]

    def test_extend_exclude_adds_to_the_configured_one(self, tree: Path) -> None:
        flag = ("--extend-exclude", "vendored")
        assert show_files(tree, *flag) == [str(tree.resolve() / "pool.py")]
        assert show_files(tree, *flag) == ruffs_files(tree, *flag)
        # The audit reads what --show-files lists: one finding, in pool.py.
        assert places(tree, *flag) == [("pool.py", "SWA002")]

    def test_exclude_replaces_the_defaults(self, tree: Path) -> None:
        # `dist` is no longer excluded, `gen` (extend-exclude) still is.
        flag = ("--exclude", "vendored,nothing")
        assert show_files(tree, *flag) == [
            str(tree.resolve() / p) for p in ("dist/built.py", "pool.py")
        ]
        assert show_files(tree, *flag) == ruffs_files(tree, *flag)
        assert [p for p, _ in places(tree, *flag)] == ["dist/built.py", "pool.py"]

    def test_nothing_to_show(self, tmp_path: Path) -> None:
        proc = run(tmp_path, "--show-files", rc=0)
        assert proc.stdout == ""
        assert "warning: No Python files found" in proc.stderr


class TestPerFileIgnores:
    @pytest.fixture
    def project(self, tmp_path: Path) -> Path:
        return write(
            tmp_path,
            {
                "pyproject.toml": '[tool.swacheck.per-file-ignores]\n"pool.py" = ["SWA002"]\n',
                "pool.py": INT64_SWA,
                "tests/test_pool.py": INT64_SWA,
            },
        )

    def test_the_flag_replaces_the_configured_table(self, project: Path) -> None:
        assert places(project) == [("tests/test_pool.py", "SWA002")]
        assert places(project, "--per-file-ignores", "tests/*:SWA002") == [("pool.py", "SWA002")]

    def test_the_extend_flag_adds_to_it(self, project: Path) -> None:
        assert places(project, "--extend-per-file-ignores", "tests/*:SWA") == []
        # Several pairs in one value, or the flag repeated.
        both = "pool.py:SWA002,tests/*:SWA002"
        assert places(project, "--per-file-ignores", both) == []
        repeated = ("--per-file-ignores", "pool.py:SWA002", "--per-file-ignores", "x.py:SWA001")
        assert places(project, *repeated) == [("tests/test_pool.py", "SWA002")]

    def test_usage_errors_are_ruffs(self, project: Path) -> None:
        bad = run(project, "--per-file-ignores", "pool.py", rc=2)
        assert "argument --per-file-ignores: expected PATTERN:CODE, got 'pool.py'" in bad.stderr
        assert (
            "Expected <FilePattern>:<RuleCode>"
            in ruff(project, "--per-file-ignores", "pool.py").stderr
        )
        unknown = run(project, "--per-file-ignores", "pool.py:SWA0999", rc=2)
        assert "unknown rule code or prefix 'SWA0999'" in unknown.stderr


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    return folder


class TestFixable:
    def test_unfixable_drops_the_fix_everywhere(self, examples: Path) -> None:
        before = found(examples)
        assert any(f["code"] == "SWA002" and f["fix"] for f in before)
        after = found(examples, "--unfixable", "SWA002")
        assert [(f["code"], f["location"]) for f in after] == [
            (f["code"], f["location"]) for f in before
        ]
        for finding, was in zip(after, before, strict=True):
            assert finding["fix"] == (None if finding["code"] == "SWA002" else was["fix"])
        concise = run(examples, "--unfixable", "SWA002", rc=1).stdout
        assert "SWA002 [*]" not in concise and "SWA006 [*]" in concise
        # --fix leaves those findings' lines as they are and fixes the others.
        runner = examples / "cuda_graph_runner.py"
        run(examples, "--fix", "--unfixable", "SWA002", rc=1)
        assert "dtype=torch.int64" in runner.read_text()
        assert "self.out_cache_loc_swa.zero_()" in runner.read_text()  # SWA003's fix

    def test_fixable_offers_only_its_codes(self, examples: Path) -> None:
        fixed = {f["code"] for f in found(examples, "--fixable", "SWA006") if f["fix"]}
        assert fixed == {"SWA006"}
        fixed = {
            f["code"]
            for f in found(examples, "--fixable", "SWA006", "--extend-fixable", "SWA003")
            if f["fix"]
        }
        assert fixed == {"SWA003", "SWA006"}

    def test_the_flags_come_after_the_configuration_as_in_ruff(self, tmp_path: Path) -> None:
        """Configured ``unfixable``, then ``--fixable`` (starts over) or
        ``--extend-fixable`` (adds): the code is fixable again, in ruff and here."""
        swa = write(
            tmp_path / "swa",
            {"pyproject.toml": '[tool.swacheck]\nunfixable = ["SWA002"]\n', "bufs.py": INT64_SWA},
        )
        assert [f["fix"] for f in found(swa)] == [None]
        py = write(
            tmp_path / "py",
            {"pyproject.toml": '[tool.ruff.lint]\nunfixable = ["F401"]\n', "m.py": "import os\n"},
        )
        for flag, code in (("--fixable", "SWA002"), ("--extend-fixable", "SWA002")):
            assert [f["fix"] is not None for f in found(swa, flag, code)] == [True]
            theirs = json.loads(
                ruff(py, "--select", "F401", flag, "F401", "--output-format", "json").stdout
            )
            assert [f["fix"] is not None for f in theirs] == [True]
        # --unfixable wins over both; an unknown code is an error naming the flag.
        assert found(swa, "--fixable", "SWA", "--unfixable", "SWA002")[0]["fix"] is None
        bad = run(swa, "--unfixable", "SWA0002", rc=2)
        assert "--unfixable: unknown rule code or prefix 'SWA0002'" in bad.stderr


class TestIsolatedAndNoqa:
    @pytest.fixture
    def project(self, tmp_path: Path) -> Path:
        return write(
            tmp_path,
            {
                "pyproject.toml": '[tool.swacheck]\nignore = ["SWA002"]\n',
                "bufs.py": INT64_SWA,
                "suppressed.py": INT64_SWA.replace("int64)\n", "int64)  # noqa: SWA002, SWA006\n"),
                "file_level.py": "# swacheck: noqa: SWA002\n" + INT64_SWA,
            },
        )

    def test_isolated_reads_no_configuration_file(self, project: Path) -> None:
        assert places(project) == []
        assert places(project, "--isolated") == [("bufs.py", "SWA002")]
        # KEY = VALUE overrides still apply; a configuration file cannot be given.
        assert places(project, "--isolated", "--config", "ignore = ['SWA002']") == []
        bad = run(project, "--isolated", "--config", "pyproject.toml", rc=2)
        assert "--config pyproject.toml cannot be used with --isolated" in bad.stderr
        assert (
            "cannot be used with `--isolated`"
            in ruff(project, "--isolated", "--config", "pyproject.toml").stderr
        )
        settings = run(project, "--isolated", "--show-settings", rc=0).stdout
        assert "Settings path: none (defaults)" in settings and "ignore = []" in settings

    def test_ignore_noqa_reports_what_suppressions_hid(self, project: Path) -> None:
        plain = ("--isolated", "--extend-select", "SWA100")
        assert places(project, *plain) == [
            ("bufs.py", "SWA002"),
            ("suppressed.py", "SWA100"),  # SWA006 suppresses nothing there
        ]
        # Every suppression ignored, the line's and the file's; SWA100 still says which
        # code is unused (as ruff's RUF100 does), not the one that matched. Cached runs
        # before and after give each its own answer.
        assert places(project, *plain, "--ignore-noqa") == [
            ("bufs.py", "SWA002"),
            ("file_level.py", "SWA002"),
            ("suppressed.py", "SWA002"),
            ("suppressed.py", "SWA100"),
        ]
        assert len(places(project, *plain)) == 2
