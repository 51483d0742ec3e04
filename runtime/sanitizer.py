"""The sanitizer: watched objects, the scope in progress, and what every check concluded.

Watchers (``pool_watch``, ``graph_watch``, ``forward_watch``) wrap methods and report
events here; this class owns the state they share (which forward or capture run is
in progress, which pools exist) and turns failed checks into violations according
to the action.

Checks run are counted in one plain integer per kind (``*_checks``), folded into the
report's per-kind dictionary only when a report is made: the hot path never touches
a ``Counter``.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

from swacheck.config import Config

from . import violations as V
from .consequence import KVWriteCheck
from .contracts import SAMPLE_EVERY, Contract, install_contracts
from .deferred import DeferredFlags, FlagSource, is_capturing
from .forward_watch import batch_argument, install_backend, install_model_runner
from .graph_watch import GraphRunnerWatch, install_graph_runner
from .locations import LocationNames, Span, span
from .model import Role, Scope, ScopeKind, Watched, site_codes
from .pool_watch import PoolWatch
from .report import SanitizerReport
from .roles import detect_role
from .wrapping import Patcher, forwarding, public_methods

LEVELS = ("fast", "full")
ACTIONS = ("raise", "log")

logger = logging.getLogger("swacheck.runtime")

# A mutator wrapper's body (``wrapping.forwarding``): the same as ``wrap_mutator``'s
# generic wrapper, with the method's own parameters.
_MUTATOR_BODY = """\
    _sw_san._mutator_depth += 1
    try:
        _sw_result = CALL
    finally:
        _sw_san._mutator_depth -= 1
    if _sw_san.live_pools and not _sw_san._mutator_depth:
        _sw_check(_sw_name)
    return _sw_result
