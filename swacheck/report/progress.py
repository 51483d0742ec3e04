"""What a long audit says while it works, on stderr.

A cold audit of a large engine tree takes tens of seconds (minutes on a busy machine);
without a word the terminal, a CI log or a pre-commit hook shows nothing until the
findings. So:

- :class:`IndexingNote`: one line, said once as the analysis starts, that the project is
  being indexed and roughly how long that takes, where it is long enough to be worth a
  line. It is the only word a captured stderr (pre-commit's, a CI log's) gets.
- :class:`ProgressLine`: files analysed out of those to analyse and the time so far, on a
  terminal: rewritten in place (a carriage return), at most every :data:`INTERVAL_S`, and
  erased when the audit ends, so what stays on screen is what the audit reports. The
  command draws it only when stderr is a terminal and the report is text meant for a
  person (not ``-q``/``-s``, not a machine format).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TextIO

INTERVAL_S = 0.1
# CPU seconds an audit spends per file it indexes: SGLang 0.5.11 at 30a33b2, 40.1 s for
# the first pre-commit call (488 files indexed, one checked), 43 s for a cold audit of the
# whole tree (487 indexed and checked). Re-measure when the analysis changes, with the
# "first pre-commit call" row of benchmarks/BENCHMARKS.md.
CPU_S_PER_FILE = 0.085
# Work estimated shorter than this (wall seconds) is not worth a line.
NOTE_FROM_S = 5.0
# Back to the start of the line and erase it (ANSI, as every terminal emulator reads it).
_ERASE = "\r\x1b[2K"


class ProgressLine:
    """``(done, total)`` -> ``swacheck: 120/685 files, 3.4 s`` on ``stream``."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self._drawn_at: float | None = None

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if done < total and self._drawn_at is not None and now - self._drawn_at < INTERVAL_S:
            return
        self._drawn_at = now
        elapsed = now - self.started
        self.stream.write(f"{_ERASE}swacheck: {done}/{total} files, {elapsed:.1f} s")
        self.stream.flush()

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Erase the line (if one was drawn): the report follows on a clean line."""
        if self._drawn_at is not None:
            self.stream.write(_ERASE)
            self.stream.flush()
            self._drawn_at = None


def _share(workers: int) -> float:
    """The share of a core each worker can expect: less where other work keeps the
    machine busy (its load average against its cores; all of it, as a container's
    quota already bounds ``workers``)."""
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this system
        return 1.0
    return min(1.0, (os.cpu_count() or 1) / (busy + workers))


def _duration(seconds: float) -> str:
    """``40 s``, ``3 min``: as roughly as an estimate deserves."""
    if seconds < 90:
        return f"{max(10, round(seconds, -1)):.0f} s"
    return f"{round(seconds / 60)} min"


class IndexingNote:
    """Told the number of files an audit indexes (``Workspace.audit(indexing=...)``), says
    once, where the estimate reaches :data:`NOTE_FROM_S`:
    ``swacheck: indexing the project (488 files), roughly 20 s on 2 workers (...)``.

    ``workers``: the processes the audit may use; ``cached``: whether later runs reuse
    what this one reads (no ``--no-cache``)."""

    def __init__(self, stream: TextIO, workers: int, cached: bool) -> None:
        self.stream = stream
        self.workers = max(1, workers)
        self.cached = cached

    def __call__(self, files: int) -> None:
        workers = min(self.workers, files) or 1
        share = _share(workers)
        estimate = files * CPU_S_PER_FILE / (workers * share)
        if estimate < NOTE_FROM_S:
            return
        on = f"{workers} worker{'s' if workers > 1 else ''}"
        if share < 0.75:
            on += " of a busy machine"
        once = (
            "once: later runs read only the files that changed"
            if self.cached
            else "on every run with --no-cache"
        )
        self.stream.write(
            f"swacheck: indexing the project ({files:,} files), roughly "
            f"{_duration(estimate)} on {on} ({once})\n"
        )
        self.stream.flush()
