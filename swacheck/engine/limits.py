"""The per-file bounds: ``max-file-time`` CPU seconds and ``max-file-memory`` MiB for each
pass over one file, and what a file beyond them is told.

The size bound (``max-file-size``) keeps what libcst parses in proportion to real engine
files. These two bound the rest, where a file's cost can grow faster than its size
(thousands of SWA classes in one generated file; shapes libcst's native parser is
quadratic or worse on):

- :func:`time_limit`, a CPU-time timer (``ITIMER_PROF``, so that a loaded CI machine
  does not turn a file near the bound into a different answer). Its signal interrupts
  Python code between bytecodes, raising :class:`OutOfTime` (a ``BaseException``, so
  the rules' own ``except Exception`` cannot swallow it); the worker goes on with the
  next file. It holds in a process's main thread, which every worker's is.
- :func:`os_limits`, inside a worker process only: the operating system's CPU-time
  limit (``RLIMIT_CPU``) at the same bound plus :data:`CPU_GRACE_S`, which stops native
  code the timer's signal cannot interrupt (libcst's parser) by killing the worker
  (``SIGXCPU``), and an address-space limit (``RLIMIT_AS``) of what the worker holds
  before the file plus ``max-file-memory``: an allocation beyond it fails (a
  ``MemoryError`` in Python; in libcst's native code the process aborts). The parent
  blames the file the worker was on and starts another (``engine/workers.py``).

A file beyond a bound is answered with ``SWA999`` and the audit goes on.
"""

from __future__ import annotations

import math
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType

from swacheck.finding import PARSE_ERROR_CODE, Finding, Position

# Seconds of CPU time a file's pass may run past ``max-file-time`` inside native code
# before the operating system stops the worker (RLIMIT_CPU counts whole seconds).
CPU_GRACE_S = 1


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


def _address_space() -> int | None:
    """This process's address space in bytes (Linux), ``None`` where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _lower(resource_id: int, soft: int) -> int | None:
    """Set ``resource_id``'s soft limit to ``soft`` (at most the hard limit); the soft
    limit it had, ``None`` if it could not be set."""
    import resource

    previous, hard = resource.getrlimit(resource_id)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    try:
        resource.setrlimit(resource_id, (soft, hard))
    except (ValueError, OSError):
        return None
    return previous


def _restore(resource_id: int, soft: int | None) -> None:
    import resource

    if soft is not None:
        with suppress(ValueError, OSError):
            resource.setrlimit(resource_id, (soft, resource.getrlimit(resource_id)[1]))


@contextmanager
def os_limits(seconds: float, mebibytes: int) -> Iterator[None]:
    """The operating system's limits for one pass over one file, in a worker process:
    CPU time ``seconds`` (plus grace) and ``mebibytes`` of address space beyond what the
    process holds now (0: no limit). Never call this in a process whose death would
    take more than one file with it."""
    try:
        import resource
    except ImportError:  # not POSIX: the timer and the parent's watchdog still hold
        yield
        return
    cpu = memory = None
    if seconds > 0:
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = used.ru_utime + used.ru_stime
        cpu = _lower(resource.RLIMIT_CPU, math.ceil(spent + seconds) + CPU_GRACE_S)
    base = _address_space() if mebibytes > 0 else None
    if base is not None:
        memory = _lower(resource.RLIMIT_AS, base + mebibytes * 2**20)
    try:
        yield
    finally:
        _restore(resource.RLIMIT_AS, memory)
        _restore(resource.RLIMIT_CPU, cpu)


def beyond_limits(path: str, message: str) -> Finding:
    """``SWA999`` for a file the analysis gave up on (a bound, a crash)."""
    position = Position(1, 0)
    return Finding(PARSE_ERROR_CODE, message, path, position, position, noqa_row=None)


def too_large(path: str, size: int, limit: int) -> Finding:
    """SWA999 for a file over ``max-file-size`` bytes (it is neither read nor parsed)."""
    size_text = f"{size:,} bytes, over the limit of {limit:,}"
    return beyond_limits(path, f"File too large to analyse ({size_text}: `max-file-size`)")


def out_of_time(path: str, seconds: float) -> Finding:
    """SWA999 for a file whose analysis ran past ``max-file-time``."""
    message = f"File too slow to analyse (over {seconds:g} s of CPU time: `max-file-time`)"
    return beyond_limits(path, message)


def out_of_memory(path: str, mebibytes: int) -> Finding:
    """SWA999 for a file whose analysis needed more than ``max-file-memory`` (0: more
    than there was)."""
    limit = f"the memory limit of {mebibytes:,} MiB: `max-file-memory`" if mebibytes else ""
    message = f"File too large to analyse (over {limit or 'the memory available'})"
    return beyond_limits(path, message)
