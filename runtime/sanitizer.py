"""The sanitizer facade: what users call. It recognises the role each watched object
plays, builds that role's watch over one shared :class:`~.checks.Checks`, installs the
type contracts, and reports.

Layers, each importing only those before it: the data model (``violations``, ``model``,
``locations``, ``wrapping``, ``deferred``, ``report``), the checks (``checks``,
``consequence``, ``contracts``), the per-role watches (``roles``, ``pool_watch``,
``graph_watch``, ``forward_watch``), and this facade.
"""

from __future__ import annotations

import functools
import warnings
from collections import Counter
from collections.abc import Callable, Sequence

import torch

from swacheck.config import Config

from . import violations as V
from .backend_watch import BackendWatch, install_backend
from .checks import ACTIONS, LEVELS, Checks
from .contracts import Contract, install_contracts
from .dtype_roles import DtypeContract
from .forward_watch import install_model_runner
from .graph_watch import GraphRunnerWatch, install_graph_runner, install_input_buffers
from .locations import LocationNames
from .model import Role, Watched, site_codes
from .pool_watch import PoolWatch, install_allocator
from .report import SanitizerReport
from .roles import describe_roles, detect_cache_model, detect_role, role_of_class
from .wrapping import Patcher

# Left out of a violation's pytest traceback (``violations.hide_from_traceback``).
__tracebackhide__ = V.hide_from_traceback

__all__ = ["ACTIONS", "LEVELS", "Sanitizer", "UnclassifiedWarning"]


