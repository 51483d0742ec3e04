"""Issue 28: one hostile file costs that file only, in every way an audit runs.

Each hostile class (``hostile.py``) sits next to an ordinary file with a known finding;
the real command must answer the hostile file with its own ``SWA999`` naming why, report
every finding of the ordinary file as it does alone, exit 1 and print no traceback:
auditing the folder (worker processes), ``--jobs 1``, the files named on the command
line (pre-commit's path) and stdin (an editor's ``--fix -`` included). The shapes libcst
crashes or stalls on that no guard recognises are answered by the worker processes and
the operating system's limits: a real SIGSEGV of libcst's parser, a native parse past
``max-file-time``, allocations past ``max-file-memory``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import libcst
import pytest
from fuzzkit import INT64_SWA, Cli, corpus, write
from hostile import BOUNDED, CHAIN_LAYOUTS, GUARDED, UNREADABLE, attribute_chain

from swacheck.engine.guards import MAX_RUN, shape_problem

ORDINARY = "zz_ordinary.py"


def _by_file(findings: list[dict]) -> dict[str, list[dict]]:
    """Findings by file name, each without its (absolute) file name, so that a file's
    findings in one folder compare equal to its findings in another."""
    grouped: dict[str, list[dict]] = {}
    for finding in findings:
        name = Path(finding.pop("filename")).name
        grouped.setdefault(name, []).append(finding)
    return grouped


def _ordinary_alone(cli: Cli, tmp_path: Path) -> list[dict]:
    alone = tmp_path / "alone"
    write(alone / ORDINARY, INT64_SWA)
    found = _by_file(Cli(alone).json("--no-cache", check_rc=1))[ORDINARY]
    assert [f["code"] for f in found] == ["SWA002"]
    return found


# -- the guards ----------------------------------------------------------------------------


@pytest.mark.parametrize("layout", sorted(CHAIN_LAYOUTS))
@pytest.mark.parametrize("links", [MAX_RUN + 1, 2000, 6000])
def test_an_attribute_chain_is_refused_whatever_its_layout(layout: str, links: int) -> None:
    shape = shape_problem(attribute_chain(links, layout))
    assert shape is not None and "chain" in shape.reason
    assert shape.row == 2  # the chain's first line


@pytest.mark.parametrize("layout", sorted(CHAIN_LAYOUTS))
def test_a_chain_real_code_could_hold_is_parsed(layout: str) -> None:
    data = attribute_chain(150, layout)
    assert shape_problem(data) is None
    libcst.parse_module(data)


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_each_guarded_shape_is_refused_at_every_size_beyond_its_bound(name: str) -> None:
    make, sizes, words = GUARDED[name]
    for size in sizes:
        shape = shape_problem(make(size))
        assert shape is not None, (name, size)
        assert words.lower() in shape.reason.lower() and shape.row == 2


def test_no_real_source_is_refused() -> None:
    """The examples and every rule's VALID/INVALID examples (SGLang's releases are
    measured in docs/reliability.md: none refused, the longest run 98)."""
    refused = {
        name: shape
        for name, text in corpus().items()
        if (shape := shape_problem(text.encode())) is not None
    }
    assert refused == {}


# -- the command: one hostile file of each class beside an ordinary one ---------------------


def test_every_guarded_class_is_its_own_swa999_and_the_run_goes_on(
    cli: Cli, tmp_path: Path
) -> None:
    expected = _ordinary_alone(cli, tmp_path)
    tree = tmp_path / "tree"
    for name, (make, sizes, _) in GUARDED.items():
        write(tree / f"{name}.py", make(sizes[-1]))
    for name, (content, _) in UNREADABLE.items():
        write(tree / f"{name}.py", content)
    write(tree / ORDINARY, INT64_SWA)
    names = [*GUARDED, *UNREADABLE]
    words = {name: GUARDED[name][2] for name in GUARDED} | {
        name: UNREADABLE[name][1] for name in UNREADABLE
    }
    for jobs in ("0", "1"):  # one worker per core, and one
        started = time.perf_counter()
        found = _by_file(Cli(tree).json("--no-cache", "--jobs", jobs, check_rc=1))
        assert time.perf_counter() - started < 120
        assert found.pop(ORDINARY) == expected
        for name in names:
            (swa999,) = found.pop(f"{name}.py")
            assert swa999["code"] == "SWA999"
            assert words[name].lower() in swa999["message"].lower(), swa999
        assert found == {}
    # The files named on the command line, as pre-commit passes them.
    given = [f"{name}.py" for name in names[::3]] + [ORDINARY]
    found = _by_file(Cli(tree).json("--no-cache", "--force-exclude", *given, check_rc=1))
    assert found.pop(ORDINARY) == expected
    assert sorted(found) == sorted(given[:-1])


@pytest.mark.parametrize("name", sorted(BOUNDED))
def test_what_no_guard_knows_is_bounded_by_the_workers(cli: Cli, tmp_path: Path, name: str) -> None:
    content, config, words = BOUNDED[name]
    expected = _ordinary_alone(cli, tmp_path)
    tree = tmp_path / "tree"
    write(tree / "hostile.py", content)
    write(tree / ORDINARY, INT64_SWA)
    limits = ["--config", config] if config else []
    for jobs in ("0", "1"):
        proc = Cli(tree)(
            "audit", "--no-cache", "--output-format", "json", "--jobs", jobs, *limits, timeout=120
        )
        assert proc.returncode == 1, proc.stderr
        found = _by_file(json.loads(proc.stdout))
        assert found.pop(ORDINARY) == expected
        (swa999,) = found.pop("hostile.py")
        assert swa999["code"] == "SWA999" and words in swa999["message"], swa999
        assert found == {}


# -- stdin: an editor's path ------------------------------------------------------------------


def _stdin(cwd: Path, content: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "swacheck", "audit", "--no-cache"]
    proc = subprocess.run(
        [*command, "--stdin-filename", "x.py", *args, "-"],
        cwd=cwd,
        input=content,
        capture_output=True,
        timeout=120,
    )
    assert b"Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1, proc.stderr
    return proc


@pytest.mark.parametrize(
    "name", ["attribute_chain_space", "huge_integer", "elif_chain", "lone_surrogate"]
)
def test_stdin_gets_swa999_and_fix_hands_back_the_source_unchanged(
    tmp_path: Path, name: str
) -> None:
    if name in GUARDED:
        make, sizes, words = GUARDED[name]
        content = make(sizes[-1])
    elif name in BOUNDED:
        content, _, words = BOUNDED[name]
    else:
        content, words = UNREADABLE[name]
    (swa999,) = json.loads(_stdin(tmp_path, content, "--output-format", "json").stdout)
    assert swa999["code"] == "SWA999" and words.lower() in swa999["message"].lower()
    assert Path(swa999["filename"]).name == "x.py"
    # An editor replaces its buffer with what --fix - prints: never nothing.
    assert _stdin(tmp_path, content, "--fix").stdout == content
