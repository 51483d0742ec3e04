"""What isolating each file in a worker process costs, and what a hostile file costs now.

``cold``: the cold whole-tree audit (``--no-cache``) of engine releases, ``--jobs 1``
and the default (one worker per core), interleaved run by run with a baseline
interpreter that has another checkout installed (main's venv: ``--baseline
/work/venv/bin/python``); medians of ``--runs``, CPU time of the command and its
children, peak memory of the whole process tree (the sum of its processes' proportional
set sizes, sampled every 20 ms), and whether both give the same findings.

``hostile``: each hostile class of ``tests/reliability/hostile.py`` beside an ordinary
file, one ``swacheck audit --no-cache`` per class (``--jobs 1``), with its time, the
tree's peak memory and its answer, for docs/reliability.md.

``many``: a git tree of ``--files`` tiny files (one per kind: ``plain`` holds nothing of
SWA and is not parsed, ``clean`` an SWA name without a finding, ``flagged`` an SWA002
finding, ``mixed`` one flagged file in ten, the others plain), one cold audit
(``--no-cache``, a worker per core) each with this interpreter and ``--baseline``'s: the
peak of the whole process tree and of the audit's own process and its largest worker.

    python benchmarks/bench_isolation.py cold sglang==0.5.11 sglang==0.5.23 \
        --baseline /work/venv/bin/python --runs 3
    python benchmarks/bench_isolation.py hostile
    python benchmarks/bench_isolation.py many --files 20000 --kinds plain clean mixed \
        --baseline /tmp/basevenv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "reliability"))

from bench_audit import _project  # noqa: E402
from engines import ensure  # noqa: E402


class Run(NamedTuple):
    seconds: float
    cpu: float
    peak_mib: float
    stdout: str
    # Each process's own peak (MiB): the audit's first, then its workers.
    processes: tuple[float, ...] = ()


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except OSError:
                continue
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(child for child, parent in parents.items() if parent == current)
    return found


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def timed(cmd: list[str], cwd: Path) -> Run:
    """Run ``cmd``: wall and CPU time (children included) and the peak of its process
    tree's summed PSS."""
    peak = [0]
    each: dict[int, int] = {}
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.DEVNULL)
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                sizes = {p: _pss_kib(p) for p in _tree(proc.pid)}
                for p, size in sizes.items():
                    each[p] = max(each.get(p, 0), size)
                peak[0] = max(peak[0], sum(sizes.values()))
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, _, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        done.set()
        sampler.join()
        proc.returncode = 0
        out.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        workers = sorted((size for p, size in each.items() if p != proc.pid), reverse=True)
        processes = tuple(size / 1024 for size in [each.get(proc.pid, 0), *workers])
        return Run(elapsed, cpu, peak[0] / 1024, out.read().decode(errors="replace"), processes)


def _row(label: str, runs: list[Run]) -> str:
    wall = statistics.median(r.seconds for r in runs)
    cpu = statistics.median(r.cpu for r in runs)
    peak = max(r.peak_mib for r in runs)
    return f"| {label} | {wall:.2f} s | {cpu:.2f} s | {peak:.0f} MiB |"


def cold(releases: list[str], baseline: str, runs: int) -> int:
    print(f"# load: {os.getloadavg()}", flush=True)
    interpreters = {"baseline": baseline, "this": sys.executable}
    for spec in releases:
        with tempfile.TemporaryDirectory() as tmp:
            name, version = spec.split("==")
            repo = _project(ensure(name, version), Path(tmp))
            for jobs in ("1", "0"):
                measured: dict[str, list[Run]] = {name: [] for name in interpreters}
                for run in range(runs):
                    for name, python in interpreters.items():
                        cmd = [python, "-m", "swacheck", "audit", "--no-cache", "--jobs", jobs]
                        result = timed([*cmd, "--output-format", "json", "--exit-zero"], repo)
                        measured[name].append(result)
                        print(
                            f"# {spec} --jobs {jobs} {name} run {run}: {result.seconds:.2f} s, "
                            f"{result.cpu:.2f} s CPU, {result.peak_mib:.0f} MiB",
                            flush=True,
                        )
                same = len(
                    {json.dumps(json.loads(r.stdout)) for rs in measured.values() for r in rs}
                )
                print(f"\n{spec}, --jobs {jobs or 'default'} (findings identical: {same == 1})")
                print("| | wall (median) | CPU (median) | peak of the process tree |")
                print("| --- | --- | --- | --- |")
                for name, results in measured.items():
                    print(_row(name, results))
                base = statistics.median(r.cpu for r in measured["baseline"])
                this = statistics.median(r.cpu for r in measured["this"])
                print(f"CPU: {100 * (this - base) / base:+.1f} %\n", flush=True)
    print(f"# load: {os.getloadavg()}")
    return 0


