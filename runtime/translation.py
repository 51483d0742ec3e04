"""I9, translation correctness where SWA KV is written, whatever the design.

Wherever an SWA KV write takes its locations, each live row's SWA location must be the
translation of its full location under the current mapping (``mapping[full]``), and
each padded row the sentinel slot 0. The pair is checked where it is consumed:

- a watched pool's KV write (``set_kv_buffer``): the full location it is given and the
  SWA location that write actually uses: the one its SWA sub-pool's write receives
  (0.5.11's ``self.swa_loc`` attribute, 0.5.13's ``swa_loc=``, a ``KVWriteLoc``), else
  its SWA argument or the location holder's SWA field, else what it translated itself;
- a graph's SWA write-location buffers, once filled for a replay (a runner's input
  buffers after populate, an attention backend's after its replay metadata), against
  the full write locations of the same replay.

So one check catches an untranslated location (``swa_out_cache_loc = out_cache_loc``),
a stale translation (a cache served after the mapping moved, a translation kept from an
earlier batch), a page of full slots where SWA slots belong, and a padded row that was
not reset, whether translation happens in the pool, the runner or the backends.

``full`` compares every distinct pair on the spot (the same pair handed to every layer
of a forward is compared once). ``fast`` never reads the device: it samples, per place,
the first pair and then one in ``TRANSLATION_SAMPLE_EVERY`` at random strides
(``sampling.py``), and stages the sampled rows (at most ``MAX_STAGED_ROWS``, a window at
a random offset of a larger write) with their expected translation into a ring on the
device (one gather and one ``torch.cat``); the ring is read at the safe points that read
the padding flags. A mistranslation that recurs (an untranslated or stale location
path) is reported within ``2 * TRANSLATION_SAMPLE_EVERY - 1`` writes at that place plus
two flag reads (``2 * deferred.POLL_EVERY`` forwards), and by the end of the test at the
latest; a one-off one with the probability of being sampled (``full`` sees all).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import violations as V
from .model import caller, site_of, tensor_version
from .sampling import Sampler

# ``fast``: writes per place per sampled one, on average; rows staged per sampled write.
TRANSLATION_SAMPLE_EVERY = 8
MAX_STAGED_ROWS = 256
# Ring slots per device (each three times MAX_STAGED_ROWS int64 values).
RING_SLOTS = 64
SENTINEL_SLOT = 0


@dataclass(frozen=True)
class Staged:
    """One sampled write in a ring slot: where, which rows (the first row's index, how
    many), and which rows of the write are padded (from ``raw`` on)."""

    label: str
    site: str | Callable[[], str]
    first: int
    rows: int
    raw: int | None


@dataclass(frozen=True)
class Finding:
    """A mistranslated write: the wrong rows counted and the first few as
    (row, full location, expected SWA location, actual)."""

    label: str
    site: str
    rows: int
    live_wrong: int
    padded_wrong: int
    first: tuple[V.Row, ...]
    picture: V.Picture | None = None


def picture(
    label: str,
    full: list[int],
    expected: list[int],
    actual: list[int],
    first_row: int,
    raw: int | None,
    first_wrong: int,
) -> V.Picture:
    """The rows of a write a report draws: all of them, or ``MAX_PICTURE_ROWS`` from a
    little before the first wrong one (``first_wrong``, an index into the lists)."""
    n, keep = len(actual), V.MAX_PICTURE_ROWS
    start = 0 if n <= keep else min(max(first_wrong - keep // 4, 0), n - keep)
    end = start + min(n, keep)
    return V.Picture(
        label,
        first_row=first_row + start,
        raw=raw,
        full=tuple(full[start:end]),
        expected=tuple(expected[start:end]),
        actual=tuple(actual[start:end]),
    )


def expected_translation(
    mapping: torch.Tensor, full: torch.Tensor, raw: int | None
) -> torch.Tensor:
    """``mapping[full]``, with the rows from ``raw`` on set to the sentinel (on the device)."""
    expected = mapping[full.long()]
    if raw is not None and raw < expected.numel():
        expected[raw:] = SENTINEL_SLOT
    return expected


def compare(
    label: str,
    site: str,
    full: list[int],
    expected: list[int],
    actual: list[int],
    first_row: int,
    raw: int | None,
) -> Finding | None:
    """The wrong rows of one write, from host values (``None``: none wrong)."""
    wrong = [i for i, (e, a) in enumerate(zip(expected, actual, strict=True)) if e != a]
    if not wrong:
        return None
    rows = [first_row + i for i in wrong]
    padded = sum(1 for row in rows if raw is not None and row >= raw)
    return Finding(
        label,
        site,
        len(actual),
        len(rows) - padded,
        padded,
        tuple((first_row + i, full[i], expected[i], actual[i]) for i in wrong[: V.MAX_VALUES]),
        picture(label, full, expected, actual, first_row, raw, wrong[0]),
    )


class RowRing:
    """One device's staging ring for ``fast``: a sampled write's full locations, expected
    and actual SWA locations, side by side in a slot, copied to pinned host memory at a
    safe point and read once that copy has landed (never waiting on the hot path)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.width = 3 * MAX_STAGED_ROWS
        self.ring = torch.zeros(RING_SLOTS * self.width, dtype=torch.int64, device=device)
        self._host = torch.zeros(
            RING_SLOTS * self.width, dtype=torch.int64, pin_memory=device.type == "cuda"
        )
        self.staged: list[Staged] = []
        self._in_flight: list[Staged] = []
        self._event: torch.cuda.Event | None = None
        self.pending = False
        self._carried: list[Finding] = []

    @property
    def idle(self) -> bool:
        return not (self.pending or self.staged or self._carried)

    def slot(self, entry: Staged) -> torch.Tensor | None:
        """The next slot's first ``3 * rows`` values, or ``None`` when the ring is full and
        its last copy has not landed (the sample is dropped: the next one is taken)."""
        if len(self.staged) == RING_SLOTS and not self._make_room():
            return None
        first = len(self.staged) * self.width
        self.staged.append(entry)
        return self.ring[first : first + 3 * entry.rows]

    def _make_room(self) -> bool:
        if self.pending:
            if self._event is None or not self._event.query():
                return False
            self._carried += self._read(self._host, self._in_flight)
            self.pending = False
        self._ship()
        return True

    def _ship(self) -> None:
        if self.device.type != "cuda":
            self._carried += self._read(self.ring, self.staged)
            self.staged = []
            return
        n = len(self.staged) * self.width
        self._host[:n].copy_(self.ring[:n], non_blocking=True)
        self._in_flight, self.staged = self.staged, []
        self._event = self._event or torch.cuda.Event()
        self._event.record()
        self.pending = True

    def _read(self, values: torch.Tensor, entries: list[Staged]) -> list[Finding]:
        found = []
        flat = values[: len(entries) * self.width].tolist()
        for index, entry in enumerate(entries):
            base, n = index * self.width, entry.rows
            site = entry.site if isinstance(entry.site, str) else entry.site()
            finding = compare(
                entry.label,
                site,
                flat[base : base + n],
                flat[base + n : base + 2 * n],
                flat[base + 2 * n : base + 3 * n],
                entry.first,
                entry.raw,
            )
            if finding is not None:
                found.append(finding)
        return found

    def poll(self) -> list[Finding]:
        """What landed since the last poll; ships what was staged (never waits)."""
        if self.pending and self._event is not None and self._event.query():
            self._carried += self._read(self._host, self._in_flight)
            self.pending = False
        if not self.pending and self.staged:
            self._ship()
        found, self._carried = self._carried, []
        return found

    def drain(self) -> list[Finding]:
        """Everything staged, waiting for the device (report time only)."""
        if self.pending and self._event is not None:
            self._event.synchronize()
            self._carried += self._read(self._host, self._in_flight)
        self.pending = False
        if self.staged:
            self._carried += self._read(self.ring.cpu(), self.staged)
            self.staged = []
        found, self._carried = self._carried, []
        return found


