"""Issue #9: discovery and configuration survive hostile trees, and nothing is executed.

Symlink loops and links out of the tree, FIFOs and devices, unreadable files and
folders, odd file names, broken ``.gitignore`` lines, malformed or wrongly typed
configuration (exit 2 naming the key and the reason), and audited files and configs
that would leave a marker behind if swacheck ever imported or executed them.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fuzzkit import INT64_SWA, Cli, write

from swacheck.cli import main

FIXED = INT64_SWA.replace("int64", "int32")


def _names(findings: list[dict], root: Path) -> list[str]:
    """The findings' files relative to ``root`` (JSON's ``filename`` is absolute, as ruff's)."""
    return sorted(Path(f["filename"]).relative_to(root).as_posix() for f in findings)


def test_symlinks_in_the_tree_are_never_followed(cli: Cli, tmp_path: Path) -> None:
    outside = write(tmp_path.parent / f"{tmp_path.name}-outside" / "bufs.py", INT64_SWA)
    write(tmp_path / "pkg" / "ok.py", INT64_SWA)
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path / "pkg", target_is_directory=True)
    (tmp_path / "pkg" / "up").symlink_to("..", target_is_directory=True)
    (tmp_path / "out_dir").symlink_to(outside.parent, target_is_directory=True)
    (tmp_path / "out_file.py").symlink_to(outside)
    (tmp_path / "dangling.py").symlink_to(tmp_path / "missing.py")
    assert _names(cli.json("--no-cache", timeout=30), tmp_path) == ["pkg/ok.py"]
    proc = cli("audit", "--no-cache", "out_dir", check_rc=0)
    assert "out_dir: is a symlink; not followed" in proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifos_and_devices_are_skipped_not_read(cli: Cli, tmp_path: Path) -> None:
    """Reading a FIFO named ``*.py`` would block forever."""
    os.mkfifo(tmp_path / "pipe.py")
    write(tmp_path / "ok.py", INT64_SWA)
    proc = cli("audit", "--no-cache", "--output-format", "json", timeout=30)
    assert "pipe.py: not a regular file" in proc.stderr
    assert f'"filename": "{tmp_path / "ok.py"}"' in proc.stdout
    proc = cli("audit", "--no-cache", "pipe.py", os.devnull, "ok.py", check_rc=1, timeout=30)
    assert "pipe.py: not a regular file" in proc.stderr
    assert f"{os.devnull}: not a regular file" in proc.stderr


