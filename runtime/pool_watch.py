"""Checks on an SWA pool, by its cache model (``model.CacheModel``): a memoising
translate's cache (I2, I5, I6, I7) and the mapping writes under it (I1); attribute
caches (``attribute_cache``); the dtype of the SWA locations its KV writes consume
(``consumers``); a pool without a cache gets no cache checks at all.

A memoising translate's cache hit is recognised from the outside: the translate
method returned the very tensor object of the live entry, not written since. Everything
else is a miss, which records a new entry. That needs no knowledge of the pool's cache fields, so a
foreign pool is checked exactly like the reference one.

The wrappers run on every translation and every allocator call (some twenty calls a
decode step), so everything fixed per pool (names, labels, the mapping's storage
reference) is worked out once, checks are counted in plain integers, messages are only
built for a violation, and what only a live entry can violate is skipped while there
is none: ``live`` is the pool's entry while no invalidation has followed it (``entry``
stays, invalidated, to recognise a hit served after an invalidation), and the
sanitizer counts the pools with a live entry, so an invalidation that finds none, an
allocator call and a scope boundary cost one integer test.
"""

from __future__ import annotations

import logging
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import violations as V
from .attribute_cache import AttributeCacheWatch
from .branches import may_run
from .bytecode import class_functions, self_access, source_line
from .checks import Checks
from .consumers import install_subpool_writes, pool_write_check
from .deferred import is_capturing
from .locations import Span
from .model import (
    INTERNAL_FILES,
    NOTHING_REPORTED,
    STORAGE_OBJECTS_PRESERVED,
    CacheEntry,
    CacheModel,
    ScopeKind,
    StorageRef,
    TensorIdentity,
    caller,
    tensor_version,
)
from .roles import first_present
from .wrapping import Patcher, Wrapped, forwarding, original_of, public_methods

# Left out of a violation's pytest traceback (``violations.hide_from_traceback``).
__tracebackhide__ = V.hide_from_traceback

logger = logging.getLogger("swacheck.runtime")

# How deep the search for the lines that write the mapping follows ``self.method()`` calls.
WRITE_SEARCH_DEPTH = 3

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


# A mutator wrapper's body (``wrapping.forwarding``): the same as ``wrap_mutator``'s
# generic wrapper, with the method's own parameters.
_MUTATOR_BODY = """\
    _sw_checks.mutator_depth += 1
    try:
        _sw_result = CALL
    finally:
        _sw_checks.mutator_depth -= 1
    if _sw_checks.live_pools and not _sw_checks.mutator_depth:
        _sw_check(_sw_original)
    return _sw_result
"""


def wrap_mutator(checks: Checks, original: Callable[..., Any]) -> Callable[..., Any]:
    """Any public method of a pool or allocator: at the end of the outermost such call,
    the mapping must not have moved under a live cached translation (I1)."""
    pools = checks.pools

    def check(method: Callable[..., Any]) -> None:
        for pool in pools:
            if pool.live is not None:
                pool.check_mapping_write(method)

    exact = forwarding(original, _MUTATOR_BODY, {"_sw_checks": checks, "_sw_check": check})
    if exact is not None:
        return exact

    def mutator(*args: Any, **kwargs: Any) -> Any:
        checks.mutator_depth += 1
        try:
            result = original(*args, **kwargs)
        finally:
            checks.mutator_depth -= 1
        if checks.live_pools and not checks.mutator_depth:
            check(original)
        return result

    return mutator


def install_allocator(checks: Checks, allocator: object) -> None:
    """An object that writes the mapping without owning the cache: I1 at its exits."""
    for name in public_methods(allocator):
        checks.patcher.wrap_method(allocator, name, lambda original: wrap_mutator(checks, original))


