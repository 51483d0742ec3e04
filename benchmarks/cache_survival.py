"""Issue 26, item 2: what survives in the cache, counted as files libcst parses.

Audits a git copy of a real tree with ``--jobs 1`` (every parse in one process, counted
by wrapping ``libcst.parse_module``): cold, warm, after a reinstall of the same code (the
swacheck package copied to another folder, with new modification times, as
``pip install .`` lays it out), after one file's edit, and under keys the facts do not
read (``--config`` overrides, another ``--select``).

    python benchmarks/cache_survival.py ~/.cache/swacheck/engines/sglang-0.5.23 \\
        [--repo /work/main --python /work/venv/bin/python]

``--repo``/``--python``: another checkout's swacheck and the interpreter whose packages
it needs (the peer run, side by side). Figures: docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COUNTING = """
import sys

import libcst

parsed = []
original = libcst.parse_module


def counting(*args, **kwargs):
    parsed.append(1)
    return original(*args, **kwargs)


libcst.parse_module = counting
from swacheck.cli import main

status = main(["audit", "--jobs", "1", "--output-format", "json", *sys.argv[1:]])
print(f"parsed={len(parsed)}", file=sys.stderr)
sys.exit(status)
"""


def install(repo: Path, site: Path) -> Path:
    """``repo``'s swacheck laid out as an install (the rules inside the package)."""
    bytecode = shutil.ignore_patterns("__pycache__")
    shutil.copytree(repo / "swacheck", site / "swacheck", ignore=bytecode)
    shutil.copytree(repo / "rules", site / "swacheck" / "rules", ignore=bytecode)
    return site


def audit(python: str, root: Path, site: Path, label: str, *args: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(site))
    started = time.monotonic()
    proc = subprocess.run(
        [python, "-c", COUNTING, *args], cwd=root, env=env, capture_output=True, text=True
    )
    wall = time.monotonic() - started
    parsed = int(proc.stderr.rsplit("parsed=", 1)[1])
    found = len(json.loads(proc.stdout))
    print(f"{label:48} parsed {parsed:5}  findings {found:3}  {wall:7.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="a source tree (e.g. an SGLang release)")
    parser.add_argument("--repo", type=Path, default=REPO, help="the swacheck checkout")
    parser.add_argument("--python", default=sys.executable, help="its interpreter")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        root = work / "tree"
        shutil.copytree(args.tree, root)
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        first = install(args.repo, work / "installed")
        again = install(args.repo, work / "reinstalled")
        target = sorted(root.rglob("model_runner.py"))[0]
        given = str(target.relative_to(root))
        run = [args.python, root]
        audit(*run, first, "cold")
        audit(*run, first, "warm")
        audit(*run, again, "reinstalled (same code, new path and mtimes)")
        target.write_text(target.read_text() + "# edited\n")
        audit(*run, again, "one file edited, that file given", given)
        audit(*run, again, "--config max-file-time = 30.0", "--config", "max-file-time = 30.0")
        audit(*run, again, "--config cache-model = 'none'", "--config", "cache-model = 'none'")
        audit(*run, again, "--select SWA002 (whole tree)", "--select", "SWA002")
        audit(*run, again, "--select SWA005, the edited file", "--select", "SWA005", given)


if __name__ == "__main__":
    main()
