"""What a cold audit must parse, and what parsing it alone costs, beside ruff's whole run.

Issue 27 asks for a cold whole-tree audit within 5x ruff's time. This measures the floor
the libcst design puts under that: the text a cold audit hands libcst (the candidate
files the prefilter keeps, with the definitions no trigger matches blanked out, as
``engine.regions`` does for the rules that apply to the tree), and the CPU seconds of
parsing exactly that text, in one process with the cyclic collector off (as workers
run), three ways: CPython's ``ast``, libcst as shipped (every node validated), and
swacheck's parse (``engine.parse.parse_source``: libcst without the per-node
validation). Beside them, ``ruff check --select E,F,W --no-cache`` of the whole tree
(wall and CPU seconds), and what a finer prefilter could leave: the bytes kept if
every rule were region-safe per top-level definition, and per method.

    python benchmarks/parse_share.py sglang==0.5.11 sglang==0.5.23 vllm==0.33.0
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import gc
import os
import resource
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import libcst as cst
from engines import ensure

from swacheck.catalogue import RuleSpec, catalogue
from swacheck.config import Config
from swacheck.engine.parse import parse_source
from swacheck.engine.regions import Regions, blank_irrelevant_definitions
from swacheck.triggers import FileText, TriggerSet

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _applicable(files: list[bytes]) -> list[RuleSpec]:
    """The rules a cold audit of these files runs (their scope opened by some file)."""
    specs = [spec for spec in catalogue(Config()) if spec.triggers is not None]
    return [
        spec
        for spec in specs
        if spec.activation is None or any(spec.activation[1].search(data) for data in files)
    ]


def _kept(data: bytes, triggers: TriggerSet) -> tuple[int, int]:
    """Bytes of ``data`` kept were every rule region-safe per top-level definition, and
    per method (a class's other statements kept)."""
    tree = ast.parse(data)
    lines = data.split(b"\n")

    def text(node: ast.stmt) -> bytes:
        assert node.end_lineno is not None
        return b"\n".join(lines[node.lineno - 1 : node.end_lineno])

    top = method = 0
    for node in tree.body:
        block = text(node)
        if not isinstance(node, _DEFINITIONS):
            top += len(block)
            method += len(block)
        elif triggers.matches(FileText(block)):
            top += len(block)
            members = node.body if isinstance(node, ast.ClassDef) else [node]
            for member in members:
                part = text(member)
                if not isinstance(member, _DEFINITIONS) or triggers.matches(FileText(part)):
                    method += len(part)
    return top, method


def _cpu(parse: Callable[[bytes], object], texts: list[bytes]) -> float:
    """CPU seconds to parse ``texts`` (a text a parser rejects costs what it cost)."""
    start = time.process_time()
    for data in texts:
        with contextlib.suppress(Exception):
            parse(data)
    return time.process_time() - start


def _ruff(tree: Path) -> tuple[float, float]:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [ruff, "check", "--select", "E,F,W", "--no-cache", "--exit-zero", "-q", str(tree)],
        capture_output=True,
        check=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(spec: str) -> None:
    name, _, version = spec.partition("==")
    tree = ensure(name, version)
    files = [path.read_bytes() for path in sorted(tree.rglob("*.py"))]
    rules = _applicable(files)
    regions = Regions.of(rules)
    triggers = TriggerSet(set().union(*(rule.triggers or () for rule in rules)))
    texts, top, method, candidates = [], 0, 0, 0
    for data in files:
        if not triggers.matches(FileText(data)):
            continue
        sparse = blank_irrelevant_definitions(data, regions)
        texts.append(data if sparse is None else sparse)
        try:
            kept = _kept(data, triggers)
        except SyntaxError:
            kept = (len(data), len(data))
        candidates += len(data)
        top, method = top + kept[0], method + kept[1]
    parsed = sum(len(text) for text in texts)
    ruff_wall, ruff_cpu = _ruff(tree)
    gc.disable()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with_ast = _cpu(ast.parse, texts)
    with_libcst = _cpu(cst.parse_module, texts)
    swacheck = _cpu(lambda data: parse_source("f.py", data, nesting_checked=True), texts)
    gc.enable()
    mb = 1e6
    print(
        f"## {spec}: {len(files)} files, {sum(map(len, files)) / mb:.1f} MB; rules "
        f"{','.join(rule.code for rule in rules)}\n"
        f"- candidates {len(texts)} files, {candidates / mb:.1f} MB; handed to libcst "
        f"{parsed / mb:.1f} MB (definitions without a trigger blanked)\n"
        f"- parse CPU: ast {with_ast:.1f} s, libcst {with_libcst:.1f} s, "
        f"swacheck's parse {swacheck:.1f} s\n"
        f"- ruff E,F,W --no-cache, whole tree: {ruff_wall:.2f} s wall, {ruff_cpu:.2f} s CPU "
        f"(5x: {5 * ruff_wall:.1f} s wall, about {5 * ruff_wall * (os.cpu_count() or 1):.0f} "
        "CPU s on every core)\n"
        f"- kept if every rule were region-safe: per top-level definition {top / mb:.1f} MB, "
        f"per method {method / mb:.1f} MB",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("releases", nargs="+", help="pkg==version")
    for spec in parser.parse_args().releases:
        measure(spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
