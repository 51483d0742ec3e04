"""The run cache and the catalogue: a warm audit replays the last audit of the same files
without importing libcst, and anything that could change a finding misses it."""

from __future__ import annotations

import json
import os
import shutil
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
    first = swacheck("audit", "--output-format", "concise", check_rc=1).stdout
    assert first.startswith(f"pkg{os.sep}bufs.py:")
    # Same bytes, different working directory: paths are shown relative to it.
    inner = swacheck_at(tmp_path / "pkg")("audit", "--output-format", "concise", check_rc=1)
    assert inner.stdout.startswith("bufs.py:")
    target.rename(tmp_path / "pkg" / "moved.py")
    moved = swacheck("audit", "--output-format", "json", check_rc=1).stdout
    assert json.loads(moved)[0]["filename"] == str(tmp_path / "pkg" / "moved.py")
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


# -- what the cache holds cannot change what is found (issue 29) -------------------------

TWO_INT64 = INT64_SWA + "swa_out_cache_loc = torch.zeros((8,), dtype=torch.int64)\n"
THREE_INT64 = TWO_INT64 + "window_swa_loc = torch.zeros((8,), dtype=torch.int64)\n"
# SWA002's triggers occur in it (so it is parsed and has a findings entry), no finding.
CLEAN_SWA = INT64_SWA.replace("int64", "int32")


def entries(folder: Path) -> dict[Path, bytes]:
    """Every entry of a cache folder and its bytes."""
    return {
        p: p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name not in (".gitignore", "CACHEDIR.TAG")
    }


def kind(data: bytes) -> str:
    """The type of what an entry holds (read by the test, which trusts its own cache)."""
    import pickle

    value = pickle.loads(data[32:])  # after the 32-byte signature
    return type(value).__name__