class PoolWatch:
    def __init__(
        self,
        checks: Checks,
        pool: object,
        label: str,
        kv_buffers: Callable[[], Sequence[torch.Tensor]] | None,
        model: CacheModel,
    ) -> None:
        config = checks.config
        mapping_attr = first_present(pool, config.mapping_attributes, method=False)
        assert mapping_attr is not None
        self.checks = checks
        self.pool = pool
        self.label = label
        self.mapping_attr = mapping_attr
        self.kv_buffers = kv_buffers
        self.model = model
        self.memoising = model.memoising
        self.attribute_cache = (
            AttributeCacheWatch(
                checks,
                pool,
                label,
                mapping_attr,
                model.attributes,
                config.invalidate_methods[0],
            )
            if model.attributes
            else None
        )
        # The last entry filled; the same entry while no invalidation has followed it; the
        # kinds already reported against it (one missing invalidation, one report).
        self.entry: CacheEntry | None = None
        self.live: CacheEntry | None = None
        self.reported: frozenset[str] = NOTHING_REPORTED
        self._kv_depth = 0
        # Within a KV write: the SWA location its SWA sub-pool's write received, and what
        # it translated itself (I9 pairs the full location with the one that was used).
        self._kv_sub_loc: torch.Tensor | None = None
        self._kv_translated: torch.Tensor | None = None
        self._kv_full: torch.Tensor | None = None
        self._kv_label = ""
        self._translate_name = config.translate_methods[0]
        self._invalidate_name = config.invalidate_methods[0]
        # The last mapping tensor seen and its identity (see ``_mapping_identity``).
        self._mapping_seen: weakref.ref[torch.Tensor] | None = None
        self._mapping_known: TensorIdentity | None = None
        # The invalidation methods' wrappers: in place only while an entry is live.
        self._invalidators: list[Wrapped] = []
        # The last translation handed out, while translate is not known to memoise.
        self._last_result: weakref.ref[torch.Tensor] | None = None

    # -- installation -------------------------------------------------------------------

    def install(self, patcher: Patcher) -> None:
        config = self.checks.config
        writes = tuple(n for n in config.kv_write_methods if callable(getattr(self.pool, n, None)))
        special = {*config.translate_methods, *config.invalidate_methods, *writes}
        for name in config.translate_methods:
            if callable(getattr(self.pool, name, None)):
                patcher.wrap_method(self.pool, name, self._wrap_translate)
        for name in config.invalidate_methods:
            if callable(getattr(self.pool, name, None)):
                self._invalidators.append(
                    patcher.wrap_method(self.pool, name, self._wrap_invalidate)
                )
        for name in writes:
            patcher.wrap_method(self.pool, name, self._wrap_kv_write)
        install_subpool_writes(self.checks, self.pool, self.label, self._subpool_written)
        checks = self.checks

        def mutator(original: Callable[..., Any]) -> Callable[..., Any]:
            return wrap_mutator(checks, original)

        for name in public_methods(self.pool):
            if name not in special:
                patcher.wrap_method(self.pool, name, mutator)
        if self.attribute_cache is not None:
            self.attribute_cache.install(patcher)

    def mapping(self) -> torch.Tensor:
        return getattr(self.pool, self.mapping_attr)

    def _mapping_identity(self, mapping: torch.Tensor) -> TensorIdentity:
        """Which tensor the mapping is now. The translate wrapper reuses the last answer
        while the pool keeps the same tensor object at the same address and size: its
        storage is then the same (a storage it is given, by ``set_`` or ``.data =``, was
        allocated while the old one was alive)."""
        self._mapping_seen = weakref.ref(mapping)
        known = self._mapping_known = TensorIdentity(mapping)
        return known

    def mark(self, kind: str) -> None:
        """``kind`` was reported against the current entry: not again for it."""
        self.reported = self.reported | {kind}

    # -- wrappers -----------------------------------------------------------------------

    def _wrap_translate(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """A memoising translate's cache checks; otherwise a translation is only observed:
        recorded for the attribute caches, its dtype checked where configured, and
        compared with the one before (the very same tensor handed back is a cache after
        all: from then on it is checked as one)."""
        memoising = self._memoising_translate(original)
        if self.memoising:
            return memoising
        checks = self.checks
        check_dtype = checks.config.check_translate_dtype
        attribute_cache = self.attribute_cache
        what = f"{self.label}.{self._translate_name}() output"

        def translate(kv_indices: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self.memoising:
                return memoising(kv_indices, *args, **kwargs)
            result = original(kv_indices, *args, **kwargs)
            if not isinstance(result, torch.Tensor):
                return result
            last = self._last_result
            if last is not None and last() is result and result is not kv_indices:
                self._observed_memoisation()
            self._last_result = weakref.ref(result)
            if attribute_cache is not None:
                attribute_cache.record(kv_indices, result)
            if self._kv_depth:
                self._kv_translated = result
            if checks.write_dtypes is None:
                checks.learn_write_dtype(result, what)
            elif check_dtype:
                checks.check_dtype(result, what)
            return result

        return translate

    def _observed_memoisation(self) -> None:
        """Translate handed back the tensor it returned before: it memoises, whatever its
        class suggested. Checked as a memoising cache from the next call on."""
        self.memoising = True
        self.model = CacheModel(
            True,
            self.model.attributes,
            "observed: translate handed back the tensor it returned before",
        )
        logger.warning(
            "%s: %s() handed back the same tensor twice: checked as a memoising cache from now "
            "on (declare cache-model to say so from the start)",
            self.label,
            self._translate_name,
        )

    def _memoising_translate(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Every translation passes here (twice a decode step), so the wrapper is one
        function: the common path, a miss outside any live entry, calls nothing of the
        sanitizer's and builds its record (:class:`CacheEntry`) as one tuple."""
        checks = self.checks
        pools = checks.pools
        is_tensor = torch.Tensor
        check_dtype = checks.config.check_translate_dtype
        pool = self.pool
        mapping_attr = self.mapping_attr
        get_frame = sys._getframe
        files = INTERNAL_FILES
        make_ref = weakref.ref
        preserved = STORAGE_OBJECTS_PRESERVED
        tuple_new = tuple.__new__
        invalidators = self._invalidators

        def translate(kv_indices: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            # Earlier writes outside watched calls (I1), then the scope-start checks (I5/I6)
            # if this is the scope's first cache access.
            if checks.live_pools:
                for watch in pools:
                    if watch.live is not None:
                        watch.check_mapping_write(None)
            scope = checks.scope
            if not scope.dispatched and scope.active:
                checks.dispatch()
                scope = checks.scope
            pointer = kv_indices.data_ptr()
            live = self.live
            if live is not None and scope.active:
                self._check_key_change(live, kv_indices, pointer)
            result = original(kv_indices, *args, **kwargs)
            if not isinstance(result, is_tensor):
                return result
            # The same live result object again, unwritten, is a hit (I2); anything else a
            # miss, which fills a new entry.
            checks.stale_checks += 1
            try:
                version = result._version
            except RuntimeError:  # an inference tensor keeps no version
                version = None
            entry = self.entry
            if entry is not None and entry.result() is result and entry.result_version == version:
                self._check_hit(entry, kv_indices, result)
            else:
                try:
                    key_version = kv_indices._version
                except RuntimeError:
                    key_version = None
                mapping = getattr(pool, mapping_attr)
                try:
                    mapping_version = mapping._version
                except RuntimeError:
                    mapping_version = None
                known = self._mapping_known
                if (
                    known is None
                    or self._mapping_seen() is not mapping  # type: ignore[misc]
                    or known.data_ptr != mapping.data_ptr()
                    or known.numel != mapping.numel()
                ):
                    known = self._mapping_identity(mapping)
                # Where: the calling frame, unless it is the sanitizer's own (a contract
                # wrapper) or a file not classified yet.
                frame = get_frame(1)
                code = frame.f_code
                if files.get(code.co_filename, True):
                    code, offset = caller()
                else:
                    offset = frame.f_lasti
                if live is None:  # an entry goes live: invalidations matter again
                    checks.live_pools += 1
                    for wrapped in invalidators:
                        wrapped.step_in()
                self.entry = self.live = tuple_new(  # type: ignore[call-overload]
                    CacheEntry,
                    (
                        make_ref(kv_indices.untyped_storage())
                        if preserved
                        else StorageRef(kv_indices),
                        pointer,
                        kv_indices.numel(),
                        kv_indices.dtype,
                        key_version,
                        known,
                        mapping_version,
                        make_ref(result),
                        version,
                        self._kv_depth > 0,
                        scope.scope_id,
                        code,
                        offset,
                    ),
                )
                self.reported = NOTHING_REPORTED
            if self._kv_depth:
                self._kv_translated = result
            allowed = checks.write_dtypes
            if allowed is None:
                checks.learn_write_dtype(result, f"{self.label}.{self._translate_name}() output")
            elif check_dtype:
                checks.dtype_checks += 1
                if result.dtype not in allowed:
                    checks.flag_dtype(result, f"{self.label}.{self._translate_name}() output")
            return result

        return translate

    def _wrap_invalidate(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """An invalidation ends the live entry. With none live it has nothing to record, so
        the wrappers step aside until the next miss fills one (engines invalidate in every
        allocator call, some ten times a decode step, mostly with nothing live)."""

        def invalidate(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if self.live is not None:
                self.end_live()
            return result

        return invalidate

    def end_live(self) -> None:
        """The live entry was invalidated: no entry is live until the next miss."""
        self.live = None
        self.checks.live_pools -= 1
        for wrapped in self._invalidators:
            wrapped.step_aside()

    def _wrap_kv_write(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """A KV write: the SWA locations it consumes (``consumers``) and I9 (``translation``):
        the SWA location it uses against the full one it was given, checked before the
        SWA sub-pool's write receives it (so under ``raise`` a wrong one is never written),
        else after the write (the SWA argument, or what it translated itself).
        Translations made inside it are of the batch's own locations, never fresh tensors
        (I7)."""
        name = getattr(original, "__name__", "set_kv_buffer")
        label = f"{self.label}.{name}"
        check = pool_write_check(self.checks, original, label)
        checks = self.checks

        def kv_write(*args: Any, **kwargs: Any) -> Any:
            full, swa = check(args, kwargs)
            self._kv_depth += 1
            self._kv_full, self._kv_label = full, label
            self._kv_sub_loc = self._kv_translated = None
            try:
                result = original(*args, **kwargs)
            finally:
                self._kv_depth -= 1
            if full is not None and self._kv_sub_loc is None:
                used = swa if swa is not None else self._kv_translated
                if used is not None:
                    checks.check_translation(label, self.mapping(), full, used)
            return result

        return kv_write

    def _subpool_written(self, loc: torch.Tensor) -> None:
        """The SWA sub-pool's write is about to receive ``loc``: the location the KV write
        in progress really uses, checked against its full location now (I9)."""
        if self._kv_depth and self._kv_sub_loc is None:
            self._kv_sub_loc = loc
            if self._kv_full is not None:
                self.checks.check_translation(self._kv_label, self.mapping(), self._kv_full, loc)

    # -- checks -------------------------------------------------------------------------

    def _fresh(self, entry: CacheEntry) -> bool:
        """Whether ``entry`` translated a freshly computed tensor, not the batch's own
        locations (I7): not inside set_kv_buffer, and its key does not start inside one of
        the scope's location spans. Worked out only when a check needs it (the entry is
        live in its own scope), not on every miss."""
        if entry.in_kv_write:
            return False
        token = entry.key_storage()
        if token is None:
            return True  # freed: not the batch's locations, which the batch holds
        device = token.device if STORAGE_OBJECTS_PRESERVED else None  # type: ignore[attr-defined]
        return not _starts_in(entry.key_ptr, device, self.checks.own_spans())

    def _check_key_change(self, entry: CacheEntry, kv: torch.Tensor, pointer: int) -> None:
        """I7: within one forward, another tensor is translated without an invalidation
        in between and one side is a freshly computed tensor (a fresh tensor freed and its
        address reused is the case where the pool would even hit). ``entry`` is live."""
        checks = self.checks
        if entry.scope_id != checks.scope.scope_id:
            return
        checks.fresh_checks += 1
        fresh = not self._kv_depth and not _starts_in(pointer, kv.device, checks.own_spans())
        entry_fresh = self._fresh(entry)
        if not (fresh or entry_fresh) or entry.key_difference(kv) is None:
            return  # batch locations may change key; the same tensor again is a plain hit
        self.mark(V.UNFLUSHED_FRESH_TRANSLATION)
        what = "a freshly computed tensor" if fresh else "the batch's locations"
        before = "a fresh tensor's" if entry_fresh else "the batch locations'"
        checks.record(
            V.UNFLUSHED_FRESH_TRANSLATION,
            f"{self.label}: translating {what} ({kv.numel()} indices) while {before} "
            f"translation cached at {entry.site} is still live; bracket fresh translations "
            f"with {self._invalidate_name}() before and after",
            values=_head(kv),
        )

    def _check_hit(self, entry: CacheEntry, kv: torch.Tensor, result: torch.Tensor) -> None:
        checks = self.checks
        if V.STALE_TRANSLATION in self.reported or kv.numel() == 0:
            return  # an empty translation cannot be wrong
        if entry is not self.live:
            reason = "the cache was invalidated since it was filled"
        else:
            reason = entry.key_difference(kv)
            if reason is None and entry.mapping_difference(self.mapping()) is not None:
                reason = "the mapping was written since it was filled"
        if reason is not None:
            self.mark(V.STALE_TRANSLATION)
            checks.record(
                V.STALE_TRANSLATION,
                f"{self.label}: cached translation from {entry.site} served for "
                f"{kv.numel()} indices, but {reason}",
                values=_head(kv),
            )
            return
        if checks.full and not is_capturing():
            self._compare_content(entry, kv, result)

    def _compare_content(self, entry: CacheEntry, kv: torch.Tensor, result: torch.Tensor) -> None:
        """``full``: re-translate a hit and compare; catches writes no version counter sees."""
        checks = self.checks
        want = self.mapping()[kv.long()].to(result.dtype)
        if want.shape == result.shape and torch.equal(want, result):
            return
        self.mark(V.STALE_TRANSLATION)
        if want.shape != result.shape:
            where, got = (), ()
        else:
            where, got = _first_mismatches(result, want)
        checks.record(
            V.STALE_TRANSLATION,
            f"{self.label}: cached translation differs from re-translating its key now "
            f"(positions {list(where)}); the key or mapping changed behind the version counters",
            values=got,
        )

    def check_mapping_write(self, method: Callable[..., Any] | None) -> None:
        """I1: the mapping moved under a live cached translation with no invalidation, during
        the watched ``method`` (``None``: outside any watched call)."""
        entry = self.live
        if entry is None or V.UNINVALIDATED_MAPPING_WRITE in self.reported:
            return
        self.checks.mapping_checks += 1
        mapping = getattr(self.pool, self.mapping_attr)
        # The common answer without working it out (mutators run several times a decode
        # step with an entry live): the tensor object the entry was gathered from (see
        # ``_mapping_identity``), at the same address and size, its version not moved.
        known = entry.mapping
        seen = self._mapping_seen
        if (
            known is self._mapping_known
            and seen is not None
            and seen() is mapping
            and entry.mapping_version is not None
            and tensor_version(mapping) == entry.mapping_version
            and mapping.data_ptr() == known.data_ptr
            and mapping.numel() == known.numel
        ):
            return
        reason = entry.mapping_difference(mapping)
        if reason is None:
            return
        self.mark(V.UNINVALIDATED_MAPPING_WRITE)
        site = None
        if method is None:
            during = "outside any watched call"
        else:
            name = getattr(method, "__qualname__", getattr(method, "__name__", "?"))
            during = f"during {name}()"
            writes = mapping_writes(method, self.mapping_attr)
            if len(writes) == 1:
                site = writes[0]
                during += f", which writes it at {site}"
            elif writes:  # alternatives no flag decides: the caller is the place
                during += f", which writes it at one of {len(writes)} lines: " + "; ".join(writes)
        self.checks.record(
            V.UNINVALIDATED_MAPPING_WRITE,
            f"{self.label}.{self.mapping_attr} changed ({reason}) {during}, while the "
            f"translation cached at {entry.site} was live, and no {self._invalidate_name}() "
            f"followed",
            site=site,
        )

    def check_scope_start(self, kind: ScopeKind, scope_id: int) -> None:
        """I5/I6: a capture run or a forward must begin with no entry from before it (the
        caller counts the check, for every pool, live entry or not)."""
        entry = self.live
        kind_name = SCOPE_START_KIND[kind]
        if entry is None or entry.scope_id == scope_id or kind_name in self.reported:
            return
        self.mark(kind_name)
        what = "a graph capture/warm-up run" if kind is ScopeKind.CAPTURE_RUN else "a forward"
        self.checks.record(
            kind_name,
            f"{self.label}: {what} started with the translation cached at {entry.site} still "
            f"live; {self._invalidate_name}() must run first",
            values=_head_of(entry),
        )

    def check_scope_end(self) -> None:
        """I7: a fresh tensor's translation must not outlive its bracket."""
        entry = self.live
        if entry is None or entry.scope_id != self.checks.scope.scope_id:
            return
        if V.UNFLUSHED_FRESH_TRANSLATION in self.reported or not self._fresh(entry):
            return
        self.mark(V.UNFLUSHED_FRESH_TRANSLATION)
        self.checks.record(
            V.UNFLUSHED_FRESH_TRANSLATION,
            f"{self.label}: the fresh tensor's translation cached at {entry.site} is still live "
            f"when the forward ends; a later lookup at the same address would hit it",
        )


def _starts_in(pointer: int, device: torch.device | None, spans: tuple[Span, ...]) -> bool:
    """Whether a tensor starting at ``pointer`` on ``device`` (``None``: any) starts inside
    one of ``spans`` (a view or slice of that tensor)."""
    for where, start, end in spans:
        if start <= pointer < end and (device is None or device == where):
            return True
    return False


def _head(t: torch.Tensor) -> tuple[int, ...]:
    """The first few values of a location tensor, for a report. Reading them may wait
    for the device, which only a violation pays for; never while capturing."""
    if is_capturing():
        return ()
    return tuple(t.reshape(-1)[: V.MAX_VALUES].tolist())


def _head_of(entry: CacheEntry) -> tuple[int, ...]:
    result = entry.result()
    return () if result is None else _head(result)


def mapping_writes(method: Callable[..., Any], mapping_attr: str) -> list[str]:
    """Where ``method`` (a bound method) and the methods of its object it calls, to
    ``WRITE_SEARCH_DEPTH``, can write an attribute named ``mapping_attr`` (their own or
    another object's) in this process: ``path:line in function: `text```, read from their
    bytecode, less the lines and the calls of helpers that a module flag rules out
    (``branches.may_run``: the NPU branch on a CUDA machine). Worked out only for a
    violation."""
    owner = getattr(method, "__self__", None)
    functions = dict(class_functions(type(owner))) if owner is not None else {}
    found: list[str] = []
    seen: set[object] = set()
    pending = [(original_of(method), 0)]
    while pending:
        function, depth = pending.pop(0)
        function = getattr(function, "__func__", function)
        if function in seen:
            continue
        seen.add(function)
        access = self_access(function)
        found += [
            source_line(function, line)
            for line in access.any_writes.get(mapping_attr, ())
            if may_run(function, line)
        ]
        if depth < WRITE_SEARCH_DEPTH:
            pending += [
                (functions[name], depth + 1)
                for name in sorted(access.loads)
                if name in functions
                and any(may_run(function, line) for line in access.load_lines.get(name, ()))
            ]
    return found
