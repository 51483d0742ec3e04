"""Fuzz the analyzer at a size too large for CI (issue #9, static half).

    python benchmarks/fuzz_linter.py --programs 500 --mutants 2000 --cli-batches 10
    python benchmarks/fuzz_linter.py --programs 0 --mutants 0 --pathological --huge-mb 20

Four parts, each optional, all through the real engine or the real CLI:

- ``--mutants N``: audits of 1-3 real files (examples/ and every rule's VALID/INVALID
  sources) mutated by deleting, duplicating and reordering lines and injecting the seed
  bugs, written with LF, CRLF, CR, a BOM or a declared latin-1 encoding;
- ``--programs N``: programs generated from Python's grammar (hypothesmith) with seed
  bugs injected into them;
- each checked for the properties of ``tests/reliability/fuzzkit.py`` (no crash or
  internal error, positions inside the file, prefilter and cache change nothing,
  ``--fix`` keeps files parsing, stays inside its edits, and is idempotent);
- ``--cli-batches N``: trees of 40 mutants through the ``swacheck`` command with
  ``--jobs 1`` and ``--jobs 2`` under different hash seeds, cache cold and warm, and
  ``--no-prefilter``: the JSON must be byte-identical and the exit status 0 or 1;
- ``--pathological``: deep nesting, a ``--huge-mb`` file, long lines and odd encodings,
  each in its own process with a time limit, with time and peak memory.

Prints one JSON line: counts, failures by property, one example of each, timings.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "reliability"))
import fuzzkit  # noqa: E402

CLI_BATCH_FILES = 40


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


class Tally:
    def __init__(self) -> None:
        self.failures: collections.Counter[str] = collections.Counter()
        self.examples: dict[str, dict[str, object]] = {}

    def add(self, problems: list[fuzzkit.Problem], files: dict[str, bytes]) -> None:
        """Count by property; ``+separator``: the files hold a character ``str.splitlines``
        ends lines at and Python does not (a known bug class, kept apart)."""
        texts = [_text(data) for data in files.values()]
        tag = "+separator" if any(c in t for t in texts for c in fuzzkit.SEPARATORS) else ""
        for kind, detail in problems:
            kind += tag
            self.failures[kind] += 1
            if kind not in self.examples:
                shown = {name: data.decode("latin-1")[:2000] for name, data in files.items()}
                self.examples[kind] = {"detail": detail[:500], "files": shown}


def random_mutant(rng: random.Random, corpus: dict[str, str]) -> bytes:
    name = rng.choice(sorted(corpus))
    mutations = [
        (
            rng.choice(fuzzkit.OPERATIONS),
            rng.randrange(10**6),
            rng.randrange(10**6),
            rng.randrange(99),
        )
        for _ in range(rng.randrange(0, 6))
    ]
    return fuzzkit.encode(fuzzkit.mutate(corpus[name], mutations), rng.choice(fuzzkit.STYLES))


def fuzz_mutants(count: int, rng: random.Random, tally: Tally) -> int:
    corpus = fuzzkit.corpus()
    for _ in range(count):
        files = {f"m{k}.py": random_mutant(rng, corpus) for k in range(rng.randint(1, 3))}
        with tempfile.TemporaryDirectory() as tmp:
            tally.add(fuzzkit.check(files, Path(tmp)), files)
    return count


def fuzz_programs(count: int, seed: int, tally: Tally) -> int:
    """Grammar-generated programs; the body records problems, so hypothesis never shrinks."""
    import hypothesmith
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    done = 0

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(
        program=hypothesmith.from_grammar(),
        injections=st.lists(
            st.tuples(st.just("inject"), st.integers(0, 999), st.just(0), st.integers(0, 99)),
            max_size=3,
        ),
        style=st.sampled_from(fuzzkit.STYLES),
    )
    def one(program: str, injections: list[fuzzkit.Mutation], style: str) -> None:
        nonlocal done
        done += 1
        files = {"generated.py": fuzzkit.encode(fuzzkit.mutate(program, injections), style)}
        with tempfile.TemporaryDirectory() as tmp:
            tally.add(fuzzkit.check(files, Path(tmp)), files)

    one()
    return done


def swacheck(args: list[str], cwd: Path, hash_seed: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.run(
        [sys.executable, "-m", "swacheck", "audit", "--output-format", "json", *args, "."],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def cli_batch(rng: random.Random, corpus: dict[str, str], tally: Tally) -> None:
    """One tree through the command line, five ways; every output must be the same."""
    files = {f"pkg{i % 4}/m{i:02}.py": random_mutant(rng, corpus) for i in range(CLI_BATCH_FILES)}
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        fuzzkit.write_tree(tree, files)
        (tree / "pyproject.toml").write_text(f"[tool.swacheck]\ncache-dir = '{tree / 'cache'}'\n")
        runs = {
            "jobs-1": swacheck(["--jobs", "1", "--no-cache"], tree, "0"),
            "jobs-2": swacheck(["--jobs", "2", "--no-cache"], tree, "1"),
            "cache-cold": swacheck(["--jobs", "2"], tree, "2"),
            "cache-warm": swacheck(["--jobs", "1"], tree, "3"),
            "no-prefilter": swacheck(["--jobs", "2", "--no-cache", "--no-prefilter"], tree, "4"),
        }
    reference = runs["jobs-1"]
    problems: list[fuzzkit.Problem] = []
    for name, proc in runs.items():
        if proc.returncode not in (0, 1) or "Traceback" in proc.stderr:
            problems.append(("cli-crash", f"{name}: rc {proc.returncode}: {proc.stderr[-400:]}"))
        elif proc.stdout != reference.stdout:
            problems.append(("cli-mismatch", f"{name} differs from --jobs 1"))
    tally.add(problems, files)


# The pathological inputs too large or slow for CI: name -> source (built lazily).
def pathological(huge_mb: float) -> dict[str, bytes]:
    header = b"import torch\n\nout_cache_loc_swa = torch.zeros((8,), dtype=torch.int64)\n\n"
    pool = (fuzzkit.EXAMPLES / "swa_memory_pool.py").read_text()
    dense, size, i = [], 0, 0
    while size < huge_mb * 2**20:
        part = pool.replace("class SWAKVPool", f"class SWAKVPool{i}")
        dense.append(part)
        size, i = size + len(part), i + 1
    sparse_count = int(huge_mb * 2**20 / 45)
    sparse = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n" for i in range(sparse_count))
    return {
        "huge-irrelevant": b"# generated\n" + sparse.encode(),
        "huge-sparse": header + sparse.encode(),
        "huge-dense": "".join(dense).encode(),
        "line-100k-list": header + b"swa_table = [" + b"1," * 50_000 + b"]\n",
        "parens-1500": header + b"x = " + b"(" * 1500 + b"1" + b")" * 1500 + b"\n",
        "lists-1000": header + b"x = " + b"[" * 1000 + b"]" * 1000 + b"\n",
        "binop-2000-module": header + b"x = " + b" + ".join([b"a"] * 2000) + b"\n",
        "binop-1500-in-method": header
        + b"class P:\n    def invalidate_loc_cache(self):\n        pass\n\n"
        + b"    def f(self):\n        self.swa_loc = "
        + b" + ".join([b"a"] * 1500)
        + b"\n",
        "strings-3000": header + b"x = (\n" + b"    'x'\n" * 3000 + b")\n",
        "attribute-chain-5000": header + b"x = a" + b".b" * 5000 + b"\n",
        "subscript-chain-2000": header + b"x = a" + b"[0]" * 2000 + b"\n",
    }


# The CLI in a child that reports its own peak memory as its last line of stderr.
MEASURED_CLI = """
import resource, sys
from swacheck.cli import main
try:
    code = main(sys.argv[1:])