def codes_found(swacheck, *args: str) -> list[str]:  # type: ignore[no-untyped-def]
    proc = swacheck("audit", "--output-format", "json", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return [f"{Path(f['filename']).name}:{f['code']}" for f in json.loads(proc.stdout)]


def test_entries_moved_to_another_key_are_misses(swacheck, tmp_path: Path) -> None:
    """b.py's signed findings entry put where a.py's lies hid a.py's finding (1 -> 0);
    swapped, the two entries are misses too."""
    write(tmp_path / "a.py", INT64_SWA)
    write(tmp_path / "b.py", CLEAN_SWA)
    assert codes_found(swacheck) == ["a.py:SWA002"]
    cache = entries(tmp_path / ".swacheck_cache")
    outcomes = {p: data for p, data in cache.items() if kind(data) == "CheckOutcome"}
    (with_finding,) = [p for p, data in outcomes.items() if b"a.py" in data]
    (clean,) = [p for p in outcomes if p != with_finding]
    for path, data in cache.items():
        if kind(data) == "_RunRecord":
            path.unlink()  # the run's record would answer without the findings entries
    with_finding.write_bytes(outcomes[clean])
    assert codes_found(swacheck) == ["a.py:SWA002"]
    # Swapped (and the run record gone again), every entry of both files is a miss.
    cache = entries(tmp_path / ".swacheck_cache")
    for path, data in cache.items():
        if kind(data) == "_RunRecord":
            path.unlink()
    facts = sorted(p for p, data in cache.items() if kind(data) == "FactsRecord")
    for pair in (sorted(outcomes), facts):
        first, second = pair
        first.write_bytes(cache[second])
        second.write_bytes(cache[first])
    assert codes_found(swacheck) == ["a.py:SWA002"]


def test_replayed_entries_are_misses(swacheck, tmp_path: Path) -> None:
    """An entry of an older version of a file, put where the newer one's entry lies,
    made the audit report the old findings (3 -> 2)."""
    target = write(tmp_path / "bufs.py", TWO_INT64)
    assert len(codes_found(swacheck)) == 2
    old = entries(tmp_path / ".swacheck_cache")
    target.write_text(THREE_INT64)
    assert len(codes_found(swacheck)) == 3
    new = {p: data for p, data in entries(tmp_path / ".swacheck_cache").items() if p not in old}
    replayed = 0
    for path, data in new.items():
        for old_data in old.values():
            if kind(old_data) == kind(data) and kind(data) in ("_RunRecord", "CheckOutcome"):
                path.write_bytes(old_data)
                replayed += 1
    assert replayed == 2
    assert len(codes_found(swacheck)) == 3


def test_an_entry_of_another_format_is_a_miss(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from swacheck.engine import cache as cache_module

    cache = cache_module.result_cache(Config(), tmp_path / "cache")
    key = cache.key("run", b"", "x")
    cache.put(key, "value")
    assert cache.get(key) == "value"
    monkeypatch.setattr(cache_module, "FORMAT", "swacheck-cache-0")
    assert cache.get(key) is None


def test_a_walk_serves_only_the_exclusions_it_was_made_under(swacheck, tmp_path: Path) -> None:
    """Issue 39: the project's last walk was kept in the inventory, whose key holds no
    exclusion, so an audit with ``extend-exclude = []`` after one excluding ``vendored``
    lost vendored's finding, and the other order reported an excluded file's."""
    write(tmp_path / "pyproject.toml", "[tool.swacheck]\nextend-exclude = ['vendored']\n")
    write(tmp_path / "pkg" / "bufs.py", INT64_SWA)
    write(tmp_path / "vendored" / "bufs.py", TWO_INT64)
    every = ("--config", "extend-exclude = []")
    for args in ((), every, (), every):
        assert codes_found(swacheck, *args) == codes_found(swacheck, "--no-cache", *args)
    assert len(codes_found(swacheck, *every)) == 3


def test_a_file_read_as_too_large_is_read_again_under_a_larger_limit(
    swacheck, tmp_path: Path
) -> None:
    """A file's state recorded under one ``max-file-size`` served another: recorded as
    too large, the pool opened no rule's scope under a larger limit (SWA005 lost in the
    runner), and recorded in full its cached facts served a smaller limit, where a cold
    audit answers SWA999."""
    import time

    from swacheck.engine.project import RACY_NS

    for source in (REPO / "examples").glob("*.py"):
        shutil.copy(source, tmp_path / source.name)
    pool = tmp_path / "swa_memory_pool.py"
    pool.write_text(pool.read_text() + "# padding\n" * 300)
    time.sleep(RACY_NS / 1e9 + 0.1)  # recorded as not racy: trusted while unchanged
    small = ("--config", "max-file-size = 3000")
    for args in ((), small, (), small):
        assert codes_found(swacheck, *args) == codes_found(swacheck, "--no-cache", *args)
    assert "swa_memory_pool.py:SWA999" in codes_found(swacheck, *small)
    assert "model_runner.py:SWA005" in codes_found(swacheck)


def test_a_run_record_serves_only_its_configurations_folder(swacheck, tmp_path: Path) -> None:
    """``per-file-ignores`` globs are relative to the configuration's folder: the same
    settings read from another folder ignore other files, and the run's record of the
    first answered for the second in a cache both use."""
    settings = "[tool.swacheck]\nper-file-ignores = { 'pkg/*' = ['SWA002'] }\n"
    write(tmp_path / "pyproject.toml", settings)
    write(tmp_path / "pkg" / "pyproject.toml", settings)
    write(tmp_path / "pkg" / "bufs.py", INT64_SWA)
    inner = ("--config", str(tmp_path / "pkg" / "pyproject.toml"), "--cache-dir", "cache")
    assert codes_found(swacheck, "--cache-dir", "cache") == []
    assert codes_found(swacheck, *inner) == ["bufs.py:SWA002"]
    assert codes_found(swacheck, *inner) == codes_found(swacheck, "--no-cache", *inner)


def test_findings_do_not_depend_on_which_files_were_asked_about_first(
    swacheck, tmp_path: Path
) -> None:
    """Where two files build the mapping's sentinel, SWA011 names the first in the
    project index, whose order put the files asked about first: a pre-commit call on
    the allocator cached a message naming it, which a whole-tree audit replayed where
    ``--no-cache`` names ``a_alloc.py``, first in the walk."""
    import subprocess

    for source in (REPO / "examples").glob("*.py"):
        shutil.copy(source, tmp_path / source.name)
    shutil.copy(tmp_path / "swa_allocator.py", tmp_path / "a_alloc.py")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    given = swacheck("audit", "--output-format", "json", "swa_allocator.py").stdout
    warm = swacheck("audit", "--output-format", "json").stdout
    cold = swacheck("audit", "--output-format", "json", "--no-cache").stdout
    assert json.loads(warm) == json.loads(cold)
    built = {
        f["filename"].rsplit("/", 1)[-1]: f["message"].split("(built at ")[1].split(")")[0]
        for f in json.loads(warm)
        if f["code"] == "SWA011"
    }
    # its row in its own findings; in another file's, the file alone
    assert built == {"a_alloc.py": "a_alloc.py:9", "swa_allocator.py": "a_alloc.py"}, built
    assert [f for f in json.loads(warm) if f["filename"].endswith("swa_allocator.py")] == (
        json.loads(given)
    )


def test_a_call_from_a_sub_folder_uses_the_projects_cache(
    swacheck, swacheck_at, tmp_path: Path
) -> None:
    """Issue 39: ``swacheck audit .`` in a sub-folder of a project without
    ``[tool.swacheck]`` made a cache there, cold, while ``--show-settings`` named the git
    root as the project's: the cache is the root's, whatever the working directory."""
    import subprocess

    engine = tmp_path / "engine"
    engine.mkdir()
    for source in (REPO / "examples").glob("*.py"):
        shutil.copy(source, engine / source.name)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    root_cache = tmp_path / ".swacheck_cache"
    swacheck("audit", check_rc=1)
    inside = swacheck_at(engine)
    shown = inside("audit", "--show-settings", check_rc=0).stdout
    assert f"Cache folder: {root_cache}\n" in shown
    before = entries(root_cache)
    assert codes_found(inside) == codes_found(inside, "--no-cache")
    assert not (engine / ".swacheck_cache").exists()
    new = [kind(data) for path, data in entries(root_cache).items() if path not in before]
    assert new == ["_RunRecord"]  # its findings came from the root's entries


# -- nothing written outside the project (issue 29) ---------------------------------------


def outside(tmp_path: Path) -> Path:
    """A folder beside the project: nothing of an audit may land there."""
    folder = tmp_path.parent / f"{tmp_path.name}-outside"
    folder.mkdir()
    return folder


def test_a_gitignore_symlink_in_the_cache_is_not_followed(swacheck, tmp_path: Path) -> None:
    """A committed ``.swacheck_cache/.gitignore`` linking elsewhere made the audit write
    ``*`` there (here: into a file that did not exist, and over one that did)."""
    away = outside(tmp_path)
    write(tmp_path / "bufs.py", INT64_SWA)
    cache = tmp_path / ".swacheck_cache"
    cache.mkdir()
    (cache / ".gitignore").symlink_to(away / "new")
    swacheck("audit", check_rc=1)
    assert not (away / "new").exists()
    (away / "kept").write_text("mine\n")
    (cache / ".gitignore").unlink()
    (cache / ".gitignore").symlink_to(away / "kept")
    swacheck("audit", check_rc=1)
    assert (away / "kept").read_text() == "mine\n"
    assert entries(cache), "the cache is still used"


def test_symlinked_folders_in_the_cache_are_not_followed(swacheck, tmp_path: Path) -> None:
    """A two-hex folder linking elsewhere sent entries there; a linked cache root did."""
    away = outside(tmp_path)
    write(tmp_path / "bufs.py", INT64_SWA)
    cache = tmp_path / ".swacheck_cache"
    cache.mkdir()
    for number in range(256):
        (cache / f"{number:02x}").symlink_to(away, target_is_directory=True)
    proc = swacheck("audit", check_rc=1)
    assert "is a symlink or not a folder; not followed" in proc.stderr
    assert list(away.iterdir()) == []
    shutil.rmtree(cache)
    cache.symlink_to(away, target_is_directory=True)
    proc = swacheck("audit", check_rc=1)
    assert f"{cache}: is a symlink or not a folder; the cache is not used" in proc.stderr
    assert list(away.iterdir()) == []


def test_entries_that_are_links_or_fifos_are_misses(swacheck, tmp_path: Path) -> None:
    """An entry linking to a file outside is neither read nor written through; a FIFO
    planted as an entry does not block the audit."""
    away = outside(tmp_path)
    write(tmp_path / "bufs.py", INT64_SWA)
    swacheck("audit", check_rc=1)
    cache = entries(tmp_path / ".swacheck_cache")
    for number, (path, data) in enumerate(cache.items()):
        copy = away / str(number)
        copy.write_bytes(data)
        path.unlink()
        path.symlink_to(copy)
    assert codes_found(swacheck) == ["bufs.py:SWA002"]
    assert {(away / str(n)).read_bytes() for n in range(len(cache))} == set(cache.values())
    assert all(not p.is_symlink() for p in cache), "each link was replaced by an entry"
    for path in cache:
        path.unlink()
        os.mkfifo(path)
    assert codes_found(swacheck) == ["bufs.py:SWA002"]  # within the runner's timeout


def test_a_configured_cache_dir_outside_the_project_is_not_used(
    swacheck, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """``cache-dir = "../x"`` (or an absolute path) in a repository's pyproject made an
    audit create folders and files there; the user's own ``--cache-dir``,
    ``SWACHECK_CACHE_DIR`` or ``--config`` override may put the cache anywhere."""
    away = outside(tmp_path)
    write(tmp_path / "bufs.py", INT64_SWA)
    for configured in (f"../{away.name}/cache", str(away / "cache"), "."):
        write(tmp_path / "pyproject.toml", f"[tool.swacheck]\ncache-dir = {configured!r}\n")
        proc = swacheck("audit", check_rc=1)
        assert (
            f"warning: cache-dir = {configured!r} in {tmp_path / 'pyproject.toml'}" in proc.stderr
        )
        assert "the cache is not used" in proc.stderr and "--cache-dir" in proc.stderr
        assert list(away.iterdir()) == [] and not (tmp_path / ".gitignore").exists()
    swacheck("audit", "--cache-dir", f"../{away.name}/flag", check_rc=1)
    (tmp_path / "mine").symlink_to(away, target_is_directory=True)
    swacheck("audit", "--cache-dir", "mine/linked", check_rc=1)  # the user's own link
    swacheck("audit", "--config", f"cache-dir = '{away / 'override'}'", check_rc=1)
    monkeypatch.setenv("SWACHECK_CACHE_DIR", str(away / "env"))
    assert f"Cache folder: {away / 'env'}" in swacheck("audit", "--show-settings").stdout
    swacheck("audit", check_rc=1)
    names = ["env", "flag", "linked", "override"]
    assert sorted(p.name for p in away.iterdir()) == names
    assert all(entries(away / name) for name in names)


def test_a_configured_cache_dir_through_a_link_is_not_used(swacheck, tmp_path: Path) -> None:
    away = outside(tmp_path)
    write(tmp_path / "pyproject.toml", "[tool.swacheck]\ncache-dir = 'build/swc'\n")
    write(tmp_path / "bufs.py", INT64_SWA)
    (tmp_path / "build").symlink_to(away, target_is_directory=True)
    proc = swacheck("audit", check_rc=1)
    assert f"{tmp_path / 'build' / 'swc'}: is a symlink or not a folder" in proc.stderr
    assert list(away.iterdir()) == []


def test_a_cache_dir_holding_sources_is_not_used(swacheck, tmp_path: Path) -> None:
    """``cache-dir = "pkg"`` wrote ``pkg/.gitignore`` with ``*`` (new modules vanished from
    ``git status``) and the same audit then skipped ``pkg``: "All checks passed" on a
    package with a finding. A folder holding sources (at any depth) or a
    ``pyproject.toml`` is refused, wherever the setting comes from."""
    write(tmp_path / "pkg" / "bufs.py", INT64_SWA)
    write(tmp_path / "src" / "inner" / "bufs.py", INT64_SWA)
    write(tmp_path / "conf" / "pyproject.toml", "[project]\nname = 'x'\n")
    folders = [tmp_path / name for name in ("pkg", "src", "conf")]
    before = sorted(p for folder in folders for p in folder.rglob("*"))
    for folder in ("pkg", "src", "conf"):
        write(tmp_path / "pyproject.toml", f"[tool.swacheck]\ncache-dir = {folder!r}\n")
        proc = swacheck("audit", "--output-format", "concise", check_rc=1)
        assert proc.stdout.count("SWA002") == 2, proc.stdout
        assert f"{tmp_path / folder}: holds " in proc.stderr
        assert "which audits read: the cache is not used" in proc.stderr
    write(tmp_path / "pyproject.toml", "[tool.swacheck]\n")
    for given in (("--cache-dir", "pkg"), ("--config", "cache-dir = 'src'")):
        proc = swacheck("audit", *given, check_rc=1)
        assert "which audits read: the cache is not used" in proc.stderr
    assert (
        "Cache folder: none (" in swacheck("audit", "--show-settings", "--cache-dir", "pkg").stdout
    )
    after = sorted(p for folder in folders for p in folder.rglob("*"))
    assert after == before, "nothing written into the source folders"


def test_a_cache_dir_in_version_control_s_folder_is_not_used(
    swacheck, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """``cache-dir = ".git/objects"`` put entries among git's loose objects (same
    two-hex layout), which ``git fsck`` reports as bad objects."""
    git = tmp_path / ".git"
    (git / "objects").mkdir(parents=True)
    write(tmp_path / "bufs.py", INT64_SWA)
    for configured in (".git", ".git/objects", ".git/swacheck"):
        write(tmp_path / "pyproject.toml", f"[tool.swacheck]\ncache-dir = {configured!r}\n")
        proc = swacheck("audit", check_rc=1)
        assert "lies inside .git, version control's own folder: the cache is not used" in (
            proc.stderr
        )
    write(tmp_path / "pyproject.toml", "[tool.swacheck]\n")
    proc = swacheck("audit", "--cache-dir", ".git/objects", check_rc=1)
    assert f"cache folder {git / 'objects'} lies inside .git" in proc.stderr
    (tmp_path / "link").symlink_to(git, target_is_directory=True)
    monkeypatch.setenv("SWACHECK_CACHE_DIR", str(tmp_path / "link" / "swc"))
    assert "lies inside .git" in swacheck("audit", check_rc=1).stderr
    assert sorted(p.relative_to(git) for p in git.rglob("*")) == [Path("objects")]


def test_a_gitignore_goes_only_into_a_folder_the_cache_made(swacheck, tmp_path: Path) -> None:
    """A folder the cache makes gets ``.gitignore`` and the cache directory tag; one that
    was there (empty, or an older swacheck's cache) is tagged when adopted, never given
    a ``.gitignore``; a tagged cache is not searched below its top again."""
    write(tmp_path / "bufs.py", INT64_SWA)
    swacheck("audit", check_rc=1)
    made = tmp_path / ".swacheck_cache"
    assert (made / ".gitignore").read_text() == "# Automatically created by swacheck.\n*\n"
    assert (made / "CACHEDIR.TAG").read_bytes().startswith(b"Signature: 8a477f597d28d172789f06")
    (tmp_path / "mine").mkdir()
    write(tmp_path / "pyproject.toml", "[tool.swacheck]\ncache-dir = 'mine'\n")
    swacheck("audit", check_rc=1)
    assert entries(tmp_path / "mine") and (tmp_path / "mine" / "CACHEDIR.TAG").is_file()
    assert not (tmp_path / "mine" / ".gitignore").exists()
    # An older swacheck's cache (entries and a .gitignore, no tag) is adopted, entries kept.
    (made / "CACHEDIR.TAG").unlink()
    write(tmp_path / "pyproject.toml", "[tool.swacheck]\n")
    before = entries(made)
    assert codes_found(swacheck) == ["bufs.py:SWA002"]
    assert (made / "CACHEDIR.TAG").is_file() and set(before) <= set(entries(made))


def test_an_empty_or_unreadable_cache_key_is_made_anew(
    swacheck, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A 0-byte key (a full disk, a truncation) turned the cache off for good and said
    nothing; ``--show-settings`` still named the cache folder."""
    project = tmp_path / "project"
    write(project / "bufs.py", INT64_SWA)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    key = tmp_path / "xdg" / "swacheck" / "cache-key"
    key.parent.mkdir(parents=True)
    run = swacheck.__class__(project)
    for broken in (b"", b"short"):
        key.write_bytes(broken)
        shutil.rmtree(project / ".swacheck_cache", ignore_errors=True)
        proc = run("audit", check_rc=1)
        assert "cache" not in proc.stderr
        assert len(key.read_bytes()) == 32 and key.stat().st_mode & 0o777 == 0o600
        assert entries(project / ".swacheck_cache"), "the cache is on"
    key.unlink()
    os.mkfifo(key)  # unreadable (and a read would block): replaced too
    assert codes_found(run) == ["bufs.py:SWA002"]
    assert key.is_file() and len(key.read_bytes()) == 32
    key.unlink()
    key.mkdir()  # cannot be replaced: the run says so, once
    shutil.rmtree(project / ".swacheck_cache")
    proc = run("audit", check_rc=1)
    assert proc.stderr.count(f"the cache is off: its signing key {key} cannot be made") == 1
    assert not (project / ".swacheck_cache").exists()
    settings = run("audit", "--show-settings").stdout
    assert f"Cache folder: none (the cache is off: its signing key {key}" in settings


# -- the cache survives what its entries do not depend on (issue 26) ----------------------

# ``swacheck audit`` counting libcst's parses (``--jobs 1``: all of them in this process).
COUNTING = """
import os
import sys
import tempfile

import libcst

# Files are parsed in worker processes: each parse is counted in a file they all append to.
tally = tempfile.NamedTemporaryFile(prefix="parsed-", delete=False)
tally.close()
original = libcst.parse_module


def counting(*args, **kwargs):
    with open(tally.name, "a") as counts:
        counts.write("1")
    return original(*args, **kwargs)


libcst.parse_module = counting
from swacheck.cli import main

status = main(["audit", "--jobs", "1", "--output-format", "json", *sys.argv[1:]])
with open(tally.name) as counts:
    print(f"parsed={len(counts.read())}", file=sys.stderr)
os.unlink(tally.name)
sys.exit(status)
"""
REPO = Path(__file__).resolve().parents[2]


def install_copy(site: Path) -> Path:
    """swacheck laid out as ``pip install .`` lays it out (the rules inside the package),
    at another path and with new modification times: a reinstall of the same code."""
    shutil.copytree(
        REPO / "swacheck", site / "swacheck", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        REPO / "rules", site / "swacheck" / "rules", ignore=shutil.ignore_patterns("__pycache__")
    )
    return site


def counted(root: Path, *args: str, site: Path | None = None) -> tuple[list[dict], int]:
    """The findings of an audit in ``root`` and how many files it parsed."""
    import subprocess
    import sys

    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    proc = subprocess.run(
        [sys.executable, "-c", COUNTING, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    parsed = int(proc.stderr.rsplit("parsed=", 1)[1])
    return json.loads(proc.stdout), parsed


def test_the_cache_survives_a_reinstall_and_keys_facts_do_not_read(tmp_path: Path) -> None:
    """Reinstalling the same version, or a one-key ``--config`` override, made the next
    audit fully cold: entries were keyed by the install's paths and modification times
    and by the whole configuration. Counted as files libcst parsed."""
    import subprocess

    root = tmp_path / "project"
    shutil.copytree(REPO / "examples", root, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    runner = root / "model_runner.py"
    text = runner.read_text()
    every = len(list(root.glob("*.py")))  # each example file holds some rule's triggers
    cold, parsed = counted(root)
    assert parsed == every and cold
    # Same code elsewhere, newer files: warm. An edited file costs itself only.
    site = install_copy(tmp_path / "site")
    assert counted(root, site=site) == (cold, 0)
    runner.write_text(text + "# edit 1\n")
    assert counted(root, site=site) == (cold, 1)
    # Keys no fact reads: the run's record stays (runtime names, where files are
    # found) or its facts and findings do (a bound).
    assert counted(root, "--config", "cache-model = 'none'", site=site) == (cold, 0)
    assert counted(root, "--config", "extend-exclude = ['vendored']", site=site) == (cold, 0)
    assert counted(root, "--config", "max-file-time = 30.0", site=site) == (cold, 0)
    runner.write_text(text + "# edit 2\n")
    assert counted(root, "--config", "max-file-time = 30.0", site=site) == (cold, 1)
    # Another selection: the project's facts stay; only the file asked about is checked.
    narrow, parsed = counted(root, "--select", "SWA005", "model_runner.py", site=site)
    assert parsed == 1 and {f["code"] for f in narrow} == {"SWA005"}
    # A change to the analysing code (a comment in a rule) is a cold cache.
    changed = install_copy(tmp_path / "changed")
    rule = next((changed / "swacheck" / "rules").glob("swa002_*.py"))
    rule.write_text(rule.read_text() + "# changed\n")
    assert counted(root, site=changed) == (cold, every)


def test_entries_are_keyed_by_the_interpreter_and_libcsts_version(
    tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A project's cache is shared by the environments that audit it (a pre-commit
    hook's, a developer's): one with another Python (whose ``ast`` finds regions and
    syntax errors) or another libcst (whose trees facts are read from) misses it."""
    import importlib.machinery
    import importlib.util
    import sys

    from swacheck.engine import cache as cache_module

    digest = cache_module._code_digest.__wrapped__
    here = digest()
    monkeypatch.setattr(sys, "version_info", (3, 99, 0, "final", 0))
    assert digest() != here
    monkeypatch.undo()
    other = tmp_path / "libcst"
    other.mkdir()
    (other / "_version.py").write_text("__version__ = '0.0.1'\n")
    spec = importlib.machinery.ModuleSpec("libcst", None, is_package=True)
    spec.submodule_search_locations = [str(other)]
    find = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: spec if name == "libcst" else find(name, *a)
    )
    assert digest() != here


def test_facts_of_a_wider_selection_give_a_narrower_one_its_own_findings(
    tmp_path: Path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    """Facts collected for every rule serve an audit of one (:func:`covers`): its
    findings are those of that rule audited alone without a cache, for each rule."""
    import subprocess

    from swacheck.cli import main
    from swacheck.rules import all_rules

    shutil.copytree(REPO / "examples", tmp_path / "p", ignore=shutil.ignore_patterns("*.md"))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path / "p", check=True)
    monkeypatch.chdir(tmp_path / "p")

    def audit(*args: str) -> list[dict]:
        capsys.readouterr()
        assert main(["audit", "--jobs", "1", "--output-format", "json", *args]) in (0, 1)
        return json.loads(capsys.readouterr().out)

    assert audit()
    for rule in all_rules():
        alone = audit("--no-cache", "--select", rule.code)
        assert audit("--select", rule.code) == alone, rule.code
        assert {f["code"] for f in alone} == {rule.code}


def test_the_analysis_reads_no_key_its_cached_facts_are_not_keyed_by() -> None:
    """Facts and the rules' declarations are cached under ``fingerprint("analysis")``:
    no module of the analysis may read a key left out of it, but where the engine keys
    what depends on it otherwise (the bounds: SWA999 records and uncached outcomes;
    ``per-file-ignores``: a path's ignored codes in its findings' key)."""
    import ast

    from swacheck.config import NOT_FINDINGS, REPORTING

    handled = {
        "swacheck/engine/checker.py": {"max_file_time", "per_file_ignores"},
        "swacheck/engine/units.py": {"max_file_time", "max_file_size"},
        "swacheck/engine/workers.py": {"max_file_time"},
        # ``source``: only to name the file an unknown code came from.
        "swacheck/engine/selection.py": {
            "per_file_ignores",
            "select",
            "extend_select",
            "ignore",
            "source",
        },
    }
    modules = [
        *(REPO / "swacheck" / "analysis").glob("*.py"),
        *(REPO / "rules").glob("*.py"),
        *(REPO / "swacheck" / "engine").glob("*.py"),
        *(REPO / "swacheck" / name for name in ("rule.py", "order_rule.py", "context.py")),
        REPO / "swacheck" / "catalogue.py",
        REPO / "swacheck" / "triggers.py",
    ]
    left_out = set(NOT_FINDINGS) | set(REPORTING)
    read = set()
    for path in modules:
        relative = path.relative_to(REPO).as_posix()
        if relative in ("swacheck/engine/workspace.py", "swacheck/engine/cache.py"):
            continue  # the engine's own bookkeeping (where the cache is, the bounds' keys)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in left_out:
                base = node.value
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if name == "config" and node.attr not in handled.get(relative, ()):
                    read.add(f"{relative}: config.{node.attr}")
    assert not read


def test_an_edit_that_only_shifts_rows_re_checks_that_file_alone(tmp_path: Path) -> None:
    """Issue 39: a comment line inserted at the top of an SWA file cost a cold audit
    (every file's findings were keyed by every file's facts, positions included). Now
    other files' findings are keyed by what the facts say, and a finding names a place
    in another file without its row, so they stay right: equal to a ``--no-cache`` run."""
    import subprocess
    import sys

    def full(*args: str) -> str:  # the notes too, where SWA008 names every reader
        command = [sys.executable, "-m", "swacheck", "audit", "--output-format", "full"]
        proc = subprocess.run([*command, *args], cwd=root, capture_output=True, text=True)
        assert proc.returncode == 1, proc.stderr
        return proc.stdout

    root = tmp_path / "project"
    shutil.copytree(REPO / "examples", root, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    # A reader of the pool's per-batch state in another file: SWA008 names it there.
    write(root / "reader.py", "def step(pool):\n    return pool.swa_loc\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    cold, parsed = counted(root)
    assert parsed == len(list(root.glob("*.py")))
    pool, reader = root / "swa_memory_pool.py", root / "reader.py"
    for path in (pool, reader):
        path.write_text("# moved\n\n" + path.read_text())
        warm, parsed = counted(root)
        assert parsed == 1
        assert warm == counted(root, "--no-cache")[0]
        assert full() == full("--no-cache")
    assert "read at reader.py in step()" in full()
    # Shifted rows in the pool's own findings; another file's findings where they were.
    assert sorted((f["filename"], f["location"]["row"]) for f in warm) == sorted(
        (f["filename"], f["location"]["row"] + 2 * f["filename"].endswith(pool.name)) for f in cold
    )
    # A change to what the reader does reaches the pool's finding.
    reader.write_text("def step(pool):\n    return 1\n")
    assert counted(root)[0] == counted(root, "--no-cache")[0]
    assert full() == full("--no-cache") and "reader.py" not in full()
