"""docs/reliability.md is the record of what swacheck promises and the test proving each
promise: what it says of the tests must be true of them.

It said "48 tests" while 118 were collected: the count it gives is now the number
collected, and every test it names (``test_file.py``, ``test_file.py::test_name``, a
bare ``test_name`` or a ``test_prefix_*``) must exist, so a renamed or deleted test
cannot leave a promise citing nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORD = REPO / "docs" / "reliability.md"
TESTS = REPO / "tests"

# A test named in backticks: an optional folder, a file, an optional ``::function``;
# or a function alone (a trailing ``*`` names every test with that prefix).
_CITED = re.compile(r"`((?:[\w/]+/)?test_\w+\.py)(?:::(test_\w+\*?))?`|`(test_\w+\*?)`")


def _definitions() -> dict[str, set[str]]:
    """Each test file under tests/ (by its path below the repository) -> its functions."""
    return {
        path.relative_to(REPO).as_posix(): set(
            re.findall(r"^\s*def (test_\w+)", path.read_text(encoding="utf-8"), re.M)
        )
        for path in TESTS.rglob("test_*.py")
    }


def _defined(name: str, functions: set[str]) -> bool:
    if name.endswith("*"):
        return any(f.startswith(name[:-1]) for f in functions)
    return name in functions


def test_every_test_the_record_cites_exists() -> None:
    definitions = _definitions()
    everywhere = set().union(*definitions.values())
    missing = []
    for match in _CITED.finditer(RECORD.read_text(encoding="utf-8")):
        file, function, bare = match.groups()
        if bare is not None:
            if not _defined(bare, everywhere):
                missing.append(bare)
            continue
        files = [path for path in definitions if path.endswith(f"/{file.rsplit('/', 1)[-1]}")]
        if "/" in file:
            files = [path for path in files if path.endswith(file)]
        if not files:
            missing.append(file)
        elif function is not None and not any(_defined(function, definitions[f]) for f in files):
            missing.append(f"{file}::{function}")
    assert missing == []


def test_the_record_gives_the_number_of_reliability_tests_collected() -> None:
    stated = re.search(
        r"`tests/reliability/`,\s+collected by [^:]*: (\d[\d,]*) tests", RECORD.read_text()
    )
    assert stated is not None, "the record states how many tests tests/reliability/ holds"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO / "tests" / "reliability",
        capture_output=True,
        text=True,
        timeout=300,
    )
    collected = re.search(r"(\d+) tests? collected", proc.stdout)
    assert collected is not None, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert int(stated.group(1).replace(",", "")) == int(collected.group(1))
