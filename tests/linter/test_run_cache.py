"""The run cache and the catalogue: a warm audit replays the last audit of the same files
without importing libcst, and anything that could change a finding misses it."""

from __future__ import annotations

import json
from pathlib import Path

from swacheck.config import Config
from swacheck.discovery import Discovery

INT64_SWA = (
    "import torch\n\nout_cache_loc_swa = torch.zeros((8,), dtype=torch.int64)\n"
    "\n\ndef set_kv_buffer(layer, swa_loc, cache_k, cache_v):\n"
    "    assert swa_loc.dtype == torch.int32  # the KV store takes int32: a safe fix\n"
)
PLAIN = "def add(a, b):\n    return a + b\n"
IMPORTTIME = ("-X", "importtime")  # the interpreter lists every module it imports


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def imports_libcst(proc) -> bool:  # type: ignore[no-untyped-def]
    return any(line.split("|")[-1].strip() == "libcst" for line in proc.stderr.splitlines())


def test_warm_audit_replays_without_libcst(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    write(tmp_path / "plain.py", PLAIN)
    cold = swacheck("audit", "--output-format", "json", python=IMPORTTIME)
    warm = swacheck("audit", "--output-format", "json", python=IMPORTTIME)
    uncached = swacheck("audit", "--no-cache", "--output-format", "json", check_rc=1)
    assert imports_libcst(cold) and not imports_libcst(warm)
    assert cold.returncode == warm.returncode == 1
    assert json.loads(cold.stdout) == json.loads(warm.stdout) == json.loads(uncached.stdout)
    assert [f["code"] for f in json.loads(warm.stdout)] == ["SWA002"]


def test_file_no_rule_can_fire_in_needs_no_libcst(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    swacheck("audit", check_rc=1)  # fills the catalogue
    target = write(tmp_path / "plain.py", PLAIN)
    for edit in range(2):  # each call sees new bytes: the run record misses
        target.write_text(PLAIN + f"# edit {edit}\n")
        proc = swacheck("audit", "plain.py", python=IMPORTTIME)
        assert proc.returncode == 0 and proc.stdout == "All checks passed!\n"
        assert not imports_libcst(proc)


def test_edit_rename_and_working_directory_all_miss(swacheck, swacheck_at, tmp_path) -> None:
    target = write(tmp_path / "pkg" / "bufs.py", INT64_SWA)
    first = swacheck("audit", "--output-format", "json", check_rc=1).stdout
    assert json.loads(first)[0]["filename"] == "pkg/bufs.py"
    # Same bytes, different working directory: paths are shown relative to it.
    inner = swacheck_at(tmp_path / "pkg")("audit", "--output-format", "json", check_rc=1)
    assert json.loads(inner.stdout)[0]["filename"] == "bufs.py"
    target.rename(tmp_path / "pkg" / "moved.py")
    moved = swacheck("audit", "--output-format", "json", check_rc=1).stdout
    assert json.loads(moved)[0]["filename"] == "pkg/moved.py"
    (tmp_path / "pkg" / "moved.py").write_text(INT64_SWA.replace("int64", "int32"))
    swacheck("audit", check_rc=0)


def test_configuration_and_selection_miss(swacheck, tmp_path: Path) -> None:
    write(tmp_path / "bufs.py", INT64_SWA)
    swacheck("audit", check_rc=1)
    swacheck("audit", "--ignore", "SWA002", check_rc=0)
    write(tmp_path / "pyproject.toml", "[tool.swacheck]\nswa-loc-dtype = 'int64'\n")
    swacheck("audit", check_rc=0)


def test_fix_is_not_replayed_away(swacheck, tmp_path: Path) -> None:
    target = write(tmp_path / "bufs.py", INT64_SWA)
    swacheck("audit", check_rc=1)  # a warm record holding a fixable finding
    swacheck("audit", "--fix", check_rc=0)
    assert "torch.int32" in target.read_text()
    swacheck("audit", check_rc=0)


def test_name_only_excludes_match_as_pathspec_does(tmp_path: Path) -> None:
    """The set lookup for name-only patterns and pathspec agree (``*.nomatch`` forces
    pathspec for the same names)."""
    for name in ("a.py", "build/b.py", "src/build/c.py", "src/d.py", "src/e.pyi", "x/f.txt"):
        write(tmp_path / name, PLAIN)
    names = Config(exclude=("build", "d.py"))
    globbed = Config(exclude=("build", "d.py", "*.nomatch"))
    by_name = Discovery(names)
    by_glob = Discovery(globbed)
    assert by_name.exclude is None and by_glob.exclude is not None
    found = sorted(p.relative_to(tmp_path).as_posix() for p in by_name.files([tmp_path]))
    assert found == sorted(p.relative_to(tmp_path).as_posix() for p in by_glob.files([tmp_path]))
    assert found == ["a.py", "src/e.pyi"]


def test_a_file_no_rule_can_fire_in_needs_no_libcst_in_a_project_either(
    swacheck, tmp_path: Path
) -> None:
    """In a project (a git repository) the other files are context; for a file no rule
    can fire in, the call still parses nothing and loads no facts."""
    import shutil
    import subprocess

    examples = Path(__file__).resolve().parents[2] / "examples"
    for source in examples.glob("*.py"):
        shutil.copy(source, tmp_path / source.name)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    swacheck("audit", check_rc=1)  # the project's facts and the catalogue, cached
    target = write(tmp_path / "plain.py", PLAIN)
    for edit in range(2):
        target.write_text(PLAIN + f"# edit {edit}\n")
        proc = swacheck("audit", "plain.py", python=IMPORTTIME)
        assert proc.returncode == 0 and proc.stdout == "All checks passed!\n"
        assert not imports_libcst(proc)
    # An SWA file of the same project gets its context (SWA005 needs the pool's facts).
    runner = swacheck("audit", "model_runner.py", "-q", check_rc=1)
    assert runner.stdout.startswith("model_runner.py:13:20: SWA005 ")
