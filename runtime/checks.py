"""What every check shares: the counters of checks run, the forward or capture run in
progress, and the turning of a failed check into a violation according to the action.

The per-role watches (``pool_watch``, ``graph_watch``, ``forward_watch``) wrap an
engine's methods and report events here; the :class:`~swacheck.runtime.Sanitizer`
facade builds them over one :class:`Checks`. This module imports no watch: what it
needs of a pool's cache it asks through :class:`CacheWatch`.

Checks run are counted in one plain integer per kind (``*_checks``), folded into a
dictionary only when a report is made: the hot path never touches a ``Counter``.
"""

from __future__ import annotations

import gc
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch.utils.weak import WeakIdKeyDictionary

from swacheck.config import Config

from . import violations as V
from .consequence import KVWriteCheck, SnapshotPool
from .deferred import DeferredFlags, FlagSource, is_capturing
from .locations import LocationNames, Span, batch_argument, span
from .model import Scope, ScopeKind
from .sampling import Sampler
from .wrapping import Patcher

# Left out of a violation's pytest traceback (``violations.hide_from_traceback``).
__tracebackhide__ = V.hide_from_traceback

LEVELS = ("fast", "full")
ACTIONS = ("raise", "log")

# Violations kept per kind for the report (all are counted).
MAX_KEPT = 20
# Violations logged per kind before the rest are only counted.
MAX_LOGGED = 10
# ``fast``: forwards between two samples of the type contracts, on average (contracts.py).
SAMPLE_EVERY = 64

logger = logging.getLogger("swacheck.runtime")


class CacheWatch(SnapshotPool, Protocol):
    """What the scope checks ask of a watched pool's translation cache (``pool_watch``)."""

    live: object | None

    def check_mapping_write(self, method: str | None) -> None: ...

    def check_scope_start(self, kind: ScopeKind, scope_id: int) -> None: ...

    def check_scope_end(self) -> None: ...


class Sampled(Protocol):
    """A check that ``fast`` runs on a sample of calls: it steps in for the next call."""

    def step_in(self) -> None: ...


