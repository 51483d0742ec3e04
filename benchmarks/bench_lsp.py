"""Language server latency on SGLang: ``swacheck server`` beside ``ruff server``.

Both servers run in one go, each as a subprocess driven over stdio by pygls' client
(``tests/lsp/lspkit.py``, the tests' kit), on a release of SGLang from PyPI
(``benchmarks/engines.py``), copied to a temporary folder that is the workspace folder
(the server keeps the project's cache there: the engines' folder stays unwritten and a
cold start stays cold). For each server:

- *start-up*: spawn to the ``initialize`` answer, to the first diagnostics of the
  first file opened, and (swacheck) to the message that the project is indexed, when
  its full diagnostics are in (a cold project, no cache: the first diagnostics are
  the file's own, in the context of nothing yet; then every candidate file of the
  project is parsed for its facts; with ``--cli-cache``, a warm start from the cache
  ``swacheck audit`` wrote, in the copy made a git repository);
- *round trip*: an edit (``didChange``) to the diagnostics of that version, for
  ``--edits`` edits of each kind, each after a pause longer than the debounce (a
  keystroke after a pause); kinds: a comment appended to a statement in a method, and
  a statement inserted in a method (changes the method, its facts, and so the index);
- *typing*: a statement typed one character at a time (``--interval`` apart: the
  intermediate texts do not all parse), from the last keystroke to the diagnostics of
  the final text (the debounce plus one audit).

Each swacheck edit is followed by an audit of the same text through the server's audit
path in this process (wall and CPU time), to tell the engine's share of a round trip
from the protocol's at the same moment. One JSON line per result, then a Markdown table.

    python benchmarks/bench_lsp.py                      # sglang 0.5.23, swa_memory_pool.py
    python benchmarks/bench_lsp.py --file srt/mem_cache/memory_pool.py --edits 10
    python benchmarks/bench_lsp.py --cli-cache --no-peer --edits 5   # the warm start
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pygls.protocol import LanguageServerProtocol

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lsp"))
sys.path.insert(0, str(REPO / "benchmarks"))
import lspkit  # noqa: E402
from engines import ensure  # noqa: E402

from swacheck.engine.project import RACY_NS  # noqa: E402
from swacheck.server.settings import DEFAULT_DEBOUNCE_MS  # noqa: E402


class _PlainInitialize(LanguageServerProtocol):
    """Leaves the ``initialize`` answer as JSON: ruff's notebook selector is one that
    lsprotocol 2025.0 cannot read, and the benchmark needs nothing from it."""

    def get_result_type(self, method: str) -> Any:
        return None if method == "initialize" else super().get_result_type(method)


@dataclass
class Edits:
    """Variants of one file's text: each edit is made to the original."""

    text: str
    anchor: int  # 0-based line of a one-line statement in a method body
    indent: str = field(init=False)

    def __post_init__(self) -> None:
        line = self.text.splitlines()[self.anchor]
        self.indent = line[: len(line) - len(line.lstrip())]

    def _lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)

    def comment(self, n: int) -> str:
        lines = self._lines()
        lines[self.anchor] = lines[self.anchor].rstrip("\r\n") + f"  # edit {n}\n"
        return "".join(lines)

    def statement(self, text: str) -> str:
        lines = self._lines()
        lines.insert(self.anchor, f"{self.indent}{text}\n")
        return "".join(lines)