def _without_privileges() -> tuple[str, ...]:
    """A command prefix under which file permissions bind (root ignores them)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return ()
    caps = "-dac_override,-dac_read_search"
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: permissions cannot be made to bind")
    return ("setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}")


def test_unreadable_files_and_folders_are_reported(cli: Cli, tmp_path: Path) -> None:
    prefix = _without_privileges()
    write(tmp_path / "locked_file.py", INT64_SWA).chmod(0)
    write(tmp_path / "locked_dir" / "inner.py", INT64_SWA)
    (tmp_path / "locked_dir").chmod(0)
    write(tmp_path / "ok.py", INT64_SWA)
    inner = os.path.join("locked_dir", "inner.py")
    try:
        walked = cli("audit", "--no-cache", "--output-format", "concise", prefix=prefix, check_rc=1)
        # Named first: the configuration is looked for upward from the unreadable folder.
        named = cli(
            "audit",
            "--no-cache",
            "--output-format",
            "concise",
            inner,
            "locked_dir",
            "ok.py",
            prefix=prefix,
        )
    finally:
        (tmp_path / "locked_dir").chmod(0o755)
    # A file that cannot be read is an SWA999 finding (ruff: E902); a folder a warning.
    for proc in (walked, named):
        assert proc.returncode == 1
        assert "ok.py:2:45: SWA002" in proc.stdout
        assert "locked_dir: Permission denied" in proc.stderr
    assert walked.stdout.splitlines()[:3] == [
        "locked_file.py:1:1: SWA999 File could not be read (Permission denied)",
        "ok.py:2:45: SWA002 [*] " + walked.stdout.split("SWA002 [*] ")[1].splitlines()[0],
        "Found 2 findings.",
    ]
    assert named.stdout.splitlines()[0] == (
        f"{inner}:1:1: SWA999 File could not be read (Permission denied)"
    )
    assert named.stdout.splitlines()[2] == "Found 2 findings."


ODD_NAMES = [
    "with space.py",
    "ünïcödé.py",
    "-leading-dash.py",
    "--fix.py",
    "new\nline.py",
    "tab\tname.py",
    os.fsdecode(b"latin1-\xe9.py"),
]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file names")
def test_odd_file_names(cli: Cli, tmp_path: Path) -> None:
    for name in ODD_NAMES:
        write(tmp_path / name, INT64_SWA)
    assert _names(cli.json("--no-cache"), tmp_path) == sorted(ODD_NAMES)
    explicit = cli.json("--no-cache", "--", "-leading-dash.py", "--fix.py")
    assert _names(explicit, tmp_path) == ["--fix.py", "-leading-dash.py"]
    assert (tmp_path / "--fix.py").read_text() == INT64_SWA  # a name, not the option
    cli("audit", "--no-cache", "--fix", check_rc=0)
    assert {(tmp_path / name).read_text() for name in ODD_NAMES} == {FIXED}


def test_invalid_gitignore_lines_are_skipped_and_reported(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path / ".gitignore", "!\n\\\n[z-a]\ngenerated/\n")
    write(tmp_path / "generated" / "a.py", INT64_SWA)
    write(tmp_path / "keep.py", INT64_SWA)
    proc = cli("audit", "--no-cache", "--output-format", "concise", check_rc=1)
    assert proc.stdout.startswith("keep.py:")
    assert proc.stdout.splitlines()[1] == "Found 1 finding."
    for number, pattern in ((1, "'!'"), (2, "'\\\\'"), (3, "'[z-a]'")):
        assert f".gitignore: line {number}: invalid pattern {pattern} skipped" in proc.stderr


@pytest.fixture
def deep_tree(tmp_path: Path) -> Iterator[Path]:
    """The bottom of a chain of 1,500 folders below ``tmp_path``, removed afterwards
    bottom-up: ``shutil.rmtree`` (pytest's clean-up of old temporary folders) recurses
    per level and would fail on it in every later session."""
    deep = tmp_path
    for _ in range(1500):  # os.makedirs recurses per level too
        deep = deep / "d"
        deep.mkdir()
    try:
        yield deep
    finally:
        while deep != tmp_path:
            for entry in deep.iterdir():
                entry.unlink()
            deep.rmdir()
            deep = deep.parent


def test_a_tree_1500_folders_deep_is_walked(cli: Cli, tmp_path: Path, deep_tree: Path) -> None:
    """Discovery recursed once per folder (through the ``.gitignore`` chain's generators)
    and a tree ~1,000 deep ended the audit with ``RecursionError``: no findings at all."""
    (tmp_path / ".git").mkdir()
    write(tmp_path / ".gitignore", "generated_*.py\n")
    write(deep_tree / "bufs.py", INT64_SWA)
    write(deep_tree / "generated_bufs.py", INT64_SWA)
    write(deep_tree / ".gitignore", "other.py\n")
    found = cli.json(timeout=60)
    assert _names(found, tmp_path) == [f"{'d/' * 1500}bufs.py"]
    given = cli.json("--no-cache", str(deep_tree / "bufs.py"), timeout=60)
    assert [f["code"] for f in given] == ["SWA002"]


# [tool.swacheck] body -> what the error must name: the key, and the reason.
BAD_CONFIGS = {
    "unknown-key": ("maping-attributes = ['m']", "'maping-attributes'", "unknown configuration"),
    "unknown-table": ("[tool.swacheck.nested]\na = 1", "'nested'", "unknown configuration"),
    "string-not-list": ("select = 'SWA002'", "select", "expected a list of strings"),
    "list-of-ints": ("select = [1]", "select", "expected a list of strings, found 1"),
    "unknown-code": ("ignore = ['NOPE']", "ignore", "unknown rule code or prefix 'NOPE'"),
    "bool-as-string": ("respect-gitignore = 'yes'", "respect-gitignore", "expected true or false"),
    "bool-as-int": ("kernel-launch-writes = 1", "kernel-launch-writes", "expected true or false"),
    "string-as-int": ("cache-dir = 3", "cache-dir", "expected a string"),
    "bad-dtype": ("swa-loc-dtype = 'int16'", "swa-loc-dtype", "expected one of auto, int32, int64"),
    "bad-regex": ("swa-loc-pattern = '('", "swa-loc-pattern", "not a valid regular expression"),
    "bad-range-glob": ("exclude = ['[z-a]']", "exclude", "invalid glob '[z-a]'"),
    "bad-git-glob": ("extend-exclude = ['\\']", "extend-exclude", "invalid glob '\\\\'"),
    "ignores-not-table": ("per-file-ignores = 3", "per-file-ignores", "expected a table"),
    "ignores-string": (
        "[tool.swacheck.per-file-ignores]\n'x.py' = 'SWA002'",
        "per-file-ignores.x.py",
        "expected a list of strings",
    ),
    "ignores-empty-glob": (
        "[tool.swacheck.per-file-ignores]\n'' = ['SWA002']",
        "per-file-ignores",
        "invalid glob ''",
    ),
    "ignores-unknown-code": (
        "[tool.swacheck.per-file-ignores]\n'x.py' = ['NOPE']",
        "per-file-ignores.x.py",
        "unknown rule code",
    ),
    # Limits must be finite and bounded (nan crashed in setitimer; inf, 1e300 too).
    **{
        f"{key}-{name}": (f"{key} = {value}", key, "expected 0 (no limit) or a positive number")
        for key in ("max-file-time", "max-file-size", "max-file-memory")
        for name, value in (("nan", "nan"), ("inf", "inf"), ("huge", "1e300"), ("negative", "-1"))
        if key == "max-file-time" or name == "negative"
    },
    "memory-not-int": ("max-file-memory = 1.5", "max-file-memory", "expected an integer"),
    "memory-huge": ("max-file-memory = 9000000000000", "max-file-memory", "up to"),
    "malformed": ("[tool.swacheck", "pyproject.toml", "not valid TOML"),
    "duplicate-key": ("select = []\nselect = []", "pyproject.toml", "not valid TOML"),
    # What tomllib and re raise besides their own errors (each was a traceback, exit 1).
    "deep-arrays": ("select = " + "[" * 600 + "]" * 600, "pyproject.toml", "nested too deeply"),
    "deep-inline-tables": (
        "per-file-ignores = " + "{a = " * 600 + "1" + "}" * 600,
        "pyproject.toml",
        "nested too deeply",
    ),
    "huge-integer": ("max-file-size = " + "1" * 5000, "pyproject.toml", "Exceeds the limit"),
    "regex-too-deep": (
        "swa-loc-pattern = '" + "(" * 1000 + ")" * 1000 + "'",
        "swa-loc-pattern",
        "not a valid regular expression",
    ),
    "regex-huge-repeat": (
        "swa-loc-pattern = 'a{99999999999}'",
        "swa-loc-pattern",
        "not a valid regular expression: the repetition number is too large",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_configuration_exits_2_naming_key_and_reason(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    body, key, reason = BAD_CONFIGS[case]
    write(tmp_path / "pyproject.toml", f"[tool.swacheck]\n{body}\n")
    write(tmp_path / "bufs.py", INT64_SWA)
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "--no-cache", "."]) == 2
    error = capsys.readouterr().err
    assert "configuration error" in error
    assert key in error and reason in error, error
    assert str(tmp_path / "pyproject.toml") in error, error
    assert len(error) < 2000, "no value is shown whole"


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ("select = " + "[" * 600 + "]" * 600, "nested too deeply"),
        ("max-file-size = " + "1" * 5000, "Exceeds the limit"),
        ("swa-loc-pattern = '" + "(" * 1000 + ")" * 1000 + "'", "not a valid regular expression"),
    ],
)
def test_bad_configuration_overrides_exit_2(
    override: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "--no-cache", "--config", override, "."]) == 2
    error = capsys.readouterr().err
    assert "configuration error: --config" in error and reason in error


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"tool = 3\n", "[tool] must be a table"),
        (b"[[tool.swacheck]]\nselect = []\n", "[tool.swacheck] must be a table"),
        (b"[tool.swacheck]\nselect = ['\xff']\n", "not valid TOML"),
        (b"import os\nos.system('touch executed')\n", "not valid TOML"),
    ],
)
def test_bad_configuration_files(
    content: bytes,
    reason: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    write(tmp_path / "conf.toml", content)
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "--no-cache", "--config", "conf.toml", "."]) == 2
    assert reason in capsys.readouterr().err
    assert not (tmp_path / "executed").exists()


def test_config_that_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "folder.toml").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "--config", "missing.toml", "."]) == 2
    assert "missing.toml: cannot read: No such file or directory" in capsys.readouterr().err
    assert main(["audit", "--config", "folder.toml", "."]) == 2
    assert "folder.toml: cannot read" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_configuration_is_refused_not_waited_on(cli: Cli, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f.toml")
    proc = cli("audit", "--no-cache", "--config", "f.toml", ".", check_rc=2, timeout=30)
    assert "f.toml: cannot read: not a regular file" in proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_file_replaced_by_a_fifo_after_discovery_is_refused(tmp_path: Path) -> None:
    """A warm workspace trusts its last scan and re-reads a file it is told changed: a
    FIFO found there is reported, not opened for reading (which blocked the run)."""
    from swacheck.config import Config
    from swacheck.engine.workspace import Workspace
    from swacheck.rules import all_rules

    (tmp_path / ".git").mkdir()
    context = write(tmp_path / "pool.py", INT64_SWA)
    asked = write(tmp_path / "bufs.py", INT64_SWA)
    workspace = Workspace(Config(), all_rules(), root=tmp_path, cache=False)
    assert [f.code for f in workspace.audit([asked]).findings] == ["SWA002"]
    context.unlink()
    os.mkfifo(context)  # opening it for reading would block until a writer comes
    workspace.files_changed([context])
    started = time.monotonic()
    result = workspace.audit([asked], rescan=False)
    assert time.monotonic() - started < 30
    assert [f.code for f in result.findings] == ["SWA002"]
    asked.unlink()
    os.mkfifo(asked)
    workspace.files_changed([asked])
    result = workspace.audit([asked], rescan=False)
    assert result.findings == []
    (warning,) = result.warnings
    assert warning.endswith("bufs.py: not a regular file (FIFO, socket or device); skipped")


def test_a_huge_sparse_file_is_not_read(cli: Cli, tmp_path: Path) -> None:
    """3 GB of nothing (no disk used): over ``max-file-size``, so it is answered from
    its size alone; reading it took 6 GB and minutes."""
    with open(tmp_path / "x.py", "wb") as handle:
        handle.truncate(3 * 2**30)
    write(tmp_path / "zz_ordinary.py", INT64_SWA)
    started = time.monotonic()
    found = {Path(f["filename"]).name: f for f in cli.json("--no-cache", timeout=120)}
    assert time.monotonic() - started < 60
    assert found["x.py"]["code"] == "SWA999"
    assert "3,221,225,472 bytes, over the limit of 1,000,000" in found["x.py"]["message"]
    assert found["zz_ordinary.py"]["code"] == "SWA002"


# Each writes a file named after itself into MARKERS if imported or executed.
PLANTED = [
    "setup.py",
    "conftest.py",
    "sitecustomize.py",
    "usercustomize.py",
    "__main__.py",
    "pkg/__init__.py",
    "evil_backend.py",
    # swacheck's own imports: shadowing them needs the folder on sys.path, which the
    # ``swacheck`` command never puts there (``python -m`` does: Python's own rule).
    "libcst.py",
    "pathspec.py",
    "tomllib.py",
    "tomli.py",
    "typing_extensions.py",
]


def _marker_code(markers: Path, name: str) -> str:
    return f"open({str(markers / name.replace('/', '_'))!r}, 'w').close()\n"


def test_nothing_in_the_tree_or_config_is_imported_or_executed(tmp_path: Path) -> None:
    command = Path(sys.executable).with_name("swacheck")
    if not command.exists():
        pytest.skip("the swacheck command is not installed next to this Python")
    markers = tmp_path / "markers"
    markers.mkdir()
    tree = tmp_path / "tree"
    for name in PLANTED:
        write(tree / name, _marker_code(markers, name) + INT64_SWA)
    write(tree / "evil.pth", "import os; " + _marker_code(markers, "evil.pth"))
    for i in range(30):  # enough files for a process pool
        write(tree / "pkg" / f"m{i:02}.py", _marker_code(markers, f"m{i}") + INT64_SWA)
    write(
        tree / "pyproject.toml",
        "[build-system]\nrequires = []\nbuild-backend = 'evil_backend'\nbackend-path = ['.']\n"
        "[tool.swacheck]\nextend-exclude = ['nothing']\n",
    )
    runs = [
        ["audit", "--no-cache", "--jobs", "1"],
        ["audit", "--jobs", "2"],
        ["audit", "--jobs", "2"],
        ["audit", "--no-cache", "--no-prefilter", "--statistics"],
        ["audit", "--no-cache", "--fix", "--unsafe-fixes", "--jobs", "2"],
    ]
    for args in runs:
        proc = subprocess.run(
            [str(command), *args], cwd=tree, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode in (0, 1), proc.stderr
        assert "Traceback" not in proc.stderr
    assert (tree / "pkg" / "m00.py").read_text().endswith(FIXED)
    assert sorted(p.name for p in markers.iterdir()) == []


def test_a_cache_entry_planted_in_the_tree_is_never_executed(cli: Cli, tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    cli("audit", check_rc=1)  # fills .swacheck_cache/ with the keys the next run reads
    marker = tmp_path / "executed"
    for entry in (tmp_path / ".swacheck_cache").rglob("*"):
        if entry.is_file() and entry.name not in (".gitignore", "CACHEDIR.TAG"):
            entry.write_bytes(pickle.dumps(_OpensOnLoad(marker)))
    cli("audit")
    assert not marker.exists()


class _OpensOnLoad:
    """Unpickles as ``open(path, "w")``: the file appears if the entry is ever loaded."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.path, "w"))
