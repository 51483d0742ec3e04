"""What the reliability tests and ``benchmarks/fuzz_linter.py`` share: the real CLI in a
subprocess, real sources, the mutations applied to them, and the properties every
audit of them must have.

The properties are checked through the real engine (discovery, prefilter, both
passes, cache, fixer) on files written to disk, never on mocks: no crash and no
internal error, every position inside its file, no SWA999 on a file CPython parses,
the same findings with the prefilter off and with the cache cold or warm, and a
``--fix`` that keeps every file parsing, touches no line outside its edits and has
nothing left to do after.
"""

from __future__ import annotations

import ast
import codecs
import dataclasses
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from swacheck.config import config_from_table
from swacheck.engine.audit import AuditOptions, AuditResult, audit_paths
from swacheck.finding import PARSE_ERROR_CODE, Finding, Position
from swacheck.rules import all_rules

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

# The seed bugs of examples/, one statement (or block) each, injected into other code.
SEED_SNIPPETS = (
    "self.full_to_swa_index_mapping[free_index] = 0",
    "self.full_to_swa_index_mapping[full_loc] = swa_loc.to(torch.int64)",
    "self.invalidate_loc_cache()",
    "key = (kv_indices.untyped_storage().data_ptr(), kv_indices.numel())",
    "self._cached_swa_loc = self.full_to_swa_index_mapping[kv_indices]",
    "out_cache_loc_swa = torch.zeros((max_num_token,), dtype=torch.int64)",
    "self.swa_loc = swa_loc",
    "return self._swa_kv_pool.swa_loc",
    "if bs != raw_bs:\n    self.seq_lens.fill_(1)\n    self.out_cache_loc.zero_()",
    "with torch.cuda.graph(graph):\n    out = forward(self.buffers.input_ids[:bs])",
    "return self.graph_runner.replay(forward_batch)",
    "window_kv_indices[:n] = pool.translate_loc_from_full_to_swa(window_kv_indices[:n])",
    "def invalidate_loc_cache(self):\n    self._cached_loc_key = None",
)

