"""LSP work-done progress of a long audit (a cold start): ``$/progress`` begin, reports
and end, told from the audit thread.

The audit runs on its own thread (:mod:`swacheck.server.worker`) and reports
``(done, total)`` files as it goes (``Workspace.audit(progress=...)``); the protocol is
the event loop's, so each report is handed to the loop (``call_soon_threadsafe``), at
most every :data:`INTERVAL_S`. The token is created with
``window/workDoneProgress/create`` first, as LSP requires of server-initiated progress,
and only for a client that says it shows progress (``window.workDoneProgress``).
"""

from __future__ import annotations

import asyncio
import itertools
import time

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.lsp.server import LanguageServer

INTERVAL_S = 0.2
_TOKENS = itertools.count(1)


class WorkDone:
    """One long audit's progress in the client (nothing, for a client without it)."""

    def __init__(self, server: LanguageServer, title: str) -> None:
        self.server = server
        self.title = title
        self.token = f"swacheck-audit-{next(_TOKENS)}"
        self.shown = get_capability(server.client_capabilities, "window.work_done_progress", False)
        self._loop = asyncio.get_running_loop()
        self._told_at = float("-inf")
        self._started = False

    async def begin(self, message: str) -> None:
        if not self.shown:
            return
        try:
            await self.server.work_done_progress.create_async(self.token)
        except Exception:  # the client refused it: no progress then
            self.shown = False
            return
        self.server.work_done_progress.begin(
            self.token,
            types.WorkDoneProgressBegin(
                title=self.title, message=message, percentage=0, cancellable=False
            ),
        )
        self._started = True

    def __call__(self, done: int, total: int) -> None:
        """``(done, total)`` files, from the audit thread."""
        now = time.monotonic()
        if not self._started or (done < total and now - self._told_at < INTERVAL_S):
            return
        self._told_at = now
        self._loop.call_soon_threadsafe(self._report, done, total)

    def _report(self, done: int, total: int) -> None:
        if not self._started:
            return
        percentage = done * 100 // total if total else 100
        self.server.work_done_progress.report(
            self.token,
            types.WorkDoneProgressReport(message=f"{done}/{total} files", percentage=percentage),
        )

    def end(self, message: str) -> None:
        if self._started:
            self.server.work_done_progress.end(
                self.token, types.WorkDoneProgressEnd(message=message)
            )
            self._started = False
