"""When to audit: at once after an open, a save or a change on disk; debounced while typing.

An edit after a quiet spell (no edit for the debounce time) is audited at once, so a
single change gets its diagnostics as fast as the audit allows; edits that follow
closer together than the debounce time are audited once, that long after the last of
them. At most one audit round runs at a time (an audit cannot be interrupted); anything
that asks for one meanwhile gets one more round right after it, which audits the newest
text of every document. An audit started at a burst's first key holds up the one after
its last key only by what it outlasts the burst plus the debounce time; bursts of typing
last longer than the debounce time, so that is nothing unless rounds take longer than
twice the debounce time (a 6,000-line file): then the first edit of a burst waits too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)


class Debouncer:
    def __init__(self, audit: Callable[[], Awaitable[None]], delay_s: float) -> None:
        self._audit = audit
        self.delay_s = delay_s
        self._last_edit = float("-inf")
        self._timer: asyncio.TimerHandle | None = None
        self._running: asyncio.Task[None] | None = None
        self._again = False
        # How long the last round took (seconds).
        self.last_round_s = 0.0

    def edited(self) -> None:
        """A document's text changed in the editor."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        quiet = now - self._last_edit >= self.delay_s
        self._last_edit = now
        if quiet and self._timer is None and self.last_round_s <= 2 * self.delay_s:
            self.now()
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(self.delay_s, self.now)

    def now(self) -> None:
        """Audit as soon as the round running (if any) is over."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._running is not None:
            self._again = True
            return
        self._running = asyncio.get_running_loop().create_task(self._rounds())

    async def _rounds(self) -> None:
        try:
            while True:
                self._again = False
                started = asyncio.get_running_loop().time()
                try:
                    await self._audit()
                except Exception:
                    logger.exception("audit round failed")
                self.last_round_s = asyncio.get_running_loop().time() - started
                if not self._again:
                    return
        finally:
            self._running = None