class TranslationCheck:
    """The I9 check of every place that consumes SWA write locations (see the module
    docstring). ``record`` turns a finding into a violation (``Checks`` records it)."""

    def __init__(self, full: bool, record: Callable[[Finding, bool], None]) -> None:
        self.full = full
        self.record = record
        self.count = 0  # checks run
        self._samplers: dict[str, Sampler] = {}
        self._rings: dict[torch.device, RowRing] = {}
        self._rng = random.Random(0)
        # The last pair checked: (scope, full's pointer, numel, version, swa's ...).
        self._last: tuple[object, ...] | None = None

    def check(
        self,
        label: str,
        mapping: torch.Tensor,
        full: torch.Tensor,
        swa: torch.Tensor,
        raw: int | None = None,
        scope_id: int = 0,
        site: str | None = None,
    ) -> None:
        """``swa`` must be ``mapping[full]`` row by row, the rows from ``raw`` on the
        sentinel. ``site``: where the write was consumed (the calling engine frame when
        not given). Pairs of other sizes are left alone."""
        n = full.numel()
        if n == 0 or swa.numel() != n or not self._due(label, full, swa, n, raw, scope_id):
            return
        self._run(label, mapping, full.reshape(-1), swa.reshape(-1), raw, site)

    def check_rows(
        self,
        label: str,
        mapping: torch.Tensor,
        full: torch.Tensor,
        swa: torch.Tensor,
        rows: int,
        scope_id: int = 0,
        site: str | None = None,
    ) -> None:
        """:meth:`check` of the first ``rows`` rows of ``full`` and ``swa`` (buffers a
        replay fills, the live rows first). The rows are cut out only for a check that
        runs: ``fast`` skips most calls, and a view costs what the skip does."""
        if rows <= 0 or full.numel() < rows or swa.numel() < rows:
            return
        if self._due(label, full, swa, rows, None, scope_id):
            self._run(label, mapping, full.reshape(-1)[:rows], swa.reshape(-1)[:rows], None, site)

    def _due(
        self,
        label: str,
        full: torch.Tensor,
        swa: torch.Tensor,
        rows: int,
        raw: int | None,
        scope_id: int,
    ) -> bool:
        """Whether the check of this pair runs (and is counted): not the same pair again,
        unwritten, and in ``fast`` sampled at ``label``. A pair is told by where its rows
        start, how many, and the version counters (a view shares its base's)."""
        key = (
            scope_id,
            full.data_ptr(),
            rows,
            tensor_version(full),
            swa.data_ptr(),
            tensor_version(swa),
            raw,
        )
        if key == self._last:
            return False  # the same pair, unwritten, again (every layer of a forward)
        # Inference tensors keep no version: an in-place write would go unseen.
        self._last = None if key[3] is None or key[5] is None else key
        if not self.full:
            sampler = self._samplers.get(label)
            if sampler is None:
                sampler = self._samplers[label] = Sampler(TRANSLATION_SAMPLE_EVERY)
            elif not sampler.due():
                return False
        self.count += 1
        return True

    def _run(
        self,
        label: str,
        mapping: torch.Tensor,
        full: torch.Tensor,
        swa: torch.Tensor,
        raw: int | None,
        site: str | None,
    ) -> None:
        """Compare a pair now (``full``) or stage it (``fast``); both flat."""
        if self.full:
            self._compare_now(label, mapping, full, swa, raw, site)
        else:
            self._stage(label, mapping, full, swa, raw, site)

    def _compare_now(
        self,
        label: str,
        mapping: torch.Tensor,
        full: torch.Tensor,
        swa: torch.Tensor,
        raw: int | None,
        site: str | None,
    ) -> None:
        expected = expected_translation(mapping, full, raw)
        wrong = (swa != expected).nonzero().reshape(-1)
        if not wrong.numel():
            return
        head = wrong[: V.MAX_VALUES]
        rows = tuple(
            zip(
                head.tolist(),
                full[head].tolist(),
                expected[head].tolist(),
                swa[head].tolist(),
                strict=True,
            )
        )
        padded = 0 if raw is None else int((wrong >= raw).sum())
        first_wrong = int(head[0])
        start = max(first_wrong - V.MAX_PICTURE_ROWS // 4, 0)
        window = slice(start, start + V.MAX_PICTURE_ROWS)
        drawn = picture(
            label,
            full[window].tolist(),
            expected[window].tolist(),
            swa[window].tolist(),
            start,
            raw,
            first_wrong - start,
        )
        finding = Finding(
            label, site or V.call_site(), full.numel(), wrong.numel() - padded, padded, rows, drawn
        )
        self.record(finding, False)

    def _stage(
        self,
        label: str,
        mapping: torch.Tensor,
        full: torch.Tensor,
        swa: torch.Tensor,
        raw: int | None,
        site: str | None,
    ) -> None:
        n = full.numel()
        first = 0 if n <= MAX_STAGED_ROWS else self._rng.randrange(n - MAX_STAGED_ROWS + 1)
        rows = min(n, MAX_STAGED_ROWS)
        if first or rows < n:
            full, swa = full[first : first + rows], swa[first : first + rows]
        ring = self._rings.get(full.device)
        if ring is None:
            ring = self._rings[full.device] = RowRing(full.device)
        if site is None:
            where: str | Callable[[], str] = functools.partial(site_of, *caller())
        else:
            where = site
        shifted = None if raw is None else max(raw - first, 0)
        out = ring.slot(Staged(label, where, first, rows, raw))
        if out is None:
            return
        expected = expected_translation(mapping, full, shifted)
        torch.cat((full, expected, swa), out=out)

    def poll(self) -> list[Finding]:
        found: list[Finding] = []
        for ring in self._rings.values():
            if not ring.idle:
                found += ring.poll()
        return found

    def drain(self) -> list[Finding]:
        found: list[Finding] = []
        for ring in self._rings.values():
            found += ring.drain()
        return found

    def samplers(self) -> int:
        """Places sampled (bookkeeping)."""
        return len(self._samplers)

    def rings(self) -> int:
        """Devices with a staging ring (bookkeeping)."""
        return len(self._rings)
