"""Checks on an SWA pool: its translation cache (I2, I7), its mapping writes (I1), and the
dtype of what it hands out and is handed (I3).

A cache hit is recognised from the outside: the translate method returned the very
tensor object of the live entry, not written since. Everything else is a miss,
which records a new entry. That needs no knowledge of the pool's cache fields, so a
foreign pool is checked exactly like the reference one.

The wrappers run on every translation and every allocator call, so everything fixed
per pool (names, labels, the mapping's storage reference) is worked out once, checks
are counted in plain integers, and messages are only built for a violation.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from . import violations as V
from .deferred import is_capturing
from .locations import starts_in
from .model import CacheEntry, ScopeKind, TensorIdentity, caller, tensor_version
from .roles import first_present
from .wrapping import Patcher, public_methods

if TYPE_CHECKING:
    from .sanitizer import Sanitizer

# Methods with their own wrappers; every other public method is wrapped as a possible mutator.
SET_KV_BUFFER = "set_kv_buffer"

# The kind a scope's start checks for, by scope kind (I6, I5).
SCOPE_START_KIND = {
    ScopeKind.FORWARD: V.FORWARD_WITHOUT_INVALIDATION,
    ScopeKind.CAPTURE_RUN: V.CAPTURE_CACHE_POLLUTION,
}


def _first_mismatches(
    got: torch.Tensor, want: torch.Tensor
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """First differing positions and the values found there (synchronises: ``full`` only)."""
    where = (got.reshape(-1) != want.reshape(-1)).nonzero().reshape(-1)[: V.MAX_VALUES]
    return tuple(where.tolist()), tuple(got.reshape(-1)[where].tolist())


class PoolWatch:
    def __init__(
        self,
        san: Sanitizer,
        pool: object,
        label: str,
        kv_buffers: Callable[[], Sequence[torch.Tensor]] | None,
    ) -> None:
        config = san.config
        mapping_attr = first_present(pool, config.mapping_attributes, method=False)
        assert mapping_attr is not None
        self.san = san
        self.pool = pool
        self.label = label
        self.mapping_attr = mapping_attr
        self.kv_buffers = kv_buffers
        self.entry: CacheEntry | None = None
        self._kv_depth = 0
        self._translate_name = config.translate_methods[0]
        self._invalidate_name = config.invalidate_methods[0]
        # The last mapping tensor seen and its identity then (see ``_mapping_identity``).
        self._mapping_seen: weakref.ref[torch.Tensor] | None = None
        self._mapping_known: TensorIdentity | None = None

    # -- installation -------------------------------------------------------------------

    def install(self, patcher: Patcher) -> None:
        config = self.san.config
        special = {*config.translate_methods, *config.invalidate_methods, SET_KV_BUFFER}
        for name in config.translate_methods:
            if callable(getattr(self.pool, name, None)):
                patcher.wrap_method(self.pool, name, self._wrap_translate)
        for name in config.invalidate_methods:
            if callable(getattr(self.pool, name, None)):
                patcher.wrap_method(self.pool, name, self._wrap_invalidate)
        if callable(getattr(self.pool, SET_KV_BUFFER, None)):
            patcher.wrap_method(self.pool, SET_KV_BUFFER, self._wrap_set_kv_buffer)
        for name in public_methods(self.pool):
            if name not in special:
                patcher.wrap_method(self.pool, name, self.san.wrap_mutator)

    def mapping(self) -> torch.Tensor:
        return getattr(self.pool, self.mapping_attr)

    def _mapping_identity(self) -> TensorIdentity:
        """The mapping as it is now, reusing what holds still: while the pool keeps the same
        tensor at the same address its storage is the same (a storage it is given, by
        ``set_`` or ``.data =``, was allocated while the old one was alive), and while its
        version holds too, so does the whole identity (one write per decode step, several
        translations)."""
        mapping = self.mapping()
        known = self._mapping_known
        if known is None or self._mapping_seen is None or self._mapping_seen() is not mapping:
            self._mapping_seen = weakref.ref(mapping)
            known = TensorIdentity.of(mapping)
        elif known.data_ptr != mapping.data_ptr():
            known = TensorIdentity.of(mapping)
        elif known.version != tensor_version(mapping):
            known = TensorIdentity.of(mapping, known.storage)
        self._mapping_known = known
        return known

    # -- wrappers -----------------------------------------------------------------------

    def _wrap_translate(self, original: Callable[..., Any]) -> Callable[..., Any]:
        san = self.san
        pools = san.pools
        is_tensor = torch.Tensor

        def translate(kv_indices: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            # Earlier writes outside watched calls (I1), then the scope-start checks (I5/I6)
            # if this is the scope's first cache access. Inlined, like the rest: every
            # translation passes here.
            for pool in pools:
                entry = pool.entry
                if entry is not None and not entry.invalidated:
                    pool.check_mapping_write(None)
            scope = san.scope
            if scope.active and not scope.dispatched:
                san.dispatch()
                scope = san.scope
            # A translation of something other than the batch's own locations (I7).
            fresh = not self._kv_depth and not starts_in(
                kv_indices, scope.batch_spans + san.static_batch_spans
            )
            entry = self.entry
            if entry is not None and not entry.invalidated and scope.active:
                self._check_key_change(entry, kv_indices, fresh)
            result = original(kv_indices, *args, **kwargs)
            if isinstance(result, is_tensor):
                # The same live result object again is a hit (I2); anything else a new entry.
                entry = self.entry
                san.stale_checks += 1
                if entry is not None and entry.serves(result):
                    self._check_hit(entry, kv_indices, result)
                else:
                    self.entry = CacheEntry(
                        key=TensorIdentity.of(kv_indices),
                        mapping=self._mapping_identity(),
                        result=weakref.ref(result),
                        result_version=tensor_version(result),
                        fresh=fresh,
                        scope_id=san.scope.scope_id,
                        site=caller(),
                    )
                san.dtype_checks += 1
                if result.dtype is not san.swa_dtype:
                    san.flag_dtype(result, f"{self.label}.{self._translate_name}() output")
            return result

        return translate

    def _wrap_invalidate(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def invalidate(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if self.entry is not None:
                self.entry.invalidated = True
            return result

        return invalidate

    def _wrap_set_kv_buffer(self, original: Callable[..., Any]) -> Callable[..., Any]:
        san = self.san
        swa_params = san.names.swa_params(original)
        label = self.label

        def set_kv_buffer(*args: Any, **kwargs: Any) -> Any:
            for index, name in swa_params:
                if name in kwargs:
                    value = kwargs[name]
                elif index is not None and index < len(args):
                    value = args[index]
                else:
                    continue
                if isinstance(value, torch.Tensor):
                    san.dtype_checks += 1
                    if value.dtype is not san.swa_dtype:
                        san.flag_dtype(value, f"{label}.set_kv_buffer({name}=...)")
            self._kv_depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._kv_depth -= 1

        return set_kv_buffer

    # -- checks -------------------------------------------------------------------------

    def _check_key_change(self, entry: CacheEntry, kv: torch.Tensor, fresh: bool) -> None:
        """I7: within one forward, another tensor is translated without an invalidation
        in between and one side is a freshly computed tensor (a fresh tensor freed and its
        address reused is the case where the pool would even hit). ``entry`` is live."""
        san = self.san
        if entry.scope_id != san.scope.scope_id:
            return
        san.fresh_checks += 1
        if not (fresh or entry.fresh) or entry.key.difference(kv) is None:
            return  # batch locations may change key; the same tensor again is a plain hit
        entry.reported.add(V.UNFLUSHED_FRESH_TRANSLATION)
        what = "a freshly computed tensor" if fresh else "the batch's locations"
        before = "a fresh tensor's" if entry.fresh else "the batch locations'"
        san.record(
            V.UNFLUSHED_FRESH_TRANSLATION,
            f"{self.label}: translating {what} ({kv.numel()} indices) while {before} "
            f"translation cached at {entry.site} is still live; bracket fresh translations "
            f"with {self._invalidate_name}() before and after",
            values=_head(kv),
        )

    def _check_hit(self, entry: CacheEntry, kv: torch.Tensor, result: torch.Tensor) -> None:
        san = self.san
        if V.STALE_TRANSLATION in entry.reported or kv.numel() == 0:
            return  # an empty translation cannot be wrong
        if entry.invalidated:
            reason = "the cache was invalidated since it was filled"
        else:
            reason = entry.key.difference(kv)
            if reason is None and entry.mapping.difference(self.mapping()) is not None:
                reason = "the mapping was written since it was filled"
        if reason is not None:
            entry.reported.add(V.STALE_TRANSLATION)
            san.record(
                V.STALE_TRANSLATION,
                f"{self.label}: cached translation from {entry.site} served for "
                f"{kv.numel()} indices, but {reason}",
                values=_head(kv),
            )
            return
        if san.full and not is_capturing():
            self._compare_content(entry, kv, result)

    def _compare_content(self, entry: CacheEntry, kv: torch.Tensor, result: torch.Tensor) -> None:
        """``full``: re-translate a hit and compare; catches writes no version counter sees."""
        san = self.san
        want = self.mapping()[kv.long()].to(result.dtype)
        if want.shape == result.shape and torch.equal(want, result):
            return
        entry.reported.add(V.STALE_TRANSLATION)
        if want.shape != result.shape:
            where, got = (), ()
        else:
            where, got = _first_mismatches(result, want)
        san.record(
            V.STALE_TRANSLATION,
            f"{self.label}: cached translation differs from re-translating its key now "
            f"(positions {list(where)}); the key or mapping changed behind the version counters",
            values=got,
        )

    def check_mapping_write(self, method: str | None) -> None:
        """I1: the mapping moved under a live cached translation with no invalidation, during
        the watched ``method`` (``None``: outside any watched call)."""
        entry = self.entry
        if entry is None or entry.invalidated or V.UNINVALIDATED_MAPPING_WRITE in entry.reported:
            return
        self.san.mapping_checks += 1
        reason = entry.mapping.difference(self.mapping())
        if reason is None:
            return
        entry.reported.add(V.UNINVALIDATED_MAPPING_WRITE)
        during = "outside any watched call" if method is None else f"during {method}()"
        self.san.record(
            V.UNINVALIDATED_MAPPING_WRITE,
            f"{self.label}.{self.mapping_attr} changed ({reason}) {during} while the translation "
            f"cached at {entry.site} was live, and no {self._invalidate_name}() followed",
        )

    def check_scope_start(self, kind: ScopeKind, scope_id: int) -> None:
        """I5/I6: a capture run or a forward must begin with no entry from before it."""
        kind_name = SCOPE_START_KIND[kind]
        if kind is ScopeKind.FORWARD:
            self.san.forward_start_checks += 1
        else:
            self.san.capture_start_checks += 1
        entry = self.entry
        if (
            entry is None
            or entry.invalidated
            or entry.scope_id == scope_id
            or kind_name in entry.reported
        ):
            return
        entry.reported.add(kind_name)
        what = "a graph capture/warm-up run" if kind is ScopeKind.CAPTURE_RUN else "a forward"
        self.san.record(
            kind_name,
            f"{self.label}: {what} started with the translation cached at {entry.site} still "
            f"live; {self._invalidate_name}() must run first",
            values=_head_of(entry),
        )

    def check_scope_end(self) -> None:
        """I7: a fresh tensor's translation must not outlive its bracket."""
        entry = self.entry
        if entry is None or entry.invalidated or not entry.fresh:
            return
        if entry.scope_id != self.san.scope.scope_id:
            return
        if V.UNFLUSHED_FRESH_TRANSLATION in entry.reported:
            return
        entry.reported.add(V.UNFLUSHED_FRESH_TRANSLATION)
        self.san.record(
            V.UNFLUSHED_FRESH_TRANSLATION,
            f"{self.label}: the fresh tensor's translation cached at {entry.site} is still live "
            f"when the forward ends; a later lookup at the same address would hit it",
        )


def _head(t: torch.Tensor) -> tuple[int, ...]:
    """The first few values of a location tensor, for a report. Reading them may wait
    for the device, which only a violation pays for; never while capturing."""
    if is_capturing():
        return ()
    return tuple(t.reshape(-1)[: V.MAX_VALUES].tolist())


def _head_of(entry: CacheEntry) -> tuple[int, ...]:
    result = entry.result()
    return () if result is None else _head(result)