def anchor_of(text: str) -> int:
    """A one-line simple statement in a method body, nearest the middle of the file."""
    middle = len(text.splitlines()) // 2
    best: int | None = None
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for statement in node.body:
            simple = isinstance(statement, ast.Assign | ast.Expr | ast.Return)
            if simple and statement.lineno == statement.end_lineno:
                line = statement.lineno - 1
                if best is None or abs(line - middle) < abs(best - middle):
                    best = line
    if best is None:
        raise SystemExit("no one-line statement in a method body to edit")
    return best


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {
        "n": len(values),
        "median_ms": round(statistics.median(values) * 1000, 1),
        "p90_ms": round(p90 * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


async def measure(
    name: str,
    command: tuple[str, ...],
    root: Path,
    files: list[Path],
    edits: int,
    interval: float,
    pause: float,
    paired: InProcess | None = None,
    start: str = "cold",
) -> list[dict[str, Any]]:
    protocol = _PlainInitialize if name != "swacheck" else LanguageServerProtocol
    session = lspkit.Session(protocol)
    results: list[dict[str, Any]] = []
    spawned = time.perf_counter()
    await session.start(root, command=command)
    results.append({"server": name, "what": "initialize", "s": time.perf_counter() - spawned})
    for number, path in enumerate(files):
        text = path.read_text(encoding="utf-8")
        opened = time.perf_counter()
        uri = session.open(path, text)
        first = await session.published_after(uri, 0, timeout=3600)
        what = f"first diagnostics ({start})" if number == 0 else "first diagnostics (warm)"
        results.append(
            {
                "server": name,
                "file": str(path.relative_to(root)),
                "what": what,
                "s_since_open": time.perf_counter() - opened,
                "s_since_spawn": time.perf_counter() - spawned,
                "diagnostics": len(first.diagnostics),
            }
        )
        where = {"server": name, "file": str(path.relative_to(root))}
        if name == "swacheck" and number == 0:
            # After a cold start the first diagnostics are the open file's own; the
            # project's facts follow, then its full diagnostics ("indexed").
            await session.until(
                lambda: next((m for m in session.shown if "indexed" in m.message), None),
                timeout=3600,
            )
            indexed = time.perf_counter() - opened
            results.append(where | {"what": f"project indexed ({start})", "s_since_open": indexed})
        if paired is not None:
            wall, _ = paired.audit(path, text)
            results.append(where | {"what": f"in-process first audit ({start})", "s": wall})
        variants = Edits(text, anchor_of(text))
        times: dict[str, list[float]] = {"comment": [], "statement": []}
        walls: dict[str, list[float]] = {"comment": [], "statement": []}
        cpus: dict[str, list[float]] = {"comment": [], "statement": []}
        for n in range(edits):
            for kind, new in (
                ("comment", variants.comment(n)),
                ("statement", variants.statement(f"_lsp_probe = {n}")),
            ):
                await asyncio.sleep(pause)
                count = len(session.published)
                sent = time.perf_counter()
                version = session.change(uri, new)
                published = await session.published_after(uri, count)
                while published.version != version:
                    count = session.published.index(published) + 1
                    published = await session.published_after(uri, count)
                times[kind].append(time.perf_counter() - sent)
                if paired is not None:
                    wall, cpu = paired.audit(path, new)
                    walls[kind].append(wall)
                    cpus[kind].append(cpu)
        for kind, values in times.items():
            results.append(where | {"what": f"edit: {kind}"} | summary(values))
            if paired is not None:
                what = f"edit: {kind}, its audit in-process"
                results.append(where | {"what": f"{what} (wall)"} | summary(walls[kind]))
                results.append(where | {"what": f"{what} (CPU)"} | summary(cpus[kind]))
        typed = "_lsp_probe_value = 123456789"
        await asyncio.sleep(pause)
        keys = []
        for k in range(1, len(typed) + 1):
            keys.append(session.change(uri, variants.statement(typed[:k])))
            last = time.perf_counter()
            if k < len(typed):
                await asyncio.sleep(interval)
        await session.diagnostics(uri, keys[-1])
        results.append(
            {
                "server": name,
                "file": str(path.relative_to(root)),
                "what": f"typing ({len(typed)} keys, {interval * 1000:.0f} ms apart): last key",
                "ms": round((time.perf_counter() - last) * 1000, 1),
                "keys_audited": len(
                    {p.version for p in session.published if p.uri == uri} & set(keys)
                ),
            }
        )
        session.close(uri)
    await session.stop()
    return results


class InProcess:
    """The server's own audit path (:class:`Projects`) in this process, run on the same
    texts right after each round trip: the engine's share of a round trip at the same
    moment (the machine is shared, so its load moves), and its CPU time."""

    def __init__(self, root: Path) -> None:
        from swacheck.server.projects import Projects

        self.projects = Projects([root])
        self.projects.watched = True  # as for the client here, which watches files
        self.version = 0

    def audit(self, path: Path, text: str) -> tuple[float, float]:
        """Wall and CPU seconds of one audit of ``text`` as ``path``."""
        from swacheck.server.documents import Snapshot

        self.version += 1
        snapshot = Snapshot(path.as_uri(), path, self.version, text)
        wall, cpu = time.perf_counter(), time.thread_time()
        self.projects.audit([snapshot])
        return time.perf_counter() - wall, time.thread_time() - cpu


def table(results: list[dict[str, Any]]) -> str:
    rows = ["| server | file | what | figure |", "| --- | --- | --- | --- |"]
    for r in results:
        if "median_ms" in r:
            figure = f"median {r['median_ms']} ms, p90 {r['p90_ms']} ms (n={r['n']})"
        elif "ms" in r:
            figure = f"{r['ms']} ms"
        elif "s_since_spawn" in r:
            figure = (
                f"{r['s_since_open']:.2f} s after open ({r['s_since_spawn']:.2f} s after spawn)"
            )
        elif "s_since_open" in r:  # the project indexed, after a cold start
            figure = f"{r['s_since_open']:.2f} s after open"
        else:
            figure = f"{r['s']:.2f} s"
        rows.append(f"| {r['server']} | {r.get('file', '')} | {r['what']} | {figure} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="sglang==0.5.23")
    parser.add_argument("--file", action="append", help="file(s) under the package to edit")
    parser.add_argument("--edits", type=int, default=20, help="edits of each kind per file")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between keys")
    parser.add_argument("--no-peer", action="store_true", help="skip ruff server")
    parser.add_argument(
        "--no-engine", action="store_true", help="skip the in-process audits paired with edits"
    )
    parser.add_argument(
        "--cli-cache",
        action="store_true",
        help="start warm from `swacheck audit`'s cache",
    )
    args = parser.parse_args()
    package, _, version = args.engine.partition("==")
    root = Path(tempfile.mkdtemp(prefix="bench-lsp-")) / "sglang"
    shutil.copytree(ensure(package, version), root)
    start = "cold"
    results: list[dict[str, Any]] = []
    if args.cli_cache:
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        # A file changed within RACY_NS of a scan is read again by the next one (its stat
        # signature cannot tell a later change in the same tick): a checkout is not copied
        # the moment before it is audited, so the copy is left to settle first.
        time.sleep(RACY_NS / 1e9 + 0.5)
        audited = time.perf_counter()
        audit = [sys.executable, "-m", "swacheck", "audit", "--exit-zero", "--jobs", "1"]
        subprocess.run(audit, cwd=root, check=True, capture_output=True)
        spent = time.perf_counter() - audited
        results.append({"server": "", "what": "swacheck audit (fills the cache)", "s": spent})
        start = "after swacheck audit"
    files = [root / f for f in (args.file or ["srt/mem_cache/swa_memory_pool.py"])]
    pause = DEFAULT_DEBOUNCE_MS / 1000 + 0.05
    servers: list[tuple[str, tuple[str, ...]]] = [("swacheck", lspkit.SERVER)]
    ruff = shutil.which("ruff")
    if ruff and not args.no_peer:
        servers.append(("ruff", (ruff, "server")))
    load = os.getloadavg()
    for name, command in servers:
        paired = InProcess(root) if name == "swacheck" and not args.no_engine else None
        results += asyncio.run(
            measure(name, command, root, files, args.edits, args.interval, pause, paired, start)
        )
    machine = {
        "what": "machine",
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "python": sys.version.split()[0],
        "engine": args.engine,
        "files_in_project": sum(1 for _ in root.rglob("*.py")),
        "debounce_ms": DEFAULT_DEBOUNCE_MS,
    }
    for result in [machine, *results]:
        print(json.dumps(result))
    print()
    print(table(results))
    shutil.rmtree(root.parent)


if __name__ == "__main__":
    main()
