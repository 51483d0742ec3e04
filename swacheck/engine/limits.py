"""The per-file time bound: ``max-file-time`` seconds for each pass over one file.

The size bound (``max-file-size``, :func:`swacheck.engine.parse.too_large`) keeps what
libcst parses, and the memory that takes, in proportion to real engine files; this one
bounds the analysis, whose cost on pathological code (thousands of SWA classes in one
generated file) can grow faster than its size. A file that runs out of time is answered
with ``SWA999`` and the audit goes on.

The bound is on CPU time (``ITIMER_PROF``), so that a loaded CI machine does not turn a
file near it into a different answer; it is a signal, so it holds in a process's main
thread (the command, and each worker process); elsewhere (an editor's worker thread)
only the size bound applies. The exception derives from ``BaseException`` so that the rules' own
``except Exception`` isolation cannot swallow it. libcst's native parser cannot be
interrupted; the size bound is what bounds it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from swacheck.finding import PARSE_ERROR_CODE, Finding, Position


class OutOfTime(BaseException):
    """Raised in the main thread when a file's pass uses more CPU time than its bound."""


def _raise(signum: int, frame: FrameType | None) -> None:
    raise OutOfTime


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`OutOfTime` if the block uses more than ``seconds`` of CPU time
    (0: no bound)."""
    if (
        seconds <= 0
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    previous = signal.signal(signal.SIGPROF, _raise)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def out_of_time(path: str, seconds: float) -> Finding:
    """SWA999 for a file whose analysis ran past ``max-file-time``."""
    position = Position(1, 0)
    message = f"File too slow to analyse (over {seconds:g} s of CPU time: `max-file-time`)"
    return Finding(PARSE_ERROR_CODE, message, path, position, position, noqa_row=None)
