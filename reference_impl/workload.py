"""The request mix served by the demo and the tests, built so every bug's trigger is reached.

- r0 and r1 arrive together with equal prompt lengths: their prefill runs as two
  micro-batches whose ``out_cache_loc`` are equal-sized views of one tensor
  (``storage-pointer-key`` collides there).
- r2's prompt exceeds the chunked-prefill size and the window: an extend with a
  cached prefix, and SWA eviction during prefill.
- With at most four running requests, r1 (second in the batch) finishes while
  no one is waiting: the batch drops from 4 to 3 and is padded back to the
  4-bucket, whose tail still holds r3's previous SWA slot, a live token
  (``padding-not-zeroed`` overwrites it at scheduler step 11, decode step 8).
- Every decode step allocates, evicts and frees (mapping mutations between
  translations).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestSpec:
    rid: int
    prompt: tuple[int, ...]
    max_new_tokens: int
    arrival_step: int  # scheduler step at which the request becomes admissible


# (prompt length, max new tokens, arrival step)
_MIX: tuple[tuple[int, int, int], ...] = (
    (6, 40, 0),
    (6, 8, 0),
    (20, 30, 2),
    (5, 20, 3),
    (11, 14, 16),
    (3, 6, 16),
    (9, 10, 26),
)


def make_workload(seed: int, vocab_size: int) -> list[RequestSpec]:
    """The fixed length mix with token ids drawn from ``seed``."""
    rng = random.Random(seed)
    return [
        RequestSpec(rid, tuple(rng.randrange(vocab_size) for _ in range(n)), new, arrival)
        for rid, (n, new, arrival) in enumerate(_MIX)
    ]
