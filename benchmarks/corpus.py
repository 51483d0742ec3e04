"""Audit real engine code and summarise the findings per rule and target.

A target is a PyPI release (``sglang==0.5.12.post1``, downloaded once into the engine
cache of ``engines.py``, never into the repository) or a folder (a scratch tree of
SGLang files read from its history, e.g. ``/work/scratch/sglang-cache-era``).
``swacheck audit --output-format json`` runs over each target, one at a time; the
findings land in ``--out`` as ``<target>.json`` and the summary row as
``<target>.row.json``, and one JSON line per target is printed: findings per rule,
internal errors, files, seconds.

``--report`` runs nothing: it reads the rows and findings already in ``--out`` and
prints the Markdown tables of docs/real-world.md (counts per rule and target) and,
with ``--findings``, every finding as ``file:line rule`` for triage. ``--python``
audits with another interpreter (another branch's virtual environment), so two rule
sets can be compared on the same targets:

    python benchmarks/corpus.py --out /tmp/corpus --jobs 1
    python benchmarks/corpus.py --out /tmp/corpus sglang==0.5.12.post1 ../scratch/sglang-cache-era
    python benchmarks/corpus.py --out /tmp/corpus --report --findings
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from engines import ensure

DEFAULT = [
    *(
        f"sglang=={v}"
        for v in (
            "0.5.10",
            "0.5.10.post1",
            "0.5.11",
            "0.5.12",
            "0.5.12.post1",
            "0.5.13",
            "0.5.13.post1",
            "0.5.14",
            "0.5.15",
            "0.5.15.post1",
            "0.5.16",
            "0.5.17",
            "0.5.18",
            "0.5.19",
            "0.5.20",
            "0.5.21",
            "0.5.22",
            "0.5.23",
        )
    ),
    "vllm==0.32.0",
    "vllm==0.33.0",
]
ORDER_RULES = ("SWA001", "SWA004", "SWA005", "SWA007")
RULES = (
    "SWA001",
    "SWA002",
    "SWA003",
    "SWA004",
    "SWA005",
    "SWA006",
    "SWA007",
    "SWA008",
    "SWA009",
    "SWA010",
    "SWA011",
)


def resolve(target: str) -> tuple[str, Path]:
    """The row name and the folder to audit for ``pkg==version`` or a folder path."""
    if "==" in target:
        name, _, version = target.partition("==")
        return f"{name}-{version}", ensure(name, version)
    tree = Path(target).expanduser().resolve()
    if not tree.is_dir():
        raise SystemExit(f"corpus: {target!r} is neither pkg==version nor a folder")
    return tree.name, tree


def audit(python: str, tree: Path, out: Path, extra: list[str]) -> dict[str, object]:
    start = time.perf_counter()
    # `python -m` puts the working directory first on sys.path: run from an empty folder so
    # a checkout we happen to stand in cannot shadow the interpreter's own swacheck
    with tempfile.TemporaryDirectory() as neutral:
        proc = _run_swacheck(python, tree, extra, Path(neutral))
    elapsed = time.perf_counter() - start
    out.write_text(proc.stdout)
    findings = json.loads(proc.stdout or "[]")
    errors = [line for line in proc.stderr.splitlines() if "internal error" in line]
    return {
        "per_rule": dict(sorted(Counter(f["code"] for f in findings).items())),
        "internal_errors": len(errors),
        "first_errors": errors[:3],
        "exit": proc.returncode,
        "stderr_tail": proc.stderr.strip().splitlines()[-3:] if proc.returncode else [],
        "seconds": round(elapsed, 1),
    }


def _run_swacheck(
    python: str, tree: Path, extra: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            python,
            "-m",
            "swacheck",
            "audit",
            "--exit-zero",
            "--no-cache",
            "--output-format",
            "json",
            *extra,
            str(tree),
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def run(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    extra = ["--jobs", str(args.jobs)] + (["--select", args.select] if args.select else [])
    failed = False
    for target in args.targets or DEFAULT:
        name, tree = resolve(target)
        row: dict[str, object] = {
            "target": target,
            "name": name,
            "files": sum(1 for _ in tree.rglob("*.py")),
        }
        row.update(audit(args.python, tree, args.out / f"{name}.json", extra))
        failed |= bool(row["internal_errors"]) or row["exit"] != 0
        (args.out / f"{name}.row.json").write_text(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    return 1 if failed else 0


def resolve_name(target: str) -> str:
    """The row name of a target without downloading anything."""
    if "==" in target:
        name, _, version = target.partition("==")
        return f"{name}-{version}"
    return Path(target).name


def _rows(out: Path, targets: list[str]) -> list[dict[str, object]]:
    names = [resolve_name(t) for t in targets] if targets else None
    rows = [json.loads(p.read_text()) for p in out.glob("*.row.json")]
    if names is not None:
        return [r for n in names for r in rows if r["name"] == n]
    order = [resolve_name(t) for t in DEFAULT]  # releases in version order, then trees
    return sorted(
        rows,
        key=lambda r: (order.index(r["name"]) if r["name"] in order else len(order), r["name"]),
    )


def report(args: argparse.Namespace) -> int:
    rows = _rows(args.out, args.targets)
    if not rows:
        raise SystemExit(f"corpus: no *.row.json in {args.out}; run without --report first")
    print("| target | files | " + " | ".join(RULES) + " | internal errors | audit s |")
    print("| --- | --- | " + " | ".join("---" for _ in RULES) + " | --- | --- |")
    for row in rows:
        counts = row["per_rule"]
        cells = " | ".join(str(counts.get(code, 0)) for code in RULES)  # type: ignore[union-attr]
        print(
            f"| {row['name']} | {row['files']:,} | {cells} | {row['internal_errors']} "
            f"| {row['seconds']:.0f} |"
        )
    if args.findings:
        for row in rows:
            findings = json.loads((args.out / f"{row['name']}.json").read_text() or "[]")
            print(f"\n## {row['name']}: {len(findings)} findings")
            for f in sorted(findings, key=lambda f: (f["filename"], f["location"]["row"])):
                path = _relative(Path(f["filename"]), row)
                print(f"- {path}:{f['location']['row']} {f['code']} {f['message'][:110]}")
    return 0


def _relative(path: Path, row: dict[str, object]) -> str:
    """A finding's path from the package folder (``srt/...``), as the docs cite it."""
    parts = path.parts
    for anchor in ("sglang", "vllm"):
        if anchor in parts:
            i = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[i + 1 :])
    return str(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="pkg==version or a folder (default: DEFAULT)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/swacheck-corpus"))
    parser.add_argument("--select", default="")
    parser.add_argument("--jobs", type=int, default=1, help="swacheck audit --jobs")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs swacheck")
    parser.add_argument("--report", action="store_true", help="print the tables from --out")
    parser.add_argument("--findings", action="store_true", help="with --report: every finding")
    args = parser.parse_args()
    return report(args) if args.report else run(args)


if __name__ == "__main__":
    sys.exit(main())
