"""Audit speed, side by side in one run: swacheck (cold, warm, pre-commit), ruff, Fixit.

Downloads the engine releases (benchmarks/engines.py) and times, interleaved, each
tool on each tree; reports medians of ``--runs`` runs and peak memory (max RSS of the
child). Also checks that findings are identical with and without the prefilter, the
cache (the run record, and the per-file entries alone) and parallelism.

The pre-commit-like calls audit one file whose bytes changed since the last call (a
copy with a new comment each run), with the cache on as pre-commit runs it: the
largest ``*swa*`` file (it must be parsed) and the largest file no enabled rule's
triggers occur in (most edits in an engine tree); ``ruff check`` on the same SWA file
beside them.

    python benchmarks/bench_audit.py sglang==0.5.11 sglang==0.5.23 vllm==0.33.0 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from engines import ensure

HERE = Path(__file__).parent


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (MiB) of the command, and its stdout.

    The peak comes from GNU time wrapped around the command where it is installed: a
    child's own ``ru_maxrss`` starts from this (large) process's at fork on Linux.
    """
    gnu_time = shutil.which("time", path="/usr/bin")
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as peak:
        wrapped = [gnu_time, "-f", "%M", "-o", peak.name, *cmd] if gnu_time else cmd
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, _, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = 0  # reaped by wait4
        out.seek(0)
        kib = int(peak.read().strip().splitlines()[-1]) if gnu_time else usage.ru_maxrss
        return elapsed, kib // 1024, out.read().decode(errors="replace")


def _largest_untriggered(tree: Path) -> Path:
    """The largest file that no rule's triggers occur in (default configuration)."""
    from swacheck.catalogue import catalogue
    from swacheck.config import Config
    from swacheck.engine.prefilter import Prefilter

    prefilter = Prefilter(catalogue(Config()))
    plain = (p for p in tree.rglob("*.py") if not prefilter.wants(p.read_bytes()))
    return max(plain, key=lambda p: p.stat().st_size)


def _edited_copy(source: Path, folder: Path, run: int) -> Path:
    """A copy of ``source`` with bytes no earlier call has seen."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / source.name
    copy.write_bytes(source.read_bytes() + f"\n# edited for run {run}\n".encode())
    return copy


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("releases", nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fixit-runs", type=int, default=1, help="Fixit is slow: fewer runs")
    parser.add_argument("--no-fixit", action="store_true")
    parser.add_argument(
        "--no-variants", action="store_true", help="skip the no-prefilter/--jobs 1 comparisons"
    )
    args = parser.parse_args()
    swacheck = [sys.executable, "-m", "swacheck", "audit", "--exit-zero"]
    here = Path(sys.executable).parent  # tools installed beside this Python first
    ruff = shutil.which("ruff", path=str(here)) or shutil.which("ruff") or "ruff"
    fixit = shutil.which("fixit", path=str(here)) or shutil.which("fixit") or "fixit"
    rows = []
    for spec in args.releases:
        name, _, version = spec.partition("==")
        tree = ensure(name, version)
        files = sum(1 for _ in tree.rglob("*.py"))
        size = sum(p.stat().st_size for p in tree.rglob("*.py")) / 1e6
        cache = Path(tempfile.mkdtemp(prefix="swacheck-bench-"))
        config = cache / "bench.toml"
        config.write_text(f"[tool.swacheck]\ncache-dir = '{cache / 'c'}'\n")
        one_file = max((p for p in tree.rglob("*swa*.py")), key=lambda p: p.stat().st_size)
        plain_file = _largest_untriggered(tree)
        edits = cache / "edits"
        times: dict[str, list[float]] = {
            "cold": [],
            "warm": [],
            "one-file": [],
            "one-file-plain": [],
            "ruff": [],
            "ruff-one-file": [],
            "fixit": [],
        }
        peak: dict[str, int] = {}
        outputs: dict[str, str] = {}
        for run in range(args.runs):
            shutil.rmtree(cache / "c", ignore_errors=True)
            swa_copy = _edited_copy(one_file, edits / f"swa{run}", run)
            plain_copy = _edited_copy(plain_file, edits / f"plain{run}", run)
            for label, cmd in (
                (
                    "cold",
                    [*swacheck, "--config", str(config), "--output-format", "json", str(tree)],
                ),
                (
                    "warm",
                    [*swacheck, "--config", str(config), "--output-format", "json", str(tree)],
                ),
                ("one-file", [*swacheck, "--config", str(config), str(swa_copy)]),
                ("one-file-plain", [*swacheck, "--config", str(config), str(plain_copy)]),
                (
                    "ruff-one-file",
                    [ruff, "check", "--select", "E,F,W", "-q", "--exit-zero", str(swa_copy)],
                ),
                (
                    "ruff",
                    [
                        ruff,
                        "check",
                        "--select",
                        "E,F,W",
                        "--no-cache",
                        "--exit-zero",
                        "-q",
                        str(tree),
                    ],
                ),
            ):
                seconds, rss, out = timed(cmd, cwd=tree.parent)
                print(f"# {spec} run {run} {label}: {seconds:.2f} s, {rss} MiB", flush=True)
                times[label].append(seconds)
                peak[label] = max(peak.get(label, 0), rss)
                outputs.setdefault(label, out)
            if not args.no_fixit and run < args.fixit_runs:
                env = {**os.environ, "PYTHONPATH": str(HERE)}
                seconds, _, _ = timed(
                    [fixit, "--rules", "fixit_swa002", "lint", str(tree)], cwd=tree.parent, env=env
                )
                times["fixit"].append(seconds)
        # Findings identical without prefilter, cache and parallelism; and from the per-file
        # entries alone (an empty extra file makes the run record miss).
        (edits / "empty.py").write_text("")
        variants = {
            "no-prefilter": ["--no-prefilter", "--no-cache"],
            "jobs1": ["--jobs", "1", "--no-cache"],
            "file-entries": ["--config", str(config)],
        }
        extra_paths = {"file-entries": [str(edits / "empty.py")]}
        identical = {}
        reference = json.loads(outputs["cold"])
        for label, extra in variants.items() if not args.no_variants else ():
            _, _, out = timed(
                [
                    *swacheck,
                    *extra,
                    "--output-format",
                    "json",
                    str(tree),
                    *extra_paths.get(label, []),
                ],
                cwd=tree.parent,
            )
            identical[label] = json.loads(out) == reference
        identical["warm"] = json.loads(outputs["warm"]) == reference
        med = {k: round(statistics.median(v), 3) for k, v in times.items() if v}
        row = {
            "release": spec,
            "files": files,
            "MB": round(size, 1),
            "median_s": med,
            "peak_MiB": peak,
            "cold_vs_ruff": round(med["cold"] / med["ruff"], 2),
            "warm_vs_ruff": round(med["warm"] / med["ruff"], 2),
            "one_file": str(one_file.relative_to(tree.parent)),
            "one_file_plain": str(plain_file.relative_to(tree.parent)),
            "findings": len(reference),
            "identical": identical,
            "runs": args.runs,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
