"""Parsing (``engine.parse``): the tree libcst's parser makes, without re-validating it."""

from __future__ import annotations

import sysconfig
import threading
from pathlib import Path

import libcst as cst
import pytest

from swacheck.engine.parse import Parsed, parse_source

REPO = Path(__file__).resolve().parents[2]
STDLIB = Path(sysconfig.get_paths()["stdlib"])
SOURCES = [
    *sorted((REPO / "examples").glob("*.py")),
    *sorted((REPO / "reference_impl").rglob("*.py"))[:20],
    *(STDLIB / name for name in ("dataclasses.py", "argparse.py", "typing.py", "ast.py")),
]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_the_tree_is_libcsts_validated_tree(path: Path) -> None:
    """Skipping the per-node validation while parsing changes nothing in the tree."""
    data = path.read_bytes()
    parsed = parse_source(path.name, data)
    assert isinstance(parsed, Parsed)
    validated = cst.parse_module(data)
    assert parsed.wrapper.module.deep_equals(validated)
    assert parsed.wrapper.module.bytes == data


def _validations_while_parsing(monkeypatch: pytest.MonkeyPatch) -> int:
    calls = []
    validate = cst.CSTNode._validate
    monkeypatch.setattr(cst.CSTNode, "_validate", lambda node: calls.append(validate(node)))
    assert isinstance(parse_source("f.py", b"def f(x):\n    return x[0] + 1\n"), Parsed)
    return len(calls)


def test_nodes_are_validated_again_after_the_parse_and_in_threaded_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Validation is skipped only inside the parse of a single-threaded process: a node
    built afterwards is validated, and a parse beside another live thread validates
    (that thread may be building nodes by hand)."""
    with monkeypatch.context() as alone:  # as in a worker (the suite may run threads)
        alone.setattr(threading, "active_count", lambda: 1)
        assert _validations_while_parsing(alone) == 0
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not an identifier")
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert _validations_while_parsing(monkeypatch) > 0
    finally:
        release.set()
        other.join()
