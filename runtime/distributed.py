"""Tensor-parallel runs: a sanitizer per rank, one merged report, and no hang on a raise.

Each rank of a torch.distributed job (started by ``torchrun``) runs its own
:class:`~swacheck.runtime.Sanitizer` over its own pools; violations carry the rank
(``Violation.rank``). At the end :func:`gather_report` merges the ranks' reports with a
collective and rank 0 prints the result.

A rank that fails (a sanitizer error under ``raise``, or anything else) may leave its
peers waiting inside a collective it will never join, so it must not take part in another
one. :class:`RankGuard` takes it out of the run instead: it publishes its report in the
process group's store, shuts its side of the group (gloo peers blocked on it fail at once
and do the same), and exits non-zero, which makes torchrun end the remaining ranks. Rank
0 merges what the ranks published before it exits.

Also here: :func:`torchrun`, the launcher used by ``swacheck demo --tp N`` and the pytest
plugin's ``swa_sanitize_ranks`` fixture, and the per-rank entry behind that fixture,
``python -m swacheck.runtime.distributed module:function``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import os
import signal
import subprocess
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import torch
import torch.distributed as dist

from swacheck.config import resolve_config

from .class_spec import parse_class_spec
from .report import SanitizerReport
from .sanitizer import ACTIONS, LEVELS, Sanitizer
from .violations import KINDS

# Rank 0's stdout line carrying the merged report of a launched run, as JSON.
REPORT_PREFIX = "swa-sanitizer merged report: "
# Collectives waiting longer than this fail (gloo) or are aborted by NCCL's watchdog.
DEFAULT_TIMEOUT = timedelta(minutes=5)
# How long an aborting rank waits for its peers' reports, or for rank 0 to print.
GRACE_S = 10.0


def init_from_env(device_type: str, timeout: timedelta = DEFAULT_TIMEOUT) -> torch.device:
    """Join the process group torchrun set up: NCCL with one GPU per local rank, gloo on
    the CPU. Returns this rank's device."""
    if device_type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        # device_id: NCCL connects now, before any CUDA graph could capture a collective.
        dist.init_process_group("nccl", timeout=timeout, device_id=device)
        return device
    dist.init_process_group("gloo", timeout=timeout)
    return torch.device(device_type)


def rank_device() -> torch.device:
    """This rank's device in an initialised group: its GPU under NCCL, else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def merge_reports(
    reports: Mapping[int, SanitizerReport],
    world_size: int,
    errors: Mapping[int, str] | None = None,
) -> SanitizerReport:
    """One report for a run from the reports of the ranks (by rank) that sent one: checks,
    violations and watched objects summed, the evidence in rank order, each rank's counts."""
    if not reports:
        raise ValueError("no rank reported")
    ranks = sorted(reports)
    checks: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    watched: Counter[str] = Counter()
    left_alone: Counter[str] = Counter()
    cache_models: dict[str, str] = {}
    for rank in ranks:
        checks.update(reports[rank].checks)
        counts.update(reports[rank].counts)
        watched.update(reports[rank].watched)
        left_alone.update(reports[rank].left_alone)
        cache_models.update(reports[rank].cache_models)
    first = reports[ranks[0]]
    return SanitizerReport(
        level=first.level,
        action=first.action,
        checks=dict(checks),
        counts={kind: counts[kind] for kind in KINDS},
        violations=tuple(v for rank in ranks for v in reports[rank].violations),
        watched=dict(watched),
        cache_models=cache_models,
        left_alone=dict(left_alone),
        world_size=world_size,
        per_rank={r: {k: n for k, n in reports[r].counts.items() if n} for r in ranks},
        errors=dict(errors or {}),
    )


def gather_report(
    report: SanitizerReport, group: dist.ProcessGroup | None = None
) -> SanitizerReport:
    """Collective: every rank of ``group`` passes its own report and gets the merged one."""
    world_size = dist.get_world_size(group)
    gathered: list[Any] = [None] * world_size
    dist.all_gather_object(gathered, report.to_dict(), group=group)
    reports = {rank: SanitizerReport.from_dict(data) for rank, data in enumerate(gathered)}
    return merge_reports(reports, world_size)


