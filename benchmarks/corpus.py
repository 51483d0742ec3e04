"""Audit real engine releases from PyPI and summarise the findings per rule and release.

Downloads (once, into the engine cache of ``engines.py``; never into the repository)
SGLang releases and vLLM releases, runs ``swacheck audit --output-format json`` over each
package folder, and prints one JSON line per release: findings per rule, internal
errors, files and time. The JSON findings land in ``--out`` for triage
(docs/real-world.md).

    python benchmarks/corpus.py --out /tmp/corpus sglang==0.5.10 sglang==0.5.23 vllm==0.33.0
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from engines import ensure

DEFAULT = [
    *(f"sglang==0.5.{n}" for n in (10, 11, 12, 14, 22, 23)),
    "vllm==0.32.0",
    "vllm==0.33.0",
]


def audit(tree: Path, out: Path, extra: list[str]) -> dict[str, object]:
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
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
    )
    elapsed = time.perf_counter() - start
    out.write_text(proc.stdout)
    findings = json.loads(proc.stdout or "[]")
    errors = [line for line in proc.stderr.splitlines() if "internal error" in line]
    return {
        "per_rule": dict(sorted(Counter(f["code"] for f in findings).items())),
        "internal_errors": len(errors),
        "first_errors": errors[:3],
        "exit": proc.returncode,
        "seconds": round(elapsed, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("releases", nargs="*", default=DEFAULT)
    parser.add_argument("--out", type=Path, default=Path("/tmp/swacheck-corpus"))
    parser.add_argument("--select", default="")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    extra = ["--select", args.select] if args.select else []
    failed = False
    for spec in args.releases:
        name, _, version = spec.partition("==")
        tree = ensure(name, version)
        row = {"release": spec, "files": sum(1 for _ in tree.rglob("*.py"))}
        row.update(audit(tree, args.out / f"{name}-{version}.json", extra))
        failed |= bool(row["internal_errors"]) or row["exit"] != 0
        print(json.dumps(row), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
