"""The audit thread: audits and fixes run here, one at a time, off the event loop.

A :class:`~swacheck.engine.workspace.Workspace` serves one audit at a time, and an
audit (a cold start above all) must not hold up the protocol: requests are answered,
and ``shutdown``/``exit`` honoured, while it runs. The thread is a daemon, so an exit
in the middle of a long cold start does not wait for it (a
:class:`~concurrent.futures.ThreadPoolExecutor`'s threads are joined at exit).

``max-file-time`` is a ``SIGALRM`` timer and holds in the main thread only; here only
``max-file-size`` bounds a file (see :mod:`swacheck.engine.limits`).
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