class Checks:
    """The state the checks share, and the recording of what they conclude.

    ``level``: ``fast`` (host-only, never synchronises, safe during graph capture) or
    ``full`` (adds content checks that read the device). ``action``: ``raise`` a typed
    :class:`~swacheck.runtime.SWASanitizerError` per violation, or ``log`` and count.
    """

    def __init__(
        self,
        level: str,
        action: str,
        config: Config,
        batch_loc_names: tuple[str, ...],
    ) -> None:
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
        self.level = level
        self.action = action
        self.config = config
        self.full = level == "full"
        # The dtypes SWA locations may have where they are consumed (I3).
        self.swa_dtypes: frozenset[torch.dtype] = frozenset(
            getattr(torch, name)
            for name in config.runtime_swa_loc_dtypes or config.runtime_default_dtypes
        )
        self.names = LocationNames(config.swa_loc_pattern, batch_loc_names)
        self.patcher = Patcher()
        self.pools: list[CacheWatch] = []
        self.sampled: list[Sampled] = []
        # Objects whose populate method some graph watch wraps (by id): one watch each,
        # whether found through a runner or watched on their own.
        self.populate_owners: set[int] = set()
        # Checks run, one counter per kind (see ``checks``).
        self.mapping_checks = 0
        self.stale_checks = 0
        self.dtype_checks = 0
        self.padding_checks = 0
        self.capture_start_checks = 0
        self.forward_start_checks = 0
        self.fresh_checks = 0
        self.kv_checks = 0
        self.counts: Counter[str] = Counter()
        self.violations: list[V.Violation] = []
        # Violations not turned into an exception (``log``, or found at report time); the
        # first ``MAX_KEPT`` of each kind, like ``violations``.
        self.unraised: list[V.Violation] = []
        self._deferred_raised = 0  # of ``unraised``, how many check_deferred raised
        self.flags = DeferredFlags()
        # Between scopes, ``scope`` is the idle scope.
        self._idle = Scope(spans=())
        self._active = Scope(ScopeKind.FORWARD)
        self.scope = self._idle
        self._scope_ids = 0
        # Pools whose cache holds a live (not invalidated) entry: while none does, the
        # checks that only a live entry can fail (I1 at allocator exits, I5/I6 at scope
        # starts, I7 at scope ends) are skipped, the checks still counted.
        self.live_pools = 0
        # ``fast``: the forwards after which the sampled checks check one call each again.
        self.contract_sampler = Sampler(SAMPLE_EVERY)
        self.mutator_depth = 0
        # Graph runners' ``capture`` calls in progress, and whether the cyclic garbage
        # collector ran before the outermost one (``enter_capture``).
        self.capture_depth = 0
        self._gc_was_enabled = True
        # Graph runners' static location buffers: the batch's locations whenever they are used
        # (held, so that their spans stay theirs).
        self.static_batch_locs: list[torch.Tensor] = []
        self.static_batch_spans: tuple[Span, ...] = ()
        self._kv_check: KVWriteCheck | None = None
        self._kv_turn = -1  # which SWA K/V buffer the consequence check reads (rotating)
        self._dtype_flagged: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.closed = False

    # -- outcomes -----------------------------------------------------------------------

    @property
    def checks(self) -> dict[str, int]:
        """Checks run so far by the kind each guards against (kinds never checked left out)."""
        counted = {
            V.UNINVALIDATED_MAPPING_WRITE: self.mapping_checks,
            V.STALE_TRANSLATION: self.stale_checks,
            V.SWA_LOC_DTYPE: self.dtype_checks,
            V.PADDING_NOT_ZEROED: self.padding_checks,
            V.CAPTURE_CACHE_POLLUTION: self.capture_start_checks,
            V.FORWARD_WITHOUT_INVALIDATION: self.forward_start_checks,
            V.UNFLUSHED_FRESH_TRANSLATION: self.fresh_checks,
            V.SWA_KV_CORRUPTION: self.kv_checks,
        }
        return {kind: n for kind, n in counted.items() if n}

    def record(
        self,
        kind: str,
        message: str,
        values: Sequence[int] = (),
        *,
        site: str | None = None,
        deferred: bool = False,
    ) -> None:
        """A check failed: count it, keep it, then log or raise per the action. ``deferred``
        violations (found at report time) are never raised there."""
        violation = V.Violation(kind, message, site or V.call_site(), tuple(values)[: V.MAX_VALUES])
        self.counts[kind] += 1
        seen = self.counts[kind]
        if seen <= MAX_KEPT:
            self.violations.append(violation)
        if self.action == "raise" and not deferred:
            raise V.ERROR_BY_KIND[kind](violation)
        if seen <= MAX_KEPT:
            self.unraised.append(violation)
        if seen <= MAX_LOGGED:
            logger.warning("%s", violation)
        elif seen == MAX_LOGGED + 1:
            logger.warning("%s: further violations are counted, not logged", kind)

    def check_dtype(self, t: torch.Tensor, what: str) -> None:
        """I3: an SWA-space location tensor must have the configured dtype."""
        self.dtype_checks += 1
        if t.dtype not in self.swa_dtypes:
            self.flag_dtype(t, what)

    def flag_dtype(self, t: torch.Tensor, what: str, *, static: bool = False) -> None:
        """An SWA-space location tensor of the wrong dtype (already counted as checked).
        Each offending tensor is reported once, however many checks (contract, buffer,
        argument) see it. A ``static`` buffer's dtype is a property of its allocation, not
        of the call that found it: it is recorded now and raised at the next
        :meth:`check_deferred` (the end of a test, under the pytest plugin), so a call's
        own violation (a padded tail left by that populate) is the one raised first."""
        if t not in self._dtype_flagged:
            self._dtype_flagged[t] = True
            self.record(
                V.SWA_LOC_DTYPE,
                f"{what} is {t.dtype}, expected {' or '.join(sorted(map(str, self.swa_dtypes)))} "
                f"(shape {tuple(t.shape)})",
                deferred=static,
            )

    def dtype_flagged(self) -> int:
        """Offending tensors alive that were reported (see ``flag_dtype``)."""
        return len(self._dtype_flagged)

    # -- scopes (forwards and capture runs) ---------------------------------------------

    def _new_scope(
        self, kind: ScopeKind, depth: int, batch: object | None = None, check: bool = False
    ) -> None:
        """Open a scope; ``check``: the batch's SWA locations must have the SWA dtype (I3).
        The batch's locations are kept for the scope; where they lie (``own_spans``) is
        worked out only if a check asks."""
        self._scope_ids += 1
        # One scope is active at a time: the same object serves every one, reset here.
        scope = self._active
        scope.kind = kind
        scope.scope_id = self._scope_ids
        scope.depth = depth
        scope.dispatched = False
        scope.spans = None
        scope.locs = ()
        self.scope = scope
        if batch is not None:
            locs, swa = self.names.scan_batch(batch)
            scope.locs = locs
            if check:
                for name, t in swa:
                    self.dtype_checks += 1
                    if t.dtype not in self.swa_dtypes:
                        self.flag_dtype(t, f"forward_batch.{name}")

    def own_spans(self) -> tuple[Span, ...]:
        """Where the current scope's own locations lie: the batch's location tensors and
        the graph runners' static location buffers (I7 tells fresh translations by them)."""
        scope = self.scope
        if scope.spans is None:
            scope.spans = tuple(map(span, scope.locs))
        return scope.spans + self.static_batch_spans

    def add_static_batch_locs(self, locs: list[torch.Tensor]) -> None:
        """A graph runner's static location buffers: the batch's own locations (I7)."""
        self.static_batch_locs.extend(locs)
        self.static_batch_spans += tuple(span(t) for t in locs)

    def dispatch(self, batch: object | None = None) -> None:
        """A forward builds attention metadata, replays, or translates for the first time.
        Outside any scope this opens an implicit forward (ended by the next scope)."""
        scope = self.scope
        if not scope.active:
            if batch is None or self.in_capture:
                return
            self._new_scope(ScopeKind.FORWARD, 0, batch)
            scope = self.scope
        if scope.dispatched:
            return
        scope.dispatched = True
        if scope.kind is ScopeKind.FORWARD:
            self.forward_start_checks += len(self.pools)
        else:
            self.capture_start_checks += len(self.pools)
        if self.live_pools:
            for pool in self.pools:
                pool.check_scope_start(scope.kind, scope.scope_id)

    def forward_called(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A watched forward (or replay) was called with these arguments: nested in a
        forward in progress it only joins it, without even looking for its batch."""
        scope = self.scope
        if scope.depth:
            scope.depth += 1
        else:
            self.begin_forward(batch_argument(args, kwargs))

    def begin_forward(self, batch: object | None) -> None:
        """An explicit forward (model runner ``forward`` or a stand-alone ``replay``)."""
        scope = self.scope
        if scope.active:
            if scope.depth > 0:
                scope.depth += 1
                return
            self.close_scope(True)  # an implicit forward ends here
        try:
            self._new_scope(ScopeKind.FORWARD, 1, batch, check=True)
        except V.SWASanitizerError:  # a batch SWA location of the wrong dtype, raised
            self.close_scope(False)
            raise
        if self.full and not is_capturing() and batch is not None:
            self._kv_turn += 1
            self._kv_check = KVWriteCheck.begin(
                self.pools, self.names.batch_locs(batch), self._kv_turn
            )

    @property
    def in_capture(self) -> bool:
        return self.capture_depth > 0

    def enter_capture(self) -> None:
        """A graph runner's ``capture`` begins: metadata built outside its runs is no forward.

        Python's cyclic garbage collector is paused until the capture ends. A collection
        inside a CUDA-graph capture frees whatever old cyclic garbage holds (tensors,
        graphs and their memory pools, allocated outside the capture), and freeing those
        while the stream captures invalidates the capture. torch runs ``gc.collect()``
        before a capture only when ``torch.compiler.config.force_cudagraph_gc`` is set, and
        the sanitizer's own bookkeeping during capture allocates enough Python objects to
        bring a collection on: so whether a capture broke would depend on what garbage
        earlier code left. The garbage is collected after the capture instead."""
        self.end_implicit()
        if not self.capture_depth:
            self._gc_was_enabled = gc.isenabled()
            gc.disable()
        self.capture_depth += 1

    def leave_capture(self) -> None:
        self.capture_depth -= 1
        if not self.capture_depth and self._gc_was_enabled:
            gc.enable()

    def begin_capture_run(self) -> None:
        if self.scope.active and self.scope.depth > 0:
            self.scope.depth += 1
            return
        self.end_implicit()
        self._new_scope(ScopeKind.CAPTURE_RUN, 1)

    def end_scope(self, ok: bool = True) -> None:
        """Leave an explicit scope; the outermost exit runs the end-of-scope checks (not
        when an exception is propagating: ``ok=False``)."""
        self.scope.depth -= 1
        if self.scope.depth > 0:
            return
        self.close_scope(ok)

    def end_implicit(self) -> None:
        if self.scope.active and self.scope.depth == 0:
            self.close_scope(True)

    def close_scope(self, ok: bool) -> None:
        """The outermost exit of a scope: its end checks (when ``ok``: no exception is
        propagating), then back to the idle scope."""
        if not self.full and not self.closed and self.contract_sampler.due():
            for sampled in self.sampled:
                sampled.step_in()
        kv_check, self._kv_check = self._kv_check, None
        try:
            if ok:
                if self.live_pools:
                    for pool in self.pools:
                        pool.check_scope_end()
                if kv_check is not None:
                    self._finish_kv_check(kv_check)
                found = self.flags.poll()
                if found:
                    self.record_flags(found, deferred=False)
        finally:
            scope = self._active
            scope.locs = ()  # the batch's tensors are not held past its forward
            scope.spans = None
            self.scope = self._idle

    def _finish_kv_check(self, kv_check: KVWriteCheck) -> None:
        for label, extra in kv_check.finish():
            self.kv_checks += 1
            if extra:
                self.record(
                    V.SWA_KV_CORRUPTION,
                    f"{label}: the forward wrote SWA KV slots {extra[: V.MAX_VALUES]} "
                    f"({len(extra)} in all) outside the batch's real slots and the sentinel "
                    f"{KVWriteCheck.SENTINEL_SLOT}; live requests' KV was overwritten",
                    values=extra,
                )

    def record_flags(self, found: list[FlagSource], deferred: bool) -> None:
        for source in found:
            self.record(
                V.PADDING_NOT_ZEROED,
                f"the padded tail of {source.label} held slots other than the sentinel 0 "
                f"after a padded populate since the last check, so padded tokens wrote their "
                f"KV into those slots; the populate (at the place named) must reset the tail",
                site=source.site,
                deferred=deferred,
            )

    def check_deferred(self) -> None:
        """Wait for the device-side checks and record what they found; under ``raise``,
        raise the first violation not raised yet (device-side or deferred)."""
        self.end_implicit()
        self.record_flags(self.flags.drain(), deferred=False)
        if self.action == "raise" and len(self.unraised) > self._deferred_raised:
            violation = self.unraised[self._deferred_raised]
            self._deferred_raised += 1
            raise V.ERROR_BY_KIND[violation.kind](violation)