finally:
    print("peak-rss-kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def run_pathological(name: str, data: bytes, limit: float) -> dict[str, object]:
    row: dict[str, object] = {"case": name, "mb": round(len(data) / 2**20, 2)}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / f"{name}.py").write_bytes(data)
        command = [sys.executable, "-c", MEASURED_CLI, "audit", "--no-cache", "--jobs", "1"]
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                [*command, "--output-format", "json", f"{name}.py"],
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=limit,
            )
        except subprocess.TimeoutExpired:
            row["seconds"] = round(time.perf_counter() - start, 1)
            row["outcome"] = f"timeout after {limit:.0f} s"
            return row
    row["seconds"] = round(time.perf_counter() - start, 1)
    lines = proc.stderr.strip().splitlines()
    if lines and lines[-1].startswith("peak-rss-kib"):
        row["peak_rss_mib"] = int(lines.pop().split()[1]) // 1024
    if proc.returncode < 0:
        row["outcome"] = f"killed by signal {-proc.returncode}"
    elif "Traceback" in proc.stderr:
        row["outcome"] = "crash: " + lines[-1][:120]
    else:
        codes = sorted({f["code"] for f in json.loads(proc.stdout or "[]")})
        row["outcome"] = f"exit {proc.returncode}: " + (",".join(codes) or "no findings")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=500)
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--cli-batches", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pathological", action="store_true")
    parser.add_argument("--huge-mb", type=float, default=20.0)
    parser.add_argument("--limit", type=float, default=300.0, help="seconds per pathological case")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    tally = Tally()
    started = time.perf_counter()
    row: dict[str, object] = {"seed": args.seed}
    row["mutants_fuzzed"] = fuzz_mutants(args.mutants, rng, tally)
    row["programs_fuzzed"] = fuzz_programs(args.programs, args.seed, tally) if args.programs else 0
    corpus = fuzzkit.corpus()
    for _ in range(args.cli_batches):
        cli_batch(rng, corpus, tally)
    row["cli_batches"] = args.cli_batches
    row["cli_files"] = args.cli_batches * CLI_BATCH_FILES
    if args.pathological:
        row["pathological"] = [
            run_pathological(name, data, args.limit)
            for name, data in pathological(args.huge_mb).items()
        ]
    row["failures"] = dict(sorted(tally.failures.items()))
    row["failure_examples"] = tally.examples
    row["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(row), flush=True)
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
