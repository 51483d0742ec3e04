"""The progress line of a long audit on a terminal: files analysed out of those to analyse,
and the time so far, on stderr.

A cold audit of a large engine tree takes tens of seconds; without it the terminal shows
nothing until the findings. The line is rewritten in place (a carriage return), at most
every :data:`INTERVAL_S`, and erased when the audit ends, so what stays on screen is what
the audit reports. The command draws it only when stderr is a terminal and the report is
text meant for a person (not ``-q``/``-s``, not a machine format).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

INTERVAL_S = 0.1
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
