"""Checks on a pool's attribute caches: translations a pool keeps in an attribute and
reads back later, such as DeepSeek-V4's ``self.cached_loc =
self.translate_loc_from_full_to_swa(raw_loc)``, reused by later layers.

Every translation is recorded with the mapping it was gathered from (identity and
version counter) and its key. A method that reads the attribute (``roles.readers``:
its code loads ``self.<attribute>``) and returns with the attribute still holding the
very tensor it held on entry has served that cached translation: a hit. A hit is
stale (I2) when the mapping was written or replaced since the translation was made,
or when the method was given another location tensor than the one translated; in
``full`` a hit is also re-translated and compared (writes no version counter sees).
A method that refills the attribute is a miss and checks nothing.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

from . import violations as V
from .checks import Checks
from .consumers import LOCATION_WORD, words
from .deferred import is_capturing
from .locations import argument, parameters
from .model import CacheEntry, TensorIdentity, caller, storage_ref, tensor_version
from .roles import readers
from .wrapping import Patcher

# Left out of a violation's pytest traceback (``violations.hide_from_traceback``).
__tracebackhide__ = V.hide_from_traceback


class AttributeCacheWatch:
    def __init__(
        self,
        checks: Checks,
        pool: object,
        label: str,
        mapping_attr: str,
        attributes: tuple[str, ...],
        invalidate_name: str,
    ) -> None:
        self.checks = checks
        self.pool = pool
        self.label = label
        self.mapping_attr = mapping_attr
        self.attributes = attributes
        self.invalidate_name = invalidate_name
        # Translation result -> (its record, a weak reference to its key).
        self.entries: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def install(self, patcher: Patcher) -> list[str]:
        """Wrap the readers of every cache attribute; their names."""
        wrapped = []
        for attribute in self.attributes:
            for name in readers(type(self.pool), attribute, self.checks.config):
                if callable(getattr(self.pool, name, None)):
                    patcher.wrap_method(
                        self.pool,
                        name,
                        lambda original, a=attribute: self._wrap_reader(original, a),
                    )
                    wrapped.append(name)
        return wrapped

    def record(self, key: torch.Tensor, result: torch.Tensor) -> None:
        """A translation was made: remember what it was made from."""
        mapping = getattr(self.pool, self.mapping_attr)
        code, offset = caller()
        entry = CacheEntry(
            storage_ref(key),
            key.data_ptr(),
            key.numel(),
            key.dtype,
            tensor_version(key),
            TensorIdentity(mapping),
            tensor_version(mapping),
            weakref.ref(result),
            tensor_version(result),
            False,
            self.checks.scope.scope_id,
            code,
            offset,
        )
        self.entries[result] = (entry, weakref.ref(key))

    def _wrap_reader(self, original: Callable[..., Any], attribute: str) -> Callable[..., Any]:
        namespace = vars(self.pool)
        method = getattr(original, "__name__", "?")
        location = next(
            ((i, n) for i, n in parameters(original) if LOCATION_WORD in words(n)), None
        )

        def reader(*args: Any, **kwargs: Any) -> Any:
            before = namespace.get(attribute)
            result = original(*args, **kwargs)
            if before is not None and namespace.get(attribute) is before:
                found = self.entries.get(before)
                if found is not None:
                    key = None if location is None else argument(args, kwargs, *location)
                    self._check_hit(attribute, method, before, found, key)
            return result

        return reader

    def _check_hit(
        self,
        attribute: str,
        method: str,
        cached: torch.Tensor,
        found: tuple[CacheEntry, weakref.ref[torch.Tensor]],
        key: object,
    ) -> None:
        """I2 for a hit on ``attribute`` served by ``method``."""
        checks = self.checks
        checks.stale_checks += 1
        entry, key_ref = found
        mapping = getattr(self.pool, self.mapping_attr)
        reason = entry.mapping_difference(mapping)
        if reason is not None:
            reason = f"the mapping changed since: {reason}"
        elif isinstance(key, torch.Tensor):
            differs = entry.key_difference(key)
            if differs is not None:
                reason = f"{method}() was given another location tensor: {differs}"
        if reason is None and checks.full and not is_capturing():
            original_key = key_ref()
            if original_key is not None:
                want = mapping[original_key.long()].to(cached.dtype)
                if want.shape != cached.shape or not torch.equal(want, cached):
                    reason = (
                        "re-translating its key now gives other slots "
                        "(a write no version counter saw)"
                    )
        if reason is None:
            return
        del self.entries[cached]  # one report per stale translation
        checks.record(
            V.STALE_TRANSLATION,
            f"{self.label}.{attribute} served by {method}() holds the translation made at "
            f"{entry.site}, which is stale: {reason}. Reset {attribute} (as "
            f"{self.invalidate_name}() does) whenever the mapping changes",
        )
