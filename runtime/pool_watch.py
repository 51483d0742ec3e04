"""Checks on an SWA pool: its translation cache (I2, I7), its mapping writes (I1), and the
dtype of what it hands out and is handed (I3).

A cache hit is recognised from the outside: the translate method returned the very
tensor object of the live entry, not written since. Everything else is a miss,
which records a new entry. That needs no knowledge of the pool's cache fields, so a
foreign pool is checked exactly like the reference one.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from . import violations as V
from .deferred import is_capturing
from .locations import argument, overlaps
from .model import CacheEntry, ScopeKind, TensorIdentity, tensor_version
from .roles import first_present
from .wrapping import Patcher, public_methods

if TYPE_CHECKING:
    from .sanitizer import Sanitizer

# Methods with their own wrappers; every other public method is wrapped as a possible mutator.
SET_KV_BUFFER = "set_kv_buffer"


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

    # -- wrappers -----------------------------------------------------------------------

    def _wrap_translate(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def translate(kv_indices: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            san = self.san
            san.before_translate()
            fresh = self._is_fresh(kv_indices)
            self._check_key_change(kv_indices, fresh)
            result = original(kv_indices, *args, **kwargs)
            if isinstance(result, torch.Tensor):
                self._after_translate(kv_indices, result, fresh)
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
        swa_params = self.san.names.swa_params(original)

        def set_kv_buffer(*args: Any, **kwargs: Any) -> Any:
            for index, name in swa_params:
                value = argument(args, kwargs, index, name)
                if isinstance(value, torch.Tensor):
                    self.san.check_dtype(value, f"{self.label}.set_kv_buffer({name}=...)")
            self._kv_depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._kv_depth -= 1

        return set_kv_buffer

    # -- checks -------------------------------------------------------------------------

    def _is_fresh(self, kv: torch.Tensor) -> bool:
        """A translation of something other than the batch's own locations (I7)."""
        if self._kv_depth:
            return False
        san = self.san
        return not any(overlaps(kv, loc) for loc in (*san.scope.batch_locs, *san.static_batch_locs))

    def live_entry(self) -> CacheEntry | None:
        entry = self.entry
        return entry if entry is not None and entry.live else None

    def _check_key_change(self, kv: torch.Tensor, fresh: bool) -> None:
        """I7: within one forward, another tensor is translated without an invalidation
        in between and one side is a freshly computed tensor (a fresh tensor freed and its
        address reused is the case where the pool would even hit)."""
        san = self.san
        entry = self.live_entry()
        if not san.scope.active or entry is None or entry.scope_id != san.scope.scope_id:
            return
        san.tally(V.UNFLUSHED_FRESH_TRANSLATION)
        if not (fresh or entry.fresh) or entry.key.difference(kv) is None:
            return  # batch locations may change key; the same tensor again is a plain hit
        entry.reported.add(V.UNFLUSHED_FRESH_TRANSLATION)
        what = "a freshly computed tensor" if fresh else "the batch's locations"
        before = "a fresh tensor's" if entry.fresh else "the batch locations'"
        san.record(
            V.UNFLUSHED_FRESH_TRANSLATION,
            f"{self.label}: translating {what} ({kv.numel()} indices) while {before} "
            f"translation cached at {entry.site} is still live; bracket fresh translations "
            f"with {san.config.invalidate_methods[0]}() before and after",
            values=_head(kv),
        )

    def _after_translate(self, kv: torch.Tensor, result: torch.Tensor, fresh: bool) -> None:
        san = self.san
        entry = self.entry
        san.tally(V.STALE_TRANSLATION)
        if entry is not None and entry.serves(result):
            self._check_hit(entry, kv, result)
        else:
            self.entry = CacheEntry(
                key=TensorIdentity.of(kv),
                mapping=TensorIdentity.of(self.mapping()),
                result=weakref.ref(result),
                result_version=tensor_version(result),
                fresh=fresh,
                scope_id=san.scope.scope_id,
                site=V.call_site(),
            )
        san.check_dtype(result, f"{self.label}.{san.config.translate_methods[0]}() output")

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

    def check_mapping_write(self, during: str) -> None:
        """I1: the mapping moved under a live cached translation with no invalidation."""
        entry = self.live_entry()
        if entry is None or V.UNINVALIDATED_MAPPING_WRITE in entry.reported:
            return
        self.san.tally(V.UNINVALIDATED_MAPPING_WRITE)
        reason = entry.mapping.difference(self.mapping())
        if reason is None:
            return
        entry.reported.add(V.UNINVALIDATED_MAPPING_WRITE)
        self.san.record(
            V.UNINVALIDATED_MAPPING_WRITE,
            f"{self.label}.{self.mapping_attr} changed ({reason}) {during} while the translation "
            f"cached at {entry.site} was live, and no "
            f"{self.san.config.invalidate_methods[0]}() followed",
        )

    def check_scope_start(self, kind: ScopeKind, scope_id: int) -> None:
        """I5/I6: a capture run or a forward must begin with no entry from before it."""
        entry = self.live_entry()
        kinds = {
            ScopeKind.FORWARD: V.FORWARD_WITHOUT_INVALIDATION,
            ScopeKind.CAPTURE_RUN: V.CAPTURE_CACHE_POLLUTION,
        }
        kind_name = kinds[kind]
        self.san.tally(kind_name)
        if entry is None or entry.scope_id == scope_id or kind_name in entry.reported:
            return
        entry.reported.add(kind_name)
        what = "a graph capture/warm-up run" if kind is ScopeKind.CAPTURE_RUN else "a forward"
        self.san.record(
            kind_name,
            f"{self.label}: {what} started with the translation cached at {entry.site} still "
            f"live; {self.san.config.invalidate_methods[0]}() must run first",
            values=_head_of(entry),
        )

    def check_scope_end(self) -> None:
        """I7: a fresh tensor's translation must not outlive its bracket."""
        entry = self.live_entry()
        if entry is None or not entry.fresh or entry.scope_id != self.san.scope.scope_id:
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
