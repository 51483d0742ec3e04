"""Issue #9: ``--fix`` never corrupts a file.

Through the real command: after ``--fix`` every file parses, a second run fixes
nothing, lines outside the fixes are byte-identical, encoding, newlines, BOM, mode and
owner are kept, a read-only file is reported and left alone, a symlink stays a link,
and a run killed with SIGKILL mid-write leaves every file either old or new, whole.
The same checks on real SGLang releases: benchmarks/fix_roundtrip.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fuzzkit import EXAMPLES, INT64_SWA, STYLES, Cli, changed_rows, encode, python_parses, write

FIXED = INT64_SWA.replace("int64", "int32")
NEWLINES = {"lf": b"\n", "crlf": b"\r\n", "cr": b"\r", "bom": b"\n", "latin-1": b"\n"}
MODES = (0o644, 0o600, 0o755, 0o640, 0o664)


def _newlines(data: bytes) -> set[bytes]:
    crlf = data.count(b"\r\n")
    kinds = {b"\r\n"} if crlf else set()
    if data.count(b"\n") > crlf:
        kinds.add(b"\n")
    if data.count(b"\r") > crlf:
        kinds.add(b"\r")
    return kinds


def test_fix_on_the_examples_in_every_style(cli: Cli, tmp_path: Path) -> None:
    originals: dict[Path, bytes] = {}
    for i, style in enumerate(STYLES):
        for source in sorted(EXAMPLES.glob("*.py")):
            path = write(tmp_path / style / source.name, encode(source.read_text(), style))
            path.chmod(MODES[i])
            originals[path] = path.read_bytes()
    inodes = {path: path.stat().st_ino for path in originals}
    edit_rows: dict[Path, set[int]] = {}
    for finding in cli.json("--no-cache"):
        for edit in finding["fix"]["edits"] if finding["fix"] else ():
            rows = range(edit["location"]["row"], edit["end_location"]["row"] + 1)
            edit_rows.setdefault(tmp_path / finding["filename"], set()).update(rows)

    first = cli("audit", "--fix", "--unsafe-fixes", "--no-cache")
    assert " fixed, " in first.stdout and "error" not in first.stderr

    fixed = set()
    for i, style in enumerate(STYLES):
        for path in sorted((tmp_path / style).glob("*.py")):
            before, after = originals[path], path.read_bytes()
            assert stat.S_IMODE(path.stat().st_mode) == MODES[i], path
            if after == before:
                assert path.stat().st_ino == inodes[path], "an unchanged file is not rewritten"
                continue
            fixed.add(path)
            assert python_parses(after), path
            assert changed_rows(before, after) <= edit_rows.get(path, set()), path
            assert _newlines(after) == {NEWLINES[style]}, path
            assert after.startswith(b"\xef\xbb\xbf") == (style == "bom"), path
            if style == "latin-1":
                assert after.decode("latin-1").endswith("# \xe9\n")
            assert path.stat().st_ino != inodes[path], "written to a new file, then renamed"
    assert fixed == set(edit_rows) and len(fixed) >= 2 * len(STYLES)
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".swacheck")]

    snapshot = {path: path.read_bytes() for path in originals}
    second = cli("audit", "--fix", "--unsafe-fixes", "--no-cache")
    assert "Fixed" not in second.stderr
    assert {path: path.read_bytes() for path in originals} == snapshot


SEPARATORS = {"ff": ("\x0c", "utf-8"), "vt": ("\v", "utf-8"), "fs": ("\x1c", "utf-8")}
SEPARATORS |= {"nel": ("\x85", "latin-1"), "ls": ("\u2028", "utf-8")}


def test_fix_lands_on_its_row_after_characters_splitlines_splits_at(
    cli: Cli, tmp_path: Path
) -> None:
    """Python ends lines only at \\n, \\r\\n and \\r; a fix placed by other line ends
    shifted by a row, still parsed, and was written: ``torch.zeros((8,), torch.int32.int64)``."""
    expected = {}
    for name, (separator, encoding) in SEPARATORS.items():
        header = f"# -*- coding: {encoding} -*-\nimport torch\n\x0c\n# a{separator}b\n"
        write(tmp_path / f"{name}.py", (header + INT64_SWA).encode(encoding))
        expected[name] = (header + FIXED).encode(encoding)
    cli("audit", "--fix", "--no-cache", check_rc=0)
    assert {name: (tmp_path / f"{name}.py").read_bytes() for name in expected} == expected


def test_inserted_statement_is_indented_like_its_anchor_after_a_form_feed(
    cli: Cli, tmp_path: Path
) -> None:
    body = (
        "class Allocator:\n"
        "    def invalidate_loc_cache(self):\n"
        "        self._cached_loc_key = None\n\n"
        "    def translate_loc_from_full_to_swa(self, loc):\n"
        "        if self._cached_loc_key is None:\n"
        "            self._cached_loc_key = self.full_to_swa_index_mapping[loc]\n"
        "        return self._cached_loc_key\n\n"
        "    def free(self, idx):\n"
        "        self.full_to_swa_index_mapping[idx] = 0\n"
    )
    target = write(tmp_path / "pool.py", "\x0c\n" + body)
    cli("audit", "--fix", "--no-cache", "pool.py")
    assert target.read_text() == "\x0c\n" + body + "        self.invalidate_loc_cache()\n"


def test_read_only_file_is_reported_and_left_alone(cli: Cli, tmp_path: Path) -> None:
    read_only = write(tmp_path / "read_only.py", INT64_SWA)
    read_only.chmod(0o444)
    writable = write(tmp_path / "writable.py", INT64_SWA)
    proc = cli("audit", "--fix", "--no-cache")
    assert "read_only.py: cannot write fix: file is read-only" in proc.stderr
    assert read_only.read_text() == INT64_SWA
    assert stat.S_IMODE(read_only.stat().st_mode) == 0o444
    assert writable.read_text() == FIXED


def test_a_fix_that_cannot_be_written_keeps_its_finding(cli: Cli, tmp_path: Path) -> None:
    write(tmp_path / "read_only.py", INT64_SWA).chmod(0o444)
    proc = cli("audit", "--fix", "--no-cache", "--output-format", "concise")
    assert proc.returncode == 1
    assert proc.stdout.startswith("read_only.py:2:45: SWA002")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_owner_is_kept(cli: Cli, tmp_path: Path) -> None:
    target = write(tmp_path / "bufs.py", INT64_SWA)
    os.chown(target, 1234, 4321)
    cli("audit", "--fix", "--no-cache", check_rc=0)
    assert target.read_text() == FIXED
    assert (target.stat().st_uid, target.stat().st_gid) == (1234, 4321)


def test_symlink_given_explicitly_stays_a_link(cli: Cli, tmp_path: Path) -> None:
    target = write(tmp_path / "real" / "bufs.py", INT64_SWA)
    link = tmp_path / "link.py"
    link.symlink_to(Path("real") / "bufs.py")
    cli("audit", "--fix", "--no-cache", "link.py", check_rc=0)
    assert link.is_symlink() and os.readlink(link) == str(Path("real") / "bufs.py")
    assert target.read_text() == FIXED


# Each file: two fixes and a large definition the fix leaves alone, so writes take a while.
KILLED_FILE = (
    INT64_SWA
    + "swa_indices = torch.arange(n, dtype=torch.int64)\n\n\n"
    + "def payload():\n    return '''\n"
    + "0123456789abcdef" * 2**12
    + "\n'''\n"
)


def test_sigkill_mid_fix_leaves_every_file_old_or_new(tmp_path: Path) -> None:
    """Kill a real ``--fix`` as it writes, three times; then let one finish.

    After each kill every file must be its old or its final content, whole; the temporary
    siblings a kill may leave are never ``.py`` files, so no audit reads them.
    """
    tree = tmp_path / "tree"
    paths = [write(tree / f"m{i:03}.py", KILLED_FILE) for i in range(90)]
    old = KILLED_FILE.encode()
    command = [sys.executable, "-m", "swacheck", "audit", "--fix", "--no-cache", "--jobs", "1"]
    snapshots = []
    for fraction in (0.0, 0.3, 0.6):
        inodes = {p: p.stat().st_ino for p in paths}
        unfixed = sum(p.read_bytes() == old for p in paths)
        proc = subprocess.Popen(command, cwd=tree, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            written = sum(p.stat().st_ino != inodes[p] for p in paths)
            if written > fraction * unfixed:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.0005)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed"
        snapshots.append({p: p.read_bytes() for p in paths})
    subprocess.run(command, cwd=tree, check=False, timeout=120, capture_output=True)
    new = paths[0].read_bytes()
    assert new != old and python_parses(new) and python_parses(old)
    assert all(p.read_bytes() == new for p in paths)
    for snapshot in snapshots:
        assert set(snapshot.values()) <= {old, new}
    assert 0 < sum(data == new for data in snapshots[0].values()) < len(paths)
    assert sorted(p.name for p in tree.glob("*.py")) == [p.name for p in paths]


def test_unparseable_file_is_never_written(cli: Cli, tmp_path: Path) -> None:
    broken = write(tmp_path / "broken.py", "swa_loc = (\n")
    proc = cli("audit", "--fix", "--no-cache", check_rc=1)
    assert "Fixed" not in proc.stderr
    assert broken.read_text() == "swa_loc = (\n"


# -- an edit saved while --fix runs is never overwritten (issue 29) ------------------------

# ``swacheck audit --fix`` that, once the fix of ``bufs.py`` is computed and before it is
# written, says so (``ready``) and waits for the test's writer to save its edit (``go``).
PAUSED_FIX = """
import sys, time
from pathlib import Path