def hostile() -> int:
    from fuzzkit import INT64_SWA
    from hostile import BOUNDED, GUARDED, UNREADABLE

    cases: dict[str, tuple[bytes, list[str]]] = {
        name: (make(sizes[-1]), []) for name, (make, sizes, _) in GUARDED.items()
    }
    cases |= {
        name: (content, ["--config", config] if config else [])
        for name, (content, config, _) in BOUNDED.items()
    }
    cases |= {name: (content, []) for name, (content, _) in UNREADABLE.items()}
    print(f"# load: {os.getloadavg()}")
    print("| input | size | time (CPU) | peak of the process tree | answer |")
    print("| --- | --- | --- | --- | --- |")
    for name, (content, options) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / ".git").mkdir()
            (folder / "hostile.py").write_bytes(content)
            (folder / "zz_ordinary.py").write_text(INT64_SWA)
            cmd = [sys.executable, "-m", "swacheck", "audit", "--no-cache", "--jobs", "1"]
            result = timed([*cmd, *options, "--output-format", "json"], folder)
            found = {Path(f["filename"]).name: f for f in json.loads(result.stdout)}
            answer = found.get("hostile.py", {}).get("message", "no finding")
            ordinary = found.get("zz_ordinary.py", {}).get("code")
            note = f"{' '.join(options[1:])}; " if options else ""
            print(
                f"| {name} | {len(content) / 1000:,.0f} KB | {result.seconds:.1f} s "
                f"({result.cpu:.1f} s) | "
                f"{result.peak_mib:.0f} MiB | {note}{answer} (ordinary file: {ordinary}) |",
                flush=True,
            )
    print(f"# load: {os.getloadavg()}")
    return 0


MANY_KINDS = {
    "plain": lambda n: "x = 1\n",
    "clean": lambda n: "swa_loc = None\n",
    "flagged": lambda n: "import torch\nout_cache_loc_swa = torch.zeros((8,), dtype=torch.int64)\n",
    "mixed": lambda n: MANY_KINDS["flagged" if n % 10 == 0 else "plain"](n),
}


def many(files: int, kinds: list[str], baseline: str) -> int:
    """Cold audits of ``files`` tiny files of each kind, this interpreter and the baseline's."""
    print(f"# load: {os.getloadavg()}")
    print("| files | kind | interpreter | wall (CPU) | peak of the tree | audit | largest worker |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind in kinds:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / ".git").mkdir()
            for n in range(files):
                folder = root / f"pkg{n // 100:04d}"
                folder.mkdir(exist_ok=True)
                (folder / f"m{n:05d}.py").write_text(MANY_KINDS[kind](n))
            for label, python in (("this", sys.executable), ("baseline", baseline)):
                if not python or not Path(python).exists():
                    continue
                cmd = [python, "-m", "swacheck", "audit", "--no-cache", "-q", "--exit-zero"]
                run = timed(cmd, root)
                worker = max(run.processes[1:], default=0)
                print(
                    f"| {files:,} | {kind} | {label} | {run.seconds:.0f} s ({run.cpu:.0f} s) | "
                    f"{run.peak_mib:.0f} MiB | {run.processes[0]:.0f} MiB | {worker:.0f} MiB |",
                    flush=True,
                )
    print(f"# load: {os.getloadavg()}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("cold", "hostile", "many"))
    parser.add_argument("releases", nargs="*")
    parser.add_argument("--baseline", default="/work/venv/bin/python")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--kinds", nargs="+", choices=sorted(MANY_KINDS), default=["mixed"])
    args = parser.parse_args()
    if args.what == "cold":
        return cold(args.releases, args.baseline, args.runs)
    if args.what == "many":
        return many(args.files, args.kinds, args.baseline)
    return hostile()


if __name__ == "__main__":
    sys.exit(main())
