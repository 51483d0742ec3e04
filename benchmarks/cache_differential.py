"""The cache's differential test (``tests/linter/cache_differential.py``) for long.

    python benchmarks/cache_differential.py --examples 200 --steps 30 --release 0.5.11
    python benchmarks/cache_differential.py --examples 50 --seed 7 --release none

Runs Hypothesis's state machine for ``--examples`` sequences of up to ``--steps`` steps
(edits, configurations, the command line, the pre-commit call and the language server,
each warm answer against an audit without a cache) on the examples and a few files of
the given SGLang release (downloaded from PyPI once), then prints one JSON line: the
sequences and steps run, the comparisons made, the seconds of wall and CPU time, and
the first failure (Hypothesis's shrunk sequence of steps), if any.
"""

from __future__ import annotations

import argparse
import collections
import json
import resource
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "linter"))
sys.path.insert(0, str(REPO / "tests" / "engines"))

from cache_differential import CacheMachine  # noqa: E402
from hypothesis import HealthCheck, Phase, seed, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--release", default="0.5.11", help="an SGLang release, or none")
    parser.add_argument("--no-shrink", action="store_true", help="report a failure as found")
    args = parser.parse_args()
    sglang = None
    if args.release != "none":
        from sglang_wheels import extracted

        sglang = extracted(args.release) / "sglang"
    tally = {"sequences": 0, "steps": 0}
    compared: collections.Counter[str] = collections.Counter()

    class Counted(CacheMachine):
        def __init__(self) -> None:
            super().__init__(sglang)
            tally["sequences"] += 1

        def teardown(self) -> None:
            tally["steps"] += self.steps
            compared.update(self.compared)
            super().teardown()

    phases = [Phase.generate] if args.no_shrink else [Phase.generate, Phase.shrink]
    budget = settings(
        max_examples=args.examples,
        stateful_step_count=args.steps,
        deadline=None,
        database=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
    )
    started, cpu = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    failure = None
    try:
        run_state_machine_as_test(seed(args.seed)(Counted), settings=budget)
    except Exception:  # the property's failure, as Hypothesis reports it
        failure = traceback.format_exc()[-6000:]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = {
        "release": args.release,
        "seed": args.seed,
        **tally,
        "compared": sum(compared.values()),
        "by_front_end": dict(sorted(compared.items())),
        "wall_s": round(time.monotonic() - started, 1),
        "cpu_s": round(
            usage.ru_utime
            + usage.ru_stime
            - cpu.ru_utime
            - cpu.ru_stime
            + children.ru_utime
            + children.ru_stime,
            1,
        ),
        "failure": failure,
    }
    print(json.dumps(report))
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
