"""How many cores this process may use: the default of ``--jobs``.

``os.cpu_count()`` counts the host's cores; a CI job is usually given fewer, by CPU
affinity or by a container's CPU quota (cgroups), and one worker per host core would
multiply the memory an audit takes by the host's size. As ruff does (Rust's
``available_parallelism``), the smallest of the three counts.
"""

from __future__ import annotations

import math
import os


def _quota(path: str, period_path: str | None = None) -> int | None:
    """Cores a cgroup's CPU quota allows (v2 ``cpu.max``; v1 quota and period files)."""
    try:
        with open(path, encoding="ascii") as handle:
            fields = handle.read().split()
        if period_path is not None:
            with open(period_path, encoding="ascii") as handle:
                fields.append(handle.read().strip())
        quota, period = fields[0], fields[1]
        if quota in ("max", "-1"):
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError, IndexError, ZeroDivisionError):
        return None


def available_cores() -> int:
    counts = [os.cpu_count() or 1]
    if hasattr(os, "sched_getaffinity"):
        counts.append(len(os.sched_getaffinity(0)))
    for quota in (
        _quota("/sys/fs/cgroup/cpu.max"),
        _quota("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
    ):
        if quota is not None:
            counts.append(quota)
    return max(1, min(counts))
