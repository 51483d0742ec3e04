"""Audit speed, side by side in one run: swacheck (cold, warm), ruff, Fixit.

Downloads the engine releases (benchmarks/engines.py) and times, interleaved, each
tool on each tree; reports medians of ``--runs`` runs and peak memory (max RSS of the
child). Also checks that findings are identical with and without the prefilter, the
cache and parallelism.

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
    """Wall seconds, peak RSS (MiB) of the child, and its stdout."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, _, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = 0  # reaped by wait4
        out.seek(0)
        return elapsed, usage.ru_maxrss // 1024, out.read().decode(errors="replace")


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
        # A pre-commit-like call: one changed SWA file, its cache entry missing.
        one_file = max((p for p in tree.rglob("*swa*.py")), key=lambda p: p.stat().st_size)
        times: dict[str, list[float]] = {
            "cold": [],
            "warm": [],
            "one-file": [],
            "ruff": [],
            "fixit": [],
        }
        peak: dict[str, int] = {}
        outputs: dict[str, str] = {}
        for run in range(args.runs):
            shutil.rmtree(cache / "c", ignore_errors=True)
            for label, cmd in (
                (
                    "cold",
                    [*swacheck, "--config", str(config), "--output-format", "json", str(tree)],
                ),
                (
                    "warm",
                    [*swacheck, "--config", str(config), "--output-format", "json", str(tree)],
                ),
                ("one-file", [*swacheck, "--no-cache", str(one_file)]),
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
        # Findings identical without prefilter, cache and parallelism.
        variants = {
            "no-prefilter": ["--no-prefilter", "--no-cache"],
            "jobs1": ["--jobs", "1", "--no-cache"],
        }
        identical = {}
        reference = json.loads(outputs["cold"])
        for label, extra in variants.items() if not args.no_variants else ():
            _, _, out = timed(
                [*swacheck, *extra, "--output-format", "json", str(tree)], cwd=tree.parent
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