from swacheck.engine import passes

fix = passes.Passes.fix


def paused(self, source, *args, **kwargs):
    outcome = fix(self, source, *args, **kwargs)
    if source.key.endswith("bufs.py"):
        Path("ready").touch()
        deadline = time.monotonic() + 60
        while not Path("go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    return outcome


passes.Passes.fix = paused
from swacheck.cli import main

options = ["--fix", "--no-cache", "--jobs", "1", "--output-format", "concise"]
sys.exit(main(["audit", *options, *sys.argv[1:]]))
"""
EDITED = INT64_SWA + "swa_indices = torch.arange(8, dtype=torch.int64)  # saved meanwhile\n"


def _paused_fix(tmp_path: Path, *paths: str) -> subprocess.Popen[str]:
    """``swacheck audit --fix PATHS`` in ``tmp_path``, paused once bufs.py's fix is made."""
    audit = subprocess.Popen(
        [sys.executable, "-c", PAUSED_FIX, *paths],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists() and audit.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return audit


def test_an_edit_saved_during_the_run_is_not_overwritten(tmp_path: Path) -> None:
    """A writer process saves bufs.py after the audit read it and before its fix is
    written: the edit stays, the file is reported (SWA999, exit 1) and the other file
    is fixed as usual."""
    target = write(tmp_path / "bufs.py", INT64_SWA)
    other = write(tmp_path / "other.py", INT64_SWA)
    audit = _paused_fix(tmp_path, "bufs.py", "other.py")
    target.write_text(EDITED)  # the editor's save, in place
    (tmp_path / "go").touch()
    out, err = audit.communicate(timeout=120)
    assert audit.returncode == 1, (out, err)
    assert target.read_text() == EDITED
    assert other.read_text() == FIXED
    assert "bufs.py:1:1: SWA999 File changed on disk during the run" in out
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bufs.py", "go", "other.py", "ready"]


@pytest.mark.parametrize("swapped", ["file", "folder", "copy in place"])
def test_a_file_swapped_while_the_run_lasts_is_not_written(tmp_path: Path, swapped: str) -> None:
    """bufs.py replaced, while the audit runs, by a symlink to an identical copy elsewhere
    (another checkout), its folder by a link to a copy of the folder, or by an identical
    copy at the same path (a new inode): that copy was rewritten outside the project. Now
    nothing but the file read is written (same device and inode, same bytes); the swapped
    path is reported as changed on disk and the other file is fixed."""
    project = tmp_path / "project"
    away = tmp_path / "elsewhere"
    target = write(project / "pkg" / "bufs.py", INT64_SWA)
    other = write(project / "other.py", INT64_SWA)
    write(away / "pkg" / "bufs.py", INT64_SWA)
    audit = _paused_fix(project, ".")
    if swapped == "file":
        target.unlink()
        target.symlink_to(away / "pkg" / "bufs.py")
    elif swapped == "folder":
        shutil.rmtree(project / "pkg")
        (project / "pkg").symlink_to(away / "pkg", target_is_directory=True)
    else:
        write(project / "pkg" / "copy.tmp", INT64_SWA)
        os.replace(project / "pkg" / "copy.tmp", target)
    (project / "go").touch()
    out, err = audit.communicate(timeout=120)
    assert audit.returncode == 1, (out, err)
    assert "pkg/bufs.py:1:1: SWA999 File changed on disk during the run" in out
    assert (away / "pkg" / "bufs.py").read_text() == INT64_SWA, "nothing written outside"
    assert target.read_text() == INT64_SWA
    assert other.read_text() == FIXED
    assert "Traceback" not in err
    assert sorted(p.name for p in away.rglob("*")) == ["bufs.py", "pkg"]


def test_an_edit_just_before_the_rename_is_kept(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The last moments: a save by rename while the fixed copy is written, and a save in
    place just before the fixed copy is renamed over the file (then put back)."""
    from swacheck.engine import fixer

    target = write(tmp_path / "bufs.py", INT64_SWA)
    original = INT64_SWA.encode()
    sibling = fixer._write_sibling

    def saved_by_rename(*args):  # type: ignore[no-untyped-def]
        name = sibling(*args)
        write(tmp_path / "editor.tmp", EDITED)
        os.replace(tmp_path / "editor.tmp", target)
        return name

    monkeypatch.setattr(fixer, "_write_sibling", saved_by_rename)
    with pytest.raises(fixer.ChangedOnDisk):
        fixer.write_atomic(target, FIXED.encode(), expected=original)
    assert target.read_text() == EDITED
    monkeypatch.undo()

    write(tmp_path / "bufs.py", INT64_SWA)
    replace = os.replace

    def saved_in_place(source, destination, **at):  # type: ignore[no-untyped-def]
        monkeypatch.undo()  # once: the file is put back with os.replace itself
        target.write_text(EDITED)
        replace(source, destination, **at)

    monkeypatch.setattr(fixer.os, "replace", saved_in_place)
    with pytest.raises(fixer.ChangedOnDisk):
        fixer.write_atomic(target, FIXED.encode(), expected=original)
    assert target.read_text() == EDITED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bufs.py"]
    # The same bytes saved again are no change: the fix is written.
    write(tmp_path / "bufs.py", INT64_SWA)
    fixer.write_atomic(target, FIXED.encode(), expected=original)
    assert target.read_text() == FIXED
