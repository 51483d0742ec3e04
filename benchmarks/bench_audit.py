"""Audit speed, side by side in one run: swacheck (cold, warm, pre-commit calls), ruff, Fixit.

Downloads the engine releases (benchmarks/engines.py), copies each tree into a git
repository of its own (the project root, as an engine's checkout is), and times,
interleaved, each tool on it; reports medians of ``--runs`` runs and peak memory (max
RSS of the child). Also checks that findings are identical with and without the
prefilter, the cache (the run record, and the per-file entries alone) and parallelism,
and that a pre-commit call on one file finds what the whole audit finds in it.

The pre-commit calls are ``swacheck audit --force-exclude FILE`` from the repository
root, as the hook runs, on a file edited in place (a new comment each run, so its bytes
are new): the largest ``*swa*`` file (it must be parsed) and the largest file no enabled
rule's triggers occur in (most edits in an engine tree), with the cache warm from the
audits before; and the SWA file again on an empty cache (the first call ever, which
reads the whole project). ``ruff check`` on the same SWA file beside them. Then the
whole tree again after a comment line inserted at the top of the SWA file
(``tree-after-edit``: what an edit that shifts rows costs a warm whole-tree audit, issue
39).

With ``--baseline PYTHON`` (another install of swacheck, e.g. main's venv), that
interpreter's cold audit and pre-commit calls are timed in the same loop, interleaved
with this one's (``*-baseline`` rows): a change measured side by side under one load.

Each swacheck is timed as installed: its modules (and libcst's, pygls') byte-compiled
first, as ``pip install`` leaves them, and ``PYTHONDONTWRITEBYTECODE`` dropped from the
calls' environment. Without the bytecode a short call compiles every module it imports
(0.6 s of a 2.0 s pre-commit call on 0.5.23's largest SWA file).

    python benchmarks/bench_audit.py sglang==0.5.11 sglang==0.5.23 --runs 3 --no-fixit
    python benchmarks/bench_audit.py sglang==0.5.23 --baseline /work/venv/bin/python
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
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).parent))
from engines import ensure

HERE = Path(__file__).parent


class Run(NamedTuple):
    seconds: float
    # User + system CPU seconds, the command's children included: on a shared machine
    # the wall time of a short call grows with the load, its CPU time much less.
    cpu: float
    peak_mib: int
    stdout: str


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Run:
    """Run ``cmd`` and measure it.

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
        cpu = usage.ru_utime + usage.ru_stime
        return Run(elapsed, cpu, kib // 1024, out.read().decode(errors="replace"))


def _installed(python: str) -> dict[str, str]:
    """Byte-compile ``python``'s swacheck and the libraries it imports, as ``pip
    install`` does; the environment to time it in (bytecode read, not rewritten)."""
    where = subprocess.run(
        [python, "-c", _PACKAGE_DIRS], check=True, capture_output=True, text=True
    ).stdout.split()
    subprocess.run([python, "-m", "compileall", "-q", "-j", "0", *where], check=True)
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


_PACKAGE_DIRS = """
import importlib.util, os
for name in ("swacheck", "rules", "libcst", "pygls", "lsprotocol", "pathspec"):
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.origin:
        print(os.path.dirname(spec.origin))
"""


def _note(spec: str, run: int, label: str, measured: Run) -> None:
    print(
        f"# {spec} run {run} {label}: {measured.seconds:.2f} s, {measured.cpu:.2f} s CPU, "
        f"{measured.peak_mib} MiB",
        flush=True,
    )


def _largest_untriggered(tree: Path) -> Path:
    """The largest file that no rule's triggers occur in (default configuration)."""
    from swacheck.catalogue import catalogue
    from swacheck.config import Config
    from swacheck.engine.prefilter import Prefilter

    prefilter = Prefilter(catalogue(Config()))
    plain = (p for p in tree.rglob("*.py") if not prefilter.wants(p.read_bytes()))
    return max(plain, key=lambda p: p.stat().st_size)


def _project(tree: Path, into: Path) -> Path:
    """A copy of the release's tree in a git repository: the project root."""
    repo = into / "repo"
    shutil.copytree(tree, repo / tree.name)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo


def _edit(path: Path, original: bytes, run: int) -> None:
    """``path`` with bytes no earlier call has seen (a comment at the end: rows stay)."""
    path.write_bytes(original + f"\n# edited for run {run}\n".encode())


def _by_file(findings: list[dict], name: str) -> list[tuple[int, int, str]]:
    """The findings of file ``name`` (relative to the repository; ``filename`` is absolute)."""
    return sorted(
        (f["location"]["row"], f["location"]["column"], f["code"])
        for f in findings
        if Path(f["filename"]).as_posix().endswith(f"/{name}")
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("releases", nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fixit-runs", type=int, default=1, help="Fixit is slow: fewer runs")
    parser.add_argument("--no-fixit", action="store_true")
    parser.add_argument(
        "--no-variants", action="store_true", help="skip the no-prefilter/--jobs 1 comparisons"
    )
    parser.add_argument(
        "--baseline", metavar="PYTHON", help="another swacheck's interpreter, timed beside"
    )
    args = parser.parse_args()
    swacheck = [sys.executable, "-m", "swacheck", "audit", "--exit-zero"]
    here = Path(sys.executable).parent  # tools installed beside this Python first
    ruff = shutil.which("ruff", path=str(here)) or shutil.which("ruff") or "ruff"
    fixit = shutil.which("fixit", path=str(here)) or shutil.which("fixit") or "fixit"
    env = _installed(sys.executable)
    if args.baseline:
        _installed(args.baseline)
    rows = []
    for spec in args.releases:
        name, _, version = spec.partition("==")
        work = Path(tempfile.mkdtemp(prefix="swacheck-bench-"))
        repo = _project(ensure(name, version), work)
        files = sum(1 for _ in repo.rglob("*.py"))
        size = sum(p.stat().st_size for p in repo.rglob("*.py")) / 1e6
        cache = ["--cache-dir", str(work / "c")]
        swa_file = max((p for p in repo.rglob("*swa*.py")), key=lambda p: p.stat().st_size)
        plain_file = _largest_untriggered(repo)
        swa, plain = (str(p.relative_to(repo)) for p in (swa_file, plain_file))
        originals = {p: p.read_bytes() for p in (swa_file, plain_file)}
        hook = [*swacheck, "--force-exclude", *cache]
        base = [args.baseline, *swacheck[1:]] if args.baseline else []
        base_cache = ["--cache-dir", str(work / "cb")]
        base_hook = [*base, "--force-exclude", *base_cache]
        times: dict[str, list[float]] = {
            "cold": [],
            "warm": [],
            "one-file-cold": [],
            "one-file": [],
            "one-file-plain": [],
            "tree-after-edit": [],
            "ruff": [],
            "ruff-one-file": [],
            "fixit": [],
        }
        if base:
            for label in ("cold", "warm", "one-file-cold", "one-file", "one-file-plain"):
                times[f"{label}-baseline"] = []
        peak: dict[str, int] = {}
        cpu: dict[str, list[float]] = {}
        outputs: dict[str, str] = {}
        for run in range(args.runs):
            for path, original in originals.items():
                _edit(path, original, run)
            steps = [
                ("one-file-cold", [*hook, "--output-format", "json", swa]),
                ("cold", [*swacheck, *cache, "--output-format", "json", "."]),
                ("warm", [*swacheck, *cache, "--output-format", "json", "."]),
            ]
            if base:
                steps += [
                    ("one-file-cold-baseline", [*base_hook, swa]),
                    ("cold-baseline", [*base, *base_cache, "."]),
                    ("warm-baseline", [*base, *base_cache, "."]),
                ]
            for label, cmd in steps:
                if label in ("one-file-cold", "cold"):
                    shutil.rmtree(work / "c", ignore_errors=True)
                if label in ("one-file-cold-baseline", "cold-baseline"):
                    shutil.rmtree(work / "cb", ignore_errors=True)
                measured = timed(cmd, cwd=repo, env=env)
                _note(spec, run, label, measured)
                times[label].append(measured.seconds)
                cpu.setdefault(label, []).append(measured.cpu)
                peak[label] = max(peak.get(label, 0), measured.peak_mib)
                outputs.setdefault(label, measured.stdout)
            for path, original in originals.items():
                _edit(path, original, run + 1000)  # bytes the warm cache has not seen
            for label, cmd in (
                ("one-file", [*hook, swa]),
                ("one-file-plain", [*hook, plain]),
                *(
                    [
                        ("one-file-baseline", [*base_hook, swa]),
                        ("one-file-plain-baseline", [*base_hook, plain]),
                    ]
                    if base
                    else []
                ),
                ("ruff-one-file", [ruff, "check", "--select", "E,F,W", "-q", "--exit-zero", swa]),
                (
                    "ruff",
                    [ruff, "check", "--select", "E,F,W", "--no-cache", "--exit-zero", "-q", "."],
                ),
            ):
                measured = timed(cmd, cwd=repo, env=env)
                _note(spec, run, label, measured)
                times[label].append(measured.seconds)
                cpu.setdefault(label, []).append(measured.cpu)
                peak[label] = max(peak.get(label, 0), measured.peak_mib)
            # Issue 39: one comment line inserted at the top of the SWA file (every row
            # below it shifts), then the whole tree, warm.
            swa_file.write_bytes(f"# edited for run {run}\n".encode() + originals[swa_file])
            measured = timed([*swacheck, *cache, "--output-format", "json", "."], cwd=repo, env=env)
            _note(spec, run, "tree-after-edit", measured)
            times["tree-after-edit"].append(measured.seconds)
            cpu.setdefault("tree-after-edit", []).append(measured.cpu)
            peak["tree-after-edit"] = max(peak.get("tree-after-edit", 0), measured.peak_mib)
            outputs.setdefault("tree-after-edit", measured.stdout)
            if not args.no_fixit and run < args.fixit_runs:
                fixit_env = {**env, "PYTHONPATH": str(HERE)}
                fixit_cmd = [fixit, "--rules", "fixit_swa002", "lint", "."]
                measured = timed(fixit_cmd, cwd=repo, env=fixit_env)
                times["fixit"].append(measured.seconds)
        for path, original in originals.items():
            path.write_bytes(original)
        reference = json.loads(outputs["cold"])
        identical = {
            "warm": json.loads(outputs["warm"]) == reference,
            "tree-after-edit": json.loads(outputs["tree-after-edit"]) == reference,
        }
        # The first pre-commit call on a cold cache finds what the whole audit finds there.
        identical["one-file-cold"] = _by_file(
            json.loads(outputs["one-file-cold"]), swa
        ) == _by_file(reference, swa)
        # Without prefilter, cache and parallelism; and from the per-file entries alone
        # (the run record misses from another working directory: paths are shown from it).
        variants = {
            "no-prefilter": (["--no-prefilter", "--no-cache"], repo, "."),
            "jobs1": (["--jobs", "1", "--no-cache"], repo, "."),
            "file-entries": (cache, repo.parent, repo.name),
        }
        for label, (extra, cwd, target) in variants.items() if not args.no_variants else ():
            found = json.loads(
                timed([*swacheck, *extra, "--output-format", "json", target], cwd=cwd).stdout
            )
            for finding in found:
                finding["filename"] = os.path.relpath(cwd / finding["filename"], repo)
            identical[label] = found == reference
        med = {k: round(statistics.median(v), 3) for k, v in times.items() if v}
        row = {
            "release": spec,
            "files": files,
            "MB": round(size, 1),
            "median_s": med,
            "median_cpu_s": {k: round(statistics.median(v), 3) for k, v in cpu.items()},
            "min_s": {k: round(min(v), 3) for k, v in times.items() if v},
            "peak_MiB": peak,
            "cold_vs_ruff": round(med["cold"] / med["ruff"], 2),
            "warm_vs_ruff": round(med["warm"] / med["ruff"], 2),
            **(
                {"cold_baseline_vs_ruff": round(med["cold-baseline"] / med["ruff"], 2)}
                if base
                else {}
            ),
            "one_file": swa,
            "one_file_plain": plain,
            "findings": len(reference),
            "identical": identical,
            "runs": args.runs,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