# Characters ``str.splitlines`` takes for line ends and Python does not: put in comments.
SEPARATORS = ("\x0c", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")

OPERATIONS = ("delete", "duplicate", "swap", "move", "inject", "separator")
# How a mutant is written to disk: line endings, a BOM, a declared legacy encoding.
STYLES = ("lf", "crlf", "cr", "bom", "latin-1")

Mutation = tuple[str, int, int, int]
# (kind, detail): kinds are counted by the fuzz benchmark and name the broken property.
Problem = tuple[str, str]


INT64_SWA = (
    "import torch\nout_cache_loc_swa = torch.zeros((8,), dtype=torch.int64)\n"
    "\n\ndef set_kv_buffer(layer, swa_loc, cache_k, cache_v):\n"
    "    assert swa_loc.dtype == torch.int32  # the KV store takes int32: a safe fix\n"
)


class Cli:
    """``swacheck ARGS`` in a subprocess run in ``cwd``; ``check_rc`` asserts the exit status.

    No traceback may reach stderr, whatever the status.
    """

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(
        self,
        *args: str,
        check_rc: int | None = None,
        timeout: float = 120,
        prefix: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "swacheck", *args],
            cwd=self.cwd,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        if check_rc is not None:
            assert proc.returncode == check_rc, (proc.returncode, proc.stdout, proc.stderr)
        return proc

    def json(self, *args: str, **kwargs: Any) -> list[dict[str, Any]]:
        """The JSON findings of ``audit ARGS``; the exit status must be 0 or 1."""
        proc = self("audit", "--output-format", "json", *args, **kwargs)
        assert proc.returncode in (0, 1), (proc.returncode, proc.stderr)
        return json.loads(proc.stdout)


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def corpus() -> dict[str, str]:
    """Real sources: the bundled examples and every rule's VALID/INVALID examples."""
    sources = {f"examples/{p.name}": p.read_text() for p in sorted(EXAMPLES.glob("*.py"))}
    for rule in all_rules():
        for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            for i, example in enumerate(examples):
                sources[f"{rule.code}/{kind}{i}.py"] = example.code
                for name, text in example.files.items():
                    sources[f"{rule.code}/{kind}{i}/{name}"] = text
    return sources


def mutate(text: str, mutations: Iterable[Mutation]) -> str:
    """Apply line mutations; indices wrap around, so any integers make a valid mutation."""
    text = text if text.endswith("\n") else text + "\n"
    lines = [f"{line}\n" for line in text.split("\n")[:-1]]  # not splitlines: see SEPARATORS
    for op, a, b, k in mutations:
        i, j = a % len(lines), b % len(lines)
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "move":
            lines.insert(j, lines.pop(i))
        elif op == "inject":
            indent = re.match(r"[ \t]*", lines[i]).group()  # type: ignore[union-attr]
            snippet = SEED_SNIPPETS[k % len(SEED_SNIPPETS)]
            lines[i:i] = [f"{indent}{line}\n" for line in snippet.splitlines()]
        elif op == "separator":
            separator = SEPARATORS[k % len(SEPARATORS)]
            lines.insert(i, "\x0c\n" if k % 3 == 0 else f"# part{separator}two\n")
    return "".join(lines)


def encode(text: str, style: str) -> bytes:
    """``text`` as a file of the given style (a legacy encoding falls back to UTF-8)."""
    if style == "crlf":
        return text.replace("\n", "\r\n").encode()
    if style == "cr":
        return text.replace("\n", "\r").encode()
    if style == "bom":
        return codecs.BOM_UTF8 + text.encode()
    if style == "latin-1":
        try:
            return ("# -*- coding: latin-1 -*-\n" + text + "# \xe9\n").encode("latin-1")
        except UnicodeEncodeError:
            pass
    return text.encode()


def python_parses(data: bytes) -> bool:
    """CPython's verdict, independent of libcst, on whether ``data`` is Python."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(data)
        return True
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False


def source_lines(data: bytes) -> list[str]:
    """The file's lines as libcst counts them (``\\r\\n``, ``\\r`` or ``\\n``), no BOM."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        text = data.decode("utf-8", errors="replace")
    return re.split(r"\r\n|\r|\n", text.removeprefix("\ufeff"))


def _inside(position: Position, lines: Sequence[str]) -> bool:
    return 1 <= position.row <= len(lines) and 0 <= position.column <= len(lines[position.row - 1])


def position_problems(findings: Iterable[Finding], files: Mapping[Path, bytes]) -> list[Problem]:
    """Every finding, and every edit of its fix, lies inside the file it names."""
    problems = []
    lines = {path.resolve(): source_lines(data) for path, data in files.items()}
    for finding in findings:
        file_lines = lines.get(Path(finding.path).resolve())
        if file_lines is None:
            problems.append(
                ("position", f"{finding.code} names a file not audited: {finding.path}")
            )
            continue
        spans = [(finding.start, finding.end)]
        spans += [(e.start, e.end) for e in finding.fix.edits] if finding.fix else []
        for start, end in spans:
            if not (_inside(start, file_lines) and _inside(end, file_lines) and start <= end):
                kind = "swa999-position" if finding.code == PARSE_ERROR_CODE else "position"
                where = f"{start.row}:{start.column}-{end.row}:{end.column}"
                problems.append((kind, f"{finding.code} at {where} lies outside the file"))
    return problems


def run_audit(paths: Sequence[Path], cache_dir: Path | None = None, **options: bool) -> AuditResult:
    """One audit with every rule through the engine the CLI uses (one process)."""
    table = {"cache-dir": str(cache_dir)} if cache_dir is not None else {}
    return audit_paths(
        paths,
        AuditOptions(
            rules=all_rules(),
            config=config_from_table(table),
            jobs=1,
            cache=cache_dir is not None,
            **options,
        ),
    )


def write_tree(root: Path, files: Mapping[str, bytes]) -> dict[Path, bytes]:
    written = {}
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written[path] = data
    return written


def changed_rows(before: bytes, after: bytes) -> set[int]:
    """Rows of ``before`` (1-based) that ``after`` replaced, deleted, or inserted text at."""
    old = before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    rows: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            rows.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return rows


def _edit_rows(findings: Iterable[Finding]) -> dict[Path, set[int]]:
    rows: dict[Path, set[int]] = {}
    for finding in findings:
        for edit in finding.fix.edits if finding.fix else ():
            span = range(edit.start.row, edit.end.row + 1)
            rows.setdefault(Path(finding.path).resolve(), set()).update(span)
    return rows


def fix_problems(files: Mapping[Path, bytes], findings: list[Finding]) -> list[Problem]:
    """``--fix --unsafe-fixes`` on ``files`` (a copy): the fix-safety properties."""
    problems: list[Problem] = []
    fixed = run_audit(sorted(files), fix=True, unsafe_fixes=True)
    problems += [("internal-error", e) for e in fixed.errors if "internal error" in e]
    problems += [("fix-rejected", e) for e in fixed.errors if "fix not applied" in e]
    allowed = _edit_rows(findings)
    for path, before in files.items():
        after = path.read_bytes()
        if after == before:
            continue
        if python_parses(before) and not python_parses(after):
            problems.append(("fix-parse", f"{path.name} parses before --fix, not after"))
        outside = changed_rows(before, after) - allowed.get(path.resolve(), set())
        if outside:
            problems.append(("fix-outside", f"{path.name}: rows {sorted(outside)} changed"))
    snapshot = {path: path.read_bytes() for path in files}
    again = run_audit(sorted(files), fix=True, unsafe_fixes=True)
    if again.fixes_applied or any(path.read_bytes() != data for path, data in snapshot.items()):
        problems.append(("fix-not-idempotent", f"second --fix applied {again.fixes_applied}"))
    return problems


def check(files: Mapping[str, bytes], workdir: Path, fix: bool = True) -> list[Problem]:
    """Every property of one audit of ``files`` (written under ``workdir``); [] if all hold."""
    tree = workdir / "tree"
    written = write_tree(tree, files)
    paths = sorted(written)
    by_path = {path.resolve(): data for path, data in written.items()}
    try:
        base = run_audit(paths)
        problems = [("internal-error", e) for e in base.errors if "internal error" in e]
        problems += position_problems(base.findings, written)
        problems += [
            ("swa999-on-valid-python", f"{f.path}: {f.message}")
            for f in base.findings
            if f.code == PARSE_ERROR_CODE and python_parses(by_path[Path(f.path).resolve()])
        ]
        if run_audit(paths, prefilter=False).findings != base.findings:
            problems.append(("prefilter", "--no-prefilter changes the findings"))
        for run in ("cold", "warm"):
            if run_audit(paths, cache_dir=workdir / "cache").findings != base.findings:
                problems.append(("cache", f"the {run} cache changes the findings"))
        if fix and any(f.fix for f in base.findings):
            copy = workdir / "fixed"
            shutil.copytree(tree, copy)
            copied = {copy / path.relative_to(tree): data for path, data in written.items()}
            problems += fix_problems(copied, [_moved(f, tree, copy) for f in base.findings])
    except Exception as exc:  # the property under test: nothing escapes the engine
        problems = [("crash", f"{type(exc).__name__}: {exc}")]
    return problems


def _moved(finding: Finding, tree: Path, copy: Path) -> Finding:
    relative = Path(finding.path).resolve().relative_to(tree.resolve())
    return dataclasses.replace(finding, path=str(copy / relative))
