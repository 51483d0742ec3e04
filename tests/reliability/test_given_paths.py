"""Issue 29, item 7: a path named on the command line that is not there, and file
names that are not text.

A dangling symlink given by name is reported as a missing file is (SWA999, exit 1),
not as a warning with exit 0; a file name that is not UTF-8 is shown with its bytes
escaped (``bad\\xff.py``, as control characters are), never as ``bad\ufffd.py``, which
names no file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from fuzzkit import INT64_SWA, Cli, write

from swacheck.report.concise import shown_path


def test_a_dangling_symlink_given_by_name_is_a_missing_file(cli: Cli, tmp_path: Path) -> None:
    write(tmp_path / "ok.py", "x = 1\n")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "gone.py")
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    missing = cli(
        "audit", "--no-cache", "--output-format", "concise", "missing.py", "ok.py", check_rc=1
    )
    assert missing.stdout.startswith("missing.py:1:1: SWA999 File could not be read")
    dangling = cli(
        "audit", "--no-cache", "--output-format", "concise", "dangling.py", "ok.py", check_rc=1
    )
    assert dangling.stdout == missing.stdout.replace("missing.py", "dangling.py")
    looping = cli("audit", "--no-cache", "--output-format", "concise", "loop.py", check_rc=1)
    assert looping.stdout.startswith("loop.py:1:1: SWA999 File could not be read")
    # In a walk, links are skipped as before: nothing is reported for them.
    cli("audit", "--no-cache", "--output-format", "concise", ".", check_rc=0)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file names")
def test_a_file_name_that_is_not_utf8_is_shown_escaped(cli: Cli, tmp_path: Path) -> None:
    name = os.fsdecode(b"bad\xff.py")
    write(tmp_path / name, INT64_SWA)
    for env in ({}, {"PYTHONUTF8": "1"}, {"LC_ALL": "C"}):
        proc = cli("audit", "--no-cache", "--output-format", "concise", env=env, check_rc=1)
        assert proc.stdout.startswith("bad\\xff.py:2:45: SWA002"), (env, proc.stdout)
        assert "\ufffd" not in proc.stdout and "\udcff" not in proc.stdout


def test_shown_path_escapes_what_would_garble_a_line() -> None:
    assert shown_path("plain/ünï.py") == "plain/ünï.py"
    assert shown_path("a\nb\tc\x1b.py") == "a\\nb\\tc\\x1b.py"
    assert shown_path(os.fsdecode(b"x\xe9\xff.py")) == "x\\xe9\\xff.py"