"""

# Violations kept per kind for the report (all are counted).
MAX_KEPT = 20
# Violations logged per kind before the rest are only counted.
MAX_LOGGED = 10


class Sanitizer:
    """Checks the SWA-cache invariants on live objects.

    ``level``: ``fast`` (host-only, never synchronises, safe during graph capture) or
    ``full`` (adds content checks that read the device). ``action``: ``raise`` a
    typed :class:`SWASanitizerError` per violation, or ``log`` and count.
    """

    def __init__(
        self,
        level: str = "fast",
        action: str = "raise",
        config: Config | None = None,
        *,
        batch_loc_names: tuple[str, ...] = ("out_cache_loc",),
        contracts: bool = True,
    ) -> None:
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
        self.level = level
        self.action = action
        self.config = config or Config()
        self.full = level == "full"
        self.swa_dtype: torch.dtype = getattr(torch, self.config.swa_loc_dtype)
        self.names = LocationNames(self.config.swa_loc_pattern, batch_loc_names)
        self.contracts = contracts
        self.patcher = Patcher()
        self.pools: list[PoolWatch] = []
        self.graph_watches: list[GraphRunnerWatch] = []
        self.installed_contracts: list[Contract] = []
        self.watched: dict[int, tuple[object, Watched]] = {}
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
        self.flags = DeferredFlags()
        # Between scopes, ``scope`` is this sanitizer's idle scope.
        self._idle = Scope(spans=())
        self._active = Scope(ScopeKind.FORWARD)
        self.scope = self._idle
        self._scope_ids = 0
        # Pools whose cache holds a live (not invalidated) entry: while none does, the
        # checks that only a live entry can fail (I1 at allocator exits, I5/I6 at scope
        # starts, I7 at scope ends) are skipped, the checks still counted.
        self.live_pools = 0
        # ``fast``: forwards until the contracts check one call each again (contracts.py),
        # at random strides from a fixed seed.
        self.rng = random.Random(0)
        self._until_contract_sample = self._contract_stride()
        self._mutator_depth = 0
        # Graph runners' ``capture`` calls in progress.
        self.capture_depth = 0
        # Graph runners' static location buffers: the batch's locations whenever they are used
        # (held, so that their spans stay theirs).
        self.static_batch_locs: list[torch.Tensor] = []
        self.static_batch_spans: tuple[Span, ...] = ()
        self._kv_check: KVWriteCheck | None = None
        self._dtype_flagged: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._closed = False

    # -- watching -----------------------------------------------------------------------

    def watch(self, obj: object, role: Role | str | None = None) -> Role:
        """Wrap ``obj`` by the role it plays (detected by duck typing unless given)."""
        if self._closed:
            raise RuntimeError("this sanitizer is closed")
        found = Role(role) if role is not None else detect_role(obj, self.config)
        if found is None:
            raise TypeError(
                f"{type(obj).__qualname__} is none of: a pool (attribute "
                f"{'/'.join(self.config.mapping_attributes)} and method "
                f"{'/'.join(self.config.translate_methods)}), an allocator, a graph runner "
                f"(populate_from_forward_batch/replay/capture), an attention backend "
                f"(init_forward_metadata) or a model runner (forward, holding a pool)"
            )
        {
            Role.POOL: self.watch_pool,
            Role.ALLOCATOR: self.watch_allocator,
            Role.GRAPH_RUNNER: self.watch_graph_runner,
            Role.BACKEND: self.watch_backend,
            Role.MODEL_RUNNER: self.watch_model_runner,
        }[found](obj)
        return found

    def watch_pool(
        self, pool: object, kv_buffers: Callable[[], Sequence[torch.Tensor]] | None = None
    ) -> None:
        """Watch an SWA pool. ``kv_buffers`` returns its SWA K/V buffers (slot-major) for
        the ``full`` consequence check; by default they are looked up by name."""
        if not self._register(pool, Role.POOL):
            return
        watch = PoolWatch(self, pool, self._label(pool), kv_buffers)
        watch.install(self.patcher)
        self.pools.append(watch)
        self._install_contracts(pool)

    def watch_allocator(self, allocator: object) -> None:
        """Watch an object that writes the mapping without owning the cache (I1 at exits)."""
        if not self._register(allocator, Role.ALLOCATOR):
            return
        for name in public_methods(allocator):
            self.patcher.wrap_method(allocator, name, self.wrap_mutator)
        self._install_contracts(allocator)

    def watch_backend(self, backend: object) -> None:
        if self._register(backend, Role.BACKEND):
            install_backend(self, backend)
            self._install_contracts(backend)

    def watch_graph_runner(self, runner: object) -> None:
        if self._register(runner, Role.GRAPH_RUNNER):
            self.graph_watches.append(install_graph_runner(self, runner))
            self._install_contracts(runner)

    def watch_model_runner(self, runner: object) -> None:
        if self._register(runner, Role.MODEL_RUNNER):
            install_model_runner(self, runner)
            self._install_contracts(runner)

    def watch_class(self, cls: type) -> None:
        """Watch every instance of ``cls`` constructed from now until :meth:`close`."""
        self.patcher.hook_init(cls, self._watch_new)

    def _watch_new(self, obj: object) -> None:
        if not self._closed and id(obj) not in self.watched:
            self.watch(obj)

    def _register(self, obj: object, role: Role) -> bool:
        if self._closed:
            raise RuntimeError("this sanitizer is closed")
        if id(obj) in self.watched:
            return False
        self.watched[id(obj)] = (obj, Watched(role, self._label(obj)))
        return True

    @staticmethod
    def _label(obj: object) -> str:
        return type(obj).__qualname__

    def _install_contracts(self, obj: object) -> None:
        """Over the role's wrappers, so that a ``fast`` contract can step aside alone."""
        if self.contracts:
            self.installed_contracts += install_contracts(self, obj)

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
        if t.dtype is not self.swa_dtype:
            self.flag_dtype(t, what)

    def flag_dtype(self, t: torch.Tensor, what: str) -> None:
        """An SWA-space location tensor of the wrong dtype (already counted as checked).
        Each offending tensor is reported once, however many checks (contract, buffer,
        argument) see it."""
        if t not in self._dtype_flagged:
            self._dtype_flagged[t] = True
            self.record(
                V.SWA_LOC_DTYPE,
                f"{what} is {t.dtype}, expected {self.swa_dtype} (shape {tuple(t.shape)})",
            )

    # -- mapping writes (I1) ------------------------------------------------------------

    def wrap_mutator(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Any public method of a pool or allocator: at the end of the outermost such call,
        the mapping must not have moved under a live cached translation."""
        name = getattr(original, "__qualname__", getattr(original, "__name__", "?"))
        pools = self.pools

        def check(method: str) -> None:
            for pool in pools:
                if pool.live is not None:
                    pool.check_mapping_write(method)

        exact = forwarding(
            original, _MUTATOR_BODY, {"_sw_san": self, "_sw_check": check, "_sw_name": name}
        )
        if exact is not None:
            return exact

        def mutator(*args: Any, **kwargs: Any) -> Any:
            self._mutator_depth += 1
            try:
                result = original(*args, **kwargs)
            finally:
                self._mutator_depth -= 1
            if self.live_pools and not self._mutator_depth:
                check(name)
            return result

        return mutator

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
                    if t.dtype is not self.swa_dtype:
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
            self._kv_check = KVWriteCheck.begin(self, batch)

    @property
    def in_capture(self) -> bool:
        return self.capture_depth > 0

    def enter_capture(self) -> None:
        """A graph runner's ``capture`` begins: metadata built outside its runs is no forward."""
        self._end_implicit()
        self.capture_depth += 1

    def leave_capture(self) -> None:
        self.capture_depth -= 1

    def begin_capture_run(self) -> None:
        if self.scope.active and self.scope.depth > 0:
            self.scope.depth += 1
            return
        self._end_implicit()
        self._new_scope(ScopeKind.CAPTURE_RUN, 1)

    def end_scope(self, ok: bool = True) -> None:
        """Leave an explicit scope; the outermost exit runs the end-of-scope checks (not
        when an exception is propagating: ``ok=False``)."""
        self.scope.depth -= 1
        if self.scope.depth > 0:
            return
        self.close_scope(ok)

    def _end_implicit(self) -> None:
        if self.scope.active and self.scope.depth == 0:
            self.close_scope(True)

    def _contract_stride(self) -> int:
        return self.rng.randint(1, 2 * SAMPLE_EVERY - 1)

    def close_scope(self, ok: bool) -> None:
        """The outermost exit of a scope: its end checks (when ``ok``: no exception is
        propagating), then back to the idle scope."""
        if not self.full and not self._closed:
            self._until_contract_sample -= 1
            if not self._until_contract_sample:
                self._until_contract_sample = self._contract_stride()
                for contract in self.installed_contracts:
                    contract.step_in()
        kv_check, self._kv_check = self._kv_check, None
        try:
            if ok:
                if self.live_pools:
                    for pool in self.pools:
                        pool.check_scope_end()
                if kv_check is not None:
                    kv_check.finish()
                found = self.flags.poll()
                if found:
                    self._record_flags(found, deferred=False)
        finally:
            scope = self._active
            scope.locs = ()  # the batch's tensors are not held past its forward
            scope.spans = None
            self.scope = self._idle

    def _record_flags(self, found: list[FlagSource], deferred: bool) -> None:
        for source in found:
            self.record(
                V.PADDING_NOT_ZEROED,
                f"padded tail of {source.label} held non-sentinel slots after a populate since "
                f"the last check (first populate seen at {source.site}); padded tokens write "
                f"their KV there",
                site=source.site,
                deferred=deferred,
            )

    # -- results ------------------------------------------------------------------------

    def check_deferred(self) -> None:
        """Wait for the device-side checks and record what they found (raises per action)."""
        self._end_implicit()
        self._record_flags(self.flags.drain(), deferred=False)

    def report(self) -> SanitizerReport:
        """Everything checked so far; waits for the device-side checks (never raises)."""
        self._end_implicit()
        self._record_flags(self.flags.drain(), deferred=True)
        roles = Counter(w.role.value for _, w in self.watched.values())
        return SanitizerReport(
            level=self.level,
            action=self.action,
            checks=dict(self.checks),
            counts={kind: self.counts.get(kind, 0) for kind in V.KINDS},
            violations=tuple(self.violations),
            watched=dict(roles),
        )

    def bookkeeping(self) -> dict[str, int]:
        """Sizes of everything the sanitizer keeps, for telling a steady footprint from a
        leak. Each is fixed by what is watched, capped, or bounded by live tensors:

        - ``watched``, ``pools``, ``graph_watches``, ``wrappers``, ``contracts``,
          ``static_batch_locs``, ``scan_snapshot_values``, ``flag_devices``,
          ``flag_slots``, ``flag_slot_handles``: what is watched;
        - ``violations_kept``, ``unraised_kept``: at most ``MAX_KEPT`` per kind;
        - ``entry_reported``: kinds, per pool; ``dtype_flagged``: offending tensors alive;
        - ``contract_signatures``: at most ``MAX_SIGNATURES`` per contract;
        - ``tail_views``, ``flag_views``: padded-tail views, at most ``MAX_TAIL_VIEWS`` per
          graph runner and ``MAX_FLAG_VIEWS`` per device;
        - ``name_kinds``, ``name_cache``: attribute names seen, at most ``MAX_NAMES``;
          ``batch_plans``: classes of batch read, at most ``MAX_PLANS``;
          ``site_codes``: source files seen, at most ``MAX_CODES``.
        """
        sizes = {
            "watched": len(self.watched),
            "pools": len(self.pools),
            "graph_watches": len(self.graph_watches),
            "wrappers": len(self.patcher),
            "contracts": len(self.installed_contracts),
            "static_batch_locs": len(self.static_batch_locs),
            "violations_kept": len(self.violations),
            "unraised_kept": len(self.unraised),
            "entry_reported": sum(len(p.reported) for p in self.pools),
            "dtype_flagged": len(self._dtype_flagged),
            "flag_devices": self.flags.devices(),
            "flag_slots": self.flags.slots(),
            "flag_views": self.flags.views(),
            "contract_signatures": sum(len(c.passed) for c in self.installed_contracts),
            "name_kinds": self.names.known_names(),
            "name_cache": self.names.is_swa.cache_info().currsize,
            "batch_plans": self.names.plans(),
            "site_codes": site_codes(),
        }
        for watch in self.graph_watches:
            for key, n in watch.bookkeeping().items():
                sizes[key] = sizes.get(key, 0) + n
        return sizes

    def close(self) -> None:
        """Undo every wrapper; the sanitizer keeps its results but watches nothing more."""
        if self._closed:
            return
        self.patcher.undo_all()
        self._closed = True

    def __enter__(self) -> Sanitizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