class RankGuard:
    """Runs one rank's sanitized work so that a failure on any rank ends the whole run.

    ``with guard: ...`` wraps the rank's serving loop: an exception escaping it aborts
    (see the module docstring; the process exits with status 1). :meth:`finish` then
    merges the reports with a collective. Either way rank 0 hands the merged report to
    ``emit``. Under NCCL a peer blocked in a collective cannot be released by this rank:
    torchrun ends it when this rank exits, so rank 0 may only print what reached the store.
    """

    def __init__(
        self,
        sanitizer: Sanitizer,
        emit: Callable[[SanitizerReport], None],
        *,
        group: dist.ProcessGroup | None = None,
        grace_s: float = GRACE_S,
    ) -> None:
        self.sanitizer = sanitizer
        self.emit = emit
        self.group = group
        self.grace = timedelta(seconds=grace_s)
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        # The store every rank reached at rendezvous (torchrun's agent hosts it, so it
        # outlives the ranks). torch has no public accessor for it.
        self.store = dist.distributed_c10d._get_default_store()
        self._prefix = f"swacheck/abort/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/"

    def __enter__(self) -> RankGuard:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, Exception):
            self.abort(exc)

    def finish(self) -> SanitizerReport:
        """Merge the ranks' reports (a collective: every rank calls it); rank 0 emits."""
        with self:
            merged = gather_report(self.sanitizer.report(), self.group)
        if self.rank == 0:
            self.emit(merged)
        return merged

    def abort(self, exc: BaseException) -> NoReturn:
        """Publish this rank's report, release the peers, let rank 0 emit, exit 1."""
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exception(exc)
        print(f"[rank {self.rank}] aborting the process group: {error}", file=sys.stderr)
        payload = {"report": self.sanitizer.report().to_dict(), "error": error}
        self.store.set(self._key(self.rank), json.dumps(payload))
        if dist.get_backend(self.group) == "gloo":  # closes the sockets peers wait on
            dist.destroy_process_group()
        if self.rank == 0:
            self.emit(self._published())
            self.store.set(self._key("emitted"), "1")
        else:  # stay until rank 0 has printed: torchrun ends every rank once one exits
            self._wait([self._key("emitted")])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # no interpreter teardown: NCCL's may block on a stuck peer

    def _key(self, name: int | str) -> str:
        return f"{self._prefix}{name}"

    def _wait(self, keys: list[str]) -> None:
        with contextlib.suppress(dist.DistError):  # timed out: report what arrived
            self.store.wait(keys, self.grace)

    def _published(self) -> SanitizerReport:
        keys = [self._key(rank) for rank in range(self.world_size)]
        self._wait(keys)
        reports: dict[int, SanitizerReport] = {}
        errors: dict[int, str] = {}
        for rank, key in enumerate(keys):
            if self.store.check([key]):
                data = json.loads(self.store.get(key))
                reports[rank] = SanitizerReport.from_dict(data["report"])
                errors[rank] = data["error"]
        return merge_reports(reports, self.world_size, errors)


# -- launching ----------------------------------------------------------------------------


def run_session(
    cmd: Sequence[str],
    *,
    capture: bool = False,
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in a session of its own and wait. If the wait ends early (timeout,
    interrupt), every process of the session is killed: a launcher's ranks included."""
    pipe = subprocess.PIPE if capture else None
    proc = subprocess.Popen(
        cmd, stdout=pipe, stderr=pipe, text=True, env=env, cwd=cwd, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def torchrun(args: Sequence[str], nprocs: int, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``torchrun --standalone --nproc-per-node NPROCS ARGS`` on this machine, through
    :func:`run_session` (same keyword arguments)."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    return run_session([*launcher, f"--nproc-per-node={nprocs}", *args], **kwargs)


def parse_report(stdout: str) -> SanitizerReport | None:
    """The merged report rank 0 printed (the last such line), if any."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(REPORT_PREFIX):
            return SanitizerReport.from_dict(json.loads(line[len(REPORT_PREFIX) :]))
    return None


def launch_sanitized(
    target: str,
    nprocs: int,
    *,
    level: str = "fast",
    action: str = "raise",
    watch_classes: Sequence[str] = (),
    timeout_s: float | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], SanitizerReport | None]:
    """Run ``target`` (``module:function``, importable from this process's ``sys.path``)
    on ``nprocs`` ranks, each under its own sanitizer; return the launch and the merged
    report (``None`` if rank 0 never printed one)."""
    args = ["-m", "swacheck.runtime.distributed", target]
    args += ["--level", level, "--action", action]
    args += [f"--watch-class={spec}" for spec in watch_classes]
    paths = [p for p in (*sys.path, os.environ.get("PYTHONPATH", "")) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    proc = torchrun(args, nprocs, capture=True, timeout_s=timeout_s, env=env, cwd=cwd)
    return proc, parse_report(proc.stdout)


def _load(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"expected module:name, got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _print_report_line(report: SanitizerReport) -> None:
    print(REPORT_PREFIX + report.to_json(), flush=True)


def main(argv: list[str] | None = None) -> int:
    """One rank of :func:`launch_sanitized`: join the group, call ``target(sanitizer)``
    under a :class:`RankGuard`, then merge the reports; rank 0 prints the merged one."""
    p = argparse.ArgumentParser(prog="python -m swacheck.runtime.distributed")
    p.add_argument("target", help="module:function, called with this rank's Sanitizer")
    p.add_argument("--level", choices=LEVELS, default="fast")
    p.add_argument("--action", choices=ACTIONS, default="raise")
    p.add_argument(
        "--watch-class", action="append", default=[], metavar="MODULE:CLASS[=ROLE[/CACHE]]"
    )
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: a GPU per local rank (NCCL) when there are enough, else the CPU (gloo)",
    )
    args = p.parse_args(argv)
    device_type = args.device
    if device_type == "auto":
        enough = torch.cuda.device_count() >= int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        device_type = "cuda" if torch.cuda.is_available() and enough else "cpu"
    init_from_env(device_type)
    _run_target(args)
    gc.collect()  # graphs that captured NCCL work must be gone before its communicator
    dist.destroy_process_group()
    return 0


def _run_target(args: argparse.Namespace) -> None:
    target = _load(args.target)
    san = Sanitizer(args.level, args.action, config=resolve_config(None, [Path.cwd()]))
    for spec in map(parse_class_spec, args.watch_class):
        san.watch_class(spec.load(), spec.role, cache=spec.cache)
    guard = RankGuard(san, _print_report_line)
    with guard:
        target(san)
        san.check_deferred()
    guard.finish()
    san.close()


if __name__ == "__main__":
    sys.exit(main())
