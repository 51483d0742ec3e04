"""``fast``'s sampling: some checks run on a sample of the events they could run on.

Only checks of invariants whose violations are systematic are sampled: a padded tail
that populate does not reset stays stale on every later padded step, a type contract
broken on every call stays broken. Checks of violations that can be transient (a stale
translation, an uninvalidated write) run on every call.

A :class:`Sampler` samples at random strides drawn uniformly from 1 to ``2 * every - 1``
(mean ``every``) from a fixed seed: no periodic pattern of the engine lines up with the
gaps, a run is reproducible, and any ``max_gap`` consecutive events hold a sampled one.
That gap is the latency bound the documentation states for a systematic violation.
"""

from __future__ import annotations

import random


class Sampler:
    __slots__ = ("_every", "_left", "_rng")

    def __init__(self, every: int, seed: int = 0) -> None:
        if every < 1:
            raise ValueError(f"a sampler samples one event in {every}: must be at least 1")
        self._every = every
        self._rng = random.Random(seed)
        self._left = self._stride()

    @property
    def max_gap(self) -> int:
        """The most events from one sampled event to the next."""
        return 2 * self._every - 1

    def due(self) -> bool:
        """Count one event; whether it is sampled."""
        self._left -= 1
        if self._left:
            return False
        self._left = self._stride()
        return True

    def _stride(self) -> int:
        return self._rng.randint(1, 2 * self._every - 1)
