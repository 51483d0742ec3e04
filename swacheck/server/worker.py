"""The audit thread: audits and fixes run here, one at a time, off the event loop.

A :class:`~swacheck.engine.workspace.Workspace` serves one audit at a time, and an
audit (a cold start above all) must not hold up the protocol: requests are answered,
and ``shutdown``/``exit`` honoured, while it runs. The thread is a daemon, so an exit
in the middle of a long cold start does not wait for it (a
:class:`~concurrent.futures.ThreadPoolExecutor`'s threads are joined at exit).

The files themselves are parsed and analysed in a worker process (kept for the
server's life, :mod:`swacheck.engine.workers`), under every per-file bound:
``max-file-size``, ``max-file-time`` (an ``ITIMER_PROF`` CPU-time timer in the worker's
main thread, and the operating system's CPU limit for native code) and
``max-file-memory``. A file that crashes libcst's parser or exceeds a bound gets
``SWA999``; the server, which only waits on the worker's socket, keeps answering.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Worker:
    def __init__(self, name: str = "swacheck-audit") -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def run(self, job: Callable[[], T]) -> asyncio.Future[T]:
        """Queue ``job``; the returned future (of the running event loop) gets its result."""
        future: Future[T] = Future()
        self._jobs.put((future, job))
        return asyncio.wrap_future(future)

    def _serve(self) -> None:
        while True:
            future, job = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)
