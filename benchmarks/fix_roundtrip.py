"""``--fix`` on a copy of real releases: files still parse, a second ``--fix`` changes nothing.

    python benchmarks/fix_roundtrip.py sglang==0.5.11 sglang==0.5.14

For each release: copy its package folder, run ``swacheck audit --fix --unsafe-fixes``,
check that every file that parsed before still parses (``ast``), run ``--fix`` again and
check that no byte changes. Prints one JSON line per release.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from engines import ensure


def parses(path: Path) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(path.read_bytes())
        return True
    except (SyntaxError, ValueError):
        return False


def digest(tree: Path) -> dict[str, str]:
    return {
        str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(tree.rglob("*.py"))
    }


def fix(tree: Path, cache: Path, extra: list[str]) -> subprocess.CompletedProcess[str]:
    config = cache / "fix.toml"
    config.write_text(f"[tool.swacheck]\ncache-dir = '{cache / 'c'}'\n")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "swacheck",
            "audit",
            "--fix",
            "--unsafe-fixes",
            "--exit-zero",
            "--config",
            str(config),
            str(tree),
        ],
        capture_output=True,
        text=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("releases", nargs="+")
    parser.add_argument("--select", default="")
    args = parser.parse_args()
    extra = ["--select", args.select] if args.select else []
    ok = True
    for spec in args.releases:
        name, _, version = spec.partition("==")
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / name
            shutil.copytree(ensure(name, version), tree)
            before_parse = {p for p in tree.rglob("*.py") if parses(p)}
            before = digest(tree)
            first = fix(tree, Path(tmp), extra)
            after = digest(tree)
            changed = sorted(k for k in before if before[k] != after.get(k))
            broken = sorted(str(p.relative_to(tree)) for p in before_parse if not parses(p))
            second = fix(tree, Path(tmp), extra)
            again = digest(tree)
            row = {
                "release": spec,
                "files_fixed": len(changed),
                "fixed": changed,
                "broken_after_fix": broken,
                "second_fix_changed": sorted(k for k in after if after[k] != again.get(k)),
                "internal_errors": (first.stderr + second.stderr).count("internal error"),
            }
            ok &= not broken and not row["second_fix_changed"] and not row["internal_errors"]
            print(json.dumps(row), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