class UnclassifiedWarning(UserWarning):
    """An object of a class named for watching plays none of the roles: left alone."""


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
        self._checks = Checks(level, action, config or Config(), batch_loc_names)
        self.contracts = contracts
        self.pools: list[PoolWatch] = []
        self.graph_watches: list[GraphRunnerWatch] = []
        self.backend_watches: list[BackendWatch] = []
        self.installed_contracts: list[Contract] = []
        self.watched: dict[int, tuple[object, Watched]] = {}
        # Instances of classes named for watching that play no role, by class: left alone.
        self.left_alone: Counter[str] = Counter()

    # -- what the checks share, as the facade's own ----------------------------------------

    @property
    def level(self) -> str:
        return self._checks.level

    @property
    def action(self) -> str:
        return self._checks.action

    @action.setter
    def action(self, action: str) -> None:
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
        self._checks.action = action

    @property
    def config(self) -> Config:
        return self._checks.config

    @property
    def full(self) -> bool:
        return self._checks.full

    @property
    def dtypes(self) -> DtypeContract:
        """The dtypes SWA locations may have where they are consumed, by role (I3)."""
        return self._checks.dtypes

    @property
    def names(self) -> LocationNames:
        return self._checks.names

    @property
    def patcher(self) -> Patcher:
        return self._checks.patcher

    @property
    def counts(self) -> Counter[str]:
        return self._checks.counts

    @property
    def violations(self) -> list[V.Violation]:
        return self._checks.violations

    @property
    def unraised(self) -> list[V.Violation]:
        return self._checks.unraised

    @property
    def checks(self) -> dict[str, int]:
        """Checks run so far by the kind each guards against (kinds never checked left out)."""
        return self._checks.checks

    # -- watching -----------------------------------------------------------------------

    def watch(
        self, obj: object, role: Role | str | None = None, *, cache: str | None = None
    ) -> Role:
        """Wrap ``obj`` by the role it plays (detected by duck typing unless given; see
        ``roles.py``). For a pool, ``cache`` declares its cache model (``none``,
        ``memoising``, ``attribute``) instead of observing it. An object that plays no
        role is a ``TypeError`` naming what each role is recognised by."""
        if self._checks.closed:
            raise RuntimeError("this sanitizer is closed")
        found = Role(role) if role is not None else detect_role(obj, self.config)
        if found is None:
            raise TypeError(
                f"{type(obj).__qualname__} plays none of the roles: "
                f"{describe_roles(self.config)}. Declare one: watch(obj, role=...)"
            )
        if found is Role.POOL:
            self.watch_pool(obj, cache=cache)
        else:
            {
                Role.ALLOCATOR: self.watch_allocator,
                Role.GRAPH_RUNNER: self.watch_graph_runner,
                Role.INPUT_BUFFERS: self.watch_input_buffers,
                Role.BACKEND: self.watch_backend,
                Role.MODEL_RUNNER: self.watch_model_runner,
            }[found](obj)
        return found

    def watch_pool(
        self,
        pool: object,
        kv_buffers: Callable[[], Sequence[torch.Tensor]] | None = None,
        *,
        cache: str | None = None,
    ) -> None:
        """Watch an SWA pool. ``kv_buffers`` returns its SWA K/V buffers (slot-major) for
        the ``full`` consequence check; by default they are looked up by name. ``cache``
        declares its cache model (``roles.detect_cache_model`` observes it otherwise)."""
        if not self._register(pool, Role.POOL):
            return
        model = detect_cache_model(pool, self.config, cache)
        watch = PoolWatch(self._checks, pool, self._label(pool), kv_buffers, model)
        watch.install(self.patcher)
        self.pools.append(watch)
        self._checks.pools.append(watch)
        self._install_contracts(pool)

    def watch_allocator(self, allocator: object) -> None:
        """Watch an object that writes the mapping without owning the cache (I1 at exits)."""
        if self._register(allocator, Role.ALLOCATOR):
            install_allocator(self._checks, allocator)
            self._install_contracts(allocator)

    def watch_backend(self, backend: object) -> None:
        if self._register(backend, Role.BACKEND):
            self.backend_watches.append(install_backend(self._checks, backend))
            self._install_contracts(backend)

    def watch_graph_runner(self, runner: object) -> None:
        if self._register(runner, Role.GRAPH_RUNNER):
            self.graph_watches.append(install_graph_runner(self._checks, runner))
            self._install_contracts(runner)

    def watch_input_buffers(self, holder: object) -> None:
        """Watch a graph runner's input buffers on their own (its populate method)."""
        if self._register(holder, Role.INPUT_BUFFERS):
            self.graph_watches.append(install_input_buffers(self._checks, holder))
            self._install_contracts(holder)

    def watch_model_runner(self, runner: object) -> None:
        if self._register(runner, Role.MODEL_RUNNER):
            install_model_runner(self._checks, runner)
            self._install_contracts(runner)

    def watch_class(
        self, cls: type, role: Role | str | None = None, *, cache: str | None = None
    ) -> None:
        """Watch every instance of ``cls`` constructed from now until :meth:`close`, by
        ``role`` or the role it is recognised by. Roles known from the class's methods
        (graph runners, input buffers, backends) or declared are wrapped before the
        instance's ``__init__`` runs, so a runner that captures its graphs there is
        checked; the others once it returns. An instance that plays no role is left
        alone: counted in :attr:`left_alone`, one :class:`UnclassifiedWarning` per class."""
        declared = Role(role) if role is not None else None
        early = declared or role_of_class(cls, self.config)
        if early not in (Role.GRAPH_RUNNER, Role.INPUT_BUFFERS, Role.BACKEND, Role.MODEL_RUNNER):
            early = None
        self.patcher.hook_init(
            cls,
            functools.partial(self._watch_new, declared, cache),
            before=None if early is None else functools.partial(self._watch_early, early),
        )

    def _watch_early(self, role: Role, obj: object) -> None:
        if not self._checks.closed and id(obj) not in self.watched:
            self.watch(obj, role)

    def _watch_new(self, role: Role | None, cache: str | None, obj: object) -> None:
        if self._checks.closed or id(obj) in self.watched:
            return
        found = role or detect_role(obj, self.config)
        if found is None:
            label = f"{type(obj).__module__}.{type(obj).__qualname__}"
            self.left_alone[label] += 1
            if self.left_alone[label] == 1:
                warnings.warn(
                    UnclassifiedWarning(
                        f"swa-sanitizer: {label} plays none of the roles, so it is left "
                        f"alone: {describe_roles(self.config)}. Declare one in "
                        f"swa_sanitize_classes ({label.rsplit('.', 1)[0]}:"
                        f"{type(obj).__qualname__}=ROLE) or watch(obj, role=...)"
                    ),
                    stacklevel=3,
                )
            return
        self.watch(obj, found, cache=cache)

    def _register(self, obj: object, role: Role) -> bool:
        if self._checks.closed:
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
            installed = install_contracts(self._checks, obj)
            self.installed_contracts += installed
            self._checks.sampled += installed

    # -- results ------------------------------------------------------------------------

    def check_deferred(self) -> None:
        """Wait for the device-side checks and record what they found (raises per action)."""
        self._checks.check_deferred()

    def report(self) -> SanitizerReport:
        """Everything checked so far; waits for the device-side checks (never raises)."""
        checks = self._checks
        checks.end_implicit()
        checks.dtypes.settle()
        checks.record_flags(checks.flags.drain(), deferred=True)
        for finding in checks.translation.drain():
            checks.record_translation(finding, True)
        roles = Counter(w.role.value for _, w in self.watched.values())
        return SanitizerReport(
            level=checks.level,
            action=checks.action,
            checks=dict(checks.checks),
            counts={kind: checks.counts.get(kind, 0) for kind in V.KINDS},
            violations=tuple(checks.violations),
            watched=dict(roles),
            cache_models={p.label: p.model.kind for p in self.pools},
            left_alone=dict(self.left_alone),
        )

    def bookkeeping(self) -> dict[str, int]:
        """Sizes of everything the sanitizer keeps, for telling a steady footprint from a
        leak. Each is fixed by what is watched, capped, or bounded by live tensors:

        - ``watched``, ``pools``, ``graph_watches``, ``wrappers``, ``contracts``,
          ``static_batch_locs``, ``scan_snapshot_values``, ``flag_devices``,
          ``flag_slots``, ``flag_slot_handles``, ``translation_rings`` (devices),
          ``translation_samplers`` (places SWA write locations are consumed): what is
          watched; ``dtype_pending``: at most ``MAX_PENDING`` static buffers;
        - ``violations_kept``, ``unraised_kept``: at most ``MAX_KEPT`` per kind;
        - ``entry_reported``: kinds, per pool; ``dtype_flagged``: offending tensors alive;
        - ``contract_signatures``: at most ``MAX_SIGNATURES`` per contract;
        - ``tail_views``, ``flag_views``: padded-tail views, at most ``MAX_TAIL_VIEWS`` per
          graph runner and ``MAX_FLAG_VIEWS`` per device;
        - ``name_kinds``, ``name_cache``: attribute names seen, at most ``MAX_NAMES``;
          ``batch_plans``: classes of batch read, at most ``MAX_PLANS``;
          ``site_codes``: source files seen, at most ``MAX_CODES``.
        """
        checks = self._checks
        sizes = {
            "watched": len(self.watched),
            "pools": len(self.pools),
            "graph_watches": len(self.graph_watches),
            "wrappers": len(self.patcher),
            "contracts": len(self.installed_contracts),
            "static_batch_locs": len(checks.static_batch_locs),
            "violations_kept": len(checks.violations),
            "unraised_kept": len(checks.unraised),
            "entry_reported": sum(len(p.reported) for p in self.pools),
            "dtype_flagged": checks.dtype_flagged(),
            "flag_devices": checks.flags.devices(),
            "flag_slots": checks.flags.slots(),
            "flag_views": checks.flags.views(),
            "translation_rings": checks.translation.rings(),
            "translation_samplers": checks.translation.samplers(),
            "dtype_pending": checks.dtype_pending(),
            "contract_signatures": sum(len(c.passed) for c in self.installed_contracts),
            "name_kinds": checks.names.known_names(),
            "name_cache": checks.names.is_swa.cache_info().currsize,
            "batch_plans": checks.names.plans(),
            "site_codes": site_codes(),
        }
        for watch in [*self.graph_watches, *self.backend_watches]:
            for key, n in watch.bookkeeping().items():
                sizes[key] = sizes.get(key, 0) + n
        return sizes

    def close(self) -> None:
        """Undo every wrapper; the sanitizer keeps its results but watches nothing more."""
        if self._checks.closed:
            return
        self.patcher.undo_all()
        self._checks.closed = True

    def __enter__(self) -> Sanitizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
